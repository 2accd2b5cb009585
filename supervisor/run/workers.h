/*
 * workers.h - one agentz-worker process: spawn, control channel, output
 * pipes, death detection and kill.
 *
 * The owner drives it through a few calls and hears back through
 * struct worker_ops. A misbehaving worker (garbage on the channel, a frame
 * in the wrong state, no READY in time) is killed and reported as a death
 * with a reason; nothing it does is fatal to the supervisor.
 */
#ifndef AGENTZ_WORKERS_H
#define AGENTZ_WORKERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "sandbox/contain.h"
#include "sandbox/jail.h"
#include "supervisor/loop/loop.h"

enum worker_state {
	WORKER_DOWN,		/* no process */
	WORKER_STARTING,	/* spawned, waiting for READY */
	WORKER_IDLE,		/* ready for a cell */
	WORKER_BUSY,		/* running a cell */
	WORKER_DYING		/* killed or exiting, not yet reaped */
};

struct worker;

/* Why a worker died, as far as we know (worker_death.reason says more). */
enum worker_death_cause {
	DEATH_UNSAID,		/* exited or signalled, not by a kill of ours
				 * with a reason (the deadline's SIGKILL too) */
	DEATH_KILLED,		/* our kill, for `reason` */
	DEATH_PROTOCOL		/* our kill for a protocol error */
};

/* What became of the snapshot asked for before the last cell. */
enum worker_snap {
	WSNAP_TAKEN,		/* it is there, to be spared at a kill */
	WSNAP_NONE,		/* none: worker_snapshot_why says why */
	WSNAP_KILLED,		/* it was, but died before it was needed */
	WSNAP_WORLD_LOST	/* it was, and went with the run's namespace
				 * init */
};

struct worker_death {
	int exited;		/* 1: exit code valid, 0: signal valid */
	int code;
	int signal;
	int during_cell;	/* the worker died while running `cell` */
	uint32_t cell;
	int before_ready;	/* died before READY */
	enum worker_death_cause cause;
	const char *reason;	/* our reason for killing it, or NULL */
	struct rusage ru;
	struct contain_stats cg;	/* the worker's cgroup at its death */
	/* the worker's own CPU and peak RSS: from /proc just before our
	 * kill (a killed namespace init never reaps the worker), else from
	 * wait4 of what we forked */
	uint64_t cpu_us;
	long peak_kb;
	const char *stack;		/* faulthandler dump, or NULL */
	/* the snapshot taken before `cell` survived (worker_promote) */
	int snapshot;
	const char *threads_lost;	/* its missing threads, or NULL */
};

struct worker_ops {
	void (*ready)(struct worker *w, void *ctx);
	/* stream: 1 stdout, 2 stderr. */
	void (*output)(struct worker *w, int stream, const char *p, size_t n,
	    void *ctx);
	void (*done)(struct worker *w, const struct msg_done *d, void *ctx);
	void (*request)(struct worker *w, const struct msg_request *r,
	    void *ctx);
	void (*death)(struct worker *w, const struct worker_death *d,
	    void *ctx);
	/* Stack-dump bytes arrived (after worker_dump_stacks). */
	void (*stack)(struct worker *w, void *ctx);
	/* The answer to worker_snapshot: the cell's EXEC may go now. */
	void (*snapped)(struct worker *w, void *ctx);
};

/* The worker's seccomp profile (--sandbox), in the order of the names
 * below. */
enum sandbox_profile { SANDBOX_OFF, SANDBOX_DEFAULT, SANDBOX_STRICT };

/* The profiles' names, as agentz and agentz-worker take them on their
 * command lines, in the enum's order; NULL-terminated. */
extern const char *const worker_sandbox_names[];

