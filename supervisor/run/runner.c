/*
 * runner.c - one cell at a time in a supervised worker (see runner.h).
 *
 * Owns: the runner's life (new/free, the run's jail and containment),
 * handing cells to the worker, the per-cell deadline ladder (interrupt,
 * grace, stack dump, kill), the redaction of output on its way to the
 * record and the front end, and finishing the record at DONE.
 * Host requests the runner serves itself are in hostserve.c, a worker's
 * death and the respawn in recovery.c; struct runner is in runner_impl.h.
 *
 * May include: runner_impl.h, config.h, procstat.h, cells.h, redact.h,
 * workers.h, sandbox/ (contain, jail), common/log.h, jansson (the error
 * reply's body).
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/log.h"
#include "supervisor/run/procstat.h"

#define DUMP_WAIT_MS 100	/* stack dump signal -> SIGKILL, at most */
#define DUMP_QUIET_MS 5		/* ... or this long after the dump arrived */
/* --snapshot auto in exec runs: after a cell this long, or once the
 * worker's memory reached this much, the next cell gets a snapshot */
#define AUTO_SLOW_US 1000000u
#define AUTO_BIG_KB (256L << 10)

static void w_ready(struct worker *w, void *ctx);
static void w_output(struct worker *w, int stream, const char *p, size_t n,
    void *ctx);
static void w_done(struct worker *w, const struct msg_done *d, void *ctx);
static void w_stack(struct worker *w, void *ctx);
static void w_snapped(struct worker *w, void *ctx);

static const struct worker_ops runner_worker_ops = {
	w_ready, w_output, w_done, hostserve_request, recovery_death, w_stack,
	w_snapped
};

/* The run's world, before the first worker (and before any cgroup of a
 * worker: the jail's init stays in ours). */
static int
new_jail(struct runner *r)
{
	char err[512];

	if (r->cfg.jail == NULL)
		return 0;
	r->jail = jail_new(r->cfg.jail, err, sizeof err);
	if (r->jail == NULL) {
		if (err[0] != '\0')
			log_warnx("isolation required but unavailable: %s "
			    "(--isolation best-effort runs without it)", err);
		return -1;
	}
	if (!jail_active(r->jail) && r->cfg.jail->mode != JAIL_OFF)
		log_warnx("isolation incomplete: %s", jail_describe(r->jail));
	r->cfg.worker.jail = r->jail;
	return 0;
}

struct runner *
runner_new(struct loop *l, const struct runner_config *c,
    const struct runner_ops *ops, void *ctx)
{
	struct runner *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->loop = l;
	r->cfg = *c;
	r->ops = *ops;
	r->ctx = ctx;
	cells_init(&r->cells, c->output_limit);
	/* a reply well under the frame limit, whatever the history holds */
	cells_set_limits(&r->cells, 0, c->worker.max_frame / 2 <
	    CELLS_REPLY_MAX ? c->worker.max_frame / 2 : CELLS_REPLY_MAX);
	buf_init(&r->inbuf);
	r->ps.stat_fd = r->ps.status_fd = r->ps.clear_fd = -1;
	redact_stream_init(&r->rs[0]);
	redact_stream_init(&r->rs[1]);
	r->contain = contain_new(&c->worker.limits);
	r->cfg.worker.contain = r->contain;
	r->cfg.worker.generations = &r->generations;
	if (r->contain != NULL && new_jail(r) == 0)
		r->w = worker_new(l, &r->cfg.worker, &runner_worker_ops, r);
	if (r->w != NULL && c->snapshot != SNAPSHOT_NEVER &&
	    (r->standby = worker_new(l, &r->cfg.worker, &runner_worker_ops,
	    r)) != NULL) {
		worker_set_sibling(r->w, r->standby);
		worker_set_sibling(r->standby, r->w);
	}
	if (r->w == NULL) {
		jail_free(r->jail);
		contain_free(r->contain);
		free(r);
		return NULL;
	}
	return r;
}

