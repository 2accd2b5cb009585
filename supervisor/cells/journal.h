/*
 * journal.h - the run's journal (SPEC sections 2 and 8): append-only JSON lines,
 * each written and fdatasync'ed before the step it describes goes on:
 *   {"v":1,"type":"run","task":..,"model":..,"at":..}
 *   {"v":1,"type":"resume","task":..,"model":..,"at":..}
 *   {"v":1,"type":"isolation","isolation":..,"containment":..,
 *    "network":"none"|"host"} (network absent in older journals)
 *   {"v":1,"type":"input","cell":n, code, summary, generated_at, ...}
 *   {"v":1,"type":"successor","cell":n,"code":..,"summary":..,"repair":b}
 *   {"v":1,"type":"usage","tokens":n,"estimated":n,"calls":[id..]}
 *   {"v":1,"type":"output","cell":n, status, kind, output, ...}
 *   {"v":1,"type":"call","id":n,"estimated":t}  (a model call in flight)
 *   {"v":1,"type":"stop","exit":rc,"reason":..,"at":..}
 *   {"v":1,"type":"budgets","by":"operator","max_cells":n,"deadline":s,
 *    "max_tokens":n,"max_cost":usd,"max_same_failure":n,
 *    "max_parallel_calls":n,"at":..}  (agentz ctl budgets; 0: none)
 * Every line is redacted like everything else that is recorded. A
 * restarted supervisor reads it back (past.h, over record_json.c's
 * journal_load) to resume the run.
 *
 * The journal is a log like a database's: one supervisor at a time holds
 * it (an exclusive flock on a close-on-exec descriptor, for the life of
 * the struct journal), a line is a record only once its newline is on
 * disk, and a line that cannot be read back is corruption, never skipped.
 */
#ifndef AGENTZ_JOURNAL_H
#define AGENTZ_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/text/redact.h"

#define JOURNAL_VERSION 1

struct journal;

/*
 * Opens path for appending (created 0600; its directory is fsync'ed when
 * it is created) without following a link or blocking on a FIFO, checks
 * it is a regular file of the effective user with one name, and takes its
 * exclusive lock. Bytes after the last newline (a torn last write,
 * trailing NULs) are truncated, and said in the log, before anything is
 * appended. NULL with *err (malloc'ed, or NULL when out of memory) saying
 * why: a link, a directory, not a regular file of ours, another process
 * holds the journal (with its pid), or the system call that failed; errno
 * is kept (EROFS: a read-only filesystem).
 */
struct journal *journal_open(const char *path, const struct redact *red,
    char **err);
void journal_close(struct journal *j);
/*
 * Appends one record: text is its JSON (n bytes, no newline), redacted
 * here, then the newline, then fdatasync. 0, or -1 with errno (the
 * caller stops the run: an unrecorded step must not happen). ESTALE: the
 * path no longer names the open file (deleted, renamed or replaced under
 * the run, said in the log): the record is not written; later records
 * go to the open file, and journal_close writes the records back to the
 * path when nothing (or an empty file) is there, else saves a deleted
 * journal beside it as PATH.saved-PID. A failed
 * write is cut off again (the journal ends at its last whole record) and
 * every later append fails with EIO. The record's JSON form (with "v" and
 * "type") is record_json.h's journal_append.
 */
int journal_write(struct journal *j, const char *text, size_t n);
/*
 * While on, appends are written without waiting for the disk
 * (fdatasync): for records that come fast and matter less one by one
 * (the egress proxy's connections); the next synced append (a cell's
 * record) or the close covers them. Accepts NULL.
 */
void journal_lazy(struct journal *j, int on);
/* The locked descriptor (journal_load reads the records through it). */
int journal_fd(const struct journal *j);
/* Where the last record appended starts, and its length (newline included). */
void journal_last(const struct journal *j, uint64_t *off, size_t *len);
/*
 * The line at off (len bytes, newline included), as written, with a NUL
 * in place of its newline (malloc'ed), or NULL with errno (EIO: not a
 * whole record there, ENOMEM). Reads through the locked descriptor; the
 * file offset is not moved. The records as JSON (journal_read,
 * journal_load) are record_json.h.
 */
char *journal_read_line(const struct journal *j, uint64_t off, size_t len);

struct cell;
struct jf;
/*
 * Appends a record of type with the fields f (text/jsonf.h), "v" and
 * "type" added after them; journal_write's return and rules.
 */
int journal_append_f(struct journal *j, const char *type, const struct jf *f);
/* Appends c's "input" (outputs 0) or "output" record; as journal_append_f. */
int journal_append_cell(struct journal *j, const struct cell *c, int outputs);

#endif
