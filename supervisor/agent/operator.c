/*
 * operator.c - the operator's side of an agent run: the control socket
 * (supervisor/ctl/ctl.h) and what its commands change (see agent_int.h).
 *
 *   status     the run as it stands, one JSON object (opstatus below)
 *   note TEXT  redacted, journaled ("note"), and put ahead of the input of
 *              the model's next request as a developer message from the
 *              operator (the restart note's path, resume.c)
 *   stop       the running cell finishes, then the run ends: EXIT_OPERATOR
 *   stop --now the running cell gets the deadline ladder now, then the same
 *   pause      no new cell starts: the next one is held until resume (the
 *              running one keeps its deadline); a paused run is progress
 *              for the watchdog
 *   kill-cell  the running cell gets the deadline ladder now; the run goes
 *              on (a repair follows, as after any timeout)
 *   budgets    the budgets re-read from options (reload.c)
 */
#include "supervisor/agent/agent_int.h"
#include "supervisor/text/jsonf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "common/procfs.h"
#include "supervisor/cells/past.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/run/runner.h"
#include "supervisor/text/redact.h"

#define OPERATOR "the operator"

static void
show_flags(const struct agent *a)
{
	agent_ev_operator(a);
}

static json_t *
fail(const char *why)
{
	return json_pack("{s:b, s:s}", "ok", 0, "error", why);
}

/* --- status ------------------------------------------------------------------ */

static long
rss_kb(pid_t pid)
{
	char buf[4096];

	if (procfs_read(pid, "status", buf, sizeof buf) < 0)
		return -1;
	return procfs_status_num(buf, "VmRSS:");
}

static json_t *
cell_json(const struct agent *a, const struct cell *c)
{
	double age = (double)(loop_now_us() - c->t0_us) / 1e6;
	json_t *j = json_pack("{s:i, s:s?, s:f, s:s?}", "n", (int)c->n,
	    "summary", c->summary, "age_s", age, "stage",
	    cells_timeout_name(c->timeout_stage));

	if (j != NULL && a->cfg.cell_timeout > 0) {
		(void)json_object_set_new(j, "timeout_s",
		    json_real(a->cfg.cell_timeout));
		(void)json_object_set_new(j, "left_s",
		    json_real(a->cfg.cell_timeout - age));
	}
	return j;
}

static json_t *
worker_json(const struct agent *a)
{
	const struct worker *w = runner_worker(a->runner);
	pid_t pid = w != NULL ? worker_python_pid(w) : 0;

	if (pid <= 0)
		return json_null();
	return json_pack("{s:i, s:i, s:I}", "pid", (int)pid, "generation",
	    (int)worker_generation(w), "rss_kb", (json_int_t)rss_kb(pid));
}

/* "cell 3: error (timeout)" of the newest finished cell, or NULL. */
static json_t *
last_json(struct agent *a, int errors_only)
{
	struct cell *c = runner_last(a->runner);
	char s[320];

	if (c != NULL && c->status == CELL_RUNNING)
		c = c->n > 0 ? cells_get(runner_cells(a->runner), c->n - 1) :
		    NULL;
	if (c == NULL || (errors_only && c->status == CELL_OK))
		return json_null();
	if (c->status == CELL_OK || c->status == CELL_EXITED)
		(void)snprintf(s, sizeof s, "cell %u: %s", c->n,
		    cells_status_name(c->status));
	else
		(void)snprintf(s, sizeof s, "cell %u: %s (%s)%s%.200s", c->n,
		    cells_status_name(c->status), cells_kind_name(c->kind),
		    c->detail != NULL || c->exception_type != NULL ? ": " : "",
		    c->detail != NULL ? c->detail : c->exception_type != NULL ?
		    c->exception_type : "");
	return json_string(s);
}

static const char *
state_of(const struct agent *a)
{
	if (a->stopping || a->op_stop)
		return "stopping";
	if (a->paused)
		return "paused";
	if (a->outage[0] != '\0')
		return "waiting-model";
	return runner_current(a->runner) != NULL ? "running" :
	    model_busy(a->model) ? "asking-model" : "idle";
}

/* One budget: {"used", "max", "left"} (max and left null when none). */
static json_t *
budget(double used, double max)
{
	return max > 0 ? json_pack("{s:f, s:f, s:f}", "used", used, "max",
	    max, "left", max - used) : json_pack("{s:f, s:n, s:n}", "used",
	    used, "max", "left");
}