void
runner_free(struct runner *r)
{
	if (r == NULL)
		return;
	worker_free(r->w);
	worker_free(r->standby);
	jail_free(r->jail);
	loop_timer_cancel(r->loop, r->respawn_timer);
	loop_timer_cancel(r->loop, r->standby_timer);
	runner_cancel_deadline(r);
	procstat_close(&r->ps);
	contain_free(r->contain);
	free(r->ns);
	if (r->cfg.input_fd >= 0)
		loop_unwatch(r->loop, r->cfg.input_fd);
	cells_clear(&r->cells);
	buf_clear(&r->inbuf);
	redact_stream_clear(&r->rs[0]);
	redact_stream_clear(&r->rs[1]);
	free(r);
}

int
runner_start(struct runner *r)
{
	return worker_spawn(r->w);
}

struct cell *
runner_last(struct runner *r)
{
	return r->cells.n > 0 ? cells_get(&r->cells, r->cells.n - 1) : NULL;
}

void
runner_on_death(struct runner *r, void (*fn)(void *ctx, struct cell *c),
    void *ctx)
{
	r->death_fn = fn;
	r->death_ctx = ctx;
}

struct cells *
runner_cells(struct runner *r)
{
	return &r->cells;
}

struct cell *
runner_current(struct runner *r)
{
	return r->current;
}

int
runner_busy(const struct runner *r)
{
	return r != NULL && (r->current != NULL || r->pending != NULL);
}

const struct worker *
runner_worker(const struct runner *r)
{
	return r->w;
}

const char *
runner_containment(const struct runner *r)
{
	return contain_mechanisms(r->contain);
}

const char *
runner_isolation(const struct runner *r)
{
	return r->jail != NULL ? jail_describe(r->jail) : "none";
}

struct cell *
runner_cut(struct runner *r, const char *why)
{
	struct cell *c;
	char *detail;
	int ran;

	if (r == NULL)
		return NULL;
	if ((c = r->dead) != NULL) {	/* its death is its record */
		r->dead = NULL;
		if (c->recovered_by == NULL)
			c->recovered_by = "none";
		return c;
	}
	if ((c = r->current != NULL ? r->current : r->pending) == NULL)
		return NULL;
	ran = c == r->current;
	if (ran) {
		hostserve_input_stop(r);
		runner_cancel_deadline(r);
	} else {
		c->t0_us = loop_now_us();	/* it never started */
	}
	if (asprintf(&detail, "the run stopped %s this cell %s: %s", ran ?
	    "while" : "before", ran ? "ran" : "started", why) < 0)
		detail = NULL;
	cells_finish_dead(c, KIND_STOPPED, detail != NULL ? detail : why, -1,
	    -1);
	free(detail);
	if (ran)
		runner_flush_output(r, c);
	r->current = r->pending = NULL;
	return c;
}

int
runner_signal(struct runner *r, int signo)
{
	if (signo == SIGCHLD) {
		pid_t keep[3];

		if (r == NULL)	/* before the runner exists */
			return -1;
		keep[0] = worker_spawner_pid(r->w);
		keep[1] = r->standby != NULL ? worker_spawner_pid(r->standby) : 0;
		keep[2] = jail_init_pid(r->jail);
		(void)contain_reap_except(keep, 3);
		return -1;
	}
	log_warnx("%s: stopping", strsignal(signo));
	return 128 + signo;	/* the shell's convention: 130 for SIGINT */
}

static void on_deadline(struct loop *l, void *ctx);

void
runner_cancel_deadline(struct runner *r)
{
	loop_timer_cancel(r->loop, r->deadline_timer);
	loop_timer_cancel(r->loop, r->stage_timer);
	r->deadline_timer = r->stage_timer = 0;
}

