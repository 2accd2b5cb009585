/*
 * net.c - the worker's network namespace: only lo, brought up as
 * bubblewrap's loopback_setup and nsjail do, so a cell reaches the
 * 127.0.0.1 of its own namespace and nothing of the host's (no interface,
 * no 127.0.0.1 service, no abstract unix socket). See net.h.
 *
 * net_lo_up runs in the jail's init right after clone and in the holder
 * net_ns_new clones: SYSTEM CALLS ONLY (a copy of a supervisor that may
 * have been multithreaded). net_ns_new runs in the supervisor's main
 * thread and allocates nothing; so does net_listen_in, whose child
 * makes only system calls.
 */
#include "sandbox/net.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
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

/* net_listen_in's child: into the namespace, the socket, sent back with
 * the errno of a failed step. */
static _Noreturn void
listener(int sv, int userns, int netns, unsigned short port)
{
	struct sockaddr_in a;
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
	struct msghdr m;
	struct iovec iov;
	int fd = -1, err = 0, one = 1;

	if ((userns >= 0 && setns(userns, CLONE_NEWUSER) < 0) ||
	    setns(netns, CLONE_NEWNET) < 0 ||
	    (fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) < 0)
		err = errno;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (err == 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof one) < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(fd, 128) < 0))
		err = errno;
	memset(&m, 0, sizeof m);
	iov.iov_base = &err;
	iov.iov_len = sizeof err;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (err == 0) {
		memset(&u, 0, sizeof u);
		m.msg_control = u.b;
		m.msg_controllen = sizeof u.b;
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.h), &fd, sizeof fd);
	}
	(void)sendmsg(sv, &m, MSG_NOSIGNAL);
	_exit(0);
}

int
net_listen_in(int userns, int netns, unsigned short port)
{
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
	struct msghdr m;
	struct iovec iov;
	struct cmsghdr *h;
	int sv[2], err = EIO, fd = -1;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		(void)close(sv[0]);
		listener(sv[1], userns, netns, port);
	}
	(void)close(sv[1]);
	if (pid < 0) {
		err = errno;
		(void)close(sv[0]);
		errno = err;
		return -1;
	}
	memset(&m, 0, sizeof m);
	iov.iov_base = &err;
	iov.iov_len = sizeof err;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.b;
	m.msg_controllen = sizeof u.b;
	while ((n = recvmsg(sv[0], &m, MSG_CMSG_CLOEXEC)) < 0 &&
	    errno == EINTR)
		;
	if (n == (ssize_t)sizeof err && err == 0 &&
	    (h = CMSG_FIRSTHDR(&m)) != NULL && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(h), sizeof fd);
	else if (n != (ssize_t)sizeof err)
		err = n < 0 ? errno : ESRCH;
	(void)close(sv[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (fd < 0)
		errno = err != 0 ? err : EIO;
	return fd;
}
