/*
 * recovery.c - a worker's death in the record of the cell it ran.
 *
 * Owns: describing and classifying a death (timeout, out of memory,
 * protocol, seccomp, crashed) into the dead cell's record, what the
 * loss of the run's namespace init does to it, and completing that
 * record once a fresh worker is ready: its detail is written then, once,
 * from the death, the namespace's fate as it came true (kept, rolled
 * back, lost) and what was added since (e.g. cancelled model calls).
 * What replaces the worker is the pool's (pool.c). Exit codes are read
 * from proto.h's enum worker_exit.
 *
 * May include: runner_impl.h, common/log.h.
 */
#include "supervisor/run/runner_impl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "proto/wexit.h"

#define WORLD_LOST "the run's namespace init died (killed from outside " \
	"the jail), and every process of its namespaces with it: the " \
	"namespace (and any snapshot), /tmp and /dev/shm are lost; new " \
	"namespaces were made"

void
recovery_describe(const struct worker_death *d, char *buf, size_t len)
{
	const char *stack = d->stack != NULL ? d->stack : "(unnamed)";

	if (d->cause != DEATH_UNSAID)
		(void)snprintf(buf, len, "worker killed: %s", d->reason);
	else if (d->exited && d->code == WEXIT_SECCOMP)
		(void)snprintf(buf, len, "the seccomp filter blocked a system "
		    "call: %.*s", (int)strcspn(stack, "\n"), stack);
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

/* Kind of a cell whose worker died under it; its death into dead_why
 * (or, killed by the ladder, why the ladder ran). */
static enum cell_kind
classify_death(struct runner *r, struct cell *c, const struct worker_death *d)
{
	char how[256];

	r->dead_ladder = c->timeout_stage != TIMEOUT_NONE &&
	    d->cause == DEATH_UNSAID;
	if (r->dead_ladder) {
		ladder_why(r, r->dead_why, sizeof r->dead_why);
		return KIND_TIMEOUT;
	}
	recovery_describe(d, how, sizeof how);
	(void)snprintf(r->dead_why, sizeof r->dead_why, "%s", how);
	if (d->cg.oom_kills > 0) {
		(void)snprintf(r->dead_why, sizeof r->dead_why,
		    "out of memory: the worker reached its memory ceiling "
		    "(peak %llu MiB) and was killed; %s",
		    (unsigned long long)(d->cg.memory_peak >> 20), how);
		return KIND_MEMORY;
	}
	return d->cause == DEATH_PROTOCOL ? KIND_PROTOCOL : KIND_CRASHED;
}

/* The record's detail, written once: the death, the world's loss said
 * at it, what was added since, the world's loss said after. */
static void
write_detail(struct runner *r, struct cell *c)
{
	char base[768];
	const char *since = c->detail;
	char *d;

	if (r->dead_ladder)
		ladder_text(c, r->dead_why, base, sizeof base);
	else
		(void)snprintf(base, sizeof base, "%s", r->dead_why);
	if (asprintf(&d, "%s%s%s%s%s", base, r->dead_world == 1 ?
	    "; " WORLD_LOST : "", since != NULL ? "; " : "", since != NULL ?
	    since : "", r->dead_world == 2 ? "; " WORLD_LOST : "") < 0)
		return;
	free(c->detail);
	c->detail = d;
	runner_redact_detail(r, c);
}

struct cell *
recovery_take_dead(struct runner *r)
{
	struct cell *c = r->dead;

	if (c == NULL)
		return NULL;
	r->dead = NULL;
	write_detail(r, c);
	return c;
}

void
recovery_finish_dead(struct runner *r)
{
	struct cell *c = recovery_take_dead(r);

	if (c == NULL)
		return;
	if (c->recovered_by == RECOVERY_UNSET)
		c->recovered_by = RECOVERY_FRESH;
	if (c->timeout_stage != TIMEOUT_NONE) {
		c->deadline_to_ready_ms = (double)(loop_now_us() -
		    r->ladder.deadline_us) / 1000.0;
		c->kill_to_ready_ms = (double)(loop_now_us() -
		    r->ladder.kill_us) / 1000.0;
	}
	r->ops.finished(r->ctx, c);
}

static void
record_death(struct runner *r, struct cell *c, const struct worker_death *d)
{
	enum cell_kind kind = classify_death(r, c, d);

	/* the detail is written when the record is complete */
	cells_finish_dead(c, kind, NULL, d->exited ? d->code : -1,
	    d->exited ? -1 : d->signal);
	snapshot_note(r, c);
	if (c->timeout_stage != TIMEOUT_NONE)
		c->kind = KIND_TIMEOUT;
	cells_set_usage(c, d->cpu_us > r->cpu0_us ? d->cpu_us - r->cpu0_us : 0,
	    d->peak_kb);
	c->memory_peak = d->cg.memory_peak;
	if (d->stack != NULL)
		c->stack = strdup(d->stack);
	runner_flush_output(r, c);
	r->dead = c;
	r->dead_world = 0;
}

/* What a cell whose worker died with the run's namespace init lost
 * (said once: a second loss before the repair adds nothing). */
static void
note_world_lost(struct runner *r, struct cell *c, int at_death)
{
	if (r->dead_world != 0)
		return;
	r->dead_world = at_death ? 1 : 2;
	c->ns = NS_LOST;
	/* (the snapshot may be seen dead already, or not yet) */
	if (c->snapshot == CSNAP_TAKEN || c->snapshot == CSNAP_DIED ||
	    c->snapshot == CSNAP_KILLED)
		cells_set_snapshot(c, CSNAP_WORLD_LOST, NULL);
}

void
recovery_record_death(struct runner *r, struct cell *c,
    const struct worker_death *d, int world_lost)
{
	if (c != NULL) {
		record_death(r, c, d);
		/* what the record says should the promotion succeed (else
		 * snapshot_lost says lost after all) */
		c->ns = d->snapshot && !world_lost ? NS_ROLLED_BACK : NS_LOST;
		if (world_lost)
			note_world_lost(r, c, 1);
	} else if (world_lost && r->dead != NULL) {
		note_world_lost(r, r->dead, 0);
	}
}
