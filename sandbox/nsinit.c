/*
 * nsinit.c - PID 1 of the jail's namespaces (see nsinit.h).
 *
 * Runs in the supervisor's clone child for the whole run: SYSTEM CALLS
 * ONLY. It holds a copy of the supervisor's memory, which may have been
 * multithreaded at clone: malloc and stdio may be unusable here. It
 * joins or sets up the worker's network (net.c), builds the view
 * (viewmount.c), then kills on request (everything in the
 * namespace, or everything but a few processes, stopped first), reaps
 * every orphan of the namespace and remembers how the last ones ended.
 */
#include "sandbox/nsinit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/net.h"
#include "sandbox/view.h"

/* What the init reaped last: a ring, the oldest overwritten. */
#define REAPED_MAX 64

struct reaped {
	pid_t pid;		/* 0 = an empty slot */
	int status;
	uint64_t cpu_us;
	long maxrss_kb;
};

struct reaped_log {
	struct reaped r[REAPED_MAX];
	unsigned next;
};

/* The pids one kill has signalled (a fork bomb's worth; more only
 * costs another round). */
#define KILLED_MAX 4096
/* Rounds of /proc scans one kill makes at most. */
#define KILL_ROUNDS 64

struct killed {
	int32_t pid[KILLED_MAX];
	int n;
};

static void
report(int fd, int op, int err)
{
	struct init_status s = { op, err };

	(void)!write(fd, &s, sizeof s);
}

static int
spared(const int32_t *spare, int n, long pid)
{
	int i;

	for (i = 0; i < n; i++)
		if (spare[i] == pid)
			return 1;
	return 0;
}

static int
was_killed(const struct killed *k, long pid)
{
	int i;

	for (i = 0; i < k->n; i++)
		if (k->pid[i] == pid)
			return 1;
	return 0;
}

/*
 * Every pid in this namespace's /proc but 1, the n spared and those
 * killed already gets SIGKILL; raw getdents64, since malloc may be
 * unusable in this clone child. Returns how many it signalled (a kill
 * that finds the pid gone does not count).
 */
static int
kill_others(const int32_t *spare, int n, struct killed *k)
{
	char buf[8192];
	long len, off, pid;
	int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), hit = 0;

	if (fd < 0)
		return 0;
	while ((len = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (off = 0; off < len; ) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2,
			 * type 1, name */
			unsigned short reclen;

			memcpy(&reclen, buf + off + 16, sizeof reclen);
			pid = strtol(buf + off + 19, NULL, 10);
			off += reclen;
			if (pid <= 1 || spared(spare, n, pid) ||
			    was_killed(k, pid) || kill((pid_t)pid, SIGKILL) < 0)
				continue;
			hit++;
			if (k->n < KILLED_MAX)
				k->pid[k->n++] = (int32_t)pid;
		}
	(void)close(fd);
	return hit;
}

/*
 * Everything in the namespace but us and the n spared. With some to
 * spare, everything is stopped first, then the others are killed, then
 * the spared go on (SIGCONT also undoes a stop someone else sent them).
 * Neither kill(-1, SIGSTOP) nor kill(-1, SIGKILL) reaches a child whose
 * fork was in flight: it appears after the signal (and after a /proc
 * scan made at once). So the scans go on until one finds nothing left
 * to kill: whatever forked meanwhile was stopped or killed by then, and
 * its children are found by the next scan.
 */
static void
kill_all(const int32_t *spare, int n)
{
	static struct killed k;
	int i, round;

	k.n = 0;
	(void)kill(-1, n == 0 ? SIGKILL : SIGSTOP);
	for (round = 0; round < KILL_ROUNDS; round++)
		if (kill_others(spare, n, &k) == 0)
			break;
	for (i = 0; i < n; i++)
		(void)kill((pid_t)spare[i], SIGCONT);
}

/* Reaps every child that has ended (orphans of the namespace come to
 * us), keeping its status and usage. */
static void
reap_all(struct reaped_log *log)
{
	struct reaped *r;
	struct rusage ru;
	int status;
	pid_t pid;

	while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
		r = &log->r[log->next++ % REAPED_MAX];
		r->pid = pid;
		r->status = status;
		r->cpu_us = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
		    1000000u + (uint64_t)(ru.ru_utime.tv_usec +
		    ru.ru_stime.tv_usec);
		r->maxrss_kb = ru.ru_maxrss;
	}
}