/* Why the cell gets no snapshot, or NULL to take one. */
static const char *
snapshot_refusal(const struct runner *r)
{
	if (r->cfg.snapshot == SNAPSHOT_NEVER)
		return "none: --snapshot never";
	if (!jail_active(r->jail))
		return "none: snapshots need the run's isolation (jail)";
	if (strcmp(r->cfg.worker.sandbox, "strict") == 0)
		return "none: off under --sandbox strict";
	if (r->cfg.snapshot == SNAPSHOT_ALWAYS || r->cfg.snapshot_every_cell ||
	    r->last_cell_us >= AUTO_SLOW_US || r->last_rss_kb >= AUTO_BIG_KB)
		return NULL;
	return "none: --snapshot auto skips a quick cell in a small namespace";
}

/* What the record says of the cell's snapshot. */
void
runner_snapshot_note(struct runner *r, struct cell *c)
{
	const char *why = worker_snapshot_why(r->w);
	char *s = NULL;

	if (r->snap_refused != NULL)
		s = strdup(r->snap_refused);
	else if (why[0] == '\0')
		s = strdup("taken");
	else if (asprintf(&s, "none: %s", why) < 0)
		s = NULL;
	free(c->snapshot);
	c->snapshot = s;
}

/* The running cell to the worker. */
static void
exec_current(struct runner *r)
{
	struct cell *c = r->current;

	if (worker_exec(r->w, c->n, c->code, c->code_len) < 0)
		worker_kill(r->w, "cannot send the cell to the worker");
	/* the first cell runs: a standby is worth its start now */
	if (r->standby != NULL && worker_state(r->standby) == WORKER_DOWN)
		recovery_standby_soon(r);
}

static void
dispatch_pending(struct runner *r)
{
	struct cell *c = r->pending;

	if (c == NULL || worker_state(r->w) != WORKER_IDLE)
		return;
	r->pending = NULL;
	r->current = c;
	if (!r->expire_pending)
		r->expired_by[0] = '\0';
	c->started_at = loop_wall();
	c->t0_us = loop_now_us();
	c->worker_pid = worker_python_pid(r->w);
	c->worker_gen = worker_generation(r->w);
	/* CPU is counted from the previous sample (READY or the last
	 * DONE): no read on the way in, one write to reset the peak. */
	(void)procstat_reset_peak(&r->ps);
	if (r->cfg.cell_timeout_ms > 0 || r->expire_pending)
		r->deadline_timer = loop_timer(r->loop, r->expire_pending ? 0 :
		    r->cfg.cell_timeout_ms, on_deadline, r);
	r->expire_pending = 0;
	r->snap_refused = snapshot_refusal(r);
	if (r->snap_refused == NULL && worker_snapshot(r->w, c->n) < 0)
		r->snap_refused = "none: cannot ask the worker for one";
	if (r->snap_refused == NULL)
		return;		/* w_snapped sends the cell */
	exec_current(r);
}

static void
w_snapped(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	if (w == r->w && r->current != NULL)
		exec_current(r);
}

/* --- the deadline: interrupt, grace, stack dump, kill ------------------- */

/* The front end hears each step of the ladder. */
static void
tell_kill(struct runner *r, const char *stage)
{
	char why[96];

	if (r->ops.kill == NULL || r->current == NULL)
		return;
	(void)snprintf(why, sizeof why, "the cell exceeded its %.3g s timeout",
	    (double)r->cfg.cell_timeout_ms / 1000.0);
	r->ops.kill(r->ctx, r->current, stage, why);
}

static void
on_kill(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->stage_timer = 0;
	r->kill_us = loop_now_us();
	tell_kill(r, "kill");
	worker_kill(r->w, NULL);
}

/* The dump is written from a signal handler in one go: once bytes came,
 * a short quiet period is enough before the kill. */
static void
w_stack(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	if (w != r->w || r->stage_timer == 0 || r->current == NULL ||
	    r->current->timeout_stage == NULL ||
	    strcmp(r->current->timeout_stage, "killed") != 0)
		return;
	loop_timer_cancel(r->loop, r->stage_timer);
	r->stage_timer = loop_timer(r->loop, DUMP_QUIET_MS, on_kill, r);
}

