/*
 * runner.c - one cell at a time in a supervised worker (see runner.h).
 */
#include "supervisor/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "supervisor/config.h"
#include "sandbox/seccomp.h"
#include "supervisor/history.h"
#include "supervisor/hostreq.h"
#include "supervisor/procstat.h"
#include "supervisor/tui.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define DUMP_WAIT_MS 100	/* stack dump signal -> SIGKILL, at most */
#define DUMP_QUIET_MS 5		/* ... or this long after the dump arrived */

struct runner {
	struct loop *loop;
	struct runner_config cfg;
	struct runner_ops ops;
	void *ctx;
	struct worker *w;
	struct contain *contain;
	struct jail *jail;
	struct cells cells;
	struct cell *current;	/* running in the worker */
	struct cell *pending;	/* recorded, waiting for a ready worker */
	unsigned start_failures;
	uint64_t respawn_timer;
	/* the running cell's deadline */
	uint64_t deadline_timer, stage_timer;
	uint64_t deadline_us, kill_us;
	uint64_t cpu0_us;	/* the worker's CPU at the last sample */
	struct procstat ps;	/* the live worker's /proc files */
	/* a cell whose worker died, finished once a fresh one is ready */
	struct cell *dead;
	/* output redaction, per stream, so a secret split across chunks is
	 * caught; flushed before a record is finished */
	struct redact_stream rs[2];
	int rs_stream;		/* the stream being emitted (1 or 2) */
	/* input() */
	uint64_t input_id;	/* 0: none waiting */
	int input_eof;
	struct buf inbuf;
	/* told of a worker's death at once (runner_on_death) */
	void (*death_fn)(void *ctx, struct cell *c);
	void *death_ctx;
};

static void w_ready(struct worker *w, void *ctx);
static void w_output(struct worker *w, int stream, const char *p, size_t n,
    void *ctx);
static void w_done(struct worker *w, const struct msg_done *d, void *ctx);
static void w_request(struct worker *w, const struct msg_request *r,
    void *ctx);
static void w_death(struct worker *w, const struct worker_death *d,
    void *ctx);

static void cancel_deadline(struct runner *r);
static void finish_dead(struct runner *r);

static void w_stack(struct worker *w, void *ctx);

static const struct worker_ops runner_worker_ops = {
	w_ready, w_output, w_done, w_request, w_death, w_stack
};

