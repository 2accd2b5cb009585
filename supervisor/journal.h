/*
 * journal.h - the run's journal (SPEC §2, §8): append-only JSON lines,
 * each written and fdatasync'ed before the step it describes goes on:
 *   {"v":1,"type":"run","task":..,"model":..,"at":..}
 *   {"v":1,"type":"input","cell":n, code, summary, generated_at, ...}
 *   {"v":1,"type":"successor","cell":n,"code":..,"summary":..}
 *   {"v":1,"type":"output","cell":n, status, kind, output, ...}
 *   {"v":1,"type":"stop","exit":rc,"at":..}
 * Every line is redacted like everything else that is recorded. A
 * restarted supervisor reads it back (journal_load) to resume the run.
 */
#ifndef AGENTZ_JOURNAL_H
#define AGENTZ_JOURNAL_H

#include <jansson.h>

#include "supervisor/redact.h"

#define JOURNAL_VERSION 1

struct journal;

/* Opens path for appending (created 0600). NULL with errno. */
struct journal *journal_open(const char *path, const struct redact *red);
void journal_close(struct journal *j);
/*
 * Appends rec (borrowed) with "v" and "type" set, then fdatasync. 0, or
 * -1 with errno (the caller stops the run: an unrecorded step must not
 * happen).
 */
int journal_append(struct journal *j, const char *type, json_t *rec);

/*
 * Reads every record of path, in order. A torn last line (a crash in the
 * middle of a write) is dropped; any other bad line is an error. Returns a
 * new array, or NULL with *err (malloc'ed) naming the file and line.
 */
json_t *journal_load(const char *path, char **err);

#endif