/* The same in whole numbers (cells, tokens). */
static json_t *
budget_int(long long used, long long max)
{
	return max > 0 ? json_pack("{s:I, s:I, s:I}", "used", (json_int_t)used,
	    "max", (json_int_t)max, "left", (json_int_t)(max - used)) :
	    json_pack("{s:I, s:n, s:n}", "used", (json_int_t)used, "max",
	    "left");
}

static json_t *
op_status(struct agent *a, const struct ctl_req *q)
{
	const struct cell *cur = runner_current(a->runner);
	long long tokens = agent_tokens(a);
	json_t *j;

	(void)q;
	j = json_pack("{s:b, s:i, s:s, s:s, s:i, s:i, s:s?, s:f, s:f}",
	    "ok", 1, "v", 1, "name", a->run_name != NULL ? a->run_name : "",
	    "state", state_of(a), "pid", (int)getpid(), "uid", (int)geteuid(),
	    "journal", a->cfg.journal, "started_at", a->run_started, "age_s",
	    loop_wall() - a->run_started);
	if (j == NULL)
		return NULL;
	(void)json_object_set_new(j, "cell", cur != NULL ? cell_json(a, cur) :
	    json_null());
	(void)json_object_set_new(j, "cells", budget_int((long long)
	    runner_cells(a->runner)->n, a->cfg.max_cells));
	(void)json_object_set_new(j, "tokens", budget_int(tokens,
	    a->cfg.max_tokens));
	(void)json_object_set_new(j, "cost", a->priced ? budget(agent_cost(a),
	    a->cfg.max_cost) : json_null());
	(void)json_object_set_new(j, "deadline", budget(loop_wall() -
	    a->run_started, a->cfg.deadline));
	(void)json_object_set_new(j, "worker", worker_json(a));
	(void)json_object_set_new(j, "last", last_json(a, 0));
	(void)json_object_set_new(j, "last_error", last_json(a, 1));
	(void)json_object_set_new(j, "outage", a->outage[0] != '\0' ?
	    json_string(a->outage) : json_null());
	(void)json_object_set_new(j, "paused", json_boolean(a->paused));
	(void)json_object_set_new(j, "held_cell", a->held ?
	    json_integer((json_int_t)runner_cells(a->runner)->n) : json_null());
	(void)json_object_set_new(j, "stop", a->op_stop == 0 ? json_null() :
	    json_string(a->op_stop == 2 ? "now" : "after-cell"));
	(void)json_object_set_new(j, "notes_pending",
	    json_integer(a->notes_pending));
	return j;
}

/* --- note ---------------------------------------------------------------------- */

/* Appends the note to what the model's next request carries first. */
static int
queue_note(struct agent *a, const char *clean)
{
	char *next;
	int rc;

	if (a->restart_note != NULL)
		rc = asprintf(&next, "%s\n\n[agentz] A note from the operator "
		    "of this run: %s", a->restart_note, clean);
	else
		rc = asprintf(&next, "[agentz] A note from the operator of "
		    "this run: %s", clean);
	if (rc < 0)
		return -1;
	free(a->restart_note);
	a->restart_note = next;
	return 0;
}

static void
record_note(struct agent *a, const char *text)
{
	struct jf f[] = { JF_S("from", "operator"), JF_S("text", text),
	    JF_R("at", loop_wall()), JF_END };

	(void)agent_record(a, "note", f);
}

static json_t *
op_note(struct agent *a, const struct ctl_req *q)
{
	size_t n;
	char *clean = redact_string(a->red, q->arg, q->arg_len, &n);

	if (clean == NULL || queue_note(a, clean) < 0) {
		free(clean);
		return fail("out of memory");
	}
	a->notes_pending++;
	record_note(a, clean);
	log_info("a note from the operator, for the model's next request: %s",
	    clean);
	free(clean);
	show_flags(a);
	return json_pack("{s:b, s:i}", "ok", 1, "notes_pending",
	    (int)a->notes_pending);
}

/* A model request carries the pending notes: journaled, so a restart
 * after this does not deliver them again. */
void
agent_op_notes_delivered(struct agent *a)
{
	struct jf f[] = { JF_I("notes", a->notes_pending),
	    JF_R("at", loop_wall()), JF_END };

	if (a->notes_pending == 0)
		return;
	(void)agent_record(a, "note_delivered", f);
	a->notes_pending = 0;
	show_flags(a);
}