void
runner_config_init(struct runner_config *rc, const struct config *c,
    const char *wpath, int input_fd)
{
	memset(rc, 0, sizeof *rc);
	rc->worker.path = wpath;
	rc->worker.sandbox = c->sandbox;
	rc->worker.sandbox_debug = c->sandbox_debug;
	rc->worker.max_frame = c->max_frame;
	rc->worker.output_limit = c->output_limit;
	rc->worker.pass_env = c->pass_env;
	rc->worker.ready_timeout_ms = 30000;
	rc->worker.pidns = 1;
	rc->worker.data_limit = c->memory_limit;
	/* The cgroup ceiling sits above RLIMIT_DATA so that a big
	 * allocation is a MemoryError first and an OOM kill only for what
	 * RLIMIT_DATA does not count (shared memory, subprocesses). */
	rc->worker.limits.memory = c->memory_limit > 0 ? c->memory_limit +
	    c->memory_limit / 8 + (64u << 20) : 0;
	rc->worker.limits.pids = c->pids_limit;
	rc->worker.limits.nofile = c->nofile_limit;
	rc->worker.limits.fsize = c->fsize_limit;
	rc->cell_timeout_ms = (uint64_t)(c->cell_timeout * 1000.0);
	rc->grace_ms = (uint64_t)(c->grace * 1000.0);
	rc->output_limit = c->output_limit;
	rc->max_start_failures = 5;
	rc->input_fd = input_fd;
}

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
	if (r->contain != NULL && new_jail(r) == 0)
		r->w = worker_new(l, &r->cfg.worker, &runner_worker_ops, r);
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
	jail_free(r->jail);
	loop_timer_cancel(r->loop, r->respawn_timer);
	cancel_deadline(r);
	procstat_close(&r->ps);
	contain_free(r->contain);
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
runner_restore(struct runner *r, const json_t *in, const json_t *out)
{
	return cells_restore(&r->cells, in, out);
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

int
runner_signal(struct runner *r, int signo)
{
	if (signo == SIGCHLD) {
		if (r != NULL)	/* NULL before the runner exists */
			(void)contain_reap(worker_child_pid(r->w));
		return -1;
	}
	log_warnx("%s: stopping", strsignal(signo));
	return signo == SIGINT ? EXIT_SIGINT : 128 + signo;
}

static void on_deadline(struct loop *l, void *ctx);

static void
cancel_deadline(struct runner *r)
{
	loop_timer_cancel(r->loop, r->deadline_timer);
	loop_timer_cancel(r->loop, r->stage_timer);
	r->deadline_timer = r->stage_timer = 0;
}

static void
dispatch_pending(struct runner *r)
{
	struct cell *c = r->pending;

	if (c == NULL || worker_state(r->w) != WORKER_IDLE)
		return;
	r->pending = NULL;
	r->current = c;
	c->started_at = loop_wall();
	c->t0_us = loop_now_us();
	c->worker_pid = worker_pid(r->w);
	c->worker_gen = worker_generation(r->w);
	/* CPU is counted from the previous sample (READY or the last
	 * DONE): no read on the way in, one write to reset the peak. */
	(void)procstat_reset_peak(&r->ps);
	if (r->cfg.cell_timeout_ms > 0)
		r->deadline_timer = loop_timer(r->loop, r->cfg.cell_timeout_ms,
		    on_deadline, r);
	if (worker_exec(r->w, c->n, c->code, c->code_len) < 0)
		worker_kill(r->w, "cannot send the cell to the worker");
}

/* --- the deadline: interrupt, grace, stack dump, kill ------------------- */

static void
on_kill(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->stage_timer = 0;
	r->kill_us = loop_now_us();
	worker_kill(r->w, NULL);
}

/* The dump is written from a signal handler in one go: once bytes came,
 * a short quiet period is enough before the kill. */
static void
w_stack(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	(void)w;
	if (r->stage_timer == 0 || r->current == NULL ||
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
	(void)worker_interrupt(r->w);
	r->stage_timer = loop_timer(r->loop, r->cfg.grace_ms, on_grace, r);
}

static void
timeout_detail(struct runner *r, struct cell *c)
{
	char d[256];
	int killed = strcmp(c->timeout_stage, "killed") == 0;

	(void)snprintf(d, sizeof d, "the cell exceeded its %.3g s timeout: %s",
	    (double)r->cfg.cell_timeout_ms / 1000.0, killed ?
	    "it ignored the interrupt, so after the grace period its whole "
	    "process tree was killed; the namespace was lost" :
	    "interrupted (KeyboardInterrupt); the namespace was kept");
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

	log_debug("worker %ld ready in %llu us (python %s, %s)",
	    (long)worker_pid(w),
	    (unsigned long long)worker_spawn_ready_us(w),
	    worker_python_version(w), worker_sandbox(w));
	r->start_failures = 0;
	procstat_close(&r->ps);
	if (procstat_open(&r->ps, worker_pid(w)) == 0) {
		long kb;

		if (procstat_sample(&r->ps, &kb, &r->cpu0_us) < 0)
			r->cpu0_us = 0;
	}
	finish_dead(r);
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

static void
w_output(struct worker *w, int stream, const char *p, size_t n, void *ctx)
{
	struct runner *r = ctx;

	(void)w;
	r->rs_stream = stream;
	if (r->cfg.red == NULL || redact_count(r->cfg.red) == 0)
		(void)emit_output(r, p, n);
	else
		(void)redact_stream_feed(r->cfg.red, &r->rs[stream - 1], p, n,
		    emit_output, r);
}

/* The held-back ends of both streams, then the texts of the record. */
static void
flush_output(struct runner *r, struct cell *c)
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

static void input_stop(struct runner *r);

static void
w_done(struct worker *w, const struct msg_done *d, void *ctx)
{
	struct runner *r = ctx;
	struct cell *c = r->current;
	long kb;
	uint64_t cpu;

	input_stop(r);
	cancel_deadline(r);
	cells_finish_done(c, d);
	flush_output(r, c);
	r->current = NULL;
	if (procstat_sample(&r->ps, &kb, &cpu) == 0) {
		c->maxrss_kb = kb;
		c->cpu_us = cpu > r->cpu0_us ? cpu - r->cpu0_us : 0;
		r->cpu0_us = cpu;
	}
	if (c->timeout_stage != NULL) {
		/* a timed-out cell leaves nothing running, even when the
		 * interrupt was enough to stop the worker itself */
		(void)worker_sweep(w);
		c->deadline_to_ready_ms = (double)(loop_now_us() -
		    r->deadline_us) / 1000.0;
		timeout_detail(r, c);
	}
	r->ops.finished(r->ctx, c);
}

/* RUNTIME_INFO: the run's facts, with the worker's world and its
 * workspace as the worker sees it. */
static json_t *
runtime_info(const struct runner *r)
{
	json_t *info = history_runtime_info();

	if (info != NULL) {
		(void)json_object_set_new(info, "isolation",
		    json_string(runner_isolation(r)));
		if (jail_workspace(r->jail) != NULL)
			(void)json_object_set_new(info, "workspace",
			    json_string(jail_workspace(r->jail)));
	}
	return info;
}

static void
reply_error(struct runner *r, uint64_t id, const char *type,
    const char *message)
{
	json_t *o = json_pack("{s:s, s:s}", "type", type, "message", message);
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s != NULL)
		(void)worker_reply(r->w, id, REPLY_ERROR, s, strlen(s));
	free(s);
	json_decref(o);
}

static void
input_stop(struct runner *r)
{
	if (r->input_id != 0)
		tui_pause(0);
	r->input_id = 0;
	if (r->cfg.input_fd >= 0)
		loop_unwatch(r->loop, r->cfg.input_fd);
}

/* Answers the waiting input() if a whole line (or EOF) is buffered. */
static int
input_try_answer(struct runner *r)
{
	uint8_t *nl = r->inbuf.len > 0 ? memchr(r->inbuf.data, '\n',
	    r->inbuf.len) : NULL;
	size_t n;

	if (nl == NULL && !r->input_eof)
		return 0;
	if (nl == NULL && r->inbuf.len == 0) {
		reply_error(r, r->input_id, "EOFError", "EOF when reading a line");
	} else {
		n = nl != NULL ? (size_t)(nl - r->inbuf.data) : r->inbuf.len;
		(void)worker_reply(r->w, r->input_id, REPLY_OK,
		    (const char *)r->inbuf.data, n);
		buf_consume(&r->inbuf, nl != NULL ? n + 1 : n);
	}
	input_stop(r);
	return 1;
}

static void
input_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct runner *r = ctx;
	char tmp[4096];
	ssize_t n;

	(void)l;
	(void)revents;
	n = read(fd, tmp, sizeof tmp);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		r->input_eof = 1;
	else if (buf_append(&r->inbuf, tmp, (size_t)n) < 0)
		r->input_eof = 1;
	(void)input_try_answer(r);
}

static void
serve_input(struct runner *r, const struct msg_request *q)
{
	json_t *body = json_loadb(q->body.ptr, q->body.len, 0, NULL);
	const char *prompt = json_string_value(json_object_get(body,
	    "prompt"));

	if (r->input_id != 0) {
		reply_error(r, q->id, "RuntimeError",
		    "input() is already waiting in another thread");
	} else if (r->cfg.input_fd < 0) {
		reply_error(r, q->id, "EOFError",
		    "EOF when reading a line (no terminal)");
	} else {
		/* what the cell printed before input() comes first */
		worker_drain_output(r->w);
		if (prompt != NULL && *prompt != '\0')
			w_output(r->w, 1, prompt, strlen(prompt), r);
		r->input_id = q->id;
		tui_pause(1);
		if (!input_try_answer(r) && loop_watch(r->loop,
		    r->cfg.input_fd, POLLIN, input_event, r) < 0) {
			reply_error(r, q->id, "EOFError", "cannot read input");
			r->input_id = 0;
		}
	}
	json_decref(body);
}

/* Replies with j (consumed); redacted like everything cells see. */
static void
reply_json(struct runner *r, uint64_t id, json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) :
	    NULL;

	if (s == NULL)
		reply_error(r, id, "RuntimeError", "cannot encode the reply");
	else
		(void)runner_reply(r, id, REPLY_OK, s, strlen(s));
	free(s);
	json_decref(j);
}

