/*
 * runner_impl.h - the inside of struct runner, shared by the files that
 * implement runner.h and by nothing else:
 *
 *   runner.c     life, cells to the worker, redaction, DONE
 *   ladder.c     the running cell's deadline ladder
 *   pool.c       the pool: the cells' worker, the standby, respawn (a
 *                state machine)
 *   recovery.c   a death in the record: classification, detail
 *   snapshot.c   snapshot policy, the record's note, the rollback (the
 *                mechanism is the worker's: wsnap.c)
 *   hostserve.c  input(), cells and runtime_info requests
 *   nscells.c    which cells' effects are in the namespace
 *   wsguard.c    --workspace-size: the workspace measured, its growth
 *                past its size stopped
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
#include "supervisor/egress/egress.h"
#include "supervisor/cells/cells.h"
#include "supervisor/loop/loop.h"
#include "supervisor/run/procstat.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"
#include "supervisor/run/workers.h"

/*
 * The running cell's deadline ladder (its steps: enum ladder_step,
 * runner.h): at the deadline SIGINT (the cell sees KeyboardInterrupt),
 * after the grace period a faulthandler dump of every thread's stack,
 * then (dump arrived or not) SIGKILL of the worker's tree. The record's
 * timeout_stage says how far it went.
 */
struct ladder {
	enum ladder_step step;
	uint64_t timer;		/* the step's timer, 0: none */
	uint64_t deadline_us;	/* when the deadline came */
	uint64_t kill_us;	/* when SIGKILL was sent */
	char expired_by[64];	/* who ended it early (runner_expire), or "" */
	int expire_pending;	/* the pending cell is ended as it starts */
};

/*
 * The pool: the worker that runs the cells (w), a warm standby, and the
 * respawn of a fresh worker, as one state machine (pool.c). The state is
 * the cells' worker's; the standby's is its worker_state and timer.
 */
enum pool_state {
	POOL_STARTING,		/* w spawned (the first or a fresh one):
				 * its READY makes it the cells' worker */
	POOL_READY,		/* w is ready or runs a cell */
	POOL_PROMOTING,		/* w is the dead cell's promoted snapshot:
				 * its READY completes the rollback, its
				 * death loses the namespace after all */
	POOL_WAIT_STANDBY,	/* w is dead; the starting standby takes its
				 * place at its READY (or a respawn at its
				 * death) */
	POOL_RESPAWN,		/* w is dead; a fresh one is spawned when
				 * the respawn timer fires (backoff) */
	POOL_OVER		/* no worker could start: the run is ending
				 * (ops.fatal was told) */
};

struct dirsize;

struct runner {
	struct loop *loop;
	struct runner_config cfg;
	struct runner_ops ops;
	void *ctx;
	enum pool_state pool;
	struct worker *w;	/* runs the cells */
	/* a warm worker, ready for when w dies without a snapshot (not
	 * with --snapshot never); its generation comes from the same count */
	struct worker *standby;
	uint64_t standby_timer;
	uint64_t standby_due;	/* pool_standby_arm's: a cell ran long */
	unsigned standby_failures;
	int last_cell;		/* runner_last_cell: no standby any more */
	unsigned generations;
	struct contain *contain;
	struct jail *jail;
	struct jail_config jc;	/* cfg.jail, /tmp sized for the limits */
	char limits[448];	/* which ceilings hold (runner_limits) */
	struct cells cells;
	struct cell *current;	/* running in the worker */
	struct cell *pending;	/* recorded, waiting for a ready worker */
	unsigned start_failures;
	uint64_t respawn_timer;
	struct ladder ladder;	/* the running cell's deadline */
	uint64_t cpu0_us;	/* the worker's CPU at the last sample */
	struct procstat ps;	/* the live worker's /proc files */
	/* a cell whose worker died, finished once a fresh one is ready;
	 * its detail is written then, from its death (dead_why, or the
	 * ladder's text) and the world's loss (dead_world: 1 said before
	 * what others added to the detail since, 2 after) */
	struct cell *dead;
	char dead_why[512];	/* its death, or (dead_ladder) ladder_why */
	int dead_ladder;	/* the ladder's kill: ladder_text writes it */
	int dead_world;
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
	/* why the running cell has no snapshot by policy, or NULL: the
	 * worker was asked (its answer says) */
	const char *snap_refused;
	/* told of a worker's death at once (runner_on_death) */
	void (*death_fn)(void *ctx, struct cell *c);
	void *death_ctx;
	struct egress *egress;	/* --network proxy, or NULL */
	char netdesc[1024];	/* runner_network_desc's */
	/* --workspace-size (wsguard.c): the walk under way, what the last
	 * complete one found, what the workspace may hold (the size, or
	 * what it held over it), a kill of ours whose death is awaited
	 * (walks judge nothing until it came and the workspace was
	 * measured again), and whether a cell ran since (a walk that fails
	 * kills only a worker that has run one: a fresh one writes nothing) */
	struct wsguard {
		char *path;		/* the workspace, resolved */
		struct dirsize *walk;	/* NULL between walks */
		uint64_t timer;
		uint64_t cost_us;	/* the walk's slices, so far */
		uint64_t due_us;	/* the next walk, unless sooner */
		uint64_t bytes;
		uint64_t ref_free;	/* its filesystem's free bytes then */
		uint64_t bound;
		int killing;
		int ran;		/* a cell was sent since the kill */
	} ws;
};

