/*
 * snap.c - the worker's namespace snapshots (see snap.h, proto.h).
 *
 * The snapshot is a fork of the worker taken between cells, with no
 * Python run between SNAP and the fork (no at-fork hook, no runtime
 * call: code a cell left there could fork first and name its own child
 * in a SNAPPED; the supervisor checks the pid, see wsnap.c), and none
 * when a cell's thread keeps the import lock (the fork would wait for
 * it, and the supervisor for our SNAPPED, for good). It is born
 * undumpable (the worker clears its own flag around the fork), so a
 * same-uid cell can neither ptrace it nor write its memory through
 * /proc/PID/mem, and with oom_score_adj 0 (the worker has 1000). It
 * leaves the worker's session, blocks every signal it can, holds none of
 * the worker's pipes or channel (/dev/null on 1-4) and waits in poll
 * on the spare socket (see await_promotion), running no Python.
 * Promotion installs the descriptors it is sent, drops the signals that
 * arrived meanwhile, then lets CPython finish its after-fork work
 * (PyOS_AfterFork_Child runs here, not at the fork, so that at-fork
 * hooks a cell registered never run in a waiting snapshot), repairs the
 * channel state and the runtime, and sends READY.
 *
 * The discard kills with pidfd_send_signal where the seccomp profile
 * allows it, otherwise with kill(); either only while waitid says the
 * snapshot is our unreaped child, so its pid cannot have been reused.
 * It runs on the main thread only (after a DONE, at SNAP, at SHUTDOWN).
 */
#include "worker/snap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fdio.h"
#include "proto/proto.h"
#include "proto/wexit.h"
#include "worker/chan.h"
#include "worker/py.h"

static const char *snap_off;
static int (*snap_ready)(void);
static pid_t snap_pid;		/* 0: no snapshot */
static int snap_pidfd = -1;
/* The worker's own settings, changed around the fork: restored in the
 * worker after it and in a promoted snapshot. */
static int snap_dumpable = 1;
static char snap_oom[16] = "1000";

/* The thread forking the snapshot, while it does (see forked_child). */
static pthread_t snap_forker;
static volatile sig_atomic_t snap_forking;

/*
 * In every child forked through libc (os.fork, multiprocessing, a fork
 * before an exec), at once: a copy of the worker that a cell made holds
 * none of the worker's descriptors to the supervisor, so it can neither
 * write frames on the channel (a forged SNAPPED or DONE), nor wait on the
 * spare socket as a snapshot, nor take the next cell's pipes from the
 * output socket, nor write into the stack-dump pipe. Only the snapshot's
 * own fork keeps them (the thread that forks it; a cell's thread forking
 * meanwhile does not). A raw clone through ctypes runs no at-fork
 * handler: that copy keeps them (README, "Rollback").
 */
static void
forked_child(void)
{
	if (snap_forking && pthread_equal(pthread_self(), snap_forker))
		return;
	(void)close(WORKER_CHAN_FD);
	(void)close(WORKER_DUMP_FD);
	(void)close(WORKER_SPARE_FD);
	(void)close(WORKER_OUT_FD);
}

void
snap_init(const char *off, int (*send_ready)(void))
{
	snap_off = off;
	snap_ready = send_ready;
	(void)pthread_atfork(NULL, NULL, forked_child);
}

/* fd 5 is an AF_UNIX SOCK_SEQPACKET socket (a cell may have closed it). */
static int
spare_ok(void)
{
	int v;
	socklen_t n = sizeof v;

	if (getsockopt(WORKER_SPARE_FD, SOL_SOCKET, SO_TYPE, &v, &n) < 0 ||
	    v != SOCK_SEQPACKET)
		return 0;
	n = sizeof v;
	return getsockopt(WORKER_SPARE_FD, SOL_SOCKET, SO_DOMAIN, &v, &n) == 0 &&
	    v == AF_UNIX;
}

static int
answer(uint32_t cell, pid_t pid, const char *threads, const char *error)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	m.type = MSG_SNAPPED;
	m.u.snapped.cell = cell;
	m.u.snapped.pid = (uint32_t)pid;
	m.u.snapped.threads = (struct bytes){ (char *)(uintptr_t)threads,
	    strlen(threads) };
	m.u.snapped.error = (struct bytes){ (char *)(uintptr_t)error,
	    strlen(error) };
	return py_send(&m);
}

/* ---- the discard (worker side) ---- */

/*
 * 1 while pid is our child and not yet reaped (alive, or a zombie), so
 * the pid cannot name another process; 0 once a cell's os.wait() reaped
 * it. By pid, not pidfd: a cell's os.closerange() may have taken that.
 */
static int
still_ours(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof si);
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

/*
 * Snapshots killed but not yet reaped: a big one takes tens of ms to
 * exit (its page tables), which the next cell need not wait for. Reaped
 * without waiting at each discard; only when the list is full is the
 * oldest waited for.
 */
#define DYING_MAX 8
static pid_t dying[DYING_MAX];
static int ndying;

