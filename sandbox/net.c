/*
 * net.c - the worker's network namespace: only lo, brought up as
 * bubblewrap's loopback_setup and nsjail do, so a cell reaches the
 * 127.0.0.1 of its own namespace and nothing of the host's (no interface,
 * no 127.0.0.1 service, no abstract unix socket). See net.h.
 *
 * net_lo_up runs in the jail's init right after clone and in the holder
 * net_ns_new clones: SYSTEM CALLS ONLY (a copy of a supervisor that may
 * have been multithreaded). net_ns_new runs in the supervisor's main
 * thread and allocates nothing.
 */
#include "sandbox/net.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procfs.h"

int
net_lo_up(void)
{
	struct ifreq ifr;
	int fd, rc = -1, e;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	e = errno;
	(void)close(fd);
	errno = e;
	return rc;
}

/* The clone child of net_ns_new, in its new user and network
 * namespaces: lo up, the result said, then held open until EOF. */
static _Noreturn void
holder(int fd)
{
	int err = 0;
	char c;

	/* ours to open without CAP_SYS_PTRACE, for the moment */
	(void)prctl(PR_SET_DUMPABLE, 1);
	if (net_lo_up() < 0)
		err = errno != 0 ? errno : EIO;
	if (write(fd, &err, sizeof err) == (ssize_t)sizeof err)
		(void)!read(fd, &c, 1);
	_exit(0);
}

int
net_ns_new(void)
{
	int sv[2], err = 0, fd = -1, saved;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD,
	    NULL, NULL, NULL, NULL);
	if (pid == 0) {
		(void)close(sv[0]);
		holder(sv[1]);
	}
	saved = errno;
	(void)close(sv[1]);
	if (pid > 0) {
		while ((n = read(sv[0], &err, sizeof err)) < 0 && errno == EINTR)
			;
		if (n != (ssize_t)sizeof err)
			saved = n < 0 ? errno : ESRCH;
		else if (err != 0)
			saved = err;
		else if ((fd = procfs_open(pid, "ns/net", O_RDONLY)) < 0)
			saved = errno;
	}
	(void)close(sv[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	errno = saved;
	return fd;
}
