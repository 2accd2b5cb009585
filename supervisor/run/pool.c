/*
 * pool.c - the pool: the worker that runs the cells, a warm standby and
 * the respawn of a fresh worker, as one state machine (enum pool_state,
 * runner_impl.h).
 *
 * Five events - the worker's READY and death, the standby's READY and
 * death, the respawn timer - go through pool_event(), which hands each
 * to a named transition; each transition says the state it leads to
 * (pool_to). A death the cell's snapshot survives promotes it
 * (PROMOTING); else the ready standby takes the worker's place, a
 * starting one is waited for (WAIT_STANDBY), or a fresh worker is
 * spawned after a backoff (RESPAWN) that grows while workers die before
 * READY; after max_start_failures in a row the run is over (OVER). The
 * standby has its own small life (its worker_state and timer): started
 * once a cell runs and again after each death, with backoff, never fatal.
 *
 * May include: runner_impl.h, procstat.h, common/log.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/run/procstat.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
/*
 * A cell that has run this long gets a standby started beside it (if
 * none is there): one that ends sooner never needed one, and a run of
 * quick cells (agentz exec -) never pays a second Python start (60 ms
 * of CPU of 177 for three `x = 1` cells). A cell killed at a deadline
 * (one second or more) finds the standby ready; one that dies within its
 * first 200 ms gets a fresh worker, or the standby if it is starting.
 */
#define STANDBY_AFTER_MS 200

enum pool_event {
	EV_READY,		/* the cells' worker sent READY */
	EV_DEATH,		/* the cells' worker died */
	EV_STANDBY_READY,
	EV_STANDBY_DEATH,
	EV_RESPAWN_DUE		/* the respawn timer fired */
};

static void pool_event(struct runner *r, enum pool_event ev,
    const struct worker_death *d);

static void
pool_to(struct runner *r, enum pool_state s, const char *transition)
{
	static const char *const names[] = {
		[POOL_STARTING] = "starting", [POOL_READY] = "ready",
		[POOL_PROMOTING] = "promoting",
		[POOL_WAIT_STANDBY] = "wait-standby",
		[POOL_RESPAWN] = "respawn", [POOL_OVER] = "over",
	};

	log_debug("pool: %s -> %s (%s)", names[r->pool], names[s],
	    transition);
	r->pool = s;
}

/* --- the standby -------------------------------------------------------- */

static void
standby_now(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->standby_timer = 0;
	if (r->standby == NULL || worker_state(r->standby) != WORKER_DOWN)
		return;
	/* the world is rebuilt before the next worker of the cells (its
	 * death is on its way): the standby waits for that */
	if (jail_lost(r->jail)) {
		r->standby_failures++;
		pool_standby_soon(r);
		return;
	}
	if (worker_spawn(r->standby) < 0)
		log_warn("cannot start a standby worker");
}

void
pool_standby_soon(struct runner *r)
{
	uint64_t ms = 0;
	unsigned i;

	if (r->standby == NULL || r->standby_timer != 0 || r->last_cell)
		return;
	/* one that keeps dying before READY is retried ever more slowly,
	 * and never stops the run: the cells do not need it */
	if (r->standby_failures > 0)
		for (ms = BACKOFF_FIRST_MS, i = 1; i < r->standby_failures &&
		    ms < BACKOFF_MAX_MS * 12; i++)
			ms *= 2;
	r->standby_timer = loop_timer(r->loop, ms, standby_now, r);
}

static void
standby_due(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->standby_due = 0;
	pool_standby_soon(r);
}

void
pool_standby_arm(struct runner *r)
{
	if (r->standby == NULL || r->standby_due != 0 ||
	    r->standby_timer != 0 || r->last_cell ||
	    worker_state(r->standby) != WORKER_DOWN)
		return;
	r->standby_due = loop_timer(r->loop, STANDBY_AFTER_MS, standby_due,
	    r);
}

void
pool_standby_disarm(struct runner *r)
{
	loop_timer_cancel(r->loop, r->standby_due);
	r->standby_due = 0;
}

/* --- transitions ---------------------------------------------------------- */

/* STARTING, PROMOTING (or a standby taking over) -> READY: the worker
 * runs the cells; the dead cell's record is complete. */
static void
t_ready(struct runner *r, const char *how)
{
	pool_to(r, POOL_READY, how);
	r->start_failures = 0;
	procstat_close(&r->ps);
	if (procstat_open(&r->ps, worker_python_pid(r->w)) == 0) {
		long kb;

		if (procstat_sample(&r->ps, &kb, &r->cpu0_us) < 0)
			r->cpu0_us = 0;
	}
	recovery_finish_dead(r);
	runner_dispatch(r);
}

