/*
 * runner.h - runs cells one at a time in a supervised worker.
 *
 * Owns the worker and the cell history. The front end (agentz exec, the
 * agent loop) hands it one cell at a time and hears back when the record
 * is complete; the runner handles everything in between: waiting for a
 * ready worker, output capture, the worker dying mid-cell (the record says
 * crashed/protocol/memory, a fresh worker is started), respawn with
 * backoff, a worker that cannot start at all (fatal, after a few tries),
 * and the escalating per-cell deadline: SIGINT (KeyboardInterrupt) at the
 * deadline, then after the grace period a faulthandler dump of every
 * thread's stack and SIGKILL of the whole worker tree. The record of a
 * cell whose worker died is completed once a fresh worker is ready.
 * Host requests the runner does not serve itself go to the front end.
 */
#ifndef AGENTZ_RUNNER_H
#define AGENTZ_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "supervisor/cells/cells.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/workers.h"

struct egress;
struct egress_event;

struct runner;

/* When a cell gets a snapshot to roll back to should it be killed. */
enum snapshot_policy {
	SNAPSHOT_AUTO,		/* agent cells; exec: after a long cell or
				 * in a large namespace */
	SNAPSHOT_ALWAYS,
	SNAPSHOT_NEVER
};

struct runner_config {
	struct worker_config worker;
	const struct jail_config *jail;	/* the worker's world; NULL = none */
	size_t output_limit;		/* per cell, head + tail */
	unsigned max_start_failures;	/* consecutive deaths before READY */
	int input_fd;			/* for input(); -1: always EOFError */
	const struct redact *red;	/* secrets to clean, NULL = none */
	uint64_t cell_timeout_ms;	/* wall clock per cell, 0 = none */
	uint64_t grace_ms;		/* interrupt -> stack dump + kill */
	enum snapshot_policy snapshot;
	int snapshot_every_cell;	/* AUTO takes one before every cell
					 * (agent runs: each follows a model
					 * call of seconds) */
	/* The front end's UI steps aside (1) while input() waits for a
	 * line on input_fd and comes back (0) after; NULL = no UI. */
	void (*pause_ui)(int paused);
	/* --network proxy: the egress policy's entries, NULL-ended (NULL:
	 * none; checked by the front end, policy.h) */
	const char *const *allow_hosts;
	const char *const *deny_hosts;
	int network_ask;		/* hold an unlisted host for approval */
	uint64_t max_egress_bytes;	/* both ways; 0: none */
	uint64_t workspace_size;	/* bytes it may hold; 0: no bound */
	uint64_t approval_ms;		/* then refused */
};

/* The steps of the running cell's deadline ladder (run/ladder.c); the
 * last three are told to the front end (runner_ops.kill). */
enum ladder_step {
	LADDER_OFF,		/* no deadline timer (no cell, or none) */
	LADDER_ARMED,		/* the deadline timer runs */
	LADDER_INTERRUPTED,	/* SIGINT sent; the grace timer runs */
	LADDER_DUMPING,		/* stack dump asked; the kill timer runs */
	LADDER_KILLED		/* SIGKILL sent: the death follows */
};

struct runner_ops {
	/* Live output of the running cell (c NULL between cells). */
	void (*output)(void *ctx, const struct cell *c, int stream,
	    const char *p, size_t n);
	/* The record of c is complete. */
	void (*finished)(void *ctx, struct cell *c);
	/* A request the runner does not serve; answer with runner_reply. */
	void (*request)(void *ctx, struct cell *c,
	    const struct msg_request *r);
	/* The worker cannot be started: the run must end. */
	void (*fatal)(void *ctx, const char *why);
	/* A step of c's deadline ladder: LADDER_INTERRUPTED (SIGINT),
	 * LADDER_DUMPING (the grace ran out: the stack dump),
	 * LADDER_KILLED (SIGKILL of the tree); why in one line. NULL: not
	 * wanted. */
	void (*kill)(void *ctx, const struct cell *c, enum ladder_step step,
	    const char *why);
	/* --network proxy: a connection allowed, refused or closed. NULL:
	 * not wanted. */
	void (*net)(void *ctx, const struct egress_event *ev);
};

/*
 * NULL on ENOMEM, or (logged, naming what is missing) when the worker's
 * world is required and cannot be built.
 */
struct runner *runner_new(struct loop *l, const struct runner_config *c,
    const struct runner_ops *ops, void *ctx);
