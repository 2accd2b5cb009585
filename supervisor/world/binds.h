/*
 * binds.h - --ro-bind and --bind read into the view (internal to
 * supervisor/world/; view.c is its user).
 */
#ifndef AGENTZ_WORLD_BINDS_H
#define AGENTZ_WORLD_BINDS_H

#include "supervisor/world/view.h"

/*
 * Reads c's --ro-bind and --bind into v->binds (and v->jc). A refused one
 * is a usage error: printed, naming the option, the path and why, -1;
 * also -1 on ENOMEM (printed).
 */
int view_binds(struct view *v, const struct view_options *c,
    const char *cmd);
/* Frees what view_binds kept. */
void view_binds_clear(struct view *v);

#endif
