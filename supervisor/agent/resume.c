/*
 * resume.c - the journal and resuming: opening and reading it back,
 * refusing a run that ended or crash-loops, restoring the cells, the
 * failures and the spending, and the restart note the model is told
 * first after a restart (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"
#include "supervisor/text/jsonf.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/log.h"
#include "common/path.h"
#include "supervisor/cells/record_json.h"
#include "supervisor/cells/journal.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/agent/price.h"
#include "supervisor/run/runner.h"

/*
 * The first model request after a resume carries the supervisor's note
 * (what happened to the cell that was running) ahead of its input.
 */
size_t
agent_add_restart_note(struct agent *a, struct model_req *q, const char *sep)
{
	size_t n;

	if (a->restart_note == NULL || model_req_note(q, a->restart_note,
	    sep) != 1)
		return 0;	/* model_call says what is wrong with it */
	n = strlen(a->restart_note) + strlen(sep);
	free(a->restart_note);
	a->restart_note = NULL;
	agent_op_notes_delivered(a);
	return n;
}

static json_t *
find_type(const json_t *records, const char *type, int last)
{
	json_t *r, *found = NULL;
	size_t i;

	json_array_foreach(records, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));

		if (t != NULL && strcmp(t, type) == 0) {
			found = r;
			if (!last)
				break;
		}
	}
	return found;
}

static size_t
count_type(const json_t *records, const char *type)
{
	const json_t *r;
	size_t i, n = 0;

	json_array_foreach(records, i, r)
		n += strcmp(json_string_value(json_object_get(r, "type")),
		    type) == 0;
	return n;
}

/*
 * The money spent before the restart: the last usage record's. Tokens
 * journaled without a cost (no price was known then) are priced as
 * output, the dearest kind: the pessimistic choice, as for estimates.
 */
static void
restore_cost(struct agent *a, const json_t *cost)
{
	if (json_is_number(cost) && a->priced) {
		a->cost_base = json_number_value(cost);
	} else if (a->priced && a->tokens_base > 0) {
		a->cost_base = price_cost(&a->price, 0, 0, a->tokens_base);
		log_warnx("--resume: %lld tokens were journaled without their "
		    "cost: counted as output tokens", a->tokens_base);
	} else if (json_is_number(cost)) {
		log_warnx("--resume: the run's cost so far is not counted: no "
		    "price is known for the model %s", a->cfg.model);
	}
}

/*
 * Reads the journal back (--resume); the task, the run's first start and
 * the tokens spent so far come from it. 1 when it holds no record at all
 * (a torn first line was cut): a new run.
 */
static int
load_journal(struct agent *a)
{
	const json_t *run, *usage;
	const char *task;
	char *err = NULL;

	a->records = journal_load(a->journal, a->cfg.journal, &err);
	if (a->records == NULL) {
		log_warnx("--resume: %s", err != NULL ? err : "out of memory");
		free(err);
		return -1;
	}
	if (json_array_size(a->records) == 0 && a->task != NULL)
		return 1;
	run = find_type(a->records, "run", 0);
	task = json_string_value(json_object_get(run, "task"));
	if (task == NULL) {
		log_warnx("--resume: %s holds no run record", a->cfg.journal);
		return -1;
	}
	if (a->task != NULL && strcmp(a->task, task) != 0) {
		log_warnx("--resume: the task given differs from the one in %s",
		    a->cfg.journal);
		return -1;
	}
	if ((a->task_kept = strdup(task)) == NULL)
		return -1;
	a->task = a->task_kept;
	a->run_started = json_number_value(json_object_get(run, "at"));
	usage = find_type(a->records, "usage", 1);
	a->tokens_base = json_integer_value(json_object_get(usage, "tokens"));
	a->tokens_journaled = a->tokens_base;
	restore_cost(a, json_object_get(usage, "cost"));
	return 0;
}

