/*
 * runner_impl.h - the inside of struct runner, shared by the three files
 * that implement runner.h and by nothing else:
 *
 *   runner.c     life, cells to the worker, deadline ladder, redaction
 *   hostserve.c  input(), cells and runtime_info requests
 *   recovery.c   death classification, respawn
 *
 * May include: runner.h and what it includes, procstat.h, sandbox/.
 */
#ifndef AGENTZ_RUNNER_IMPL_H
#define AGENTZ_RUNNER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "sandbox/contain.h"
#include "sandbox/jail.h"
#include "supervisor/cells/cells.h"
#include "supervisor/loop/loop.h"
#include "supervisor/run/procstat.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"
#include "supervisor/run/workers.h"

struct runner {
	struct loop *loop;
	struct runner_config cfg;
	struct runner_ops ops;
	void *ctx;
	struct worker *w;
	/* a warm worker, ready for when w dies without a snapshot (not
	 * with --snapshot never); its generation comes from the same count */
	struct worker *standby;
	uint64_t standby_timer;
	unsigned standby_failures;
	unsigned generations;
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
	char expired_by[64];	/* who ended it early (runner_expire), or "" */
	int expire_pending;	/* the pending cell is ended as it starts */
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
	/* the cells whose effects are in the worker's namespace: ranges */
	struct ns_range { uint32_t lo, hi; } *ns;
	size_t ns_n, ns_cap;
	uint64_t last_cell_us;	/* the previous cell's duration */
	long last_rss_kb;	/* the worker's memory after it */
	const char *snap_refused;	/* the running cell's: why none */
	/* told of a worker's death at once (runner_on_death) */
	void (*death_fn)(void *ctx, struct cell *c);
	void *death_ctx;
};

/* runner.c: stops the running cell's deadline timers; the timeout detail
 * of a cell; the held-back output and the record's texts, redacted; live
 * output of a stream (1 or 2) into the record and to the front end. */
void runner_cancel_deadline(struct runner *r);
void runner_timeout_detail(struct runner *r, struct cell *c);
/* The record's "snapshot": taken, or why none. */
void runner_snapshot_note(struct runner *r, struct cell *c);
void runner_flush_output(struct runner *r, struct cell *c);
void runner_feed_output(struct runner *r, int stream, const char *p,
    size_t n);

/* hostserve.c: worker_ops.request; ends a waiting input() (the UI goes on). */
void hostserve_request(struct worker *w, const struct msg_request *q,
    void *ctx);
void hostserve_input_stop(struct runner *r);

/* recovery.c: worker_ops.death; completes the record of a cell whose
 * worker died (called once a fresh worker is ready, or at a fatal end). */
void recovery_death(struct worker *w, const struct worker_death *d,
    void *ctx);
void recovery_finish_dead(struct runner *r);
/* recovery.c: starts the standby soon (its first, or after a death). */
void recovery_standby_soon(struct runner *r);
/* recovery.c: the ready standby takes the dead worker's place (0), or
 * -1 when it is not ready. */
int recovery_take_standby(struct runner *r);
/* runner.c: worker_ops.ready of the worker that runs the cells. */
void runner_worker_ready(struct runner *r);

/* nscells.c: the cells in the namespace: a new worker has none; a cell
 * that ran is added; the record gets the set as text ("1-3,5"). */
void nscells_reset(struct runner *r);
void nscells_add(struct runner *r, uint32_t n);
void nscells_record(struct runner *r, struct cell *c);

#endif