static void
on_grace(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	if (r->current == NULL)
		return;
	r->current->timeout_stage = "killed";
	tell_kill(r, "stack_dump");
	if (worker_dump_stacks(r->w) < 0) {
		on_kill(l, r);
		return;
	}
	r->stage_timer = loop_timer(r->loop, DUMP_WAIT_MS, on_kill, r);
}

static void
on_deadline(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->deadline_timer = 0;
	if (r->current == NULL)
		return;
	r->deadline_us = loop_now_us();
	r->current->timeout_stage = "interrupted";
	tell_kill(r, "interrupt");
	(void)worker_interrupt(r->w);
	r->stage_timer = loop_timer(r->loop, r->cfg.grace_ms, on_grace, r);
}

int
runner_expire(struct runner *r, const char *who)
{
	if (r->current == NULL && r->pending != NULL) {
		/* waiting for its worker: it gets the ladder as it starts */
		(void)snprintf(r->expired_by, sizeof r->expired_by, "%s", who);
		r->expire_pending = 1;
		return 0;
	}
	if (r->current == NULL) {
		errno = ENOENT;
		return -1;
	}
	if (r->current->timeout_stage != NULL) {
		errno = EALREADY;
		return -1;
	}
	loop_timer_cancel(r->loop, r->deadline_timer);
	(void)snprintf(r->expired_by, sizeof r->expired_by, "%s", who);
	on_deadline(r->loop, r);
	return 0;
}

pid_t
runner_jail_pid(const struct runner *r)
{
	return r->jail != NULL ? jail_init_pid(r->jail) : 0;
}

void
runner_timeout_detail(struct runner *r, struct cell *c)
{
	char d[256], why[96];
	int killed = strcmp(c->timeout_stage, "killed") == 0;

	if (r->expired_by[0] != '\0')
		(void)snprintf(why, sizeof why, "was ended early by %s",
		    r->expired_by);
	else
		(void)snprintf(why, sizeof why, "exceeded its %.3g s timeout",
		    (double)r->cfg.cell_timeout_ms / 1000.0);
	(void)snprintf(d, sizeof d, "the cell %s: %s%s", why, !killed ?
	    "interrupted (KeyboardInterrupt); the namespace was kept" :
	    "it ignored the interrupt, so after the grace period its whole "
	    "process tree was killed; ", !killed ? "" : c->rolled_back ?
	    "the namespace was rolled back to before this cell" :
	    "the namespace was lost");
	cells_set_detail(c, d);
	c->status = CELL_ERROR;
	c->kind = KIND_TIMEOUT;
}

struct cell *
runner_run(struct runner *r, const char *code, size_t len,
    const char *summary, const char *source, int64_t generated_by)
{
	struct cell *c;

	if (r->current != NULL || r->pending != NULL) {
		errno = EBUSY;
		return NULL;
	}
	c = cells_begin(&r->cells, code, len, summary, source, generated_by);
	if (c == NULL)
		return NULL;
	r->pending = c;
	dispatch_pending(r);
	return c;
}

int
runner_reply(struct runner *r, uint64_t id, uint32_t status,
    const char *body, size_t len)
{
	return worker_reply(r->w, id, status, body, len);
}

int
runner_event(struct runner *r, uint64_t id, const char *body, size_t len)
{
	return worker_event(r->w, id, body, len);
}

/* --- worker callbacks ---------------------------------------------------- */

static void
w_ready(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	log_debug("%s %ld ready in %llu us (python %s, %s)",
	    w == r->w ? "worker" : "standby worker", (long)worker_python_pid(w),
	    (unsigned long long)worker_spawn_ready_us(w),
	    worker_python_version(w), worker_sandbox(w));
	if (w != r->w) {
		r->standby_failures = 0;
		/* the worker died while this one started: it takes over */
		if (worker_state(r->w) == WORKER_DOWN && r->respawn_timer == 0)
			(void)recovery_take_standby(r);
		return;
	}
	runner_worker_ready(r);
}

