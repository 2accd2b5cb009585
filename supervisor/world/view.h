/*
 * view.h - what the worker's world holds, from the operator's settings:
 * the workspace, what is masked, which binaries stay read-only, and how
 * strictly (sandbox/jail.h builds it).
 */
#ifndef AGENTZ_VIEW_H
#define AGENTZ_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/jail.h"

/* --isolation (AUTO: not given: required as root or under systemd, else
 * best-effort) */
enum isolation {
	ISOLATION_AUTO, ISOLATION_REQUIRED, ISOLATION_BEST_EFFORT,
	ISOLATION_OFF
};

/* What the operator's options say of the view. */
struct view_options {
	const char *workspace;		/* NULL = the working directory */
	const char *const *masks;	/* --mask, nmasks of them */
	size_t nmasks;
	const char *const *ro_binds;	/* --ro-bind SRC[:DST], nro_binds */
	size_t nro_binds;
	const char *const *binds;	/* --bind SRC[:DST], nbinds */
	size_t nbinds;
	int no_default_masks;
	int writable_git;		/* cells may write .git (and make one) */
	const char *journal;		/* masked too, when given */
	enum isolation isolation;
	enum jail_network network;	/* --network (none: its own) */
	uint64_t tmp_size;		/* private /tmp and /dev/shm, each */
};

/* The file that says a folder is (or was) a run's workspace. */
#define VIEW_MARKER ".agentz-workspace"

struct view_git {		/* a .git the workspace had at the start */
	dev_t dev;
	ino_t ino;
};

struct view {
	struct jail_config jc;	/* points into the fields below */
	char *workspace;
	char **masks;		/* NULL-terminated, owned */
	size_t nmasks;
	struct jail_bind *binds;	/* --ro-bind, --bind (binds.c) */
	char **bindpaths;	/* their src and dst, owned */
	size_t nbinds;
	char *protect[3];	/* agentz, agentz-worker, NULL */
	char **readonly;	/* .git, the marker: NULL-terminated, owned */
	size_t nreadonly;
	struct view_git *gits;	/* every .git seen at the start */
	size_t ngits;
	int git_watch;		/* untrust new .git at the end (view_clear) */
	int git_record;		/* what the marker says of .git (below) */
	char *marker;		/* the workspace's VIEW_MARKER, or NULL */
	char dotenv[128];	/* the marker's line naming the .env, or "" */
};

enum { GIT_RECORD_NONE, GIT_RECORD_LIST, GIT_RECORD_ANY };

/*
 * Fills v from c (wpath: the agentz-worker executable). A bad workspace
 * or bind is a usage error: printed, naming the path and why, -1. Also -1 on
 * ENOMEM (printed too). Marks the workspace (VIEW_MARKER) and, unless
 * c->writable_git, keeps every .git in it read-only in the view and
 * remembers them: view_clear renames any other .git found then (one a
 * cell made), so that the operator's git never trusts it.
 */
int view_init(struct view *v, const struct view_options *c, const char *wpath,
    const char *cmd);
void view_clear(struct view *v);
/*
 * May ./.env be loaded, dir (absolute) being the working directory? 0:
 * dir is in no run's workspace; 1: dir is one, and its .env is the one
 * agentz loaded there before (the view masked it since); -1: refuse it,
 * dir is (in) the workspace ws of a run and its cells could have written
 * it. Only the outermost marker counts: cells write below it.
 */
int view_dotenv_check(const char *dir, char *ws, size_t len);
/* main loaded ./.env from dir: the marker of a workspace there names it. */
void view_dotenv_loaded(const char *dir);
/* Masks one more absolute path (made before the world is built: a path
 * that does not exist then is dropped). Nothing without a view. 0 / -1. */
int view_add_mask(struct view *v, const char *path);

#endif
