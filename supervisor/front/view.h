/*
 * view.h - what the worker's world holds, from the operator's settings:
 * the workspace, what is masked, which binaries stay read-only, and how
 * strictly (sandbox/jail.h builds it).
 */
#ifndef AGENTZ_VIEW_H
#define AGENTZ_VIEW_H

#include <stddef.h>

#include "sandbox/jail.h"

struct config;

struct view {
	struct jail_config jc;	/* points into the fields below */
	char *workspace;
	char **masks;		/* NULL-terminated, owned */
	size_t nmasks;
	char *protect[3];	/* agentz, agentz-worker, NULL */
};

/*
 * Fills v from c (wpath: the agentz-worker executable). A bad workspace
 * is a usage error: printed, naming the path and why, -1. Also -1 on
 * ENOMEM (printed too).
 */
int view_init(struct view *v, const struct config *c, const char *wpath,
    const char *cmd);
void view_clear(struct view *v);
/* Masks one more absolute path (made before the world is built: a path
 * that does not exist then is dropped). Nothing without a view. 0 / -1. */
int view_add_mask(struct view *v, const char *path);

#endif