static void
serve_cells(struct runner *r, const struct msg_request *q)
{
	json_t *body = json_loadb(q->body.ptr, q->body.len, 0, NULL);
	const char *type;
	char *err;
	json_t *res = history_serve(&r->cells, body, &type, &err);

	json_decref(body);
	if (res == NULL)
		reply_error(r, q->id, type, err != NULL ? err :
		    "cells: out of memory");
	else
		reply_json(r, q->id, res);
	free(err);
}

static void
h_input(void *ctx, struct cell *c, const struct msg_request *q)
{
	(void)c;
	serve_input(ctx, q);
}

static void
h_cells(void *ctx, struct cell *c, const struct msg_request *q)
{
	(void)c;
	serve_cells(ctx, q);
}

static void
h_runtime_info(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct runner *r = ctx;

	(void)c;
	reply_json(r, q->id, runtime_info(r));
}

/* call_me and whatever else the front end serves. */
static void
h_front(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct runner *r = ctx;

	r->ops.request(r->ctx, c, q);
}

static void
h_error(void *ctx, uint64_t id, const char *type, const char *message)
{
	reply_error(ctx, id, type, message);
}

/* Every host request goes through hostreq's table. */
static void
w_request(struct worker *w, const struct msg_request *q, void *ctx)
{
	struct runner *r = ctx;
	struct hostreq_handlers h;

	(void)w;
	memset(&h, 0, sizeof h);
	h.fn[HOSTREQ_INPUT] = h_input;
	h.fn[HOSTREQ_CELLS] = h_cells;
	h.fn[HOSTREQ_RUNTIME_INFO] = h_runtime_info;
	h.fn[HOSTREQ_CALL_ME] = h_front;
	h.ctx[HOSTREQ_INPUT] = h.ctx[HOSTREQ_CELLS] = r;
	h.ctx[HOSTREQ_RUNTIME_INFO] = h.ctx[HOSTREQ_CALL_ME] = r;
	h.error = h_error;
	h.error_ctx = r;
	h.max_frame = r->cfg.worker.max_frame;
	/* past its deadline a cell is being stopped: its requests get a
	 * quick refusal, so a backlog cannot hold up its DONE */
	hostreq_dispatch(&h, r->current != NULL &&
	    r->current->timeout_stage == NULL ? r->current : NULL, q);
}