/* any -> OVER: no worker can start; the run ends (why: the cause). */
static void
t_fatal(struct runner *r, const char *why)
{
	pool_to(r, POOL_OVER, "fatal");
	if (r->dead != NULL)
		r->dead->recovered_by = RECOVERY_NONE;
	recovery_finish_dead(r);
	r->ops.fatal(r->ctx, why);
}

/*
 * One more start failed (what said, why the cause): counted, and the run
 * is over (1: OVER) after max_start_failures in a row.
 */
static int
start_failed(struct runner *r, const char *what, const char *why)
{
	r->start_failures++;
	log_warnx("%s%s%s, attempt %u of %u", what, why,
	    *what != '\0' ? ")" : "", r->start_failures,
	    r->cfg.max_start_failures);
	if (r->start_failures < r->cfg.max_start_failures)
		return 0;
	t_fatal(r, why);
	return 1;
}

static void
respawn_now(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->respawn_timer = 0;
	pool_event(r, EV_RESPAWN_DUE, NULL);
}

/* -> RESPAWN: a fresh worker after a backoff (none unless the last died
 * before READY). */
static void
t_respawn(struct runner *r, int before_ready)
{
	uint64_t ms = 0;
	unsigned i;

	if (before_ready) {
		ms = BACKOFF_FIRST_MS;
		for (i = 1; i < r->start_failures && ms < BACKOFF_MAX_MS; i++)
			ms *= 2;
	}
	pool_to(r, POOL_RESPAWN, before_ready ? "respawn, backoff" :
	    "respawn");
	loop_timer_cancel(r->loop, r->respawn_timer);
	r->respawn_timer = loop_timer(r->loop, ms, respawn_now, r);
}

/* A start that failed for the world's sake (its rebuild, or a new init
 * killed as well): a worker that did not start, retried with backoff. */
static void
world_start_failed(struct runner *r, const char *why)
{
	if (!start_failed(r, "", why))
		t_respawn(r, 1);
}

/*
 * The run's namespace init died (killed from outside: nothing inside can
 * signal it), and every process of its namespaces with it; nothing can
 * start there any more. A new init, namespaces and view, before the next
 * worker; a failure counts as a worker that did not start. 0: go on and
 * spawn; -1: not now (RESPAWN or OVER).
 */
static int
rebuild_world(struct runner *r)
{
	char err[512], why[640];

	if (!jail_lost(r->jail))
		return 0;
	nscells_reset(r);
	if (jail_rebuild(r->jail, err, sizeof err) == 0) {
		log_warnx("the run's namespace init died: its namespaces, "
		    "view, /tmp and /dev/shm were made anew (rebuild %u)",
		    jail_rebuilds(r->jail));
		egressrun_relisten(r);
		return 0;
	}
	(void)snprintf(why, sizeof why, "cannot rebuild the run's "
	    "namespaces: %s", err);
	world_start_failed(r, why);
	return -1;
}

/* RESPAWN -> STARTING (or RESPAWN again, or OVER): a fresh worker. */
static void
t_spawn(struct runner *r)
{
	char why[128];
	int e;

	if (rebuild_world(r) < 0)
		return;
	if (worker_spawn(r->w) == 0) {
		pool_to(r, POOL_STARTING, "spawned");
		return;
	}
	e = errno;
	if (jail_lost(r->jail)) {
		world_start_failed(r, "the run's new namespace init died "
		    "before the worker started");
		return;
	}
	(void)snprintf(why, sizeof why, "cannot start %s: %s",
	    r->cfg.worker.path, strerror(e));
	t_fatal(r, why);
}

/* WAIT_STANDBY, or a death with the standby ready -> READY: the ready
 * standby takes the dead worker's place; the dead one's struct becomes
 * the next standby. */
static void
t_take_standby(struct runner *r)
{
	struct worker *dead = r->w;

	r->w = r->standby;
	r->standby = dead;
	if (r->dead != NULL)
		r->dead->recovered_by = RECOVERY_STANDBY;
	log_debug("standby worker %ld takes over",
	    (long)worker_python_pid(r->w));
	t_ready(r, "standby takes over");
	pool_standby_soon(r);
}

/* The worker is dead and no snapshot takes over: the standby (ready:
 * READY; starting: WAIT_STANDBY), else a fresh one (RESPAWN). */
static void
t_replace(struct runner *r, int before_ready)
{
	enum worker_state s = r->standby != NULL ? worker_state(r->standby) :
	    WORKER_DOWN;

	if (s == WORKER_IDLE)
		t_take_standby(r);
	else if (s == WORKER_STARTING)
		pool_to(r, POOL_WAIT_STANDBY, "standby on its way");
	else
		t_respawn(r, before_ready);
}

