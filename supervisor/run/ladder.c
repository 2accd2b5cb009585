/*
 * ladder.c - the running cell's deadline ladder (see runner_impl.h).
 *
 * At the deadline (the cell's timeout, or at once when the operator ends
 * it early) SIGINT: the cell sees KeyboardInterrupt and may end. After
 * the grace period the worker's faulthandler dumps every thread's stack,
 * and once the dump came (a short quiet period) or after DUMP_WAIT_MS
 * at most, SIGKILL of the worker's whole tree; its death goes to the
 * pool. Each step is told to the front end (ops.kill) and recorded in
 * the cell's timeout_stage; the record's detail text is written when
 * the record is finished (ladder_text).
 *
 * May include: runner_impl.h, common/log.h, common/size.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/size.h"

#define DUMP_WAIT_MS 100	/* stack dump signal -> SIGKILL, at most */
#define DUMP_QUIET_MS 5		/* ... or this long after the dump arrived */

static void on_deadline(struct loop *l, void *ctx);

/* The ladder goes to step s, with its timer (fn after ms; fn NULL: no
 * timer). */
static void
step_to(struct runner *r, enum ladder_step s, uint64_t ms,
    void (*fn)(struct loop *, void *))
{
	loop_timer_cancel(r->loop, r->ladder.timer);
	r->ladder.timer = fn != NULL ? loop_timer(r->loop, ms, fn, r) : 0;
	r->ladder.step = s;
}

void
ladder_cancel(struct runner *r)
{
	step_to(r, LADDER_OFF, 0, NULL);
}

void
ladder_arm(struct runner *r, uint64_t ms)
{
	step_to(r, LADDER_ARMED, ms, on_deadline);
}

/* The front end hears each step of the ladder, and why it runs: the
 * cell's timeout, or who ended the cell early. */
static void
tell_kill(struct runner *r, enum ladder_step step)
{
	char why[128], ran[96];

	if (r->ops.kill == NULL || r->current == NULL)
		return;
	ladder_why(r, ran, sizeof ran);
	(void)snprintf(why, sizeof why, "the cell %s", ran);
	r->ops.kill(r->ctx, r->current, step, why);
}

/* interrupt -> stack dump -> kill: SIGKILL of the worker's tree. */
static void
on_kill(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->ladder.timer = 0;
	step_to(r, LADDER_KILLED, 0, NULL);
	r->ladder.kill_us = loop_now_us();
	tell_kill(r, LADDER_KILLED);
	worker_kill(r->w, NULL);
}

/* The dump is written from a signal handler in one go: once bytes came,
 * a short quiet period is enough before the kill. */
void
ladder_stack(struct worker *w, void *ctx)
{
	struct runner *r = ctx;

	if (w != r->w || r->ladder.step != LADDER_DUMPING ||
	    r->current == NULL)
		return;
	step_to(r, LADDER_DUMPING, DUMP_QUIET_MS, on_kill);
}

/* interrupt -> stack dump: the grace ran out. */
static void
on_grace(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	r->ladder.timer = 0;
	if (r->current == NULL)
		return;
	r->current->timeout_stage = TIMEOUT_KILLED;
	tell_kill(r, LADDER_DUMPING);
	if (worker_dump_stacks(r->w) < 0) {
		on_kill(l, r);
		return;
	}
	step_to(r, LADDER_DUMPING, DUMP_WAIT_MS, on_kill);
}

/* armed -> interrupt: SIGINT, the grace period begins. */
static void
on_deadline(struct loop *l, void *ctx)
{
	struct runner *r = ctx;

	(void)l;
	r->ladder.timer = 0;
	if (r->current == NULL)
		return;
	r->ladder.deadline_us = loop_now_us();
	r->current->timeout_stage = TIMEOUT_INTERRUPTED;
	if (r->ladder.expired_by[0] != '\0' && r->current->ended_by == NULL)
		r->current->ended_by = strdup(r->ladder.expired_by);
	tell_kill(r, LADDER_INTERRUPTED);
	(void)worker_interrupt(r->w);
	step_to(r, LADDER_INTERRUPTED, r->cfg.grace_ms, on_grace);
}

int
runner_expire(struct runner *r, const char *who)
{
	if (r->current == NULL && r->pending != NULL) {
		/* waiting for its worker: it gets the ladder as it starts */
		(void)snprintf(r->ladder.expired_by,
		    sizeof r->ladder.expired_by, "%s", who);
		r->ladder.expire_pending = 1;
		return 0;
	}
	if (r->current == NULL) {
		errno = ENOENT;
		return -1;
	}
	if (r->current->timeout_stage != TIMEOUT_NONE) {
		errno = EALREADY;
		return -1;
	}
	ladder_cancel(r);
	(void)snprintf(r->ladder.expired_by, sizeof r->ladder.expired_by,
	    "%s", who);
	on_deadline(r->loop, r);
	return 0;
}

void
ladder_why(const struct runner *r, char *buf, size_t len)
{
	char secs[32];

	if (r->ladder.expired_by[0] != '\0') {
		(void)snprintf(buf, len, "was ended early by %s",
		    r->ladder.expired_by);
		return;
	}
	size_plain((double)r->cfg.cell_timeout_ms / 1000.0, secs, sizeof secs);
	(void)snprintf(buf, len, "exceeded its %s s timeout", secs);
}

void
ladder_text(const struct cell *c, const char *why, char *buf, size_t len)
{
	int killed = c->timeout_stage == TIMEOUT_KILLED;

	(void)snprintf(buf, len, "the cell %s: %s%s", why, !killed ?
	    "interrupted (KeyboardInterrupt); the namespace was kept" :
	    "it ignored the interrupt, so after the grace period its whole "
	    "process tree was killed; ", !killed ? "" :
	    c->ns == NS_ROLLED_BACK ?
	    "the namespace was rolled back to before this cell" :
	    "the namespace was lost");
}
