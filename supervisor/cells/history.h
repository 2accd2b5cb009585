/*
 * history.h - the views of the cell history that cells and the model get:
 * CELL_INPUTS / CELL_OUTPUTS / get_last_error() for cell code, the
 * get_history_cells host tool for the model, and RUNTIME_INFO.
 */
#ifndef AGENTZ_HISTORY_H
#define AGENTZ_HISTORY_H

#include <stddef.h>

#include "supervisor/cells/cells.h"

/*
 * A cell's "cells" request (CELL_INPUTS, CELL_OUTPUTS, get_last_error()),
 * body its JSON text (len bytes). "what" is "inputs" or "outputs" with
 * one of
 *   "keys": true           -> {"total": n, "running": [i, ...]}
 *   "cell": i              -> that part of cell i's record, or null
 *   "start": a, "end": b   -> {"cells": {"a": part, ...}, "next": k}
 * (as many of cells a..b-1 as fit one reply; go on from k), or it is
 * "last_error": the whole record of the latest failed cell, or null. No
 * reply exceeds h->reply_max. Returns the reply as compact JSON text
 * (malloc'ed), or NULL with *err (malloc'ed; NULL when out of memory) and
 * *type the Python exception.
 */
char *history_serve(struct cells *h, const char *body, size_t len,
    const char **type, char **err);
/*
 * get_history_cells: args is the arguments object as JSON text (NULL:
 * none). Returns the result as compact JSON text (malloc'ed):
 * {"total": n} when start and end are both null or missing, else
 * {"total": n, "cells": history[start:end]} with Python slice semantics
 * over every cell including the running one, within h->reply_max bytes:
 * when cut, "truncated": {"next_start", "note"}, and a record too big for
 * any result stands as {"cell", "status", "omitted": why}. On bad
 * arguments returns NULL and sets *err to a malloc'ed message.
 */
char *history_slice(struct cells *h, const char *args, char **err);
/*
 * RUNTIME_INFO: provider, platform, workspace, plus only the whitelisted
 * keys (session_id, memory_gib, public_origin, user_timezone) of the JSON
 * object in AGENTZ_RUNTIME_INFO, isolation and network (the worker's:
 * "none" or "host"). workspace is the worker's (NULL: the current
 * directory). The environment is never enumerated. JSON text
 * (malloc'ed), or NULL when out of memory.
 */
char *history_runtime_info(const char *isolation, const char *network,
    const char *workspace);

#endif
