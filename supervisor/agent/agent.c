/*
 * agent.c - the agent run loop (see agent.h).
 *
 * The host never chooses actions. It runs cell n; the model, called by the
 * cell through call_me, registers cell n+1 (once) with set_next_cell_code.
 * A cell that raises, ends without a successor or is killed is followed by
 * a repair cell the supervisor asks the model for; three consecutive
 * failures end the run (exit 1), quit() ends it normally (exit 0), a
 * KeyboardInterrupt/SystemExit from cell code or Ctrl-C ends it with 130.
 *
 * With a journal, every decision survives a restart: --resume rebuilds the
 * history and the budgets (cells, tokens, cost, the deadline from the run's
 * first start, repeated and consecutive failures, restarts), and a stop
 * decided while resuming ends the process like any other. A cell cut off
 * by a supervisor restart is not the model's failure: it neither counts
 * toward nor resets the consecutive failures (--max-restarts bounds crash
 * loops instead).
 *
 * This file owns stopping, the journal records, the successor, the cell
 * loop and the set-up; agent_int.h names the files that own the rest.
 */
#include "supervisor/agent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#include "common/log.h"
#include "supervisor/agent/agent_int.h"
#include "supervisor/cells/past.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/model/hosttools.h"
#include "supervisor/cells/journal.h"
#include "supervisor/text/jsonf.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"
#include "supervisor/agent/runstop.h"
#include "supervisor/world/view.h"

/*
 * Every stop goes through here, also those decided before the loop runs
 * (while resuming): agent_run then does not enter the loop. The first
 * decided stop holds (its code and reason are the ones journaled); from
 * then on nothing new starts (agent_stopping). A broken journal wins over
 * any decision: its code is the one the process ends with.
 */
void
agent_stop(struct agent *a, int rc, const char *why)
{
	if (why != NULL)
		log_warnx("%s", why);
	if (a->stopping) {
		if (a->journal_broken && a->stop_rc != a->journal_broken) {
			a->stop_rc = a->journal_broken;
			loop_stop(a->loop, a->journal_broken);
		}
		return;
	}
	if (why != NULL)
		a->stop_reason = strdup(why);
	if (a->journal_broken)
		rc = a->journal_broken;
	agent_ev_stop(a, rc, why);
	a->stopping = 1;
	a->stop_rc = rc;
	loop_stop(a->loop, rc);
}

int
agent_stopping(const struct agent *a)
{
	return a->stopping;
}

/*
 * A record could not be appended: the run stops. The journal deleted,
 * renamed or replaced under the run (ESTALE, journal.c) ends it with exit
 * 2, which the unit does not restart: a restart would resume from
 * whatever the path holds now; any other failure with exit 5.
 */
static void
agent_journal_failed(struct agent *a, const char *type)
{
	char why[768];

	if (errno == ESTALE) {
		(void)snprintf(why, sizeof why, "stopping: the journal %s was "
		    "deleted, renamed or replaced under the run (see above): "
		    "the %s step is not recorded, so it must not happen; the "
		    "run ends (exit 2, not restarted)", a->cfg.journal, type);
		a->journal_broken = EXIT_USAGE;
	} else {
		(void)snprintf(why, sizeof why, "stopping: cannot write the "
		    "journal %s (%s): the %s step is not recorded, so it must "
		    "not happen", a->cfg.journal, strerror(errno), type);
		a->journal_broken = EXIT_JOURNAL;
	}
	agent_stop(a, a->journal_broken, why);
}

/*
 * Appends one record (consumed) to the journal, if there is one. A step
 * that cannot be recorded must not happen: the run stops.
 */
int
agent_record(struct agent *a, const char *type, const struct jf *f)
{
	int rc = 0;

	if (a->journal != NULL && !a->journal_ended &&
	    (rc = journal_append_f(a->journal, type, f)) < 0 &&
	    !a->journal_broken) {
		agent_journal_failed(a, type);
	}
	return rc;
}

/* Appends c's input or output record; agent_record's rules. */
static int
record_cell(struct agent *a, const struct cell *c, int outputs)
{
	int rc = 0;

	if (a->journal != NULL && !a->journal_ended &&
	    (rc = journal_append_cell(a->journal, c, outputs)) < 0 &&
	    !a->journal_broken) {
		agent_journal_failed(a, outputs ? "output" : "input");
	}
	return rc;
}

/*
 * Journals part of c's record; the history then reads it back from there
 * instead of keeping it in memory.
 */
