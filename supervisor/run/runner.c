/*
 * runner.c - one cell at a time in a supervised worker (see runner.h).
 *
 * Owns: the runner's life (new/free, the run's jail and containment),
 * handing cells to the worker, the redaction of output on its way to the
 * record and the front end, and finishing the record at DONE.
 * The deadline ladder is in ladder.c, the pool of workers (respawn,
 * standby) in pool.c, a death in the record in recovery.c, snapshots in
 * snapshot.c, the host requests the runner serves itself in hostserve.c;
 * struct runner is in runner_impl.h.
 *
 * May include: runner_impl.h, config.h, procstat.h, cells.h, redact.h,
 * workers.h, sandbox/ (contain, jail), common/log.h, text/jsonf.h (the
 * error reply's body).
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/run/procstat.h"
#include "supervisor/text/jsonf.h"

static void w_output(struct worker *w, int stream, const char *p, size_t n,
    void *ctx);
static void w_done(struct worker *w, const struct msg_done *d, void *ctx);
static void w_snapped(struct worker *w, void *ctx);

static const struct worker_ops runner_worker_ops = {
	pool_ready, w_output, w_done, hostserve_request, pool_death,
	ladder_stack, w_snapped
};

static unsigned long long
mib(uint64_t n)
{
	return (unsigned long long)(n >> 20);
}

/* The run's world, before the first worker (and before any cgroup of a
 * worker: the jail's init stays in ours). */
static int
new_jail(struct runner *r)
{
	char err[512];
	size_t n = strlen(r->limits);
	int capped = 0;

	if (r->cfg.jail == NULL)
		return 0;
	r->jc = *r->cfg.jail;
	r->cfg.jail = &r->jc;
	/* tmpfs pages are the memory cgroup's; without one, /tmp and
	 * /dev/shm together stay within the memory ceiling */
	if (!contain_has_cgroup(r->contain) && r->cfg.worker.data_limit &&
	    r->jc.tmp_size > r->cfg.worker.data_limit / 2) {
		r->jc.tmp_size = r->cfg.worker.data_limit / 2;
		capped = 1;
	}
	if (r->jc.mode != JAIL_OFF)
		(void)snprintf(r->limits + n, sizeof r->limits - n,
		    "; /tmp and /dev/shm %llu MiB each%s", mib(r->jc.tmp_size),
		    capped ? " (half of --memory-limit: no cgroup)" : "");
	r->jail = jail_new(r->cfg.jail, err, sizeof err);
	if (r->jail == NULL) {
		if (err[0] != '\0')
			log_warnx("isolation required but unavailable: %s "
			    "(--isolation best-effort runs without it)", err);
		return -1;
	}
	if (!jail_active(r->jail) && r->cfg.jail->mode != JAIL_OFF)
		log_warnx("isolation incomplete: %s", jail_describe(r->jail));
	if (r->cfg.jail->network == JAIL_NET_HOST &&
	    r->cfg.jail->mode != JAIL_OFF)
		log_warnx("network: host (--network host): cells reach the "
		    "host's interfaces, its 127.0.0.1 services and its "
		    "abstract unix sockets");
	r->cfg.worker.jail = r->jail;
	return 0;
}

/* Where no cgroup holds, the memory ceiling is per process: RLIMIT_AS
 * (at the cgroup's value: shared mappings count there, RLIMIT_DATA
 * counts the heap, thread stacks and private mappings) besides the
 * worker's RLIMIT_DATA; RLIMIT_NPROC bounds the processes (the cgroup's
 * pids.max, counted for the worker's uid). Then what holds, in words. */
