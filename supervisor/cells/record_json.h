/*
 * record_json.h - a cell record (cells.h) as JSON and back: the one place
 * that knows the record's JSON form, used by the journal, the spill
 * store, exec --json, the history views and resume.
 */
#ifndef AGENTZ_RECORD_JSON_H
#define AGENTZ_RECORD_JSON_H

#include <jansson.h>

#include "supervisor/cells/cells.h"

/*
 * The record as new JSON objects (valid UTF-8 whatever the output): the
 * inputs part, the outputs part (a running cell: status "running" and
 * the output captured so far), and both merged with "cell" and "source".
 */
json_t *cells_inputs_json(const struct cell *c);
json_t *cells_outputs_json(const struct cell *c);
json_t *cells_json(const struct cell *c);

/*
 * Rebuilds a cell from a journal's input record and its output record
 * (NULL: the cell never finished). Appends it to h. NULL with errno
 * EINVAL for a record without code, ENOMEM.
 */
struct cell *cells_restore(struct cells *h, const json_t *in,
    const json_t *out);

/*
 * A part of cell i's record as a new JSON object (cells_inputs_json,
 * cells_outputs_json, cells_json), from memory or read back. NULL with
 * errno: ENOENT for no such cell, EIO for a store that cannot be read.
 */
json_t *cells_part(struct cells *h, size_t i, enum cells_part p);

#endif
