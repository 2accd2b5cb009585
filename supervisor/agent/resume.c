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

#include "common/log.h"
#include "common/path.h"
#include "supervisor/cells/journal.h"
#include "supervisor/cells/past.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/agent/price.h"
#include "supervisor/run/runner.h"

/*
 * The first model request after a resume carries the supervisor's note
 * (what happened to the cell that was running) ahead of its input.
 */
size_t
agent_add_restart_note(struct agent *a, struct model_req *q, const char *sep,
    uint32_t cell, const char *purpose)
{
	size_t n;

	if (a->restart_note == NULL || model_req_note(q, a->restart_note,
	    sep) != 1)
		return 0;	/* model_call says what is wrong with it */
	n = strlen(a->restart_note) + strlen(sep);
	free(a->restart_note);
	a->restart_note = NULL;
	agent_op_notes_delivered(a, cell, purpose);
	return n;
}

/*
 * The money spent before the restart: the last usage record's. Tokens
 * journaled without a cost (no price was known then) are priced as
 * output, the dearest kind: the pessimistic choice, as for estimates.
 */
static void
restore_cost(struct agent *a)
{
	double cost = 0;
	int has_cost = journal_past_cost(a->past, &cost);

	if (has_cost && a->priced) {
		a->cost_base = cost;
	} else if (a->priced && a->tokens_base > 0) {
		a->cost_base = price_cost(&a->price, 0, 0, a->tokens_base);
		log_warnx("--resume: %lld tokens were journaled without their "
		    "cost: counted as output tokens", a->tokens_base);
	} else if (has_cost) {
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
	const char *task;
	char *err = NULL;
	double at;

	a->past = journal_past_load(a->journal, a->cfg.journal, &err);
	if (a->past == NULL) {
		log_warnx("--resume: %s", err != NULL ? err : "out of memory");
		free(err);
		return -1;
	}
	if (journal_past_empty(a->past) && a->task != NULL)
		return 1;
	task = journal_past_task(a->past, &at);
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
	a->run_started = at;
	a->tokens_base = journal_past_tokens(a->past);
	a->tokens_journaled = a->tokens_base;
	restore_cost(a);
	agent_resume_budgets(a, a->past);
	return 0;
}

/* The exit codes a run ends with by its own decision (README). */
static int
finished_code(long long rc)
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
	const char *reason;
	size_t restarts = journal_past_resumes(a->past);
	long long rc;
	char why[256];

	if (journal_past_ended(a->past, &rc, &reason) && finished_code(rc)) {
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

/* A cell back from its journal records (only their places are in
 * memory); one the restart cut off gets its output record now. */
static struct cell *
restore_cell(struct agent *a, size_t n)
{
	struct cell *c;
	int finished;

	c = journal_past_cell(a->past, runner_cells(a->runner), n, &finished);
	if (c != NULL && !finished)	/* it was running when we went down */
		(void)agent_record_cell(a, c, 1);
	return c;
}

/*
 * Rebuilds the history, the consecutive failures and the failure
 * signatures; returns the last cell, or NULL when none ran.
 */
static struct cell *
restore_cells(struct agent *a)
{
	struct cell *c;
	char *sig;
	size_t n;

	for (n = 0;; n++) {
		if ((c = restore_cell(a, n)) == NULL)
			break;
		if (c->kind == KIND_RESTART || c->kind == KIND_STOPPED)
			continue;	/* not the code's doing: counts neither way */
		a->failures = c->status == CELL_ERROR ? a->failures + 1 : 0;
		a->failed_cells = a->failures;
		if ((sig = agent_failure_signature(c)) != NULL)
			(void)agent_count_failure(a, c, sig);
		free(sig);
	}
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
continue_from(struct agent *a, struct cell *last)
{
	struct past_successor succ;
	const struct past_successor *s = journal_past_successor(a->past,
	    last->n, &succ) ? &succ : NULL;
	int code_failed = last->status != CELL_OK &&
	    last->kind != KIND_RESTART && last->kind != KIND_STOPPED;

	if (s != NULL && !code_failed && s->repair != PAST_REPAIR_YES) {
		agent_run_cell(a, s->code, s->len, s->summary,
		    (int64_t)last->n);
	} else if (s != NULL && code_failed && s->repair != PAST_REPAIR_NO) {
		agent_run_cell(a, s->code, s->len, RECOVERY_SUMMARY, -1);
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
	const char *cmd = journal_past_operator_stop(a->past);
	char why[160];

	if (cmd == NULL)
		return 0;
	(void)snprintf(why, sizeof why, "stopping: the operator stopped the "
	    "run (agentz ctl %s) before the supervisor restarted", cmd);
	agent_stop(a, EXIT_OPERATOR, why);
	return 1;
}

/* Continues a journaled run. -1 when no cell ran yet: start with cell 0. */
int
agent_resume(struct agent *a)
{
	struct cell *last = restore_cells(a);
	struct past_successor succ;

	/* the model answered in an earlier start: its set-up works, and an
	 * error now is an ordinary one (model.h: set-up errors) */
	if (runner_cells(a->runner)->n > 1 ||
	    journal_past_successor(a->past, 0, &succ))
		model_set_answered(a->model);
	log_info("resuming: %zu cells in %s (restart %zu)",
	    runner_cells(a->runner)->n, a->cfg.journal,
	    journal_past_resumes(a->past) + 1);
	if (last != NULL && last->status == CELL_EXITED) {
		log_info("the run had already ended with quit()");
		agent_stop(a, EXIT_OK, NULL);
	} else if (!operator_stopped(a) && !agent_resume_over_budget(a) &&
	    last != NULL) {
		set_restart_note(a, last);
		agent_op_renote(a);
		continue_from(a, last);
	}
	return last == NULL ? -1 : 0;
}