static void
per_process_limits(struct runner *r)
{
	struct contain_limits *l = &r->cfg.worker.limits;
	int cg = contain_has_cgroup(r->contain);
	char mem[160];

	l->nproc = l->pids;
#ifndef CONTAIN_UNDER_ASAN
	if (!cg)
		l->as = l->memory;
#endif
	if (l->memory == 0)
		(void)snprintf(mem, sizeof mem, "memory none");
	else if (cg)
		(void)snprintf(mem, sizeof mem, "memory cgroup %llu MiB "
		    "(RLIMIT_DATA %llu MiB)", mib(l->memory),
		    mib(r->cfg.worker.data_limit));
	else if (l->as == 0)
		(void)snprintf(mem, sizeof mem, "memory none (no cgroup; "
		    "no RLIMIT_DATA or RLIMIT_AS in a sanitizer build), "
		    "no SysV IPC");
	else
		(void)snprintf(mem, sizeof mem, "memory per process only "
		    "(no cgroup): RLIMIT_DATA %llu MiB, RLIMIT_AS %llu MiB, "
		    "no SysV IPC",
		    mib(r->cfg.worker.data_limit), mib(l->as));
	if (l->pids == 0)
		(void)snprintf(r->limits, sizeof r->limits, "%s; processes "
		    "none", mem);
	else
		(void)snprintf(r->limits, sizeof r->limits, "%s; processes "
		    "%s%u", mem, cg ? "cgroup and RLIMIT_NPROC " :
		    "RLIMIT_NPROC ", l->pids);
}

