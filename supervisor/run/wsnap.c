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
 *
 * SNAPPED is the worker's word, and a cell's code runs in the worker: it
 * may write frames on the channel. So the pid named is taken only when
 * it answers the SNAP we sent (one SNAPPED per SNAP: a second refuses
 * the snapshot taken) and is a child of the worker's main thread, born
 * after the SNAP went out, the only child the worker made since, and the
 * process the pidfd we keep names. A refused snapshot is never spared
 * nor given our OOM score; the record says why (verified()).
 *
 * Owns: SNAPPED, the snapshot's host pid and pidfd, whether it is alive,
 * worker_promote, the exit status of an adopted worker.
 *
 * May include: workers_impl.h, sandbox/ (contain, jail), common/log.h,
 * common/procfs.h, common/fdio.h.
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
#include <time.h>
#include <unistd.h>

#include "common/fdio.h"
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

/* The children of every thread of pid (a child hangs off the thread
 * that forked it) into out, at most max: how many. */
static int
worker_children(pid_t pid, pid_t *out, int max)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (pid <= 0)
		return 0;
	(void)snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while (n < max && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n += procfs_children(pid, (pid_t)atol(de->d_name),
			    out + n, max - n);
	(void)closedir(d);
	return n;
}

static int
listed(pid_t p, const pid_t *list, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (list[i] == p)
			return 1;
	return 0;
}

/* The host pid of the child of the worker's main thread whose namespace
 * pid is ns, or 0. */
static pid_t
main_child(const struct worker *w, pid_t ns)
{
	pid_t kids[WSNAP_BEFORE_MAX];
	int i, n = procfs_children(w->python_pid, w->python_pid, kids,
	    WSNAP_BEFORE_MAX);

	for (i = 0; i < n; i++)
		if (wsnap_ns_pid_of(kids[i]) == ns)
			return kids[i];
	return 0;
}

/* Now, as /proc/PID/stat's start times count: clock ticks since boot. */
static unsigned long long
boot_ticks(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec ts;

	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return 0;
	return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
	    (unsigned long long)ts.tv_nsec / (1000000000ull /
	    (unsigned long long)hz);
}

static int
pidfd_alive(int pidfd)
{
	struct pollfd p = { pidfd, POLLIN, 0 };

	return pidfd >= 0 && poll(&p, 1, 0) == 0;
}

/* Why host (opened as pidfd) is not the snapshot we asked for, or NULL:
 * it must be born after the SNAP went out, the only child of any of the
 * worker's threads born since, and still be what pidfd names. */
static const char *
not_ours(const struct worker *w, pid_t host, int pidfd)
{
	pid_t kids[WSNAP_BEFORE_MAX];
	struct procfs_stat st;
	int i, n, born = 0;

	if (listed(host, w->snap.before, w->snap.nbefore))
		return "it was the worker's child before the SNAP";
	n = worker_children(w->python_pid, kids, WSNAP_BEFORE_MAX);
	for (i = 0; i < n; i++)
		born += !listed(kids[i], w->snap.before, w->snap.nbefore);
	if (born != 1 || !listed(host, kids, n))
		return "the worker forked others since the SNAP";
	if (procfs_stat(host, &st) < 0 || st.ppid != w->python_pid)
		return "it is not the worker's child";
	if (st.starttime < w->snap.asked_ticks)
		return "it started before the SNAP";
	if (!pidfd_alive(pidfd))
		return "it exited";
	return NULL;
}

/*
 * The snapshot SNAPPED names (namespace pid ns), as a host pid with a
 * pidfd on it, once it is the one we asked for: a child of the worker's
 * main thread (the thread that reads SNAP and forks, running no Python
 * in between), and see not_ours. 0 with why said otherwise: a cell
 * (a thread it left, a child holding the channel) may have written it.
 */
static pid_t
verified(const struct worker *w, pid_t ns, int *pidfd, char *why,
    size_t size)
{
	const char *no;
	pid_t host;

	*pidfd = -1;
	if ((host = main_child(w, ns)) == 0) {
		(void)snprintf(why, size, "snapshot %ld refused: not a child "
		    "of worker %ld's main thread", (long)ns,
		    (long)w->python_pid);
		return 0;
	}
	*pidfd = (int)syscall(SYS_pidfd_open, host, 0);
	if (*pidfd < 0) {
		(void)snprintf(why, size, "pidfd_open(%ld): %s", (long)host,
		    strerror(errno));
		return 0;
	}
	/* the pid may have been reused before the pidfd: checked again */
	no = main_child(w, ns) != host ? "it left the worker" :
	    not_ours(w, host, *pidfd);
	if (no == NULL)
		return host;
	(void)snprintf(why, size, "snapshot %ld refused: %s", (long)ns, no);
	(void)close(*pidfd);
	*pidfd = -1;
	return 0;
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
	w->snap.asked = 0;
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
	int pidfd;

	if (s->pid == 0) {
		(void)snprintf(why, sizeof why, "%s", s->error.len > 0 ?
		    s->error.ptr : "the worker made none");
		no_snapshot(w, why);
		return;
	}
	host = verified(w, (pid_t)s->pid, &pidfd, why, sizeof why);
	if (host <= 0) {
		log_warnx("worker %ld: %s", (long)w->python_pid, why);
		no_snapshot(w, why);
		return;
	}
	w->snap.pidfd = pidfd;
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
	w->snap.asked = 0;	/* one SNAPPED per SNAP */
	w->ops.snapped(w, w->ctx);
}

/* Its oom_score_adj back to the worker's, while pidfd says the pid is
 * still its own. */
static void
restore_oom_score(struct worker *w)
{
	if (w->snap.oom[0] != '\0' && pidfd_alive(w->snap.pidfd))
		(void)oom_score(w->snap.host_pid, NULL, 0, w->snap.oom);
}

int
wsnap_expected(struct worker *w)
{
	if (w->snap.asked && w->state == WORKER_IDLE)
		return 1;
	if (w->snap.host_pid > 0) {
		log_warnx("worker %ld: a SNAPPED after the one that named "
		    "snapshot %ld: one of them is forged, the snapshot is "
		    "refused", (long)w->python_pid, (long)w->snap.host_pid);
		restore_oom_score(w);
		no_snapshot(w, "refused: a second SNAPPED answered one SNAP "
		    "(a forged one)");
	}
	return 0;
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
	/* what a snapshot born of this SNAP cannot be: anything before */
	w->snap.asked_ticks = boot_ticks();
	w->snap.nbefore = worker_children(w->python_pid, w->snap.before,
	    WSNAP_BEFORE_MAX);
	w->snap.asked = 1;
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

	return fd_send_fds(sock, &pm, sizeof pm, fds, PROMOTE_NFDS);
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
