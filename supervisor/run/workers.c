/*
 * workers.c - one agentz-worker process (see workers.h): its lifecycle.
 *
 * Owns: worker_new/free, setting up a spawn (cgroup, the go byte, the
 * watchers, the READY timer) around wspawn.c's fork, and death: a pidfd
 * is watched, so a death between cells is seen at once and a grandchild
 * holding our pipes open cannot make us wait; the frames and output sent
 * before the death are handled before the owner hears of it.
 * The fork/exec path is in wspawn.c, the pipes in wout.c, the control
 * channel in wchan.c; struct worker is in workers_impl.h.
 *
 * May include: workers_impl.h, procstat.h, sandbox/ (contain, jail),
 * common/log.h.
 */
#include "supervisor/run/workers_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/run/procstat.h"

static void pidfd_event(struct loop *l, int fd, short revents, void *ctx);
static void killed_event(struct loop *l, void *ctx);

/* How reap() learns of the death. */
enum reap_how {
	REAP_WAIT,		/* wait4 until it exits (no pidfd to watch) */
	REAP_PIDFD,		/* the pidfd is readable: wait4, WNOHANG */
	REAP_CONFIRMED		/* the jail's init confirmed our SIGKILL: no
				 * wait for the exit itself */
};
static void ready_timeout(struct loop *l, void *ctx);

struct worker *
worker_new(struct loop *l, const struct worker_config *c,
    const struct worker_ops *ops, void *ctx)
{
	struct worker *w = calloc(1, sizeof *w);

	if (w == NULL)
		return NULL;
	w->loop = l;
	w->cfg = *c;
	w->ops = *ops;
	w->ctx = ctx;
	w->pidfd = w->chan = w->out = w->err = w->dump = w->status = -1;
	w->spare = w->snap.pidfd = -1;
	w->outsock = w->next_out = w->next_err = -1;
	/* workers start from this descriptor: a path swapped later
	 * changes nothing */
	w->exe = open(c->path, O_PATH | O_CLOEXEC);
	buf_init(&w->outq);
	buf_init(&w->stack);
	frame_rx_init(&w->rx, c->max_frame);
	w->starved = 1;
	return w;
}

enum worker_state
worker_state(const struct worker *w)
{
	return w->state;
}

pid_t
worker_python_pid(const struct worker *w)
{
	return w->python_pid;
}

pid_t
worker_spawner_pid(const struct worker *w)
{
	return w->spawner_pid;
}

unsigned
worker_generation(const struct worker *w)
{
	return w->generation;
}

uint64_t
worker_spawn_ready_us(const struct worker *w)
{
	return w->ready_us > w->spawned_us ? w->ready_us - w->spawned_us : 0;
}

const char *
worker_python_version(const struct worker *w)
{
	return w->python_version;
}

const char *
worker_sandbox(const struct worker *w)
{
	return w->sandbox;
}

static int
watch_all(struct worker *w)
{
	int fl[4] = { w->chan, w->out, w->err, w->dump };
	size_t i;

	for (i = 0; i < 4; i++)
		if (fcntl(fl[i], F_SETFL, O_NONBLOCK) < 0)
			return -1;
	if (loop_watch(w->loop, w->chan, POLLIN, wchan_event, w) < 0 ||
	    loop_watch(w->loop, w->out, POLLIN, wout_pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->err, POLLIN, wout_pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->dump, POLLIN, wout_dump_event, w) < 0 ||
	    loop_watch(w->loop, w->pidfd, POLLIN, pidfd_event, w) < 0)
		return -1;
	w->ready_timer = loop_timer(w->loop, w->cfg.ready_timeout_ms,
	    ready_timeout, w);
	return 0;
}

/* Parent: cgroup, then the go byte. A failure kills the child. */
static int
release_child(struct worker *w, int sync)
{
	int rc = 0;

	if (w->cg != NULL &&
	    contain_group_attach(w->cg, w->spawner_pid) < 0) {
		log_warn("cannot move worker %ld into its cgroup",
		    (long)w->spawner_pid);
		rc = -1;
	} else if (write(sync, "g", 1) != 1) {
		rc = -1;
	}
	(void)close(sync);
	return rc;
}