int
agent_record_cell(struct agent *a, const struct cell *c, int outputs)
{
	uint64_t off;
	size_t len;
	int rc;

	rc = record_cell(a, c, outputs);
	if (rc == 0 && a->journal != NULL && !a->journal_ended) {
		journal_last(a->journal, &off, &len);
		cells_journaled(runner_cells(a->runner), c, outputs, a->journal,
		    off, len);
	}
	return rc;
}

/* --- the successor ------------------------------------------------------- */

void
agent_clear_successor(struct agent *a)
{
	free(a->succ_code);
	free(a->succ_summary);
	a->succ_code = a->succ_summary = NULL;
	a->has_succ = 0;
}

static void
record_successor(struct agent *a, uint32_t cell, int repair)
{
	struct jf f[] = { JF_I("cell", cell),
	    JF_SN("code", a->succ_code, a->succ_len),
	    JF_S("summary", a->succ_summary), JF_B("repair", repair), JF_END };

	(void)agent_record(a, "successor", f);
}

enum submit_result
agent_submit(void *ctx, uint32_t cell, const char *code, size_t len,
    const char *summary)
{
	struct agent *a = ctx;
	const struct cell *cur = runner_current(a->runner);
	int for_recovery = a->recovering && cell == a->recovery_for;

	if (!for_recovery && (cur == NULL || cur->n != cell))
		return SUBMIT_INACTIVE;
	if (a->has_succ && a->succ_for == cell)
		return SUBMIT_ALREADY;
	agent_clear_successor(a);
	a->succ_code = malloc(len + 1);
	a->succ_summary = strdup(summary);
	if (a->succ_code == NULL || a->succ_summary == NULL) {
		agent_clear_successor(a);
		return SUBMIT_INACTIVE;
	}
	memcpy(a->succ_code, code, len);
	a->succ_code[len] = '\0';
	a->succ_len = len;
	a->succ_for = cell;
	a->has_succ = 1;
	/* keyed by the cell it follows: a repair cell by the failed one */
	record_successor(a, for_recovery && a->failed != NULL ? a->failed->n :
	    cell, for_recovery);
	return for_recovery ? SUBMIT_REPAIR : SUBMIT_OK;
}

/* --- the loop ------------------------------------------------------------- */

void
agent_run_cell(struct agent *a, const char *code, size_t len,
    const char *summary, int64_t generated_by)
{
	struct cell *c;

	if (a->stopping)
		return;		/* nothing new starts */
	if (agent_op_hold(a, code, len, summary, generated_by))
		return;		/* paused (held) or stopped by the operator */
	/* code may be the successor itself: record the cell (a copy) first */
	c = runner_run(a->runner, code, len, summary, NULL, generated_by);
	agent_clear_successor(a);
	if (c == NULL) {
		agent_stop(a, EXIT_FAILED, "cannot start the next cell");
		return;
	}
	(void)agent_record_cell(a, c, 0);
	agent_ev_cell_start(a, c);
	agent_ev_status(a, "cell %u: %s", c->n,
	    c->summary != NULL ? c->summary : "");
}

/* No worker took over after c's died: the fatal stop (a_fatal) follows
 * at once, so nothing is started for c. */
static int
no_worker_after(const struct cell *c)
{
	return c->recovered_by == RECOVERY_NONE;
}

/* The record of a cell that ended normally without a successor. */
static void
mark_no_successor(struct cell *c)
{
	c->status = CELL_ERROR;
	c->kind = KIND_NO_SUCCESSOR;
	cells_set_detail(c, "the cell ended without submitting the next cell "
	    "with set_next_cell_code");
}

static void
a_finished(void *ctx, struct cell *c)
{
	struct agent *a = ctx;
	int has = a->has_succ && a->succ_for == c->n;

	if (c->status == CELL_OK && !has)
		mark_no_successor(c);
	agent_calls_cell_over(a, c);
	(void)agent_record_cell(a, c, 1);
	agent_ev_cell_end(a, c);
	if (a->stopping || no_worker_after(c)) {
		return;		/* the first decided stop holds */
	} else if (c->status == CELL_EXITED) {
		agent_stop(a, EXIT_OK, NULL);
	} else if (c->status == CELL_INTERRUPTED) {
		agent_stop(a, EXIT_SIGINT, "the cell raised KeyboardInterrupt "
		    "or SystemExit: stopping");
	} else if (agent_over_budget(a, c) || agent_op_stop_due(a)) {
		return;
	} else if (c->status == CELL_OK) {
		a->failures = a->failed_cells = 0;
		agent_run_cell(a, a->succ_code, a->succ_len, a->succ_summary,
		    c->n);
	} else {
		agent_failed(a, c, 1);
	}
}