/* The world is lost: what lived in it is gone or going (the standby
 * too, though its death may not have been seen yet: never taken over). */
static void
world_lost(struct runner *r)
{
	log_warnx("the run's namespace init died: the worker and everything "
	    "in its namespaces are lost");
	worker_drop_snapshot(r->w);
	if (r->standby != NULL && worker_state(r->standby) != WORKER_DOWN)
		worker_kill(r->standby, "its namespaces died with the run's "
		    "namespace init");
}

/* any -> PROMOTING (the snapshot takes over), READY, WAIT_STANDBY,
 * RESPAWN or OVER: the cells' worker died. */
static void
t_died(struct runner *r, const struct worker_death *d)
{
	struct cell *c = r->current;
	int lost = jail_lost(r->jail);
	char why[256];

	recovery_describe(d, why, sizeof why);
	hostserve_input_stop(r);
	ladder_cancel(r);
	/* the dead cell's standby is not started by its timer now: the
	 * replacement below (or a promotion's READY) decides */
	pool_standby_disarm(r);
	procstat_close(&r->ps);
	/* a promoted snapshot that died before its READY: the cell it
	 * stood in for lost its namespace after all */
	if (r->pool == POOL_PROMOTING && r->dead != NULL &&
	    r->dead->ns == NS_ROLLED_BACK)
		snapshot_lost(r, r->dead);
	if (lost)
		world_lost(r);
	recovery_record_death(r, c, d, lost);
	r->current = NULL;
	if (r->death_fn != NULL)
		r->death_fn(r->death_ctx, c);
	if (c != NULL && c->ns == NS_ROLLED_BACK &&
	    snapshot_roll_back(r, c, d) == 0) {
		pool_to(r, POOL_PROMOTING, "snapshot promoted");
		return;		/* its READY finishes the record */
	}
	nscells_reset(r);
	if (c != NULL)
		nscells_record(r, c);
	if (d->before_ready) {
		if (start_failed(r, "worker did not start (", why))
			return;
	} else if (c == NULL) {
		log_warnx("worker died between cells (%s); restarting", why);
	}
	t_replace(r, d->before_ready);
}

/* The standby died (a cell found and killed it, or it failed to start):
 * WAIT_STANDBY -> RESPAWN; in any state another standby soon. */
static void
t_standby_died(struct runner *r, const struct worker_death *d)
{
	char why[256];

	recovery_describe(d, why, sizeof why);
	/* not our kill: say what the run lost (a warm start) */
	if (d->cause == DEATH_UNSAID)
		log_warnx("the standby worker died (%s): starting another",
		    why);
	else
		log_debug("standby worker died: %s", why);
	if (d->before_ready)
		r->standby_failures++;
	/* the worker was waiting for this one: start a fresh one instead */
	if (r->pool == POOL_WAIT_STANDBY)
		t_respawn(r, 0);
	pool_standby_soon(r);
}

/* The one transition function: each event in each state. */
static void
pool_event(struct runner *r, enum pool_event ev, const struct worker_death *d)
{
	switch (ev) {
	case EV_READY:
		t_ready(r, r->pool == POOL_PROMOTING ? "snapshot ready" :
		    "worker ready");
		break;
	case EV_DEATH:
		t_died(r, d);
		break;
	case EV_STANDBY_READY:
		r->standby_failures = 0;
		if (r->pool == POOL_WAIT_STANDBY)
			t_take_standby(r);
		break;
	case EV_STANDBY_DEATH:
		t_standby_died(r, d);
		break;
	case EV_RESPAWN_DUE:
		if (r->pool == POOL_RESPAWN)
			t_spawn(r);
		break;
	}
}

/* --- the workers' callbacks --------------------------------------------- */

void
pool_ready(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	log_debug("%s %ld ready in %llu us (python %s, %s)",
	    w == r->w ? "worker" : "standby worker", (long)worker_python_pid(w),
	    (unsigned long long)worker_spawn_ready_us(w),
	    worker_python_version(w), worker_sandbox(w));
	pool_event(r, w == r->w ? EV_READY : EV_STANDBY_READY, NULL);
}

void
pool_death(struct worker *w, const struct worker_death *d, void *ctx)
{
	struct runner *r = ctx;

	if (w == r->w)
		wsguard_death(r);
	pool_event(r, w == r->w ? EV_DEATH : EV_STANDBY_DEATH, d);
}

int
pool_start(struct runner *r)
{
	pool_to(r, POOL_STARTING, "first worker");
	return worker_spawn(r->w);
}
