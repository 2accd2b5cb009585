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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procfs.h"
#include "supervisor/cells/past.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/run/runner.h"
#include "supervisor/text/redact.h"

#define OPERATOR "the operator"
#define TASK_SHOWN 60	/* bytes of the task's first words in a status */

static void
show_flags(const struct agent *a)
{
	agent_ev_operator(a);
}

/* A reply's text from its fields (NULL when out of memory); *ok is
 * what its "ok" says. */
static char *
reply(const struct jf *f, int ok, int *said_ok)
{
	*said_ok = ok;
	return jf_dumps(f, NULL);
}

static char *
fail(const char *why, int *ok)
{
	struct jf f[] = { JF_B("ok", 0), JF_S("error", why), JF_END };

	return reply(f, 0, ok);
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

/* The running cell's fields into f (7 of them): {"n", "summary",
 * "age_s", "stage"}, with "timeout_s" and "left_s" when cells have a
 * timeout. */
static const struct jf *
cell_fields(const struct agent *a, const struct cell *c, struct jf *f)
{
	double age = (double)(loop_now_us() - c->t0_us) / 1e6;
	double limit = a->cfg.cell_timeout;

	f[0] = JF_I("n", (int)c->n);
	f[1] = JF_S("summary", c->summary);
	f[2] = JF_R("age_s", age);
	f[3] = JF_S("stage", cells_timeout_name(c->timeout_stage));
	f[4] = limit > 0 ? JF_R("timeout_s", limit) : JF_SKIP;
	f[5] = limit > 0 ? JF_R("left_s", limit - age) : JF_SKIP;
	f[6] = JF_END;
	return f;
}

/* The worker's fields into f (4 of them), or NULL (null) without one. */
static const struct jf *
worker_fields(const struct agent *a, struct jf *f)
{
	const struct worker *w = runner_worker(a->runner);
	pid_t pid = w != NULL ? worker_python_pid(w) : 0;

	if (pid <= 0)
		return NULL;
	f[0] = JF_I("pid", (int)pid);
	f[1] = JF_I("generation", (int)worker_generation(w));
	f[2] = JF_I("rss_kb", rss_kb(pid));
	f[3] = JF_END;
	return f;
}

/* "cell 3: error (timeout)" of the newest finished cell in s, or NULL. */
static const char *
last_of(struct agent *a, int errors_only, char *s, size_t n)
{
	struct cell *c = runner_last(a->runner);

	if (c != NULL && c->status == CELL_RUNNING)
		c = c->n > 0 ? cells_get(runner_cells(a->runner), c->n - 1) :
		    NULL;
	if (c == NULL || (errors_only && c->status == CELL_OK))
		return NULL;
	if (c->status == CELL_OK || c->status == CELL_EXITED)
		(void)snprintf(s, n, "cell %u: %s", c->n,
		    cells_status_name(c->status));
	else
		(void)snprintf(s, n, "cell %u: %s (%s)%s%.200s", c->n,
		    cells_status_name(c->status), cells_kind_name(c->kind),
		    c->detail != NULL || c->exception_type != NULL ? ": " : "",
		    c->detail != NULL ? c->detail : c->exception_type != NULL ?
		    c->exception_type : "");
	return s;
}

static const char *
state_of(struct agent *a)
{
	char held[8];

	if (a->stopping || a->op_stop)
		return "stopping";
	if (a->paused)
		return "paused";
	if (a->outage[0] != '\0')
		return "waiting-model";
	if (agent_net_waiting(a, held, sizeof held) > 0)
		return "waiting-approval";
	return runner_current(a->runner) != NULL ? "running" :
	    model_busy(a->model) ? "asking-model" : "idle";
}

/* One budget into f (4 fields): {"used", "max", "left"}, reals (max and
 * left null when none). */
static const struct jf *
budget(double used, double max, struct jf *f)
{
	f[0] = JF_R("used", used);
	f[1] = max > 0 ? JF_R("max", max) : JF_N("max");
	f[2] = max > 0 ? JF_R("left", max - used) : JF_N("left");
	f[3] = JF_END;
	return f;
}

/* The same in whole numbers (cells, tokens). */
static const struct jf *
budget_int(long long used, long long max, struct jf *f)
{
	f[0] = JF_I("used", used);
	f[1] = max > 0 ? JF_I("max", max) : JF_N("max");
	f[2] = max > 0 ? JF_I("left", max - used) : JF_N("left");
	f[3] = JF_END;
	return f;
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The task's first words (what agentz runs shows): blanks and line
 * breaks made one space, at most TASK_SHOWN bytes, cut after a word and
 * "..." added when more follows. buf holds TASK_SHOWN + 4. */
static const char *
first_words(const char *task, char *buf)
{
	size_t i = 0, k = 0;

	while (task != NULL && task[i] != '\0' && k < TASK_SHOWN) {
		if (!is_blank(task[i])) {
			buf[k++] = task[i++];
			continue;
		}
		while (is_blank(task[i]))
			i++;
		if (k > 0 && task[i] != '\0')
			buf[k++] = ' ';
	}
	if (task != NULL && task[i] != '\0') {
		if (buf[k - 1] != ' ' && !is_blank(task[i]) &&
		    memchr(buf, ' ', k) != NULL)
			while (k > 0 && buf[k - 1] != ' ')
				k--;	/* a word cut: the words before it */
		while (k > 0 && buf[k - 1] == ' ')
			k--;
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = '\0';
	return buf;
}

static char *
op_status(struct agent *a, const struct ctl_req *q, int *ok)
{
	const struct cell *cur = runner_current(a->runner);
	long long n = (long long)runner_cells(a->runner)->n;
	struct jf cell[7], cells[4], tokens[4], cost[4], deadline[4], worker[4];
	char last[320], last_error[320], cwd[PATH_MAX], task[TASK_SHOWN + 4];
	char approvals[1024];
	double age = loop_wall() - a->run_started;
	struct jf f[] = {
		JF_B("ok", 1), JF_I("v", 1),
		JF_S("name", a->run_name != NULL ? a->run_name : ""),
		JF_S("state", state_of(a)), JF_I("pid", (int)getpid()),
		JF_I("uid", (int)geteuid()), JF_S("journal", a->cfg.journal),
		JF_S("cwd", getcwd(cwd, sizeof cwd)),
		JF_S("task", first_words(a->task, task)),
		JF_R("started_at", a->run_started), JF_R("age_s", age),
		JF_O("cell", cur != NULL ? cell_fields(a, cur, cell) : NULL),
		JF_O("cells", budget_int(n, a->cfg.max_cells, cells)),
		JF_O("tokens", budget_int(agent_tokens(a), a->cfg.max_tokens,
		    tokens)),
		JF_O("cost", a->priced ? budget(agent_cost(a), a->cfg.max_cost,
		    cost) : NULL),
		JF_O("deadline", budget(age, a->cfg.deadline, deadline)),
		JF_O("worker", worker_fields(a, worker)),
		JF_S("last", last_of(a, 0, last, sizeof last)),
		JF_S("last_error", last_of(a, 1, last_error,
		    sizeof last_error)),
		JF_S("outage", a->outage[0] != '\0' ? a->outage : NULL),
		JF_B("paused", a->paused),
		a->held ? JF_I("held_cell", n) : JF_N("held_cell"),
		JF_S("stop", a->op_stop == 0 ? NULL : a->op_stop == 2 ? "now" :
		    "after-cell"),
		JF_I("notes_pending", a->notes_pending),
		agent_net_waiting(a, approvals, sizeof approvals) ?
		JF_S("waiting_for_approval", approvals) : JF_SKIP, JF_END
	};

	(void)q;
	return reply(f, 1, ok);
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

static char *
op_note(struct agent *a, const struct ctl_req *q, int *ok)
{
	size_t n;
	char *clean = redact_string(a->red, q->arg, q->arg_len, &n);

	if (clean == NULL || queue_note(a, clean) < 0) {
		free(clean);
		return fail("out of memory", ok);
	}
	a->notes_pending++;
	record_note(a, clean);
	log_info("a note from the operator, for the model's next request: %s",
	    clean);
	free(clean);
	show_flags(a);
	return reply((struct jf[]){ JF_B("ok", 1), JF_I("notes_pending",
	    (int)a->notes_pending), JF_END }, 1, ok);
}

/* A model request carries the pending notes: journaled (with the
 * request's cell and purpose: "call_me", "repair"), so a restart after
 * this does not deliver them again. */
void
agent_op_notes_delivered(struct agent *a, uint32_t cell, const char *purpose)
{
	struct jf f[] = { JF_I("notes", a->notes_pending),
	    JF_I("cell", (long long)cell), JF_S("purpose", purpose),
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

static char *
op_stop(struct agent *a, const struct ctl_req *q, int *ok)
{
	int now = q->cmd == CTL_STOP_NOW;

	if (a->stopping)
		return fail("the run is stopping already", ok);
	a->op_stop = now ? 2 : 1;
	log_info("the operator asked to stop%s", now ? " now" :
	    " after the running cell");
	if (!runner_busy(a->runner))
		stop_now(a);
	else if (now)	/* a cell that ends by itself meanwhile: stopped too */
		(void)runner_expire(a->runner, OPERATOR " (stop --now)");
	return reply((struct jf[]){ JF_B("ok", 1), JF_S("stop", now ? "now" :
	    "after-cell"), JF_END }, 1, ok);
}

static char *
op_pause(struct agent *a, const struct ctl_req *q, int *ok)
{
	(void)q;
	if (!a->paused) {
		log_info("paused by the operator: no new cell starts until "
		    "resume");
		agent_ev_status(a, "paused by the operator: no new cell starts");
	}
	a->paused = 1;
	show_flags(a);
	return reply((struct jf[]){ JF_B("ok", 1), JF_B("paused", 1), JF_END },
	    1, ok);
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

static char *
op_resume(struct agent *a, const struct ctl_req *q, int *ok)
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
	return reply((struct jf[]){ JF_B("ok", 1), JF_B("paused", 0), JF_END },
	    1, ok);
}

static char *
op_kill_cell(struct agent *a, const struct ctl_req *q, int *ok)
{
	(void)q;
	if (runner_expire(a->runner, OPERATOR " (kill-cell)") == 0) {
		log_info("the operator killed the running cell");
		return reply((struct jf[]){ JF_B("ok", 1), JF_END }, 1, ok);
	}
	return fail(errno == EALREADY ? "the running cell is being stopped "
	    "already" : "no cell is running", ok);
}

static char *
op_budgets(struct agent *a, const struct ctl_req *q, int *ok)
{
	return agent_op_budgets(a, q->arg, q->arg_len, ok);
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

/* A command: its reply's JSON text (malloc'ed; NULL when it could not be
 * built), *ok what the reply's "ok" says. */
typedef char *op_fn(struct agent *a, const struct ctl_req *q, int *ok);

static const struct {
	enum ctl_cmd cmd;
	op_fn *fn;
} ops[] = {
	{ CTL_STATUS, op_status }, { CTL_NOTE, op_note },
	{ CTL_STOP, op_stop }, { CTL_STOP_NOW, op_stop },
	{ CTL_PAUSE, op_pause }, { CTL_RESUME, op_resume },
	{ CTL_KILL_CELL, op_kill_cell }, { CTL_BUDGETS, op_budgets },
	{ CTL_ALLOW, agent_op_allow }, { CTL_DENY, agent_op_deny },
	{ CTL_NETWORK, agent_op_network }, { CTL_APPROVE, agent_op_approve },
	{ CTL_REJECT, agent_op_reject },
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
	char *s = NULL, *clean;
	size_t i, n;
	int ok = 0;

	for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (ops[i].cmd == q->cmd)
			s = ops[i].fn(a, q, &ok);
	/* what the operator did, for whoever reads the run afterwards */
	if (q->cmd != CTL_STATUS && q->cmd != CTL_NOTE && ok && s != NULL)
		record_operator(a, q->cmd);
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
 * The handle agentz ctl takes for this run, said at start: its name, or
 * NAME-PID when another live run had the name (ctlfind.h); the socket's
 * path when it is outside the folders agentz ctl searches.
 */
static void
say_handle(const struct agent *a, const char *path, int dedicated)
{
	const char *base = strrchr(path, '/');
	size_t n = strlen(a->run_name);

	base = base != NULL ? base + 1 : path;
	if (!dedicated)
		log_info("control: agentz ctl %s COMMAND", path);
	else if (strncmp(base, a->run_name, n) == 0 &&
	    strcmp(base + n, ".sock") == 0)
		log_info("control: agentz ctl %s COMMAND (socket %s)",
		    a->run_name, path);
	else
		log_info("control: agentz ctl %s-%ld COMMAND (another run is "
		    "named %s; socket %s)", a->run_name, (long)getpid(),
		    a->run_name, path);
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
		say_handle(a, path, dedicated);
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