void
runner_worker_ready(struct runner *r)
{
	struct worker *w = r->w;

	r->start_failures = 0;
	procstat_close(&r->ps);
	if (procstat_open(&r->ps, worker_python_pid(w)) == 0) {
		long kb;

		if (procstat_sample(&r->ps, &kb, &r->cpu0_us) < 0)
			r->cpu0_us = 0;
	}
	recovery_finish_dead(r);
	dispatch_pending(r);
}

/* Clean bytes: into the running cell's record and to the front end. */
static int
emit_output(void *ctx, const char *p, size_t n)
{
	struct runner *r = ctx;

	if (r->current != NULL)
		(void)capture_append(&r->current->out, p, n);
	r->ops.output(r->ctx, r->current, r->rs_stream, p, n);
	return 0;
}

void
runner_feed_output(struct runner *r, int stream, const char *p, size_t n)
{
	r->rs_stream = stream;
	if (r->cfg.red == NULL || redact_count(r->cfg.red) == 0)
		(void)emit_output(r, p, n);
	else
		(void)redact_stream_feed(r->cfg.red, &r->rs[stream - 1], p, n,
		    emit_output, r);
}

static void
w_output(struct worker *w, int stream, const char *p, size_t n, void *ctx)
{
	struct runner *r = ctx;

	if (w == r->w)	/* a standby's would be noise before any cell */
		runner_feed_output(r, stream, p, n);
}

/* The held-back ends of both streams, then the texts of the record. */
void
runner_flush_output(struct runner *r, struct cell *c)
{
	char **field[3];
	size_t i, len;
	char *clean;
	int s;

	if (r->cfg.red == NULL || redact_count(r->cfg.red) == 0)
		return;
	for (s = 1; s <= 2; s++) {
		r->rs_stream = s;
		(void)redact_stream_flush(&r->rs[s - 1], emit_output, r);
	}
	field[0] = &c->traceback, field[1] = &c->detail, field[2] = &c->stack;
	for (i = 0; i < 3; i++) {
		if (*field[i] == NULL)
			continue;
		clean = redact_string(r->cfg.red, *field[i], strlen(*field[i]),
		    &len);
		if (clean != NULL) {
			char *old = *field[i];

			*field[i] = clean;
			free(old);
		}
	}
}

static void
w_done(struct worker *w, const struct msg_done *d, void *ctx)
{
	struct runner *r = ctx;
	struct cell *c = r->current;
	long kb;
	uint64_t cpu;

	hostserve_input_stop(r);
	runner_cancel_deadline(r);
	cells_finish_done(c, d);
	runner_flush_output(r, c);
	r->current = NULL;
	if (procstat_sample(&r->ps, &kb, &cpu) == 0) {
		c->maxrss_kb = kb;
		c->cpu_us = cpu > r->cpu0_us ? cpu - r->cpu0_us : 0;
		r->cpu0_us = cpu;
		r->last_rss_kb = kb;
	}
	r->last_cell_us = c->duration_us;
	runner_snapshot_note(r, c);
	nscells_add(r, c->n);
	nscells_record(r, c);
	if (c->timeout_stage != NULL) {
		/* a timed-out cell leaves nothing running, even when the
		 * interrupt was enough to stop the worker itself */
		(void)worker_sweep(w);
		c->deadline_to_ready_ms = (double)(loop_now_us() -
		    r->deadline_us) / 1000.0;
		runner_timeout_detail(r, c);
	}
	r->ops.finished(r->ctx, c);
}

void
runner_reply_error(struct runner *r, uint64_t id, const char *type,
    const char *message)
{
	json_t *o = json_pack("{s:s, s:s}", "type", type, "message", message);
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s != NULL)
		(void)worker_reply(r->w, id, REPLY_ERROR, s, strlen(s));
	free(s);
	json_decref(o);
}