static int
reaped(pid_t pid, int wait)
{
	siginfo_t si;
	int rc;

	memset(&si, 0, sizeof si);
	do
		rc = waitid(P_PID, (id_t)pid, &si, WEXITED |
		    (wait ? 0 : WNOHANG));
	while (rc < 0 && errno == EINTR);
	/* ECHILD: a cell's os.wait() reaped it already */
	return rc < 0 || si.si_pid == pid;
}

static void
reap_dying(pid_t pid)
{
	int i, n = 0;

	for (i = 0; i < ndying; i++)
		if (!reaped(dying[i], 0))
			dying[n++] = dying[i];
	ndying = n;
	if (pid <= 0 || reaped(pid, 0))
		return;
	if (ndying == DYING_MAX) {
		(void)reaped(dying[0], 1);
		memmove(dying, dying + 1, (DYING_MAX - 1) * sizeof *dying);
		ndying--;
	}
	dying[ndying++] = pid;
}

/* Without the GIL: the kill; its end is reaped later. */
static void
discard(void)
{
	pid_t pid = snap_pid;
	int pidfd = snap_pidfd;

	snap_pid = 0;
	snap_pidfd = -1;
	if (still_ours(pid) && (pidfd < 0 ||
	    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0))
		(void)kill(pid, SIGKILL);	/* seccomp refuses the above */
	reap_dying(pid);
	if (pidfd >= 0)
		(void)close(pidfd);
}

void
snap_discard(void)
{
	if (snap_pid > 0)	/* else the GIL is not even released */
		py_nogil(discard);
}

/* ---- the snapshot (child side) ---- */

/*
 * Writes our own oom_score_adj (we must be dumpable: an undumpable
 * process's /proc files are root's); old, when not NULL, gets the value
 * it replaced.
 */
static void
oom_adj(const char *v, char *old, size_t size)
{
	int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	if (old != NULL && (n = read(fd, old, size - 1)) > 0) {
		old[n] = '\0';
		old[strcspn(old, "\n")] = '\0';
		(void)lseek(fd, 0, SEEK_SET);
	}
	(void)!write(fd, v, strlen(v));
	(void)close(fd);
}

/* 1-4 on /dev/null (closed, without one): the snapshot keeps none of
 * the worker's pipes, nor its end of the channel. */
static void
quiet_fds(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC), i;

	for (i = 1; i <= WORKER_DUMP_FD; i++)
		if (fd != i)
			(void)(fd >= 0 ? dup2(fd, i) : close(i));
	if (fd > WORKER_DUMP_FD)
		(void)close(fd);
}

static _Noreturn void
refuse(int *fds, int n, int max)
{
	int i;

	for (i = 0; i < n && i < max; i++)
		(void)close(fds[i]);
	_exit(WEXIT_PROTOCOL);
}

/*
 * Blocks until the promotion; EOF ends the snapshot, garbage too.
 *
 * Every snapshot the worker forked shares the spare socket, and a
 * discarded one (SIGKILLed, see discard()) may not have run since: one
 * still asleep in a blocking recvmsg would, once scheduled, take a
 * datagram queued meanwhile (unix_dgram_recvmsg looks at the queue
 * before at its pending signal) and die with the promotion's
 * descriptors, leaving the live snapshot waiting. So we wait in poll,
 * which only looks, and take the datagram without blocking: a killed
 * snapshot never gets back to user space from poll to take it.
 */
static void
await_promotion(struct promote_msg *pm, int fds[PROMOTE_NFDS])
{
	union {
		char b[CMSG_SPACE(sizeof(int) * (PROMOTE_NFDS + 1))];
		struct cmsghdr align;
	} cb;
	int got[PROMOTE_NFDS + 1], n;
	char data[sizeof *pm + 1];
	struct iovec iov = { data, sizeof data };
	struct msghdr mh;
	ssize_t len;

	do {
		struct pollfd pfd = { WORKER_SPARE_FD, POLLIN, 0 };

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			_exit(WEXIT_CHANNEL);
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cb.b;
		mh.msg_controllen = sizeof cb.b;
		len = recvmsg(WORKER_SPARE_FD, &mh, MSG_DONTWAIT |
		    MSG_CMSG_CLOEXEC);
	} while (len < 0 && (errno == EINTR || errno == EAGAIN ||
	    errno == EWOULDBLOCK));
	if (len < 0)
		_exit(WEXIT_CHANNEL);
	n = fd_take_fds(&mh, got, PROMOTE_NFDS + 1);
	if (len == 0 && n == 0)
		_exit(WEXIT_OK);
	memcpy(pm, data, sizeof *pm < (size_t)len ? sizeof *pm : (size_t)len);
	if ((size_t)len != sizeof *pm || n != PROMOTE_NFDS ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
	    pm->magic != PROMOTE_MAGIC)
		refuse(got, n, PROMOTE_NFDS + 1);
	memcpy(fds, got, sizeof got[0] * PROMOTE_NFDS);
}