/* egressrun.c: the egress proxy once the jail exists (0: made, or not
 * asked for; -1: asked for and impossible, logged); listening in a
 * rebuilt jail's new namespace; freed. */
int egressrun_new(struct runner *r);
void egressrun_relisten(struct runner *r);
void egressrun_free(struct runner *r);

/* runner.c: held-back output and the record's texts, redacted; live
 * output of a stream (1 or 2) into the record and to the front end; the
 * cell waiting for a worker goes to it (the worker is ready). */
void runner_flush_output(struct runner *r, struct cell *c);
void runner_redact_detail(struct runner *r, struct cell *c);
void runner_feed_output(struct runner *r, int stream, const char *p,
    size_t n);
void runner_dispatch(struct runner *r);

/* ladder.c: the running cell's deadline from now (0 ms: at once, for a
 * cell ended early while it waited); cancelled; worker_ops.stack. */
void ladder_arm(struct runner *r, uint64_t ms);
void ladder_cancel(struct runner *r);
void ladder_stack(struct worker *w, void *ctx);
/* ladder.c: why the ladder ran ("exceeded its 2 s timeout", "was ended
 * early by the operator"), and a timed-out cell's detail from it and
 * the record's stage and namespace (written when the record is done). */
void ladder_why(const struct runner *r, char *buf, size_t len);
void ladder_text(const struct cell *c, const char *why, char *buf,
    size_t len);

/* pool.c: worker_ops.ready and .death of both workers; the first start;
 * the standby is worth its start now (a worker died); a cell starts
 * (arm: the standby starts once it has run STANDBY_AFTER_MS) and ends
 * (disarm: a quick cell needs none). */
void pool_ready(struct worker *w, void *ctx);
void pool_death(struct worker *w, const struct worker_death *d,
    void *ctx);
int pool_start(struct runner *r);
void pool_standby_soon(struct runner *r);
void pool_standby_arm(struct runner *r);
void pool_standby_disarm(struct runner *r);

/* recovery.c: the record of the cell the worker died under (c; NULL:
 * between cells), or of the dead cell when the world died since; the
 * dead cell taken with its detail written (recovered_by still to be
 * said), or NULL; its record completed and finished (a fresh worker is
 * ready, or the run is ending). */
void recovery_record_death(struct runner *r, struct cell *c,
    const struct worker_death *d, int world_lost);
struct cell *recovery_take_dead(struct runner *r);
void recovery_finish_dead(struct runner *r);
/* recovery.c: a death said in one line (worker_death). */
void recovery_describe(const struct worker_death *d, char *buf,
    size_t len);

/* snapshot.c: whether the cell about to run gets one (asks the worker;
 * 1: wait for its answer, ops.snapped, before EXEC); the record's note
 * on it; the rollback at a death (0: the snapshot takes over; -1: it
 * cannot, the record says the namespace is lost); the namespace lost
 * after all (the promoted snapshot died before its READY). */
int snapshot_before(struct runner *r, struct cell *c);
void snapshot_note(struct runner *r, struct cell *c);
int snapshot_roll_back(struct runner *r, struct cell *c,
    const struct worker_death *d);
void snapshot_lost(struct runner *r, struct cell *c);

/* hostserve.c: worker_ops.request; ends a waiting input() (the UI goes on). */
void hostserve_request(struct worker *w, const struct msg_request *q,
    void *ctx);
void hostserve_input_stop(struct runner *r);

/* wsguard.c: --workspace-size: the workspace measured now (0, or -1
 * logged: it cannot be) and again and again while the run lives, the
 * worker's tree killed when it grows past its size; the cells' worker
 * died (after such a kill: what the workspace holds now is measured, the
 * bound from then on); the walks ended. */
int wsguard_start(struct runner *r);
void wsguard_death(struct runner *r);
void wsguard_free(struct runner *r);

/* nscells.c: the cells in the namespace: a new worker has none; a cell
 * that ran is added; the record gets the set as text ("1-3,5"). */
void nscells_reset(struct runner *r);
void nscells_add(struct runner *r, uint32_t n);
void nscells_record(struct runner *r, struct cell *c);

#endif