static void
reset_state(struct worker *w, const int *ours)
{
	w->chan = ours[0], w->out = ours[1], w->err = ours[2];
	w->dump = ours[3];
	w->status = ours[5];
	if (w->spare >= 0)
		(void)close(w->spare);
	w->spare = ours[6];
	/* a promoted snapshot keeps the output socket (ours[7] -1) */
	if (ours[7] >= 0) {
		wout_close_socket(w);
		w->outsock = ours[7];
	}
	w->python_pid = w->spawner_pid;	/* until READY tells us better */
	w->python_ns_pid = 0;
	w->generation = wworker_next_gen(w);
	if (w->cfg.generations != NULL)
		*w->cfg.generations = w->generation;
	w->ready_us = 0;
	w->kill_cause = DEATH_UNSAID;
	w->state = WORKER_STARTING;
	frame_rx_clear(&w->rx);
	frame_rx_init(&w->rx, w->cfg.max_frame);
	w->starved = 1;
	buf_clear(&w->outq);
	buf_clear(&w->stack);
}

int
worker_spawn(struct worker *w)
{
	int ours[WSPAWN_NFDS], theirs[WSPAWN_NFDS];

	if (w->state != WORKER_DOWN) {
		errno = EBUSY;
		return -1;
	}
	/* never into dead namespaces, nor without the jail it had */
	if (jail_lost(w->cfg.jail)) {
		errno = ESRCH;
		return -1;
	}
	if (w->cg == NULL && contain_has_cgroup(w->cfg.contain) &&
	    (w->cg = contain_group_new(w->cfg.contain,
	    wworker_next_gen(w))) == NULL)
		log_warn("worker cgroup set-up failed; continuing without");
	w->world = jail_rebuilds(w->cfg.jail);
	if (wspawn_make_fds(ours, theirs) < 0 || wspawn_fork(w, theirs) < 0) {
		wspawn_close_fds(ours, WSPAWN_NFDS);
		wspawn_close_fds(theirs, WSPAWN_NFDS);
		return -1;
	}
	wspawn_close_fds(theirs, WSPAWN_NFDS);
	w->adopted = 0;
	reset_state(w, ours);
	(void)wout_send_next(w);	/* for after its first DONE */
	w->pidfd = (int)syscall(SYS_pidfd_open, w->spawner_pid, 0);
	if (release_child(w, ours[4]) < 0 || w->pidfd < 0 || watch_all(w) < 0)
		worker_kill(w, "cannot set up the new worker");
	return 0;
}

void
wworker_adopt(struct worker *w, const int *ours, pid_t pid, pid_t ns_pid,
    int pidfd)
{
	struct contain_stats st;

	w->spawned_us = loop_now_us();
	reset_state(w, ours);
	w->spawner_pid = w->python_pid = pid;
	w->python_ns_pid = ns_pid;
	w->pidfd = pidfd;
	w->adopted = 1;
	w->oom_base = 0;
	if (w->cg != NULL) {
		contain_group_stats(w->cg, &st);
		w->oom_base = st.oom_kills;
	}
	if (watch_all(w) < 0)
		worker_kill(w, "cannot set up the promoted snapshot");
}

/* --- death ------------------------------------------------------------ */

/* The jail w lives in is the run's now (not one whose init died and
 * was rebuilt since: everything of that world is dead already, and a
 * kill in the new one would reach the workers starting there). */
static int
in_jail(const struct worker *w)
{
	return jail_active(w->cfg.jail) && !jail_lost(w->cfg.jail) &&
	    jail_rebuilds(w->cfg.jail) == w->world;
}

/* The jail's kill, sparing sp[n]; said at -vv. */
static int
jail_kill_logged(struct worker *w, const char *where, pid_t *sp, size_t n)
{
	log_debug("%s: worker %ld (state %d) spares %zu: %ld %ld %ld", where,
	    (long)w->spawner_pid, (int)w->state, n, n > 0 ? (long)sp[0] :
	    0L, n > 1 ? (long)sp[1] : 0L, n > 2 ? (long)sp[2] : 0L);
	return jail_kill_spare(w->cfg.jail, sp, n);
}