/* Received fds onto 3, 1, 2, 4, 5; CLOEXEC on 3-5 as the worker has. */
static void
install_fds(int fds[PROMOTE_NFDS])
{
	static const int to[PROMOTE_NFDS] = { WORKER_CHAN_FD, 1, 2,
	    WORKER_DUMP_FD, WORKER_SPARE_FD };
	int i, fd;

	for (i = 0; i < PROMOTE_NFDS; i++) {
		if (fds[i] > WORKER_SPARE_FD)
			continue;
		fd = fcntl(fds[i], F_DUPFD_CLOEXEC, WORKER_SPARE_FD + 1);
		if (fd < 0)
			_exit(WEXIT_CHANNEL);
		(void)close(fds[i]);
		fds[i] = fd;
	}
	for (i = 0; i < PROMOTE_NFDS; i++) {
		if (dup2(fds[i], to[i]) < 0)
			_exit(WEXIT_CHANNEL);
		(void)close(fds[i]);
		if (to[i] >= WORKER_CHAN_FD)
			(void)fcntl(to[i], F_SETFD, FD_CLOEXEC);
	}
}

/* The worker's signal mask before the fork: the snapshot's own after
 * its promotion. */
static sigset_t snap_mask;

/* Drops every signal that arrived while blocked (a cell's, say). */
static void
drain_signals(void)
{
	struct timespec zero = { 0, 0 };
	sigset_t all;

	(void)sigfillset(&all);
	while (sigtimedwait(&all, NULL, &zero) > 0)
		;
}

static int
promote(const sigset_t *mask)
{
	struct promote_msg pm;
	int fds[PROMOTE_NFDS];

	await_promotion(&pm, fds);
	install_fds(fds);
	drain_signals();
	(void)sigprocmask(SIG_SETMASK, mask, NULL);
	(void)prctl(PR_SET_DUMPABLE, snap_dumpable, 0, 0, 0);
	oom_adj(snap_oom, NULL, 0);
	py_fork_child();
	chan_reset(pm.generation);
	py_promoted();
	if (snap_ready() < 0)
		_exit(WEXIT_CHANNEL);
	return 0;
}

/*
 * In the child, at once after the fork. It was born undumpable (the
 * worker clears the flag around the fork, so there is no window in which
 * a cell's thread could open /proc/PID/mem) and with oom_score_adj 0 (an
 * undumpable process cannot open its own /proc files for writing).
 * Returns once promoted.
 */
static int
snapshot(void)
{
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)setsid();
	quiet_fds();
	return promote(&snap_mask);
}

static pid_t
fork_undumpable(void)
{
	sigset_t all;
	pid_t pid;
	int e;

	snap_dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1;
	oom_adj("0", snap_oom, sizeof snap_oom);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* born with every signal blocked: a cell's signal sent the moment
	 * SNAPPED is out must not find it with the default actions */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &snap_mask);
	snap_forker = pthread_self();
	snap_forking = 1;
	pid = fork();
	snap_forking = 0;
	if (pid == 0)
		return 0;
	e = errno;
	(void)pthread_sigmask(SIG_SETMASK, &snap_mask, NULL);
	(void)prctl(PR_SET_DUMPABLE, snap_dumpable, 0, 0, 0);
	oom_adj(snap_oom, NULL, 0);
	errno = e;
	return pid;
}

/* A cell's thread holding the import lock would hold up the fork, for
 * good if it means to: waited for a while (GIL released), then none. */
#define IMPORT_LOCK_NAPS 50
static void
nap(void)
{
	struct timespec ts = { 0, 2000000 };	/* 2 ms */

	(void)nanosleep(&ts, NULL);
}

static int
import_lock_stuck(void)
{
	int i;

	for (i = 0; i < IMPORT_LOCK_NAPS; i++) {
		if (!py_import_lock_busy())
			return 0;
		py_nogil(nap);
	}
	return py_import_lock_busy();
}

int
snap_take(uint32_t cell)
{
	char err[96], *threads;
	pid_t pid;
	int e, rc;

	if (snap_off != NULL)
		return answer(cell, 0, "", snap_off);
	if (!spare_ok())
		return answer(cell, 0, "", "no spare socket");
	snap_discard();
	reap_dying(0);	/* the earlier ones that have ended by now */
	if (import_lock_stuck())
		return answer(cell, 0, "", "a thread of the cell holds the "
		    "import lock");
	/* no Python from here to the fork: nothing a cell left behind
	 * (an at-fork hook, a patched runtime or stdout) runs first, and
	 * the import lock is free: taken at once */
	py_fork_before();
	pid = fork_undumpable();
	e = errno;
	if (pid == 0)
		return snapshot();
	py_fork_parent();
	if (pid < 0) {
		(void)snprintf(err, sizeof err, "fork: %s", strerror(e));
		return answer(cell, 0, "", err);
	}
	snap_pid = pid;
	snap_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* the threads it lacks: those there are once it is forked */
	threads = py_snap_threads();
	rc = answer(cell, pid, threads != NULL ? threads : "", "");
	free(threads);
	return rc;
}