/* --- death and respawn ----------------------------------------------------- */

static void
respawn_now(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->respawn_timer = 0;
	if (worker_spawn(r->w) < 0) {
		char why[128];

		(void)snprintf(why, sizeof why, "cannot start %s: %s",
		    r->cfg.worker.path, strerror(errno));
		finish_dead(r);
		r->ops.fatal(r->ctx, why);
	}
}

static void
respawn(struct runner *r, int before_ready)
{
	uint64_t ms = 0;
	unsigned i;

	if (before_ready) {
		ms = BACKOFF_FIRST_MS;
		for (i = 1; i < r->start_failures && ms < BACKOFF_MAX_MS; i++)
			ms *= 2;
	}
	r->respawn_timer = loop_timer(r->loop, ms, respawn_now, r);
}

static void
describe_death(const struct worker_death *d, char *buf, size_t len)
{
	if (d->reason != NULL)
		(void)snprintf(buf, len, "worker killed: %s", d->reason);
	else if (d->exited && d->code == SANDBOX_EXIT_SECCOMP)
		(void)snprintf(buf, len, "the seccomp filter blocked a system "
		    "call: %.*s", (int)strcspn(d->stack != NULL ? d->stack :
		    "(unnamed)", "\n"), d->stack != NULL ? d->stack : "(unnamed)");
	else if (!d->exited && d->signal == SIGSYS)
		(void)snprintf(buf, len, "worker killed by the seccomp filter "
		    "(signal %d, SIGSYS)", d->signal);
	else if (!d->exited)
		(void)snprintf(buf, len, "worker killed by signal %d (%s)",
		    d->signal, strsignal(d->signal));
	else
		(void)snprintf(buf, len, "worker exited with code %d",
		    d->code);
}