/* --- set-up ------------------------------------------------------------------ */

static void
a_fatal(void *ctx, const char *why)
{
	struct agent *a = ctx;
	char buf[512];

	agent_stop(a, EXIT_WORKER, runstop_fatal_why(buf, sizeof buf, why));
}

/* A signal asks the run to stop (runstop.h). */
static void
a_signal_stop(void *ctx, int rc, const char *why)
{
	agent_stop(ctx, rc, why);
}

static const struct runner_ops agent_runner_ops = {
	agent_output, a_finished, agent_request, a_fatal, agent_ev_kill,
	agent_net
};

/*
 * The watchdog's rule of progress (observe.h's live): a cell is running or
 * waiting for its worker (bounded by the cell's timeout and the worker's
 * ready timeout), or a model call is open (bounded by its request timeout
 * and the outage patience), or the operator paused the run (pausing is
 * progress). A run waiting for nothing is not alive, and
 * systemd restarts it from its journal.
 */
static int
a_alive(void *ctx)
{
	const struct agent *a = ctx;

	return runner_busy(a->runner) || model_busy(a->model) || a->paused;
}

/* The reason of the stop, without its "stopping: " (for a record). */
static const char *
stop_said(const struct agent *a, char *buf, size_t n)
{
	const char *r = a->stop_reason;

	if (r == NULL) {
		(void)snprintf(buf, n, "exit %d", a->stop_rc);
		return buf;
	}
	return strncmp(r, "stopping: ", 10) == 0 ? r + 10 : r;
}

/*
 * The loop has ended: every cell with an input record but no output gets
 * its record (cut by the stop, or dead before it), its model calls ended
 * first; then the model calls still open end (a repair request, cells'
 * calls of a dead worker). Their callbacks see a stopping run: nothing
 * new starts. The model is gone after this.
 */
static void
teardown(struct agent *a, int rc)
{
	struct cell *c;
	char buf[32];
	const char *why;

	if (!a->stopping)	/* every stop goes through agent_stop */
		agent_stop(a, rc, NULL);
	why = stop_said(a, buf, sizeof buf);
	while ((c = runner_cut(a->runner, why)) != NULL) {
		agent_calls_cut(a, c, why);
		(void)agent_record_cell(a, c, 1);
		agent_ev_cell_end(a, c);
	}
	/* calls still open are cut now: their estimate is journaled (the
	 * cut calls report no usage: the totals are the same after); the
	 * analyzer loses a->stop_reason here, which agent_free frees */
	if (a->model != NULL) {	/* NOLINT(clang-analyzer-unix.Malloc) */
		a->tokens_final = model_total_tokens(a->model);
		model_usage(a->model, &a->usage_final);
	}
	model_free(a->model);
	a->model = NULL;
}

static int
record_stop(struct agent *a, int rc)
{
	struct jf f[] = { JF_I("exit", rc), JF_S("reason", a->stop_reason),
	    JF_R("at", loop_wall()), JF_END };

	return agent_record(a, "stop", f);
}

/* Writes the stop record (once); the exit status. */
static int
end_run(struct agent *a, int rc)
{
	if (a->journal_broken)
		rc = a->journal_broken;
	if (!a->journal_ended && a->journal != NULL && record_stop(a, rc) < 0)
		rc = a->journal_broken ? a->journal_broken : EXIT_JOURNAL;
	a->journal_ended = 1;
	return rc;
}

/* The control socket refuses the workers' PID namespace: the one of the
 * run's init now (a lost one is rebuilt with a new init). */
static pid_t
jail_pid_now(const void *runner)
{
	return runner_jail_pid(runner);
}

/* No worker before the loop: the stop is decided and recorded as any. */
static int
no_worker(struct agent *a, const char *why)
{
	int rc;

	agent_stop(a, EXIT_WORKER, why);
	rc = end_run(a, a->stop_rc);
	agent_ctl_close(a);
	agent_ev_stopping(a);
	return rc;
}

static void
record_isolation(struct agent *a)
{
	struct jf f[] = { JF_S("isolation", runner_isolation(a->runner)),
	    JF_S("containment", runner_containment(a->runner)),
	    JF_S("network", runner_network(a->runner)),
	    runner_egress(a->runner) != NULL ? JF_S("egress",
	    runner_network_desc(a->runner)) : JF_SKIP,
	    JF_S("limits", runner_limits(a->runner)), JF_END };

	(void)agent_record(a, "isolation", f);
}

