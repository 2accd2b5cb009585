/*
 * wsnap.c - a worker's snapshot (see workers.h, proto.h's SNAP).
 *
 * Before a cell the worker may fork a frozen copy of itself, the
 * snapshot: a child of the worker in the run's jail, which its kill
 * spares (the jail's init stops everything, kills all but the snapshot,
 * continues it) and which then survives the worker's death, reparented
 * to the jail's init. Promoting it hands it a fresh channel, output
 * pipes, dump pipe and spare socket over the old spare socket; the
 * struct worker adopts it (it is not our child: its death comes from a
 * pidfd, its status from the jail's init). When the cell ends normally
 * the worker discards the snapshot itself and we forget it.
 *
 * Owns: SNAPPED, the snapshot's host pid and pidfd, whether it is alive,
 * worker_promote, the exit status of an adopted worker.
 *
 * May include: workers_impl.h, sandbox/ (contain, jail), common/log.h,
 * common/procfs.h.
 */
#include "supervisor/run/workers_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procfs.h"

/* The last pid of the NSpid line of /proc/<pid>/status: the pid as the
 * innermost namespace sees it, or 0. */
pid_t
wsnap_ns_pid_of(pid_t pid)
{
	char buf[4096];

	if (procfs_read(pid, "status", buf, sizeof buf) <= 0)
		return 0;
	return procfs_status_nspid(buf);
}

/* The host pid of a child of thread tid of process pid whose namespace
 * pid is ns, or 0 (a child hangs off the thread that forked it). */
static pid_t
thread_child(pid_t pid, pid_t tid, pid_t ns)
{
	pid_t kids[1024];
	int i, n = procfs_children(pid, tid, kids, 1024);

	for (i = 0; i < n; i++)
		if (wsnap_ns_pid_of(kids[i]) == ns)
			return kids[i];
	return 0;
}