/*
 * How pid ended. Our zombies are reaped first; a pid that is still in
 * use (alive, or a zombie of another parent) is EBUSY, even when an
 * earlier process of that number is in the log: the newest entry of a
 * pid no process holds is the answer.
 */
static void
answer_exit(struct reaped_log *log, pid_t pid, struct init_reply *rep)
{
	const struct reaped *r;
	unsigned i;

	reap_all(log);
	if (pid <= 1) {
		rep->err = EINVAL;
		return;
	}
	if (kill(pid, 0) == 0 || errno == EPERM) {
		rep->err = EBUSY;
		return;
	}
	rep->err = ESRCH;
	for (i = 1; i <= REAPED_MAX; i++) {
		r = &log->r[(log->next - i) % REAPED_MAX];
		if (r->pid != pid)
			continue;
		rep->err = 0;
		rep->status = r->status;
		rep->cpu_us = r->cpu_us;
		rep->maxrss_kb = r->maxrss_kb;
		return;
	}
}

static void
answer(struct reaped_log *log, const struct init_req *req,
    struct init_reply *rep)
{
	memset(rep, 0, sizeof *rep);
	rep->seq = req->seq;
	if (req->op == INIT_KILL && req->n >= 0 && req->n <= JAIL_MAX_SPARE)
		kill_all(req->pid, req->n);
	else if (req->op == INIT_EXIT)
		answer_exit(log, (pid_t)req->pid[0], rep);
	else
		rep->err = EINVAL;
}

static _Noreturn void
init_loop(int cmd)
{
	static struct reaped_log done;
	struct signalfd_siginfo si;
	struct pollfd pf[2];
	struct init_req req;
	struct init_reply rep;
	sigset_t set;
	ssize_t n;

	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGCHLD);
	pf[0].fd = cmd, pf[0].events = POLLIN;
	pf[1].fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	pf[1].events = POLLIN;
	for (;;) {
		if (poll(pf, 2, -1) < 0)
			continue;
		while (pf[1].fd >= 0 && read(pf[1].fd, &si, sizeof si) > 0)
			;
		reap_all(&done);
		if (!(pf[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(cmd, &req, sizeof req);
		if (n <= 0 || n != (ssize_t)sizeof req) {
			(void)kill(-1, SIGKILL);
			_exit(0);
		}
		answer(&done, &req, &rep);
		(void)!send(cmd, &rep, sizeof rep, MSG_NOSIGNAL);
	}
}

/* Into the worker's network before anything else (see nsinit.h). */
static int
set_net(int net)
{
	if (net == INIT_NET_HOST)
		return 0;
	if (net >= 0 && setns(net, CLONE_NEWNET) < 0)
		return -1;
	return net == INIT_NET_CLONED ? net_lo_up() : 0;
}

/*
 * A PID 1 ignores every signal it has no handler for (from inside its
 * namespace even SIGKILL), and it installs none: the cells cannot touch
 * it. It holds a copy of the supervisor's memory, so it stays
 * non-dumpable.
 */
_Noreturn void
nsinit_main(const struct plan *p, int net, int cmd)
{
	sigset_t set;
	char go;
	int i, step;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Dumpable until the supervisor has opened our namespaces (it needs
	 * no CAP_SYS_PTRACE for that then, and a plain user's maps are
	 * ours to write): nothing else is in the namespace before "go". */
	(void)prctl(PR_SET_DUMPABLE, 1);
	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGCHLD);
	(void)sigprocmask(SIG_SETMASK, &set, NULL);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			(void)signal(i, SIG_DFL);
	if (set_net(net) < 0) {
		report(cmd, INIT_STEP_NET, errno);
		_exit(1);
	}
	if (view_build(p, &step) < 0) {
		report(cmd, step, errno);
		_exit(1);
	}
	if (dup2(cmd, 0) < 0)
		_exit(1);
	(void)syscall(SYS_close_range, 1u, ~0u, 0u);
	report(0, VIEW_READY, 0);
	/* the supervisor opens our namespaces (a plain user needs us
	 * dumpable for that), then says go: nothing else is here yet */
	if (read(0, &go, 1) != 1)
		_exit(0);
	(void)prctl(PR_SET_DUMPABLE, 0);
	init_loop(0);
}