static int
agent_run(struct agent *a, const char *wpath)
{
	struct runner_config rcfg = a->cfg.runner;
	char *code;
	int rc;

	a->loop = loop_new();
	a->red = redact_new_from_environ(environ);
	a->stops.stop = a_signal_stop;
	a->stops.ctx = a;
	if (a->loop == NULL || a->red == NULL ||
	    runstop_setup(&a->stops, a->loop) < 0)
		fatal("agent: set-up");
	agent_ev_attach(a);	/* the gate for everything shown */
	if (agent_open_journal(a) < 0)	/* said why */
		return a->journal_broken ? a->journal_broken : EXIT_USAGE;
	if (a->stopping)	/* ended already, or a crash loop */
		return end_run(a, a->stop_rc);
	if (agent_setup_model(a) < 0)
		return EXIT_USAGE;
	agent_ctl_open(a);	/* before the world: it is masked there */
	agent_start_deadline(a);
	agent_ev_live(a, a_alive);
	rcfg.red = a->red;
	rcfg.jail = &a->view.jc;
	rcfg.snapshot_every_cell = 1;	/* each cell follows a model call */
	a->runner = runner_new(a->loop, &rcfg, &agent_runner_ops, a);
	a->stops.runner = a->runner;
	if (a->runner != NULL) {
		a->tools.history = runner_cells(a->runner);
		log_info("isolation: %s; network: %s; limits: %s",
		    runner_isolation(a->runner), runner_network_desc(a->runner),
		    runner_limits(a->runner));
		record_isolation(a);
		/* before a cell can connect, and before run_start says
		 * which egress budget holds */
		agent_net_resume(a);
	}
	agent_ev_run_start(a);
	if (a->runner == NULL)	/* said why */
		return no_worker(a, "stopping: the worker's world cannot be "
		    "set up (see above)");
	runner_on_death(a->runner, agent_worker_death, a);
	ctl_set_jail_fn(a->ctl, jail_pid_now, a->runner);
	if (runner_start(a->runner) < 0) {
		log_warn("cannot start %s", wpath);
		return no_worker(a, "stopping: the worker cannot be started "
		    "(see above)");
	}
	rc = a->cfg.resume ? agent_resume(a) : -1;
	/* the history reads old cells back from the journal itself */
	journal_past_free(a->past);
	a->past = NULL;
	if (rc < 0 && !a->stopping) {	/* a new run, or no cell yet */
		code = agent_first_cell(a->task);
		if (code != NULL)
			agent_run_cell(a, code, strlen(code),
			    "Ask the model for the first cell.", -1);
		else
			agent_stop(a, EXIT_FAILED, "out of memory writing "
			    "cell 0");
		free(code);
	}
	/* a stop decided while resuming ends the process: no loop */
	if (!a->stopping) {
		agent_ev_ready(a);
		rc = loop_run(a->loop);
	} else {
		rc = a->stop_rc;
	}
	teardown(a, rc);
	rc = end_run(a, a->stop_rc);
	agent_ctl_close(a);
	agent_ev_run_over(a);
	agent_ev_stopping(a);
	return rc;
}

static void
agent_free(struct agent *a)
{
	agent_calls_clear(a);
	model_free(a->model);
	agent_ctl_close(a);
	runner_free(a->runner);
	view_clear(&a->view);
	hosttools_free(a->host);
	agent_ev_detach(a);
	redact_free(a->red);
	loop_free(a->loop);
	agent_clear_successor(a);
	free(a->instructions);
	journal_close(a->journal);
	journal_past_free(a->past);
	free(a->task_kept);
	agent_failures_free(a);
	free(a->stop_reason);
	free(a->restart_note);
}

int
agent_main(const struct agent_config *cfg, const struct agent_observer *obs,
    size_t nobs)
{
	struct agent a;
	int rc;

	memset(&a, 0, sizeof a);
	a.cfg = *cfg;
	a.obs = obs;
	a.nobs = nobs;
	if (agent_set_price(&a) < 0)
		return EXIT_USAGE;
	a.task = a.cfg.task;
	if (view_init(&a.view, &a.cfg.view, a.cfg.worker_path, "agentz") < 0)
		rc = EXIT_USAGE;
	else
		rc = agent_run(&a, a.cfg.worker_path);
	agent_ev_run_end(&a, rc);
	agent_free(&a);
	return rc;
}