/* ... of any thread of pid. */
static pid_t
process_child(pid_t pid, pid_t ns)
{
	char path[64];
	struct dirent *de;
	pid_t found = 0;
	DIR *d;

	if (pid <= 0)
		return 0;
	(void)snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while (found == 0 && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			found = thread_child(pid, (pid_t)atol(de->d_name), ns);
	(void)closedir(d);
	return found;
}

/*
 * The snapshot's host pid: the worker's child (of the thread that forked
 * it, or, while the worker's threads are exiting, of one still there),
 * or the jail init's once the worker is gone (we may read SNAPPED after
 * the death). A child moves from one to the next as they exit: a second
 * round finds it where the first looked too early.
 */
static pid_t
host_pid_of(const struct worker *w, pid_t ns)
{
	pid_t p = 0;
	int round;

	for (round = 0; round < 2 && p == 0; round++)
		if ((p = process_child(w->python_pid, ns)) == 0)
			p = process_child(jail_init_pid(w->cfg.jail), ns);
	return p;
}

/* Reads (out != NULL) or writes pid's oom_score_adj. 0, or -1. */
static int
oom_score(pid_t pid, char *out, size_t size, const char *val)
{
	if (out != NULL)
		return procfs_read(pid, "oom_score_adj", out, size) > 0 ? 0 : -1;
	return procfs_write(pid, "oom_score_adj", val) == 0 && val[0] != '\0' ?
	    0 : -1;
}

/*
 * The snapshot should be the last thing the OOM killer takes: as low as
 * we are. It inherited the worker's score (1000), which is kept to give
 * it back at a promotion. Lowering needs CAP_SYS_RESOURCE (the worker,
 * in the jail's Landlock domain, cannot write its /proc files itself); a
 * plain user's worker starts at its own score anyway.
 */
static void
lower_oom_score(struct worker *w, pid_t pid)
{
	char ours[16];

	if (oom_score(pid, w->snap.oom, sizeof w->snap.oom, NULL) < 0)
		w->snap.oom[0] = '\0';
	if (oom_score(getpid(), ours, sizeof ours, NULL) == 0)
		(void)oom_score(pid, NULL, 0, ours);
}

void
wsnap_forget(struct worker *w)
{
	if (w->snap.pidfd >= 0)
		(void)close(w->snap.pidfd);
	w->snap.pidfd = -1;
	w->snap.host_pid = w->snap.ns_pid = 0;
	free(w->snap.threads);
	w->snap.threads = NULL;
}

static void no_snapshot(struct worker *w, const char *why);

void
worker_drop_snapshot(struct worker *w)
{
	/* taken (and said so): the record says it went with the world,
	 * whether the cell's death is seen before this or after */
	if (w->snap.host_pid > 0) {
		wsnap_forget(w);
		w->snap.state = WSNAP_WORLD_LOST;
		w->snap.why[0] = '\0';
	}
	/* the cgroup a death kept for it goes (removed once empty): the
	 * next worker gets its own */
	if (w->state == WORKER_DOWN && w->cg != NULL) {
		contain_group_free(w->cg);
		w->cg = NULL;
	}
}

static void
no_snapshot(struct worker *w, const char *why)
{
	wsnap_forget(w);
	w->snap.state = WSNAP_NONE;
	(void)snprintf(w->snap.why, sizeof w->snap.why, "%s", why);
}

/* What SNAPPED says, taken in: a snapshot to spare, or why none. */
static void
take_snapshot(struct worker *w, const struct msg_snapped *s)
{
	char why[160];
	pid_t host;

	wsnap_forget(w);
	if (s->pid == 0) {
		(void)snprintf(why, sizeof why, "%s", s->error.len > 0 ?
		    s->error.ptr : "the worker made none");
		no_snapshot(w, why);
		return;
	}
	host = host_pid_of(w, (pid_t)s->pid);
	if (host <= 0) {
		(void)snprintf(why, sizeof why, "snapshot %u is not a child "
		    "of worker %ld", s->pid, (long)w->python_pid);
		no_snapshot(w, why);
		return;
	}
	w->snap.pidfd = (int)syscall(SYS_pidfd_open, host, 0);
	if (w->snap.pidfd < 0) {
		(void)snprintf(why, sizeof why, "pidfd_open(%ld): %s",
		    (long)host, strerror(errno));
		no_snapshot(w, why);
		return;
	}
	w->snap.host_pid = host;
	w->snap.ns_pid = (pid_t)s->pid;
	w->snap.cell = s->cell;
	w->snap.threads = s->threads.len > 0 ? strdup(s->threads.ptr) : NULL;
	w->snap.state = WSNAP_TAKEN;
	w->snap.why[0] = '\0';
	lower_oom_score(w, host);
	/* a v2 OOM kill of the worker must not take the snapshot along */
	if (w->cg != NULL)
		(void)contain_group_oom_group(w->cg, 0);
}

/* Only now may the cell run: its snapshot is set up (held, last for the
 * OOM killer) before the cell can touch it. */
void
wsnap_on_snapped(struct worker *w, const struct msg_snapped *s)
{
	take_snapshot(w, s);
	w->ops.snapped(w, w->ctx);
}

int
wsnap_alive(struct worker *w)
{
	struct pollfd p;

	if (w->snap.host_pid <= 0 || w->snap.pidfd < 0)
		return 0;
	p.fd = w->snap.pidfd;
	p.events = POLLIN;
	p.revents = 0;
	if (poll(&p, 1, 0) != 0) {
		/* it died: a cell found and killed it */
		no_snapshot(w, "the snapshot was killed before it was needed");
		w->snap.state = WSNAP_KILLED;
		return 0;
	}
	return 1;
}

pid_t
wsnap_spare(struct worker *w)
{
	return w->snap.host_pid > 0 && w->cell == w->snap.cell &&
	    (w->state == WORKER_BUSY || w->state == WORKER_DYING) ?
	    w->snap.ns_pid : 0;
}

int
worker_snapshot(struct worker *w, uint32_t cell)
{
	struct msg m;

	if (w->state != WORKER_IDLE) {
		errno = EBUSY;
		return -1;
	}
	no_snapshot(w, "no answer from the worker");
	memset(&m, 0, sizeof m);
	m.type = MSG_SNAP;
	m.u.snap.cell = cell;
	return wchan_send(w, &m);
}

enum worker_snap
worker_snapshot_state(const struct worker *w)
{
	return w->snap.state;
}

const char *
worker_snapshot_why(const struct worker *w)
{
	return w->snap.why;
}

/* One datagram: the message and PROMOTE_NFDS descriptors. */
static int
send_promotion(int sock, uint32_t generation, const int *fds)
{
	struct promote_msg pm = { PROMOTE_MAGIC, generation };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(PROMOTE_NFDS * sizeof(int))];
	} u;
	struct iovec iov = { &pm, sizeof pm };
	struct msghdr mh;
	struct cmsghdr *c;
	ssize_t n;

	memset(&mh, 0, sizeof mh);
	memset(&u, 0, sizeof u);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof u.b;
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(PROMOTE_NFDS * sizeof(int));
	memcpy(CMSG_DATA(c), fds, PROMOTE_NFDS * sizeof(int));
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof pm ? 0 : -1;
}

