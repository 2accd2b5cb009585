/*
 * events.h - `agentz --json "task"`: the agent run as an event stream on
 * stdout, one JSON object a line (README.md, "The event stream", is the
 * schema). Every event has "v" (EVENTS_VERSION), "type", "seq" (0, 1, 2,
 * ... over the run's events: a gap means events were dropped) and "time"
 * (wall clock, seconds since the epoch), then its own fields. U+2028 and
 * U+2029 are escaped, so a line splitter finds one event a line.
 *
 * Every string of an event passes the run's redactor (the secrets of
 * out_set_redact's set become [REDACTED]) and is valid UTF-8. Events go
 * through out.h's non-blocking stdout queue: a stalled reader cannot stall
 * the run. Only cell_output events may be lost to a reader that stalls
 * (dropped whole, their bytes counted in the cell's cell_end); the others
 * wait in the queue as records do, and are never cut (out_lines). At exit,
 * a reader that took nothing for a while gets the stop (or budget_stop)
 * and run_end events whole; those between that could not be written are
 * dropped whole (a gap in seq says so).
 *
 * Nothing here does anything until events_start(): the rest of the run
 * calls these unconditionally.
 */
#ifndef AGENTZ_EVENTS_H
#define AGENTZ_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "supervisor/text/redact.h"

#define EVENTS_VERSION	1

/* Events from now on, their strings cleaned with red (kept, not copied;
 * NULL: none). */
void events_start(const struct redact *red);
/* 1 after events_start(): cell output and the status bar stay off stdout. */
int events_enabled(void);

/*
 * One event of the given type with fields (consumed; NULL: none, and a
 * fields object that could not be built gives the event without them).
 */
void events_emit(const char *type, json_t *fields);

/*
 * The line of an event: its JSON text json[0..n) with U+2028 and U+2029
 * (which JSON allows raw in strings, but line splitters such as Python's
 * str.splitlines() take for line ends) written as \u2028 and \u2029, and
 * a '\n'. Malloc'ed, NUL-terminated, its length in *len; NULL on ENOMEM.
 */
char *events_line(const char *json, size_t n, size_t *len);

/* A JSON string of p[0..n) whatever the bytes (invalid UTF-8 becomes
 * U+FFFD); JSON null for a NULL p (events_str: NUL-terminated s). Never
 * NULL: an event's fields can always be packed with "o". */
json_t *events_strn(const char *p, size_t n);
json_t *events_str(const char *s);

/* Live output of cell (-1: between cells) on stream 1 or 2: cell_output
 * events. A UTF-8 character split across chunks is kept whole. */
void events_cell_output(long cell, int stream, const char *p, size_t n);

struct cell;

/*
 * Cell c's record is complete: the output held back, cell_end with the
 * record (cells/record_json.h's form), then rollback when c's namespace
 * was rolled back.
 */
void events_cell_end(const struct cell *c);

/*
 * The fields of the rollback event for cell c, whose record (its JSON
 * form) is record: "cell", "namespace" (the record's text),
 * "to_before_cell" (c's number: the snapshot was taken before it) and
 * "threads_lost" (as the record has it, when it has it). A new object, or
 * NULL when c's namespace was not rolled back (or c still runs).
 */
json_t *events_rollback_fields(const struct cell *c, const json_t *record);

#endif