unsigned
wworker_next_gen(const struct worker *w)
{
	return (w->cfg.generations != NULL ? *w->cfg.generations :
	    w->generation) + 1;
}

/* The jail's pid of the other worker (resolved through its spawner while
 * it starts), 0 when there is none. */
static pid_t
sibling_ns_pid(const struct worker *s)
{
	pid_t kid;

	if (s == NULL || s->state == WORKER_DOWN)
		return 0;
	if (s->python_ns_pid > 0)
		return s->python_ns_pid;
	if (s->spawner_pid > 0 &&
	    contain_children(s->spawner_pid, &kid, 1) == 1)
		return wsnap_ns_pid_of(kid);
	return 0;
}

/*
 * What a kill of w's processes spares in the jail (at most
 * JAIL_MAX_SPARE - 1, so a caller may add one): w's snapshot when
 * with_snapshot, the other worker and its snapshot. Returns the count.
 */
static size_t
spare_list(struct worker *w, int with_snapshot, pid_t *out)
{
	const struct worker *s = w->sib;
	size_t n = 0;
	pid_t p;

	if (with_snapshot && w->snap.ns_pid > 0)
		out[n++] = w->snap.ns_pid;
	if ((p = sibling_ns_pid(s)) > 0) {
		out[n++] = p;
		if (s->snap.ns_pid > 0)
			out[n++] = s->snap.ns_pid;
	}
	return n;
}

/* After a death: the jail's processes but those spared, and orphans
 * reparented to us but the jail's init and the other worker's spawner. */
static void
kill_rest(struct worker *w, int with_snapshot)
{
	pid_t spared[JAIL_MAX_SPARE], keep[2];

	if (in_jail(w))
		(void)jail_kill_logged(w, "rest", spared,
		    spare_list(w, with_snapshot, spared));
	keep[0] = jail_init_pid(w->cfg.jail);
	keep[1] = w->sib != NULL && w->sib->state != WORKER_DOWN ?
	    w->sib->spawner_pid : 0;
	(void)contain_sweep_except(keep, 2);
}

static void
close_all(struct worker *w)
{
	int *fds[6] = { &w->chan, &w->out, &w->err, &w->dump, &w->status,
	    &w->pidfd };
	size_t i;

	for (i = 0; i < 6; i++) {
		if (*fds[i] < 0)
			continue;
		loop_unwatch(w->loop, *fds[i]);
		(void)close(*fds[i]);
		*fds[i] = -1;
	}
	loop_timer_cancel(w->loop, w->ready_timer);
	w->ready_timer = 0;
	loop_timer_cancel(w->loop, w->killed_timer);
	w->killed_timer = 0;
	loop_timer_cancel(w->loop, w->more_timer);
	w->more_timer = 0;
}

static void
usage_at_death(const struct worker *w, struct worker_death *d)
{
	const struct rusage *ru = &d->ru;

	d->cpu_us = (uint64_t)ru->ru_utime.tv_sec * 1000000u +
	    (uint64_t)ru->ru_utime.tv_usec +
	    (uint64_t)ru->ru_stime.tv_sec * 1000000u +
	    (uint64_t)ru->ru_stime.tv_usec;
	d->peak_kb = ru->ru_maxrss;
	if (w->sampled && w->kill_cpu_us > d->cpu_us) {
		d->cpu_us = w->kill_cpu_us;
		d->peak_kb = w->kill_peak_kb;
	}
}

/*
 * The process we forked (the worker's spawner, init of its PID namespace
 * without a jail) ended without passing on the worker's status: killed
 * from outside, unless we killed it. The worker goes with it (its PID
 * namespace, or the sweep of the jail below): the death says so.
 */
static void
spawner_died(struct worker *w, int status)
{
	char why[160];

	if (w->state == WORKER_DYING || w->kill_reason != NULL ||
	    !WIFSIGNALED(status))
		return;
	(void)snprintf(why, sizeof why, "its spawner (pid %ld) died by "
	    "signal %d (%s), and the worker with it", (long)w->spawner_pid,
	    WTERMSIG(status), strsignal(WTERMSIG(status)));
	w->kill_reason = strdup(why);
	w->kill_cause = DEATH_KILLED;
}

