/*
 * recovery.c - a worker's death and the fresh worker after it.
 *
 * Owns: describing and classifying a death (timeout, out of memory,
 * protocol, seccomp, crashed) into the dead cell's record, completing
 * that record once a fresh worker is ready, and respawning with backoff
 * for a worker that dies before READY (fatal after max_start_failures).
 * Exit codes are read from proto.h's enum worker_exit.
 *
 * May include: runner_impl.h, procstat.h, common/log.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/run/procstat.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

static void respawn(struct runner *r, int before_ready);

/*
 * One more start failed (what said, why the cause): counted, and the run
 * is over (1: the fatal callback ran) after max_start_failures in a row.
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
	if (r->dead != NULL)
		r->dead->recovered_by = "none";
	recovery_finish_dead(r);
	r->ops.fatal(r->ctx, why);
	return 1;
}

/* A start that failed for the world's sake (its rebuild, or a new init
 * killed as well): a worker that did not start, retried with backoff. */
static void
world_start_failed(struct runner *r, const char *why)
{
	if (!start_failed(r, "", why))
		respawn(r, 1);
}

/*
 * The run's namespace init died (killed from outside: nothing inside can
 * signal it), and every process of its namespaces with it; nothing can
 * start there any more. A new init, namespaces and view, before the next
 * worker; a failure counts as a worker that did not start (retried with
 * backoff, fatal after max_start_failures). 0: go on and spawn; -1: not
 * now (a retry or the fatal end is on its way).
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
		return 0;
	}
	(void)snprintf(why, sizeof why, "cannot rebuild the run's "
	    "namespaces: %s", err);
	world_start_failed(r, why);
	return -1;
}

static void
respawn_now(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->respawn_timer = 0;
	if (rebuild_world(r) < 0)
		return;
	if (worker_spawn(r->w) < 0) {
		char why[128];
		int e = errno;

		if (jail_lost(r->jail)) {
			world_start_failed(r, "the run's new namespace init "
			    "died before the worker started");
			return;
		}
		(void)snprintf(why, sizeof why, "cannot start %s: %s",
		    r->cfg.worker.path, strerror(e));
		if (r->dead != NULL)
			r->dead->recovered_by = "none";
		recovery_finish_dead(r);
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
	/* one start at a time (a standby's death may have asked already) */
	loop_timer_cancel(r->loop, r->respawn_timer);
	r->respawn_timer = loop_timer(r->loop, ms, respawn_now, r);
}

static void describe_death(const struct worker_death *d, char *buf,
    size_t len);

/* --- the standby ------------------------------------------------------- */

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
		recovery_standby_soon(r);
		return;
	}
	if (worker_spawn(r->standby) < 0)
		log_warn("cannot start a standby worker");
}

void
recovery_standby_soon(struct runner *r)
{
	uint64_t ms = 0;
	unsigned i;

	if (r->standby == NULL || r->standby_timer != 0)
		return;
	/* one that keeps dying before READY is retried ever more slowly,
	 * and never stops the run: the cells do not need it */
	if (r->standby_failures > 0)
		for (ms = BACKOFF_FIRST_MS, i = 1; i < r->standby_failures &&
		    ms < BACKOFF_MAX_MS * 12; i++)
			ms *= 2;
	r->standby_timer = loop_timer(r->loop, ms, standby_now, r);
}

/* The standby died (a cell found and killed it, or it failed to start). */
static void
standby_death(struct runner *r, const struct worker_death *d)
{
	char why[256];

	describe_death(d, why, sizeof why);
	/* not our kill: say what the run lost (a warm start) */
	if (d->reason == NULL)
		log_warnx("the standby worker died (%s): starting another",
		    why);
	else
		log_debug("standby worker died: %s", why);
	if (d->before_ready)
		r->standby_failures++;
	/* the worker was waiting for this one: start a fresh one instead */
	if (worker_state(r->w) == WORKER_DOWN && r->respawn_timer == 0)
		respawn(r, 0);
	recovery_standby_soon(r);
}

/* The ready standby takes the dead worker's place; the dead one's struct
 * becomes the next standby. 0, or -1 when there is none ready. */
int
recovery_take_standby(struct runner *r)
{
	struct worker *dead = r->w;

	if (r->standby == NULL || worker_state(r->standby) != WORKER_IDLE)
		return -1;
	r->w = r->standby;
	r->standby = dead;
	if (r->dead != NULL)
		r->dead->recovered_by = "standby";
	log_debug("standby worker %ld takes over",
	    (long)worker_python_pid(r->w));
	runner_worker_ready(r);
	recovery_standby_soon(r);
	return 0;
}

