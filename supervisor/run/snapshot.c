/*
 * snapshot.c - snapshots on the runner's side: the policy (which cell
 * gets one), the record's note on it, and the rollback when its cell's
 * worker died (the snapshot takes over, or the namespace is lost after
 * all). The mechanism - asking the worker, sparing the snapshot at a
 * kill, promoting it - is the worker's (wsnap.c, workers.h).
 *
 * May include: runner_impl.h, common/log.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* --snapshot auto in exec runs: after a cell this long, or once the
 * worker's memory reached this much, the next cell gets a snapshot */
#define AUTO_SLOW_US 1000000u
#define AUTO_BIG_KB (256L << 10)

/* Why the cell gets no snapshot, or NULL to take one. */
static const char *
refusal(const struct runner *r)
{
	if (r->cfg.snapshot == SNAPSHOT_NEVER)
		return "--snapshot never";
	if (!jail_active(r->jail))
		return "snapshots need the run's isolation (jail)";
	if (r->cfg.worker.sandbox == SANDBOX_STRICT)
		return "off under --sandbox strict";
	if (r->cfg.snapshot == SNAPSHOT_ALWAYS || r->cfg.snapshot_every_cell ||
	    r->last_cell_us >= AUTO_SLOW_US || r->last_rss_kb >= AUTO_BIG_KB)
		return NULL;
	return "--snapshot auto skips a quick cell in a small namespace";
}

int
snapshot_before(struct runner *r, struct cell *c)
{
	r->snap_refused = refusal(r);
	if (r->snap_refused == NULL && worker_snapshot(r->w, c->n) < 0)
		r->snap_refused = "cannot ask the worker for one";
	return r->snap_refused == NULL;
}

void
snapshot_note(struct runner *r, struct cell *c)
{
	if (r->snap_refused != NULL) {
		cells_set_snapshot(c, CSNAP_NONE, r->snap_refused);
		return;
	}
	switch (worker_snapshot_state(r->w)) {
	case WSNAP_TAKEN:
		cells_set_snapshot(c, CSNAP_TAKEN, NULL);
		break;
	case WSNAP_KILLED:
		cells_set_snapshot(c, CSNAP_KILLED, NULL);
		break;
	case WSNAP_WORLD_LOST:
		cells_set_snapshot(c, CSNAP_WORLD_LOST, NULL);
		break;
	case WSNAP_NONE:
		cells_set_snapshot(c, CSNAP_NONE, worker_snapshot_why(r->w));
		break;
	}
}

void
snapshot_lost(struct runner *r, struct cell *c)
{
	c->ns = NS_LOST;
	c->recovered_by = RECOVERY_UNSET;
	free(c->threads_lost);
	c->threads_lost = NULL;
	cells_set_snapshot(c, CSNAP_DIED, NULL);
	nscells_reset(r);
	nscells_record(r, c);
}

int
snapshot_roll_back(struct runner *r, struct cell *c,
    const struct worker_death *d)
{
	if (worker_promote(r->w) < 0) {
		log_warnx("cell %u: the snapshot could not take over (%s); "
		    "the namespace is lost", c->n, strerror(errno));
		snapshot_lost(r, c);
		return -1;
	}
	if (d->threads_lost != NULL)
		c->threads_lost = strdup(d->threads_lost);
	c->recovered_by = RECOVERY_SNAPSHOT;
	nscells_record(r, c);
	return 0;
}
