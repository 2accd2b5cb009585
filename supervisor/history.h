/*
 * history.h - the views of the cell history that cells and the model get:
 * CELL_INPUTS / CELL_OUTPUTS / get_last_error() for cell code, the
 * get_history_cells host tool for the model, and RUNTIME_INFO.
 */
#ifndef AGENTZ_HISTORY_H
#define AGENTZ_HISTORY_H

#include <jansson.h>

#include "supervisor/cells.h"

/* {"0": record part, ...}; what is "inputs" or "outputs". NULL: bad what. */
json_t *history_map(struct cells *h, const char *what);
/* The full record of the latest failed cell, or JSON null. */
json_t *history_last_error(struct cells *h);
/*
 * get_history_cells: args is the parsed arguments object. Returns the
 * result (new reference): {"total": n} when start and end are both null
 * or missing, else {"total": n, "cells": history[start:end]} with Python
 * slice semantics over every cell including the running one. On bad
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