static void
describe_death(const struct worker_death *d, char *buf, size_t len)
{
	if (d->reason != NULL)
		(void)snprintf(buf, len, "worker killed: %s", d->reason);
	else if (d->exited && d->code == WEXIT_SECCOMP)
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
		runner_timeout_detail(r, c);
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
void
recovery_finish_dead(struct runner *r)
{
	struct cell *c = r->dead;

	if (c == NULL)
		return;
	r->dead = NULL;
	if (c->recovered_by == NULL)
		c->recovered_by = "fresh worker";
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
	runner_snapshot_note(r, c);
	if (c->timeout_stage != NULL)
		c->kind = KIND_TIMEOUT;
	cells_set_usage(c, d->cpu_us > r->cpu0_us ? d->cpu_us - r->cpu0_us : 0,
	    d->peak_kb);
	c->memory_peak = d->cg.memory_peak;
	if (d->stack != NULL)
		c->stack = strdup(d->stack);
	runner_flush_output(r, c);
	r->dead = c;
}

/* In a record's detail, the namespace's fate from what was hoped to
 * what came true (the rest of the detail, e.g. cancelled calls, stays). */
static void
detail_lost(struct cell *c)
{
	static const char hoped[] = "rolled back to before this cell";
	char *at, *d;

	if (c->detail == NULL || (at = strstr(c->detail, hoped)) == NULL)
		return;
	if (asprintf(&d, "%.*slost%s", (int)(at - c->detail), c->detail,
	    at + sizeof hoped - 1) < 0)
		return;
	free(c->detail);
	c->detail = d;
}

/* The record's namespace: lost after all (no promotion, or the promoted
 * snapshot died before its READY). */
static void
rolled_back_lost(struct runner *r, struct cell *c)
{
	c->rolled_back = 0;
	c->namespace_lost = 1;
	c->recovered_by = NULL;
	free(c->threads_lost);
	c->threads_lost = NULL;
	free(c->snapshot);
	c->snapshot = strdup("taken, but it died before it could take over "
	    "(killed by the cell?)");
	detail_lost(c);
	nscells_reset(r);
	nscells_record(r, c);
}

/*
 * The killed cell's snapshot takes over: its record says the namespace
 * was rolled back (set before the record's detail was written) and
 * which threads the snapshot lacks. 0, or -1 when it cannot.
 */
static int
roll_back(struct runner *r, struct cell *c, const struct worker_death *d)
{
	if (worker_promote(r->w) < 0) {
		log_warnx("cell %u: the snapshot could not take over (%s); "
		    "the namespace is lost", c->n, strerror(errno));
		rolled_back_lost(r, c);
		return -1;
	}
	if (d->threads_lost != NULL)
		c->threads_lost = strdup(d->threads_lost);
	c->recovered_by = "snapshot";
	nscells_record(r, c);
	return 0;
}

/* A promoted snapshot that died before its READY: the cell it stood in
 * for lost its namespace after all. */
static void
roll_back_failed(struct runner *r)
{
	if (r->dead != NULL && r->dead->rolled_back)
		rolled_back_lost(r, r->dead);
}

/* What a cell whose worker died with the run's namespace init lost. */
static void
note_world_lost(struct cell *c)
{
	static const char lost[] = "the run's namespace init died (killed "
	    "from outside the jail), and every process of its namespaces "
	    "with it: the namespace (and any snapshot), /tmp and /dev/shm "
	    "are lost; new namespaces were made";
	char *d;

	if (c->detail != NULL && strstr(c->detail, lost) != NULL)
		return;		/* said (a second loss before the repair) */
	if (asprintf(&d, "%s%s%s", c->detail != NULL ? c->detail : "",
	    c->detail != NULL ? "; " : "", lost) < 0)
		return;
	free(c->detail);
	c->detail = d;
	c->namespace_lost = 1;
	/* (the snapshot may be seen dead already, or not yet) */
	if (c->snapshot != NULL && (strncmp(c->snapshot, "taken", 5) == 0 ||
	    strstr(c->snapshot, "killed before it was needed") != NULL)) {
		free(c->snapshot);
		c->snapshot = strdup("taken, but the run's namespace init "
		    "died, and the snapshot with it");
	}
}

/* The world is lost: what lived in it is gone or going (the standby
 * too, though its death may not have been seen yet: never taken over). */
static void
world_lost(struct runner *r, struct worker *w)
{
	log_warnx("the run's namespace init died: the worker and everything "
	    "in its namespaces are lost");
	worker_drop_snapshot(w);
	if (r->standby != NULL && worker_state(r->standby) != WORKER_DOWN)
		worker_kill(r->standby, "its namespaces died with the run's "
		    "namespace init");
}

void
recovery_death(struct worker *w, const struct worker_death *d, void *ctx)
{
	struct runner *r = ctx;
	struct cell *c = r->current;
	char why[256];
	int lost;

	if (w != r->w) {
		standby_death(r, d);
		return;
	}
	lost = jail_lost(r->jail);
	describe_death(d, why, sizeof why);
	hostserve_input_stop(r);
	runner_cancel_deadline(r);
	procstat_close(&r->ps);
	roll_back_failed(r);
	if (lost)
		world_lost(r, w);
	if (c != NULL) {
		/* what the detail and the record will say, should the
		 * promotion fail after all (then rolled_back_lost) */
		c->rolled_back = d->snapshot && !lost;
		record_death(r, c, d);
		if (c->rolled_back)
			c->namespace_lost = 0;
		if (lost)
			note_world_lost(c);
	} else if (lost && r->dead != NULL) {
		note_world_lost(r->dead);
	}
	r->current = NULL;
	if (r->death_fn != NULL)
		r->death_fn(r->death_ctx, c);
	if (c != NULL && c->rolled_back && roll_back(r, c, d) == 0)
		return;		/* its READY finishes the record */
	nscells_reset(r);
	if (c != NULL)
		nscells_record(r, c);
	if (d->before_ready) {
		if (start_failed(r, "worker did not start (", why))
			return;
	} else if (c == NULL) {
		log_warnx("worker died between cells (%s); restarting", why);
	}
	if (recovery_take_standby(r) == 0)
		return;
	/* a standby on its way is sooner than a fresh start: its READY
	 * takes over (or its death starts one) */
	if (r->standby != NULL && worker_state(r->standby) == WORKER_STARTING)
		return;
	respawn(r, d->before_ready);
}
