/*
 * journal.h - the run's journal (SPEC §2, §8): append-only JSON lines,
 * each written and fdatasync'ed before the step it describes goes on:
 *   {"v":1,"type":"run","task":..,"model":..,"at":..}
 *   {"v":1,"type":"resume","task":..,"model":..,"at":..}
 *   {"v":1,"type":"isolation","isolation":..,"containment":..}
 *   {"v":1,"type":"input","cell":n, code, summary, generated_at, ...}
 *   {"v":1,"type":"successor","cell":n,"code":..,"summary":..,"repair":b}
 *   {"v":1,"type":"usage","tokens":n,"estimated":n}
 *   {"v":1,"type":"output","cell":n, status, kind, output, ...}
 *   {"v":1,"type":"stop","exit":rc,"reason":..,"at":..}
 * Every line is redacted like everything else that is recorded. A
 * restarted supervisor reads it back (journal_load) to resume the run.
 *
 * The journal is a log like a database's: one supervisor at a time holds
 * it (an exclusive flock on a close-on-exec descriptor, for the life of
 * the struct journal), a line is a record only once its newline is on
 * disk, and a line that cannot be read back is corruption, never skipped.
 */
#ifndef AGENTZ_JOURNAL_H
#define AGENTZ_JOURNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/text/redact.h"

#define JOURNAL_VERSION 1

struct journal;

/*
 * Opens path for appending (created 0600; its directory is fsync'ed when
 * it is created) and takes its exclusive lock. Bytes after the last
 * newline (a torn last write, trailing NULs) are truncated, and said in
 * the log, before anything is appended. NULL with *err (malloc'ed, or
 * NULL when out of memory) saying why: another process holds the journal
 * (with its pid), or the system call that failed.
 */
struct journal *journal_open(const char *path, const struct redact *red,
    char **err);
void journal_close(struct journal *j);
/*
 * Appends rec (borrowed) with "v" and "type" set, then fdatasync. 0, or
 * -1 with errno (the caller stops the run: an unrecorded step must not
 * happen). A failed write is cut off again (the journal ends at its last
 * whole record) and every later append fails with EIO.
 */
int journal_append(struct journal *j, const char *type, json_t *rec);
/* Where the last record appended starts, and its length (newline included). */
void journal_last(const struct journal *j, uint64_t *off, size_t *len);
/*
 * The record at off (len bytes, newline included), as written: a new
 * object, or NULL with errno (EIO: not a whole record there, ENOMEM).
 * Reads through the locked descriptor; the file offset is not moved.
 */
json_t *journal_read(const struct journal *j, uint64_t off, size_t len);

/*
 * Reads every record of path, in order, each checked against the schema
 * of its type (the fields it must have and their JSON types; a type this
 * version does not know is kept, with "v" and "type" checked). Every line
 * must end with a newline (journal_open has cut a torn tail). Returns a
 * new array, or NULL with *err (malloc'ed) naming the file and line.
 */
json_t *journal_load(const char *path, char **err);
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