static void
reap(struct worker *w, enum reap_how how)
{
	struct worker_death d;
	int status = 0, ws;
	pid_t r;

	memset(&d, 0, sizeof d);
	if (how == REAP_CONFIRMED) {
		/* SIGKILLed by the jail's init, which said it is done; the
		 * exit itself (a big worker's memory takes tens of ms to go)
		 * completes without us, and its spawner is swept below */
		status = SIGKILL;
	} else if (w->adopted) {
		/* not our child: its death came by pidfd, its status from
		 * the jail's init that reaped it */
		wsnap_adopted_status(w, &status, &d.ru);
	} else {
		do
			r = wait4(w->spawner_pid, &status,
			    how == REAP_PIDFD ? WNOHANG : 0, &d.ru);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			return;	/* pidfd readable but not yet waitable */
		if (r < 0)
			log_warn("reaping worker %ld", (long)w->spawner_pid);
	}
	/* With a namespace init, the worker's own status came by pipe. */
	if (how != REAP_CONFIRMED && w->status >= 0 &&
	    read(w->status, &ws, sizeof ws) == sizeof ws)
		status = ws;
	else if (how != REAP_CONFIRMED && w->status >= 0 && !w->adopted)
		spawner_died(w, status);
	/* frames it sent before dying still count (its DONE): the slices
	 * left for later turns are handled now */
	wchan_drain(w);
	wout_drain_all(w);
	wout_read_dump(w);
	/* the snapshot of the cell it died in survives, in its cgroup */
	d.snapshot = wsnap_spare(w) != 0 && wsnap_alive(w);
	if (w->cg != NULL) {
		contain_group_stats(w->cg, &d.cg);
		d.cg.oom_kills -= d.cg.oom_kills >= w->oom_base ?
		    w->oom_base : d.cg.oom_kills;
		if (!d.snapshot) {
			/* (after a confirmed kill only exiting tasks are
			 * left: freezing them would wait for their exit) */
			if (how != REAP_CONFIRMED)
				(void)contain_group_kill(w->cg);
			contain_group_free(w->cg);
			w->cg = NULL;
		}
	}
	/* What is left of this worker's tree: in the jail, everything but
	 * its init, the snapshot and the other worker; without one, orphans
	 * reparented to us. */
	kill_rest(w, d.snapshot);
	if (!d.snapshot)
		wsnap_forget(w);
	else
		d.threads_lost = w->snap.threads;
	close_all(w);
	if (w->stack.len > 0 && buf_append(&w->stack, "", 1) == 0)
		d.stack = (const char *)w->stack.data;
	d.exited = WIFEXITED(status);
	d.code = d.exited ? WEXITSTATUS(status) : 0;
	d.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	d.during_cell = w->state == WORKER_BUSY ||
	    (w->state == WORKER_DYING && w->cell != UINT32_MAX);
	d.cell = w->cell;
	d.before_ready = w->ready_us == 0;
	d.reason = w->kill_reason;
	d.cause = w->kill_reason != NULL ? w->kill_cause : DEATH_UNSAID;
	usage_at_death(w, &d);
	w->state = WORKER_DOWN;
	w->spawner_pid = w->python_pid = w->python_ns_pid = 0;
	w->adopted = 0;
	w->ops.death(w, &d, w->ctx);
	free(w->kill_reason);
	w->kill_reason = NULL;
	w->kill_cause = DEATH_UNSAID;
	w->sampled = 0;
}

static void
pidfd_event(struct loop *l, int fd, short revents, void *ctx)
{
	(void)l;
	(void)fd;
	(void)revents;
	reap(ctx, REAP_PIDFD);
}

