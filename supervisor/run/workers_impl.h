/*
 * workers_impl.h - the inside of struct worker, shared by the five files
 * that implement workers.h and by nothing else:
 *
 *   workers.c  lifecycle: new/free, spawn set-up, death (reap, kill)
 *   wspawn.c   the fork/exec path (async-signal-safe in the child)
 *   wout.c     the output pipes and the stack-dump pipe
 *   wchan.c    the control channel: framing, slices, backpressure
 *   wsnap.c    snapshots: SNAP/SNAPPED and its checks, sparing one at a
 *              kill, promotion
 *
 * May include: workers.h and what it includes, proto/. No one outside
 * those five files includes this header.
 */
#ifndef AGENTZ_WORKERS_IMPL_H
#define AGENTZ_WORKERS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "supervisor/loop/loop.h"
#include "supervisor/run/workers.h"

/* the worker's children listed at a SNAP (more are not compared) */
#define WSNAP_BEFORE_MAX 256

struct worker {
	struct loop *loop;
	struct worker_config cfg;
	struct worker_ops ops;
	void *ctx;
	enum worker_state state;
	/* A worker's processes, by host pid unless named _ns_ (0: none):
	 * spawner_pid: the process we forked: the spawner that waits for
	 *   the worker and passes its status on (init of the worker's PID
	 *   namespace, or in the jail a process under the jail's init), or
	 *   the worker itself without a PID namespace and once adopted;
	 *   what we wait4, kill as a group and watch by pidfd.
	 * python_pid: the worker itself, the process running Python
	 *   (spawner_pid until READY says better); what SIGINT, the stack
	 *   dump signal and /proc sampling go to.
	 * python_ns_pid: the same process as its PID namespace sees it
	 *   (READY's pid); what a jail kill spares or sweeps by.
	 * snap.host_pid / snap.ns_pid: the snapshot, a frozen fork of the
	 *   worker, as the host and as the jail see it. */
	pid_t spawner_pid;
	pid_t python_pid;
	pid_t python_ns_pid;
	int exe;		/* agentz-worker, opened at start-up */
	int pidfd, chan, out, err, dump, status;
	/* The output socket (proto.h WORKER_OUT_FD) and the read ends of the
	 * pipes waiting there for after the worker's next DONE; all three
	 * outlive a death, for a promoted snapshot (-1: none). */
	int outsock, next_out, next_err;
	int pidns_state;	/* 0 untried, 1 works, -1 refused */
	struct frame_rx rx;
	int starved;		/* rx holds no frame we can handle yet */
	uint64_t more_timer;	/* continues buffered frames next turn */
	struct buf outq;
	struct buf stack;	/* faulthandler dump (bounded) */
	unsigned generation;
	uint64_t spawned_us, ready_us;
	uint64_t ready_timer;
	uint64_t killed_timer;	/* a confirmed kill's death, next turn */
	uint32_t cell;
	char *kill_reason;
	enum worker_death_cause kill_cause;
	int sampled;		/* kill_cpu_us/kill_peak_kb are set */
	uint64_t kill_cpu_us;
	long kill_peak_kb;
	char python_version[32];
	char sandbox[64];
	int spare;		/* our end of the spare socket, or -1 */
	struct contain_group *cg;	/* this worker's cgroup, or NULL */
	const struct worker *sib;	/* the run's other worker, or NULL */
	int adopted;		/* a promoted snapshot: not our child */
	unsigned world;		/* the jail's rebuilds when it started: a
				 * worker of a lost world never kills in
				 * the new one */
	uint64_t oom_base;	/* the group's OOM kills when adopted */
	struct wsnap {
		pid_t host_pid, ns_pid;	/* see above; 0: none */
		int pidfd;
		uint32_t cell;
		char *threads;		/* names of the threads it lacks */
		char oom[16];		/* its oom_score_adj as forked (the
					 * worker's), restored at promotion */
		enum worker_snap state;
		char why[192];		/* why there is none, or "" */
		/* the SNAP out (its one SNAPPED not yet read): when it
		 * was sent, in clock ticks since boot, and the worker's
		 * children then; a snapshot must be born after both */
		int asked;
		unsigned long long asked_ticks;
		int nbefore;
		pid_t before[WSNAP_BEFORE_MAX];
	} snap;
};

/* wspawn.c: descriptors for a new worker (ours[8]/theirs[8]: chan, out,
 * err, dump, sync, status, spare, outsock), closing them, and the fork (0
 * in the parent with w->spawner_pid set, -1 with errno; the child never
 * returns). */
#define WSPAWN_NFDS 8
int wspawn_make_fds(int *ours, int *theirs);
void wspawn_close_fds(int *fds, size_t n);
int wspawn_fork(struct worker *w, const int *theirs);

/* wout.c: the loop callbacks of the output and dump pipes; everything the
 * output pipes hold (before a DONE or a death); the dump pipe's bytes. */
void wout_pipe_event(struct loop *l, int fd, short revents, void *ctx);
void wout_dump_event(struct loop *l, int fd, short revents, void *ctx);
void wout_drain_all(struct worker *w);
void wout_read_dump(struct worker *w);
/* wout.c: the next cell's pipes sent on the output socket (0, or -1 with
 * errno: then the worker keeps its pipes); at a DONE, the finished cell's
 * pipes closed and the waiting ones read instead, the next ones sent;
 * the output socket and the waiting pipes closed (a new spawn). */
int wout_send_next(struct worker *w);
void wout_rotate(struct worker *w, int surely);
void wout_close_socket(struct worker *w);

/* wchan.c: the channel's loop callback; handles a slice of the frames
 * buffered (also called at death to handle the ones left). */
void wchan_event(struct loop *l, int fd, short revents, void *ctx);
void wchan_process(struct worker *w);
void wchan_drain(struct worker *w);
/* workers.c: the generation the next process of w gets. */
unsigned wworker_next_gen(const struct worker *w);
/* wsnap.c: the pid as the innermost PID namespace sees it, or 0. */
pid_t wsnap_ns_pid_of(pid_t pid);
/* Queues a frame to the worker. 0, or -1 with errno. */
int wchan_send(struct worker *w, const struct msg *m);
/* workers.c: the struct takes a promoted snapshot as its process
 * (ours: the descriptors made for it; sync and status closed). */
void wworker_adopt(struct worker *w, const int *ours, pid_t pid,
    pid_t ns_pid, int pidfd);

/* wsnap.c: a SNAPPED frame; whether the snapshot of the running cell is
 * alive to be spared; forgetting it (its worker discards it); the pid a
 * jail kill spares (0: none); the exit status of an adopted worker. */
void wsnap_on_snapped(struct worker *w, const struct msg_snapped *s);
/* wsnap.c: whether a SNAPPED now answers our SNAP; if not, one of the
 * two is forged: the snapshot taken, if any, is refused (not spared). */
int wsnap_expected(struct worker *w);
int wsnap_alive(struct worker *w);
void wsnap_forget(struct worker *w);
pid_t wsnap_spare(struct worker *w);
void wsnap_adopted_status(struct worker *w, int *status,
    struct rusage *ru);

#endif