struct worker_config {
	const char *path;		/* agentz-worker executable */
	enum sandbox_profile sandbox;
	int sandbox_debug;
	size_t max_frame;
	size_t output_limit;		/* a traceback's head + tail, 0 none */
	const char *const *pass_env;	/* extra variable names, NULL-ended */
	const char *const *set_env;	/* "NAME=value" set for the worker
					 * (over the host's), NULL-ended */
	uint64_t ready_timeout_ms;
	struct contain *contain;	/* cgroups etc.; owned by the caller */
	struct jail *jail;		/* the run's world; owned by the caller;
					 * NULL or inactive = none */
	struct contain_limits limits;	/* rlimits for the child */
	uint64_t data_limit;		/* RLIMIT_DATA set by the worker, 0 none */
	int pidns;			/* try a PID namespace */
	unsigned *generations;		/* the run's counter, shared by its
					 * workers (NULL: this worker's own) */
};

struct worker *worker_new(struct loop *l, const struct worker_config *c,
    const struct worker_ops *ops, void *ctx);
/* Kills (if running), reaps and frees. Accepts NULL. */
void worker_free(struct worker *w);

/* Starts a process (state must be DOWN). 0, or -1 with errno. */
int worker_spawn(struct worker *w);
/* Sends EXEC (state must be IDLE; becomes BUSY). 0, or -1 with errno. */
int worker_exec(struct worker *w, uint32_t cell, const char *code,
    size_t len);
/* Sends REPLY / EVENT for a request. 0, or -1 with errno. */
int worker_reply(struct worker *w, uint64_t id, uint32_t status,
    const char *body, size_t len);
int worker_event(struct worker *w, uint64_t id, const char *body,
    size_t len);
/*
 * Reads what the worker's stdout and stderr pipes hold now (at most one
 * pipe's capacity each) and hands it to ops.output, so output written
 * before a request is shown before what answers the request.
 */
void worker_drain_output(struct worker *w);
/*
 * Asks the worker for a snapshot before `cell` (state IDLE; needs the
 * run's jail). Its answer comes through ops.snapped (a snapshot, or
 * worker_snapshot_why says why none); send the cell's EXEC then, so the
 * snapshot is set up before the cell can reach it. A kill of the cell
 * spares the snapshot, and the death says so (worker_death.snapshot).
 * 0, or -1 with errno.
 */
int worker_snapshot(struct worker *w, uint32_t cell);
/* Forgets the snapshot a death spared (its world is gone: it cannot
 * take over). */
void worker_drop_snapshot(struct worker *w);
/* The last cell's snapshot, and why none (WSNAP_NONE; else ""). */
enum worker_snap worker_snapshot_state(const struct worker *w);
const char *worker_snapshot_why(const struct worker *w);
/*
 * After a death whose snapshot survived (state DOWN): the snapshot
 * becomes the worker (state STARTING until its READY). 0, or -1 with
 * errno (ESRCH: the snapshot is gone; then spawn as usual).
 */
int worker_promote(struct worker *w);
/*
 * The run's other worker (a warm standby, or the one it stands by for):
 * w's kills and sweeps spare it and its snapshot. NULL = none.
 */
void worker_set_sibling(struct worker *w, const struct worker *sib);
/* SIGINT to the worker (the running cell sees KeyboardInterrupt). */
int worker_interrupt(struct worker *w);
/* SIGKILL to the worker's whole process tree; death is reported later
 * (cause DEATH_KILLED with reason, DEATH_UNSAID without). */
void worker_kill(struct worker *w, const char *reason);
/*
 * Kills every process the worker's cells started, sparing the worker (in
 * a jail only: its init stops them all first). 0, or -1 with errno.
 */
int worker_sweep(struct worker *w);
/*
 * Asks the worker's faulthandler for every thread's stack (read from the
 * dump pipe; reported with the death).
 */
int worker_dump_stacks(struct worker *w);

enum worker_state worker_state(const struct worker *w);
pid_t worker_python_pid(const struct worker *w);
/* The process we forked: the worker, or the init of its PID namespace. */
pid_t worker_spawner_pid(const struct worker *w);
unsigned worker_generation(const struct worker *w);
uint64_t worker_spawn_ready_us(const struct worker *w);
const char *worker_python_version(const struct worker *w);
const char *worker_sandbox(const struct worker *w);

#endif