/* The exit codes a run ends with by its own decision (README). */
static int
finished_code(json_int_t rc)
{
	return rc == EXIT_OK || rc == EXIT_FAILED || rc == EXIT_BUDGET ||
	    rc == EXIT_OPERATOR;
}

/*
 * 1 when the journaled run must not go on (a->stopping says with which
 * code): it ended already (its last record is a stop with a finished
 * code), or it was resumed --max-restarts times (a crash loop).
 */
static int
refuse_resume(struct agent *a)
{
	const json_t *last = json_array_get(a->records,
	    json_array_size(a->records) - 1);
	const char *reason;
	size_t restarts = count_type(a->records, "resume");
	json_int_t rc;
	char why[256];

	rc = json_integer_value(json_object_get(last, "exit"));
	if (strcmp(json_string_value(json_object_get(last, "type")),
	    "stop") == 0 && finished_code(rc)) {
		reason = json_string_value(json_object_get(last, "reason"));
		log_warnx("--resume: the run in %s has already ended (exit %d: "
		    "%s); nothing to resume", a->cfg.journal, (int)rc,
		    reason != NULL ? reason : rc == EXIT_OK ? "quit()" : "?");
		a->stopping = 1;
		a->stop_rc = (int)rc;
		a->journal_ended = 1;	/* it has its stop record */
		return 1;
	}
	if (a->cfg.max_restarts > 0 && restarts >= a->cfg.max_restarts) {
		(void)snprintf(why, sizeof why, "stopping: the run was already "
		    "resumed %zu times (--max-restarts %u): the supervisor is in "
		    "a crash loop", restarts, a->cfg.max_restarts);
		agent_stop(a, EXIT_BUDGET, why);
		return 1;
	}
	return 0;
}

/*
 * A journal the cells could write (inside the workspace, at any depth) is
 * refused: a cell could rename it away and plant a link or another file
 * where the next --resume looks. 1 when refused (said).
 */
static int
journal_in_workspace(const struct agent *a)
{
	char *copy = strdup(a->cfg.journal), dir[PATH_MAX];
	const char *ws = a->view.workspace;
	int in;

	if (copy == NULL || ws == NULL || realpath(dirname(copy), dir) == NULL) {
		free(copy);
		return 0;	/* journal_open says what is wrong */
	}
	free(copy);
	in = path_under(dir, ws);
	if (in)
		log_warnx("refusing the journal %s: it is inside the workspace "
		    "%s, which cells can write (a cell could replace it before "
		    "the next --resume); keep it beside the workspace, or pass "
		    "--workspace DIR", a->cfg.journal, ws);
	return in;
}

/* The kinds of failure that are the journal's filesystem, not a usage
 * error: exit 5, which the unit retries. */
static int
storage_errno(int e)
{
	return e == EROFS || e == ENOSPC || e == EDQUOT || e == EIO;
}

/* Opens (and locks) the journal; -1 when it cannot be used (said). */
static int
open_locked(struct agent *a)
{
	struct stat st;
	char *err = NULL;

	if (lstat(a->cfg.journal, &st) == 0 && S_ISDIR(st.st_mode)) {
		log_warnx("the journal %s is a directory: --journal takes a "
		    "file (e.g. %s/journal.jsonl)", a->cfg.journal,
		    a->cfg.journal);
		return -1;
	}
	if (!a->cfg.resume && lstat(a->cfg.journal, &st) == 0 &&
	    S_ISREG(st.st_mode) && st.st_size > 0) {
		log_warnx("the journal %s already holds a run: continue it with "
		    "--resume, or give another --journal", a->cfg.journal);
		return -1;
	}
	if (journal_in_workspace(a))
		return -1;
	/* locked (and its torn tail cut) before it is read */
	a->journal = journal_open(a->cfg.journal, a->red, &err);
	if (a->journal == NULL) {
		if (storage_errno(errno))
			a->journal_broken = EXIT_JOURNAL;
		log_warnx("%s%s", err != NULL ? err : "out of memory",
		    a->journal_broken ? " (exit 5: retried once the filesystem "
		    "can be written)" : "");
		free(err);
		return -1;
	}
	return 0;
}