/* Kind and detail of a cell whose worker died under it. */
static enum cell_kind
classify_death(struct runner *r, struct cell *c, const struct worker_death *d,
    char *why, size_t len)
{
	char how[256];

	if (c->timeout_stage != NULL && d->reason == NULL) {
		timeout_detail(r, c);
		(void)snprintf(why, len, "%s", c->detail);
		return KIND_TIMEOUT;
	}
	describe_death(d, how, sizeof how);
	(void)snprintf(why, len, "%s", how);
	if (d->cg.oom_kills > 0) {
		(void)snprintf(why, len, "out of memory: the worker reached its "
		    "memory ceiling (peak %llu MiB) and was killed; %s",
		    (unsigned long long)(d->cg.memory_peak >> 20), how);
		return KIND_MEMORY;
	}
	if (d->reason != NULL && strncmp(d->reason, "protocol", 8) == 0)
		return KIND_PROTOCOL;
	return KIND_CRASHED;
}

/* Completes the record of a cell whose worker died (fresh worker ready). */
static void
finish_dead(struct runner *r)
{
	struct cell *c = r->dead;

	if (c == NULL)
		return;
	r->dead = NULL;
	if (c->timeout_stage != NULL) {
		c->deadline_to_ready_ms = (double)(loop_now_us() -
		    r->deadline_us) / 1000.0;
		c->kill_to_ready_ms = (double)(loop_now_us() - r->kill_us) /
		    1000.0;
	}
	r->ops.finished(r->ctx, c);
}

static void
record_death(struct runner *r, struct cell *c, const struct worker_death *d)
{
	char why[512];
	enum cell_kind kind = classify_death(r, c, d, why, sizeof why);

	cells_finish_dead(c, kind, why, d->exited ? d->code : -1,
	    d->exited ? -1 : d->signal);
	if (c->timeout_stage != NULL)
		c->kind = KIND_TIMEOUT;
	cells_set_usage(c, d->cpu_us > r->cpu0_us ? d->cpu_us - r->cpu0_us : 0,
	    d->peak_kb);
	c->memory_peak = d->cg.memory_peak;
	if (d->stack != NULL)
		c->stack = strdup(d->stack);
	flush_output(r, c);
	r->dead = c;
}

static void
w_death(struct worker *w, const struct worker_death *d, void *ctx)
{
	struct runner *r = ctx;
	struct cell *c = r->current;
	char why[256];

	(void)w;
	describe_death(d, why, sizeof why);
	input_stop(r);
	cancel_deadline(r);
	procstat_close(&r->ps);
	if (c != NULL)
		record_death(r, c, d);
	r->current = NULL;
	if (r->death_fn != NULL)
		r->death_fn(r->death_ctx, c);
	if (d->before_ready) {
		r->start_failures++;
		log_warnx("worker did not start (%s), attempt %u of %u", why,
		    r->start_failures, r->cfg.max_start_failures);
		if (r->start_failures >= r->cfg.max_start_failures) {
			finish_dead(r);
			r->ops.fatal(r->ctx, why);
			return;
		}
	} else if (c == NULL) {
		log_warnx("worker died between cells (%s); restarting", why);
	}
	respawn(r, d->before_ready);
}
