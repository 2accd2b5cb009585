/*
 * past.h - the journal read back (--resume), typed: what a restarted run
 * needs from the records journal_load read and checked (journal.h gives
 * their form), without their JSON. Strings and arrays it gives are the
 * struct journal_past's: valid until journal_past_free.
 */
#ifndef AGENTZ_PAST_H
#define AGENTZ_PAST_H

#include <stddef.h>
#include <stdint.h>

struct cell;
struct cells;
struct journal;
struct journal_past;

/*
 * Reads every record of the open journal j (path: its name, for errors)
 * with journal_load's checks. NULL with *err (malloc'ed, or NULL when out
 * of memory): "PATH:LINE: corrupt journal record (what is wrong)", or
 * why it cannot be read. The journal must stay open while p is used.
 */
struct journal_past *journal_past_load(const struct journal *j,
    const char *path, char **err);
void journal_past_free(struct journal_past *p);

/* 1 when the journal holds no record at all. */
int journal_past_empty(const struct journal_past *p);
/* The first "run" record's task (NULL: no run record) and, in *at, its
 * "at" (wall clock seconds; 0 without a run record). */
const char *journal_past_task(const struct journal_past *p, double *at);
/* The last "usage" record's tokens (0: no usage record). */
long long journal_past_tokens(const struct journal_past *p);
/* 1 with *usd when the last "usage" record holds a cost, else 0. */
int journal_past_cost(const struct journal_past *p, double *usd);
/* How many "resume" records: how many times the run was resumed. */
size_t journal_past_resumes(const struct journal_past *p);
/* 1 when the last record is a "stop": its exit code and its reason
 * (NULL: none), else 0. */
int journal_past_ended(const struct journal_past *p, long long *rc,
    const char **reason);
/* The command ("stop", "stop --now") of the first "operator" record
 * whose command starts with "stop"; NULL: none. */
const char *journal_past_operator_stop(const struct journal_past *p);

/* The budgets of the last "budgets" record (`agentz ctl NAME budgets`;
 * 0: none; -1: a field the record lacks), who set them and when. */
struct past_budgets {
	long long max_cells, max_tokens, max_same_failure, max_parallel_calls;
	long long max_egress_bytes;
	double deadline, max_cost, at;
	const char *by;
};
/* 1 with *b from the last "budgets" record, 0: none. */
int journal_past_budgets(const struct journal_past *p, struct past_budgets *b);
/* The bytes of the egress proxy's connections the journal saw close
 * (both ways; one open at a crash is not there). */
uint64_t journal_past_egress_bytes(const struct journal_past *p);
/* The i-th "egress_policy" record (`agentz ctl NAME allow|deny ENTRY`,
 * `approve --always ID`): 1 with its command and entry (valid while p
 * is), 0 past the last. */
int journal_past_egress(const struct journal_past *p, size_t i,
    const char **command, const char **entry);

/*
 * Cell n back into h from its journal records (cells_restore), with the
 * journal's places of its records (cells_journaled). *finished: 1 when
 * it had its "output" record, 0 when it was running when the run went
 * down (its output is then the caller's to journal). NULL when there is
 * no cell n (no "input" record for it), when its records cannot be read
 * back (said in the log) or rebuilt.
 */
struct cell *journal_past_cell(const struct journal_past *p, struct cells *h,
    size_t n, int *finished);

/* What the successor record says of a repair: nothing, no or yes. */
enum past_repair { PAST_REPAIR_UNSAID, PAST_REPAIR_NO, PAST_REPAIR_YES };

/* A "successor" record: the code registered after a cell. */
struct past_successor {
	const char *code;
	size_t len;
	const char *summary;
	enum past_repair repair;
};

/* 1 with *s from the last "successor" record of cell n, 0: none. */
int journal_past_successor(const struct journal_past *p, uint32_t n,
    struct past_successor *s);

/* The i-th (from 0) operator note journaled after the last
 * "note_delivered" record; NULL past the last one. */
const char *journal_past_note(const struct journal_past *p, size_t i);

/*
 * The model calls journaled ("call") and never settled by a later
 * "usage" record: how many, their ids in *ids and the sum of their last
 * estimates in *tokens. journal_past_next_call: the id after every one
 * the journal used (0: none).
 */
size_t journal_past_cut_calls(const struct journal_past *p,
    const long long **ids, long long *tokens);
long long journal_past_next_call(const struct journal_past *p);

#endif