static int
record_start(struct agent *a)
{
	struct jf f[] = { JF_S("task", a->task), JF_S("model", a->cfg.model),
	    JF_R("at", loop_wall()), JF_END };

	return agent_record(a, a->cfg.resume ? "resume" : "run", f);
}

int
agent_open_journal(struct agent *a)
{
	struct stat st;
	int rc = 0;

	a->run_started = loop_wall();
	if (a->cfg.journal == NULL)
		return 0;
	/* nothing to resume yet: a new run (how a unit starts the first time) */
	if (a->cfg.resume && (lstat(a->cfg.journal, &st) < 0 ||
	    (S_ISREG(st.st_mode) && st.st_size == 0))) {
		if (a->task == NULL) {
			log_warnx("--resume: %s holds no run, and no task was given",
			    a->cfg.journal);
			return -1;
		}
		a->cfg.resume = 0;
	}
	if (open_locked(a) < 0)
		return -1;
	if (a->cfg.resume && (rc = load_journal(a)) < 0)
		return -1;
	if (rc > 0)
		a->cfg.resume = 0;
	if (a->cfg.resume && refuse_resume(a))
		return 0;
	if (record_start(a) < 0)
		return -1;
	if (a->cfg.resume)
		agent_settle_cut_calls(a);
	return 0;
}

/* The journal's records of one type by cell number, as an object. */
static json_t *
by_cell(const json_t *records, const char *type)
{
	json_t *o = json_object(), *r;
	char key[24];
	size_t i;

	json_array_foreach(records, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));

		if (t == NULL || strcmp(t, type) != 0)
			continue;
		(void)snprintf(key, sizeof key, "%lld", (long long)
		    json_integer_value(json_object_get(r, "cell")));
		(void)json_object_set(o, key, r);
	}
	return o;
}

/* A cell back from its journal records (only their places are in memory). */
static struct cell *
restore_cell(struct agent *a, const json_t *in, const json_t *out)
{
	json_t *i = in != NULL ? journal_full(a->journal, in) : NULL;
	json_t *o = out != NULL ? journal_full(a->journal, out) : NULL;
	struct cell *c = NULL;
	uint64_t off;
	size_t len;

	if (in != NULL && (i == NULL || (out != NULL && o == NULL)))
		log_warn("--resume: cannot read cell records back from %s",
		    a->cfg.journal);
	else if (i != NULL)
		c = cells_restore(runner_cells(a->runner), i, o);
	json_decref(i);
	json_decref(o);
	if (c == NULL)
		return NULL;
	if (journal_where(in, &off, &len) == 0)
		cells_journaled(runner_cells(a->runner), c, 0, a->journal, off,
		    len);
	if (out == NULL)	/* it was running when we went down */
		(void)agent_record_cell(a, c, 1);
	else if (journal_where(out, &off, &len) == 0)
		cells_journaled(runner_cells(a->runner), c, 1, a->journal, off,
		    len);
	return c;
}

/*
 * Rebuilds the history, the consecutive failures and the failure
 * signatures; returns the last cell, or NULL when none ran.
 */
static struct cell *
restore_cells(struct agent *a)
{
	json_t *in = by_cell(a->records, "input");
	json_t *out = by_cell(a->records, "output");
	struct cell *c = NULL;
	char key[24], *sig;
	size_t n;

	for (n = 0;; n++) {
		(void)snprintf(key, sizeof key, "%zu", n);
		if ((c = restore_cell(a, json_object_get(in, key),
		    json_object_get(out, key))) == NULL)
			break;
		if (c->kind == KIND_RESTART || c->kind == KIND_STOPPED)
			continue;	/* not the code's doing: counts neither way */
		a->failures = c->status == CELL_ERROR ? a->failures + 1 : 0;
		a->failed_cells = a->failures;
		if ((sig = agent_failure_signature(c)) != NULL)
			(void)agent_count_failure(a, c, sig);
		free(sig);
	}
	json_decref(in);
	json_decref(out);
	return runner_last(a->runner);
}

