/*
 * view.h - the worker's view as a plan: a list of ops, bubblewrap-style
 * (internal to sandbox/; jail.c is its user).
 *
 * view.c plans it in the supervisor (paths, sizes, what to cover, pin and
 * mask: allocation and string work happen there); viewmount.c carries it
 * out in the jail's init right after clone, with system calls only. An op
 * keeps the two sides of a path apart: the source as the init sees the
 * host (/oldroot/...) or the view's own file, and the target in the view
 * being built (/newroot/...), besides the view path as planned (for
 * messages and look-ups).
 */
#ifndef AGENTZ_SANDBOX_VIEW_H
#define AGENTZ_SANDBOX_VIEW_H

#include <stdint.h>
#include <sys/types.h>

struct jail_config;

enum op_kind {
	OP_RBIND, OP_RDONLY_TREE, OP_PROC, OP_BIND_RO, OP_TMPFS, OP_MKDIRS,
	OP_MKFILE, OP_BIND, OP_SYMLINK, OP_IDMAP_BIND, OP_PIN, OP_MASK_FILE,
	OP_MASK_DIR, OP_SET_RO, OP_NOSUID, OP_WRITE
};

struct op {
	enum op_kind kind;
	char *path;		/* the view path as planned ("/dev/null") */
	char *dst;		/* where the init acts: /newroot + path */
	char *src;		/* what is bound there: /oldroot + a host
				 * path, or the view's own file; NULL */
	char *data;		/* a link target, tmpfs options, a made
				 * file's text; NULL */
	unsigned mode;		/* made files and folders; OP_NOSUID:
				 * S_IFDIR or S_IFREG, a place the
				 * worker writes (Landlock's list) */
	int optional;		/* skipped when dst does not exist */
	int ro;
};

#define VIEW_MAX_OPS 1024

struct plan {
	struct op op[VIEW_MAX_OPS];
	int n;
	int userns;		/* plain user: map our own ids */
	uid_t uid;		/* ours, before the jail */
	gid_t gid;
	uid_t wuid;		/* the worker's, as the view sees them (its
				 * /etc/passwd and /etc/group name them) */
	gid_t wgid;
	int idmap_fd;		/* user namespace of the workspace idmap */
};

/*
 * Where building the view failed, besides an op's index: view_build's
 * step, carried to the supervisor in the init's status.
 */
enum view_step {
	VIEW_READY = -1,	/* built */
	VIEW_MAP_IDS = -2,	/* map our ids in a user namespace */
	VIEW_STAGE = -3,	/* pivot into a staging tmpfs */
	VIEW_ENTER = -4		/* enter the view */
};

/* An empty plan (no ops, no idmap). NULL on ENOMEM. */
struct plan *view_plan_new(void);
/* Accepts NULL; closes idmap_fd. */
void view_plan_free(struct plan *p);
/*
 * Appends the view of c to p (root: the machine's root, the worker gets
 * its own uid; p->idmap_fd, wuid and wgid set before). The view is built
 * on an empty root (a tmpfs, read-only once built): only what the
 * interpreter needs of the host, read-only, besides the workspace and
 * c->binds. 0, or -1 with errno (ENOMEM, E2BIG beyond VIEW_MAX_OPS).
 */
int view_plan(struct plan *p, const struct jail_config *c, int root);
/*
 * An op at view path `path`: the host's `host` bound there (NULL: none),
 * with data (NULL: none) and mode. NULL with errno. For view.c and
 * viewetc.c.
 */
struct op *view_op(struct plan *p, enum op_kind k, const char *path,
    const char *host, const char *data, unsigned mode);
/*
 * The host's `host` at view path `path`, read-only: a folder bound with
 * what is mounted below it, a file bound, a link made again (keep_link;
 * else what it leads to is bound, when it exists). What does not exist
 * (or is another kind) is left out. 0, or -1 with errno.
 */
int view_plan_host(struct plan *p, const char *host, const char *path,
    int keep_link);
/* viewetc.c: the view's /etc, filtered (see there). 0, or -1 with errno. */
int view_plan_etc(struct plan *p);
/* What an op does, for messages ("bind read-only"). */
const char *view_op_name(const struct op *o);

/*
 * In the init right after clone (system calls only): maps our ids when
 * p->userns, pivots into a staging tmpfs with the host at /oldroot,
 * carries out every op into /newroot, then pivots into it. 0, or -1 with
 * errno and *step: the index of the failed op, or an enum view_step.
 */
int view_build(const struct plan *p, int *step);

#endif