/*
 * The snapshot becomes this worker: new descriptors are made and sent,
 * the worker adopts its pid and pidfd, and waits for its READY as after
 * a spawn. The cgroup stays (the snapshot lives in it).
 */
int
worker_promote(struct worker *w)
{
	int ours[WSPAWN_NFDS], theirs[WSPAWN_NFDS], give[PROMOTE_NFDS];
	pid_t pid = w->snap.host_pid, ns = w->snap.ns_pid;
	int pidfd = w->snap.pidfd;

	if (w->state != WORKER_DOWN || !wsnap_alive(w) || w->spare < 0) {
		errno = ESRCH;
		return -1;
	}
	if (wspawn_make_fds(ours, theirs) < 0)
		goto fail;
	give[0] = theirs[0], give[1] = theirs[1], give[2] = theirs[2];
	give[3] = theirs[3], give[4] = theirs[6];
	if (send_promotion(w->spare, wworker_next_gen(w), give) < 0)
		goto fail;
	wspawn_close_fds(theirs, WSPAWN_NFDS);
	/* no sync byte and no init's status: the snapshot runs already; it
	 * shares the output socket of the worker it was forked from */
	(void)close(ours[4]);
	(void)close(ours[5]);
	(void)close(ours[7]);
	ours[4] = ours[5] = ours[7] = -1;
	w->snap.pidfd = -1;
	w->snap.host_pid = w->snap.ns_pid = 0;
	/* the worker again: the OOM killer's first choice, as it was */
	if (w->snap.oom[0] != '\0')
		(void)oom_score(pid, NULL, 0, w->snap.oom);
	wworker_adopt(w, ours, pid, ns, pidfd);
	return 0;
fail:
	log_warn("cannot promote snapshot %ld", (long)pid);
	wspawn_close_fds(ours, WSPAWN_NFDS);
	wspawn_close_fds(theirs, WSPAWN_NFDS);
	wsnap_forget(w);
	return -1;
}

/*
 * An adopted worker's wait status and usage, from the jail's init that
 * reaped it; unknown (status 0, no usage) where the jail cannot say.
 */
void
wsnap_adopted_status(struct worker *w, int *status, struct rusage *ru)
{
#ifdef JAIL_MAX_SPARE
	struct jail_exit e;

	if (jail_exit_status(w->cfg.jail, w->python_ns_pid, &e) == 0) {
		*status = e.status;
		ru->ru_utime.tv_sec = (time_t)(e.cpu_us / 1000000u);
		ru->ru_utime.tv_usec = (suseconds_t)(e.cpu_us % 1000000u);
		ru->ru_maxrss = e.maxrss_kb;
		return;
	}
	/* the init that reaped it is gone: it died with its namespaces */
	if (jail_lost(w->cfg.jail)) {
		*status = SIGKILL;
		return;
	}
#else
	(void)w;
	(void)ru;
#endif
	*status = 0;
}