/* What the model is told first after a restart. */
static void
set_restart_note(struct agent *a, const struct cell *last)
{
	int rc;

	if (last->kind == KIND_RESTART || last->kind == KIND_STOPPED)
		rc = asprintf(&a->restart_note, "[agentz] The supervisor was "
		    "%s while cell %u (%s) was running. That cell did not "
		    "finish: its worker and Python namespace are gone, and its "
		    "side effects may be partial (files half-written, commands "
		    "half-done). Check them before relying on them.",
		    last->kind == KIND_STOPPED ? "stopped, then resumed," :
		    "restarted", last->n,
		    last->summary != NULL ? last->summary : "no summary");
	else
		rc = asprintf(&a->restart_note, "[agentz] The supervisor was "
		    "restarted after cell %u ended; no cell was interrupted, but "
		    "the Python namespace is new (earlier variables are gone).",
		    last->n);
	if (rc < 0)
		a->restart_note = NULL;
}

/*
 * Goes on after the last cell: its successor as the model's cell (also
 * when the restart cut the cell off after it registered one), a repair
 * cell already given, or a new repair request.
 */
static void
continue_from(struct agent *a, struct cell *last, const json_t *s)
{
	const json_t *code = json_object_get(s, "code");
	const json_t *repair = json_object_get(s, "repair");
	int code_failed = last->status != CELL_OK &&
	    last->kind != KIND_RESTART && last->kind != KIND_STOPPED;

	if (s != NULL && !code_failed && !json_is_true(repair)) {
		agent_run_cell(a, json_string_value(code),
		    json_string_length(code),
		    json_string_value(json_object_get(s, "summary")),
		    (int64_t)last->n);
	} else if (s != NULL && code_failed && !json_is_false(repair)) {
		agent_run_cell(a, json_string_value(code),
		    json_string_length(code), RECOVERY_SUMMARY, -1);
	} else if (agent_too_many_failures(a, last->n)) {
		return;
	} else {
		a->failed = last;	/* already counted by restore_cells */
		agent_start_recovery(a);
	}
}

/*
 * An operator's stop is final: one journaled before the supervisor went
 * down (its stop record never written) ends the run now (1).
 */
static int
operator_stopped(struct agent *a)
{
	const json_t *r;
	const char *cmd;
	char why[160];
	size_t i;

	json_array_foreach(a->records, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));

		cmd = json_string_value(json_object_get(r, "command"));
		if (t == NULL || strcmp(t, "operator") != 0 || cmd == NULL ||
		    strncmp(cmd, "stop", 4) != 0)
			continue;
		(void)snprintf(why, sizeof why, "stopping: the operator stopped "
		    "the run (agentz ctl %s) before the supervisor restarted",
		    cmd);
		agent_stop(a, EXIT_OPERATOR, why);
		return 1;
	}
	return 0;
}

/* Continues a journaled run. -1 when no cell ran yet: start with cell 0. */
int
agent_resume(struct agent *a)
{
	json_t *succ = by_cell(a->records, "successor");
	struct cell *last = restore_cells(a);
	char key[24];

	log_info("resuming: %zu cells in %s (restart %zu)",
	    runner_cells(a->runner)->n, a->cfg.journal,
	    count_type(a->records, "resume") + 1);
	if (last != NULL && last->status == CELL_EXITED) {
		log_info("the run had already ended with quit()");
		agent_stop(a, EXIT_OK, NULL);
	} else if (!operator_stopped(a) && !agent_resume_over_budget(a) &&
	    last != NULL) {
		(void)snprintf(key, sizeof key, "%u", last->n);
		set_restart_note(a, last);
		agent_op_renote(a);
		continue_from(a, last, json_object_get(succ, key));
	}
	json_decref(succ);
	return last == NULL ? -1 : 0;
}