void runner_free(struct runner *r);

/* Starts the first worker. 0, or -1 with errno. */
int runner_start(struct runner *r);

/*
 * Records a new cell and runs it as soon as a worker is ready. Only one
 * cell at a time: EBUSY while one is running. Returns the record (owned
 * by the history), or NULL with errno.
 */
struct cell *runner_run(struct runner *r, const char *code, size_t len,
    const char *summary, const char *source, int64_t generated_by);

/*
 * No cell follows the one recorded last (agentz exec's last): no warm
 * standby is started for what cannot come. A death of the last cell is
 * still recovered by a fresh worker before its record completes.
 */
void runner_last_cell(struct runner *r);

/*
 * fn(ctx, c) runs as soon as the worker is found dead or killed, before
 * a fresh one is started: c is the cell it was running (outputs filled,
 * detail may be amended; ops.finished comes once a fresh worker is
 * ready) or NULL between cells. NULL fn for none.
 */
void runner_on_death(struct runner *r, void (*fn)(void *ctx,
    struct cell *c), void *ctx);

/* Answers a request forwarded through ops.request (REPLY_OK/ERROR). */
int runner_reply(struct runner *r, uint64_t id, uint32_t status,
    const char *body, size_t len);
/*
 * Answers request id with REPLY_ERROR and the body {"type", "message"}:
 * the exception the cell sees. A reply that cannot be built or sent is
 * dropped (the channel is failing; the worker's death follows).
 */
void runner_reply_error(struct runner *r, uint64_t id, const char *type,
    const char *message);
/* Streams one EVENT for a request before its REPLY. */
int runner_event(struct runner *r, uint64_t id, const char *body,
    size_t len);

/*
 * Gives the running cell the timeout treatment now (the deadline ladder:
 * interrupt, grace, stack dump, kill); its record says it was ended early
 * by who ("the operator"); a cell waiting for its worker gets it as it
 * starts. 0, or -1 with errno ENOENT (no cell) or EALREADY (its ladder
 * has begun).
 */
int runner_expire(struct runner *r, const char *who);
/*
 * The run is stopping (why: its reason, one line): the cell that has an
 * input record but no output yet - running, waiting for its worker, or
 * killed and waiting for a fresh one - is taken from the runner with its
 * record finished (a running or waiting one as error "stopped", its
 * output so far flushed; a dead one as its death said). ops.finished
 * does not run for it. Returns it, or NULL when there is none; call
 * until NULL.
 */
struct cell *runner_cut(struct runner *r, const char *why);
/* The pid of the run's jail init (its workers' PID namespace), 0: none. */
pid_t runner_jail_pid(const struct runner *r);

struct cells *runner_cells(struct runner *r);
struct cell *runner_current(struct runner *r);	/* running cell or NULL */
/* 1 while a cell runs or waits for a worker (each has its own deadline:
 * the cell's timeout, the worker's ready timeout). */
int runner_busy(const struct runner *r);
struct cell *runner_last(struct runner *r);	/* newest or NULL */
const struct worker *runner_worker(const struct runner *r);
/* Active containment mechanisms, e.g. "cgroup-v1,pid-namespace,...". */
const char *runner_containment(const struct runner *r);
/* Which ceilings hold and how: "memory cgroup 4672 MiB (RLIMIT_DATA
 * 4096 MiB); processes cgroup and RLIMIT_NPROC 1024; /tmp and /dev/shm
 * 1024 MiB each", or per process only where no cgroup is given. */
const char *runner_limits(const struct runner *r);
/* What the worker's world has, e.g. "mountns,pidns,...", or "none (why)". */
const char *runner_isolation(const struct runner *r);
/* The worker's network: "none" (a namespace of its own, only lo),
 * "proxy" (the same, and the egress proxy) or "host" (--network host,
 * or no jail). */
const char *runner_network(const struct runner *r);
/* The egress proxy (--network proxy), or NULL. */
struct egress *runner_egress(struct runner *r);
/* runner_network, and for a proxy its address and policy: "proxy
 * http://127.0.0.1:3128 (allow: pypi.org; deny: ...)". Valid until the
 * next call. */
const char *runner_network_desc(struct runner *r);
/*
 * A signal from sig.h: SIGCHLD reaps orphans reparented to us and returns
 * -1 (carry on); any other returns the exit status to stop with (130 for
 * SIGINT, 128 + signo otherwise).
 */
int runner_signal(struct runner *r, int signo);

#endif