/* --resume: the journal's notes that no model request carried (no
 * "note_delivered" after them) go with the next request. */
void
agent_op_renote(struct agent *a)
{
	const char *text;
	size_t i;

	for (i = 0; (text = journal_past_note(a->past, i)) != NULL; i++)
		if (queue_note(a, text) == 0)
			a->notes_pending++;
	if (a->notes_pending > 0) {
		log_info("%u operator note(s) not delivered before the restart "
		    "go with the model's next request", a->notes_pending);
		show_flags(a);
	}
}

/* --- stop, pause, resume, kill-cell ---------------------------------------- */

static void
stop_now(struct agent *a)
{
	agent_stop(a, EXIT_OPERATOR, a->op_stop == 2 ? "stopping: stopped by "
	    "the operator (agentz ctl stop --now)" : "stopping: stopped by the "
	    "operator (agentz ctl stop)");
}

static json_t *
op_stop(struct agent *a, const struct ctl_req *q)
{
	int now = q->cmd == CTL_STOP_NOW;

	if (a->stopping)
		return fail("the run is stopping already");
	a->op_stop = now ? 2 : 1;
	log_info("the operator asked to stop%s", now ? " now" :
	    " after the running cell");
	if (!runner_busy(a->runner))
		stop_now(a);
	else if (now)	/* a cell that ends by itself meanwhile: stopped too */
		(void)runner_expire(a->runner, OPERATOR " (stop --now)");
	return json_pack("{s:b, s:s}", "ok", 1, "stop", now ? "now" :
	    "after-cell");
}

static json_t *
op_pause(struct agent *a, const struct ctl_req *q)
{
	(void)q;
	if (!a->paused) {
		log_info("paused by the operator: no new cell starts until "
		    "resume");
		agent_ev_status(a, "paused by the operator: no new cell starts");
	}
	a->paused = 1;
	show_flags(a);
	return json_pack("{s:b, s:b}", "ok", 1, "paused", 1);
}

static void
run_held(struct agent *a)
{
	char *code = a->held_code, *summary = a->held_summary;

	a->held = 0;
	a->held_code = a->held_summary = NULL;
	agent_run_cell(a, code, a->held_len, summary, a->held_gen);
	free(code);
	free(summary);
}

static json_t *
op_resume(struct agent *a, const struct ctl_req *q)
{
	(void)q;
	if (a->paused) {
		log_info("resumed by the operator");
		agent_ev_status(a, "resumed by the operator");
	}
	a->paused = 0;
	show_flags(a);
	if (a->held)
		run_held(a);
	return json_pack("{s:b, s:b}", "ok", 1, "paused", 0);
}

static json_t *
op_kill_cell(struct agent *a, const struct ctl_req *q)
{
	(void)q;
	if (runner_expire(a->runner, OPERATOR " (kill-cell)") == 0) {
		log_info("the operator killed the running cell");
		return json_pack("{s:b}", "ok", 1);
	}
	return fail(errno == EALREADY ? "the running cell is being stopped "
	    "already" : "no cell is running");
}

static json_t *
op_budgets(struct agent *a, const struct ctl_req *q)
{
	return agent_op_budgets(a, q->arg, q->arg_len);
}

/* --- the gates in the run loop ------------------------------------------------ */

/*
 * Before a new cell starts (agent_run_cell): a stop asked for ends the run
 * instead; a pause holds a copy of the cell until resume. 1 when the cell
 * must not start now.
 */
int
agent_op_hold(struct agent *a, const char *code, size_t len,
    const char *summary, int64_t generated_by)
{
	if (a->op_stop) {
		stop_now(a);
		return 1;
	}
	if (!a->paused)
		return 0;
	a->held_code = malloc(len + 1);
	a->held_summary = summary != NULL ? strdup(summary) : NULL;
	if (a->held_code == NULL) {
		agent_stop(a, EXIT_FAILED, "out of memory holding a cell");
		return 1;
	}
	memcpy(a->held_code, code, len);
	a->held_code[len] = '\0';
	a->held_len = len;
	a->held_gen = generated_by;
	a->held = 1;
	agent_clear_successor(a);
	log_info("paused: the next cell waits for the operator's resume");
	agent_ev_status(a, "paused by the operator: the next cell waits");
	return 1;
}

