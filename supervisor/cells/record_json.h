/*
 * record_json.h - a cell record (cells.h) as JSON and back, and the
 * journal's records (journal.h) as JSON: the one place that knows the
 * records' JSON form, used by the journal, the spill store, the history
 * views and the journal read back (past.c).
 *
 * Private to cells/ (and its unit tests): nothing outside cells/ includes
 * it. Other modules get a record as text (cells_json_text, cells.h), the
 * journal read back typed (past.h), and write records with fields
 * (journal_append_f, journal_append_cell, journal.h).
 */
#ifndef AGENTZ_RECORD_JSON_H
#define AGENTZ_RECORD_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/cells/cells.h"

struct journal;

/*
 * The record as new JSON objects (valid UTF-8 whatever the output): the
 * inputs part, the outputs part (a running cell: status "running" and
 * the output captured so far), and both merged with "cell" and "source".
 */
json_t *cells_inputs_json(const struct cell *c);
json_t *cells_outputs_json(const struct cell *c);
json_t *cells_json(const struct cell *c);
/* The journal's "input" (outputs 0) or "output" record of c: "cell" and
 * that part, without "v" and "type" (journal_append adds them). */
json_t *cells_journal_json(const struct cell *c, int outputs);

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

/* --- the journal's records (journal.h) --- */

/*
 * Appends rec (borrowed) with "v" and "type" set (journal_write). 0, or
 * -1 with errno (the caller stops the run: an unrecorded step must not
 * happen). A failed write is cut off again (the journal ends at its last
 * whole record) and every later append fails with EIO.
 */
int journal_append(struct journal *j, const char *type, json_t *rec);
/*
 * The record at off (len bytes, newline included), as written: a new
 * object, or NULL with errno (EIO: not a whole record there, ENOMEM).
 * Reads through the locked descriptor; the file offset is not moved.
 */
json_t *journal_read(const struct journal *j, uint64_t off, size_t len);

/*
 * Reads every record of the open journal j (path: its name, for errors),
 * in order, through the descriptor journal_open checked and locked, each
 * checked against the schema of its type (the fields it must have and
 * their JSON types; a type this version does not know is kept, with "v"
 * and "type" checked) and against the records before it: cells numbered
 * from 0 in order, one input and one output each, no output or successor
 * for a cell without its input, no negative or absurd usage (more than
 * 10^12 tokens or 10^9 USD). Every line must end with a newline
 * (journal_open has cut a torn tail). Returns a new array, or NULL with
 * *err (malloc'ed): "PATH:LINE: corrupt journal record (what is wrong)".
 */
json_t *journal_load(const struct journal *j, const char *path, char **err);
/*
 * The records of cells ("input", "output") can be megabytes each, so
 * journal_load keeps only their "v", "type", "cell" and where they are:
 * journal_where gives the place (0, or -1 for a record kept whole), and
 * journal_full the whole record read back (a new reference; rec itself,
 * with a new reference, when it was kept whole; NULL with errno).
 */
int journal_where(const json_t *rec, uint64_t *off, size_t *len);
json_t *journal_full(const struct journal *j, const json_t *rec);


#endif
