/*
 * workers_impl.h - the inside of struct worker, shared by the four files
 * that implement workers.h and by nothing else:
 *
 *   workers.c  lifecycle: new/free, spawn set-up, death (reap, kill)
 *   wspawn.c   the fork/exec path (async-signal-safe in the child)
 *   wout.c     the output pipes and the stack-dump pipe
 *   wchan.c    the control channel: framing, slices, backpressure
 *
 * May include: workers.h and what it includes, proto/. No one outside
 * those four files includes this header.
 */
#ifndef AGENTZ_WORKERS_IMPL_H
#define AGENTZ_WORKERS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "supervisor/loop/loop.h"
#include "supervisor/run/workers.h"

struct worker {
	struct loop *loop;
	struct worker_config cfg;
	struct worker_ops ops;
	void *ctx;
	enum worker_state state;
	pid_t pid;
	pid_t wpid;		/* the worker itself (pid is its ns init) */
	pid_t ns_pid;		/* the worker as its namespace sees it */
	int exe;		/* agentz-worker, opened at start-up */
	int pidfd, chan, out, err, dump, status;
	int pidns_state;	/* 0 untried, 1 works, -1 refused */
	struct frame_rx rx;
	int starved;		/* rx holds no frame we can handle yet */
	uint64_t more_timer;	/* continues buffered frames next turn */
	struct buf outq;
	struct buf stack;	/* faulthandler dump (bounded) */
	unsigned generation;
	uint64_t spawned_us, ready_us;
	uint64_t ready_timer;
	uint32_t cell;
	char *kill_reason;
	int sampled;		/* kill_cpu_us/kill_peak_kb are set */
	uint64_t kill_cpu_us;
	long kill_peak_kb;
	char python_version[32];
	char sandbox[64];
};

/* wspawn.c: descriptors for a new worker (ours[6]/theirs[6]: chan, out,
 * err, dump, sync, status), closing them, and the fork (0 in the parent
 * with w->pid set, -1 with errno; the child never returns). */
int wspawn_make_fds(int *ours, int *theirs);
void wspawn_close_fds(int *fds, size_t n);
int wspawn_fork(struct worker *w, const int *theirs);

/* wout.c: the loop callbacks of the output and dump pipes; everything the
 * output pipes hold (before a DONE or a death); the dump pipe's bytes. */
void wout_pipe_event(struct loop *l, int fd, short revents, void *ctx);
void wout_dump_event(struct loop *l, int fd, short revents, void *ctx);
void wout_drain_all(struct worker *w);
void wout_read_dump(struct worker *w);

/* wchan.c: the channel's loop callback; handles a slice of the frames
 * buffered (also called at death to handle the ones left). */
void wchan_event(struct loop *l, int fd, short revents, void *ctx);
void wchan_process(struct worker *w);

#endif