/* After a cell ended (a_finished): 1 when a stop was asked for. */
int
agent_op_stop_due(struct agent *a)
{
	if (!a->op_stop)
		return 0;
	stop_now(a);
	return 1;
}

/* --- the socket ------------------------------------------------------------------ */

typedef json_t *op_fn(struct agent *a, const struct ctl_req *q);

static const struct {
	enum ctl_cmd cmd;
	op_fn *fn;
} ops[] = {
	{ CTL_STATUS, op_status }, { CTL_NOTE, op_note },
	{ CTL_STOP, op_stop }, { CTL_STOP_NOW, op_stop },
	{ CTL_PAUSE, op_pause }, { CTL_RESUME, op_resume },
	{ CTL_KILL_CELL, op_kill_cell }, { CTL_BUDGETS, op_budgets },
};

static void
record_operator(struct agent *a, enum ctl_cmd cmd)
{
	struct jf f[] = { JF_S("command", ctl_cmd_name(cmd)),
	    JF_R("at", loop_wall()), JF_END };

	(void)agent_record(a, "operator", f);
}

/* Every reply is redacted: a status may quote model-written text. */
static char *
handle(void *ctx, const struct ctl_req *q)
{
	struct agent *a = ctx;
	json_t *j = NULL;
	char *s, *clean;
	size_t i, n;

	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (ops[i].cmd == q->cmd)
			j = ops[i].fn(a, q);
	/* what the operator did, for whoever reads the run afterwards */
	if (q->cmd != CTL_STATUS && q->cmd != CTL_NOTE &&
	    json_is_true(json_object_get(j, "ok")))
		record_operator(a, q->cmd);
	s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	clean = s != NULL ? redact_string(a->red, s, strlen(s), &n) : NULL;
	free(s);
	return clean;
}

static struct ctl *
listen_as(struct agent *a, const char *dir, const char *name, char **path)
{
	struct ctl *c;

	if (asprintf(path, "%s/%s.sock", dir, name) < 0) {
		*path = NULL;
		return NULL;
	}
	if ((c = ctl_new(a->loop, *path, handle, a)) == NULL && errno ==
	    EADDRINUSE) {	/* a live run of the same name: ours by pid */
		free(*path);
		if (asprintf(path, "%s/%s-%ld.sock", dir, name,
		    (long)getpid()) < 0) {
			*path = NULL;
			return NULL;
		}
		c = ctl_new(a->loop, *path, handle, a);
	}
	return c;
}

/*
 * Masks the socket and every folder of control sockets in the worker's
 * view (also other runs', and /run/agentz above a unit's folder): the
 * innermost first, so each mask is made before one above hides it.
 */
static void
mask_sockets(struct agent *a, const char *path, const char *dir,
    int dedicated)
{
	char *dirs[3];
	size_t n = ctl_search_dirs(dirs), i;
	int rc = view_add_mask(&a->view, path);

	if (rc == 0 && dedicated)
		rc = view_add_mask(&a->view, dir);
	for (i = 0; i < n; i++) {
		if (rc == 0)
			rc = view_add_mask(&a->view, dirs[i]);
		free(dirs[i]);
	}
	if (rc < 0)
		fatal("agent: the control socket's mask");
}

/*
 * Opens the run's control socket before the worker's world is built, and
 * masks it there. A run without one goes on, said once.
 */
void
agent_ctl_open(struct agent *a)
{
	int dedicated;
	char *dir = ctl_socket_dir(a->cfg.journal, &dedicated), *path = NULL;

	a->run_name = ctl_run_name(a->cfg.journal);
	if (dir == NULL || a->run_name == NULL) {
		log_warnx("no control socket: no folder for it (set "
		    "RUNTIME_DIRECTORY or XDG_RUNTIME_DIR, or give --journal)");
		free(dir);
		return;
	}
	a->ctl = listen_as(a, dir, a->run_name, &path);
	if (a->ctl == NULL) {
		log_warn("no control socket at %s", path != NULL ? path : dir);
	} else {
		mask_sockets(a, path, dir, dedicated);
		log_debug("control socket: %s", path);
	}
	free(path);
	free(dir);
}

void
agent_ctl_close(struct agent *a)
{
	ctl_free(a->ctl);
	a->ctl = NULL;
	free(a->held_code);
	free(a->held_summary);
	a->held_code = a->held_summary = NULL;
	free(a->run_name);
	a->run_name = NULL;
}