/* --workspace-size in what holds: measured, and no file larger. */
static void
workspace_limit(struct runner *r)
{
	size_t n = strlen(r->limits);

	if (r->cfg.workspace_size > 0)
		(void)snprintf(r->limits + n, sizeof r->limits - n,
		    "; workspace %llu MiB (measured by the supervisor, "
		    "RLIMIT_FSIZE a file)", mib(r->cfg.workspace_size));
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
	if (r->contain != NULL)
		per_process_limits(r);
	r->cfg.worker.generations = &r->generations;
	if (r->contain != NULL && new_jail(r) == 0 && egressrun_new(r) == 0) {
		workspace_limit(r);
		r->w = worker_new(l, &r->cfg.worker, &runner_worker_ops, r);
	}
	if (r->w != NULL && c->snapshot != SNAPSHOT_NEVER &&
	    (r->standby = worker_new(l, &r->cfg.worker, &runner_worker_ops,
	    r)) != NULL) {
		worker_set_sibling(r->w, r->standby);
		worker_set_sibling(r->standby, r->w);
	}
	if (r->w == NULL) {
		egressrun_free(r);
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
	egressrun_free(r);
	jail_free(r->jail);
	loop_timer_cancel(r->loop, r->respawn_timer);
	loop_timer_cancel(r->loop, r->standby_timer);
	pool_standby_disarm(r);
	ladder_cancel(r);
	wsguard_free(r);
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
	if (wsguard_start(r) < 0) {
		errno = EINVAL;
		return -1;
	}
	return pool_start(r);
}

void
runner_last_cell(struct runner *r)
{
	r->last_cell = 1;
	loop_timer_cancel(r->loop, r->standby_timer);
	r->standby_timer = 0;
	pool_standby_disarm(r);
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
runner_limits(const struct runner *r)
{
	return r->limits;
}

const char *
runner_isolation(const struct runner *r)
{
	return r->jail != NULL ? jail_describe(r->jail) : "none";
}

const char *
runner_network(const struct runner *r)
{
	return r->egress != NULL ? "proxy" : jail_network(r->jail);
}

struct cell *
runner_cut(struct runner *r, const char *why)
{
	struct cell *c;
	char *detail;
	int ran;

	if (r == NULL)
		return NULL;
	/* a dead one: its death is its record */
	if ((c = recovery_take_dead(r)) != NULL) {
		if (c->recovered_by == RECOVERY_UNSET)
			c->recovered_by = RECOVERY_NONE;
		return c;
	}
	if ((c = r->current != NULL ? r->current : r->pending) == NULL)
		return NULL;
	ran = c == r->current;
	if (ran) {
		hostserve_input_stop(r);
		ladder_cancel(r);
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
		keep[1] = r->standby != NULL ?
		    worker_spawner_pid(r->standby) : 0;
		keep[2] = jail_init_pid(r->jail);
		(void)contain_reap_except(keep, 3);
		return -1;
	}
	log_warnx("%s: stopping", strsignal(signo));
	return 128 + signo;	/* the shell's convention: 130 for SIGINT */
}

/* The running cell to the worker. */
static void
exec_current(struct runner *r)
{
	struct cell *c = r->current;

	r->ws.ran = 1;
	if (worker_exec(r->w, c->n, c->code, c->code_len) < 0)
		worker_kill(r->w, "cannot send the cell to the worker");
	/* a standby once this cell has run long enough to be worth one */
	pool_standby_arm(r);
}

void
runner_dispatch(struct runner *r)
{
	struct cell *c = r->pending;

	if (c == NULL || worker_state(r->w) != WORKER_IDLE)
		return;
	r->pending = NULL;
	r->current = c;
	if (!r->ladder.expire_pending)
		r->ladder.expired_by[0] = '\0';
	c->started_at = loop_wall();
	c->t0_us = loop_now_us();
	c->worker_pid = worker_python_pid(r->w);
	c->worker_gen = worker_generation(r->w);
	/* CPU is counted from the previous sample (READY or the last
	 * DONE): no read on the way in, one write to reset the peak. */
	(void)procstat_reset_peak(&r->ps);
	if (r->cfg.cell_timeout_ms > 0 || r->ladder.expire_pending)
		ladder_arm(r, r->ladder.expire_pending ? 0 :
		    r->cfg.cell_timeout_ms);
	r->ladder.expire_pending = 0;
	if (snapshot_before(r, c))
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

pid_t
runner_jail_pid(const struct runner *r)
{
	return r->jail != NULL ? jail_init_pid(r->jail) : 0;
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
	runner_dispatch(r);
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

/* One text of the record, redacted in place. */
static void
redact_field(struct runner *r, char **field)
{
	size_t len;
	char *clean;

	if (*field == NULL)
		return;
	clean = redact_string(r->cfg.red, *field, strlen(*field), &len);
	if (clean != NULL) {
		free(*field);
		*field = clean;
	}
}

/* The held-back ends of both streams, then the texts of the record. */
void
runner_flush_output(struct runner *r, struct cell *c)
{
	int s;

	if (r->cfg.red == NULL || redact_count(r->cfg.red) == 0)
		return;
	for (s = 1; s <= 2; s++) {
		r->rs_stream = s;
		(void)redact_stream_flush(&r->rs[s - 1], emit_output, r);
	}
	redact_field(r, &c->traceback);
	redact_field(r, &c->detail);
	redact_field(r, &c->stack);
	redact_field(r, &c->egress.last_refused);
}

void
runner_redact_detail(struct runner *r, struct cell *c)
{
	if (r->cfg.red != NULL && redact_count(r->cfg.red) > 0)
		redact_field(r, &c->detail);
}

/* A timed-out cell that ended itself: its detail, its kind. */
static void
timeout_detail(struct runner *r, struct cell *c)
{
	char d[256], why[96];

	ladder_why(r, why, sizeof why);
	ladder_text(c, why, d, sizeof d);
	cells_set_detail(c, d);
	c->status = CELL_ERROR;
	c->kind = KIND_TIMEOUT;
}

static void
w_done(struct worker *w, const struct msg_done *d, void *ctx)
{
	struct runner *r = ctx;
	struct cell *c = r->current;
	long kb;
	uint64_t cpu;

	hostserve_input_stop(r);
	ladder_cancel(r);
	pool_standby_disarm(r);
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
	snapshot_note(r, c);
	nscells_add(r, c->n);
	nscells_record(r, c);
	if (c->timeout_stage != TIMEOUT_NONE) {
		/* a timed-out cell leaves nothing running, even when the
		 * interrupt was enough to stop the worker itself */
		(void)worker_sweep(w);
		c->deadline_to_ready_ms = (double)(loop_now_us() -
		    r->ladder.deadline_us) / 1000.0;
		timeout_detail(r, c);
	}
	r->ops.finished(r->ctx, c);
}

void
runner_reply_error(struct runner *r, uint64_t id, const char *type,
    const char *message)
{
	struct jf f[] = { JF_S("type", type), JF_S("message", message),
	    JF_END };
	size_t n;
	char *s = jf_dumps(f, &n);

	if (s != NULL)
		(void)worker_reply(r->w, id, REPLY_ERROR, s, n);
	free(s);
}
