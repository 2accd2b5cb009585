/*
 * history.h - the views of the cell history that cells and the model get:
 * CELL_INPUTS / CELL_OUTPUTS / get_last_error() for cell code, the
 * get_history_cells host tool for the model, and RUNTIME_INFO.
 */
#ifndef AGENTZ_HISTORY_H
#define AGENTZ_HISTORY_H

#include <jansson.h>

#include "supervisor/cells/cells.h"

/*
 * A cell's "cells" request (CELL_INPUTS, CELL_OUTPUTS, get_last_error()),
 * body parsed. "what" is "inputs" or "outputs" with one of
 *   "keys": true           -> {"total": n, "running": [i, ...]}
 *   "cell": i              -> that part of cell i's record, or null
 *   "start": a, "end": b   -> {"cells": {"a": part, ...}, "next": k}
 * (as many of cells a..b-1 as fit one reply; go on from k), or it is
 * "last_error": the whole record of the latest failed cell, or null. No
 * reply exceeds h->reply_max. Returns a new reference, or NULL with *err
 * (malloc'ed; NULL when out of memory) and *type the Python exception.
 */
json_t *history_serve(struct cells *h, const json_t *body, const char **type,
    char **err);
/*
 * get_history_cells: args is the parsed arguments object. Returns the
 * result (new reference): {"total": n} when start and end are both null
 * or missing, else {"total": n, "cells": history[start:end]} with Python
 * slice semantics over every cell including the running one, within
 * h->reply_max bytes: when cut, "truncated": {"next_start", "note"}, and
 * a record too big for any result stands as {"cell", "status",
 * "omitted": why}. On bad
 * arguments returns NULL and sets *err to a malloc'ed message.
 */
json_t *history_slice(struct cells *h, const json_t *args, char **err);
/*
 * RUNTIME_INFO: provider, platform, workspace, plus only the whitelisted
 * keys (session_id, memory_gib, public_origin, user_timezone) of the JSON
 * object in AGENTZ_RUNTIME_INFO. The environment is never enumerated.
 */
json_t *history_runtime_info(void);

#endif