void
worker_kill(struct worker *w, const char *reason)
{
	pid_t spare, spared[JAIL_MAX_SPARE];

	if (w->state == WORKER_DOWN)
		return;
	if (reason != NULL && w->kill_reason == NULL) {
		w->kill_reason = strdup(reason);
		if (w->kill_cause == DEATH_UNSAID)
			w->kill_cause = DEATH_KILLED;
	}
	if (!w->sampled && w->python_pid > 0 &&
	    procstat_sample_pid(w->python_pid, &w->kill_peak_kb,
	    &w->kill_cpu_us) == 0)
		w->sampled = 1;
	if (w->state != WORKER_BUSY && w->state != WORKER_DYING)
		w->cell = UINT32_MAX;
	w->state = WORKER_DYING;
	spare = wsnap_spare(w);
	/* In the jail, its init: everything but the snapshot and the other
	 * worker (stopped first, so nothing forks), confirmed at once, so
	 * the death is handled next turn. Else, or should that fail, the
	 * cgroup (atomic; never with a snapshot to spare: it is in there).
	 * Then the group (setsid made pgid == pid) and the pid (init of its
	 * PID namespace: its death ends every process in it). */
	if (in_jail(w) && jail_kill_logged(w, "kill", spared,
	    spare_list(w, spare != 0, spared)) == 0) {
		if (w->pidfd >= 0 && w->killed_timer == 0)
			w->killed_timer = loop_timer(w->loop, 0, killed_event,
			    w);
	} else if (w->cg != NULL && spare == 0) {
		(void)contain_group_kill(w->cg);
	}
	/* the group, unless the snapshot may still be in it (it leaves the
	 * group as it starts; the jail's kill has reached everything) */
	if (spare == 0)
		(void)kill(-w->spawner_pid, SIGKILL);
	(void)kill(w->spawner_pid, SIGKILL);
	if (w->chan >= 0) {
		loop_unwatch(w->loop, w->chan);
		(void)close(w->chan);
		w->chan = -1;
	}
	if (w->pidfd < 0)
		reap(w, REAP_WAIT);
}

/* A kill the jail's init confirmed: the death is handled now, not when
 * the exit completes (the next worker need not wait for it). */
static void
killed_event(struct loop *l, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	w->killed_timer = 0;
	if (w->state == WORKER_DYING)
		reap(w, REAP_CONFIRMED);
}

static void
ready_timeout(struct loop *l, void *ctx)
{
	struct worker *w = ctx;
	char why[96];

	(void)l;
	w->ready_timer = 0;
	(void)snprintf(why, sizeof why, "no READY within %llu ms",
	    (unsigned long long)w->cfg.ready_timeout_ms);
	worker_kill(w, why);
}

void
worker_free(struct worker *w)
{
	if (w == NULL)
		return;
	if (w->state != WORKER_DOWN) {
		w->ops.death = NULL;
		(void)kill(-w->spawner_pid, SIGKILL);
		(void)kill(w->spawner_pid, SIGKILL);
		while (waitpid(w->spawner_pid, NULL, 0) < 0 && errno == EINTR)
			;
		close_all(w);
	}
	if (w->exe >= 0)
		(void)close(w->exe);
	if (w->spare >= 0)
		(void)close(w->spare);
	wout_close_socket(w);
	wsnap_forget(w);
	if (w->cg != NULL) {
		(void)contain_group_kill(w->cg);
		contain_group_free(w->cg);
	}
	frame_rx_clear(&w->rx);
	buf_clear(&w->outq);
	buf_clear(&w->stack);
	free(w->kill_reason);
	free(w);
}

int
worker_sweep(struct worker *w)
{
	pid_t spared[JAIL_MAX_SPARE];
	size_t n;

	if (!in_jail(w) || w->python_ns_pid <= 0) {
		errno = ENOTSUP;
		return -1;
	}
	n = spare_list(w, 0, spared);
	spared[n++] = w->python_ns_pid;
	return jail_kill_logged(w, "sweep", spared, n);
}

void
worker_set_sibling(struct worker *w, const struct worker *sib)
{
	w->sib = sib;
}

int
worker_interrupt(struct worker *w)
{
	if (w->state != WORKER_BUSY) {
		errno = ESRCH;
		return -1;
	}
	return kill(w->python_pid, SIGINT);
}
