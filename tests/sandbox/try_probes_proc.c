/*
 * tests/sandbox/try_probes_proc.c - try_syscall's probes: sockets, new programs and processes, and calls strict allows or
 * leaves out.
 * Each is made with arguments the kernel rejects (see try_syscall.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tests/sandbox/try_syscall.h"

extern char **environ;

static int
p_socket_inet(void)
{
	return res_fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

static int
p_socket_inet6(void)
{
	return res_fd(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
}

static int
p_socket_netlink(void)
{
	return res_fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0));
}

static int
p_socket_packet(void)
{
	return res_fd(socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
}

static int
p_socket_unix(void)
{
	return res_fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

static int
p_socket_unix_dgram(void)
{
	return res_fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
}

static int
p_socket_unix_highbits(void)
{
	return res_fd(syscall(SYS_socket, AF_UNIX | HIGHBITS, SOCK_STREAM, 0));
}

static int
p_socketpair_unix(void)
{
	int sv[2], e = 0;
	char c = 'x';

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		return errno;
	/* asyncio's self-pipe: send() is sendto(NULL), recv() recvfrom. */
	if (send(sv[0], &c, 1, 0) != 1 || recv(sv[1], &c, 1, 0) != 1)
		e = errno;
	close(sv[0]);
	close(sv[1]);
	return e;
}

static int
p_socketpair_dgram(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == -1)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static int
p_socketpair_inet(void)
{
	int sv[2];

	if (socketpair(AF_INET, SOCK_STREAM, 0, sv) == -1)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static const struct sockaddr_un nowhere = {AF_UNIX, "/nonexistent"};

static int
p_connect_unix(void)
{
	return res(
	    connect(-1, (const struct sockaddr *)&nowhere, sizeof(nowhere)));
}

static int
p_bind_unix(void)
{
	return res(
	    bind(-1, (const struct sockaddr *)&nowhere, sizeof(nowhere)));
}

static int
p_listen(void)
{
	return res(listen(-1, 1));
}

static int
p_accept(void)
{
	return res(accept4(-1, NULL, NULL, 0));
}

static char *const no_argv[] = {NULL};

static int
p_execve(void)
{
	return res(execve("/nonexistent", no_argv, environ));
}

static int
p_execveat(void)
{
	return res(
	    syscall(SYS_execveat, -1, "", no_argv, environ, AT_EMPTY_PATH));
}

static int
reap(pid_t pid)
{
	int st;

	if (pid == -1)
		return errno;
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return errno;
	return 0;
}

static int
p_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	return reap(pid);
}

static int
p_vfork(void)
{
	/* NOLINTNEXTLINE(clang-analyzer-security.insecureAPI.vfork) */
	pid_t pid = vfork();

	if (pid == 0)
		_exit(0);
	return reap(pid);
}

static int
p_spawn(void)
{
	pid_t pid;
	int e;

	e = posix_spawn(&pid, "/nonexistent", NULL, NULL, no_argv, environ);
	if (e == 0)
		return reap(pid);
	return e;
}

static void *
thread_main(void *arg)
{
	return arg;
}

static int
p_thread(void)
{
	pthread_t t;
	void *r;
	int e;

	e = pthread_create(&t, NULL, thread_main, &protect_pid);
	if (e != 0)
		return e;
	e = pthread_join(t, &r);
	if (e == 0 && r != &protect_pid)
		e = EPROTO;
	return e;
}

static int
p_getrandom(void)
{
	char b[16];

	return getrandom(b, sizeof(b), 0) == (ssize_t)sizeof(b) ? 0 : errno;
}

static int
p_mmap(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return errno;
	return res(munmap(p, 4096));
}

static int
p_openat(void)
{
	return res_fd(open("/nonexistent", O_RDONLY | O_CLOEXEC));
}

static int
p_prctl_name(void)
{
	char name[16];

	return res(prctl(PR_GET_NAME, name, 0, 0, 0));
}

static int
p_prctl_unknown(void)
{
	return res(prctl(0x7fffffff, 0, 0, 0, 0));
}

static int
p_unlisted(void)
{
	/* Size 0 is below SHMMIN: the kernel refuses to create anything. */
	return res(syscall(SYS_shmget, IPC_PRIVATE, 0, 0));
}

static int
p_syslog(void)
{
	return res(syscall(SYS_syslog, 0x7fff, NULL, 0));
}

static int
p_clock_settime(void)
{
	return res(syscall(SYS_clock_settime, 0x7fff, NULL));
}

static int
p_mbind(void)
{
	return res(syscall(SYS_mbind, 0, 0, 0, NULL, 0, ~0U));
}

/* clang-format off */
const struct probe probes_proc[] = {
	{ "socket_inet", p_socket_inet },
	{ "socket_inet6", p_socket_inet6 },
	{ "socket_netlink", p_socket_netlink },
	{ "socket_packet", p_socket_packet },
	{ "socket_unix", p_socket_unix },
	{ "socket_unix_dgram", p_socket_unix_dgram },
	{ "socket_unix_highbits", p_socket_unix_highbits },
	{ "socketpair_unix", p_socketpair_unix },
	{ "socketpair_dgram", p_socketpair_dgram },
	{ "socketpair_inet", p_socketpair_inet },
	{ "connect_unix", p_connect_unix },
	{ "bind_unix", p_bind_unix },
	{ "listen", p_listen },
	{ "accept", p_accept },
	{ "execve", p_execve },
	{ "execveat", p_execveat },
	{ "fork", p_fork },
	{ "vfork", p_vfork },
	{ "spawn", p_spawn },
	{ "thread", p_thread },
	{ "getrandom", p_getrandom },
	{ "mmap", p_mmap },
	{ "openat", p_openat },
	{ "prctl_name", p_prctl_name },
	{ "prctl_unknown", p_prctl_unknown },
	{ "unlisted", p_unlisted },
	{ "syslog", p_syslog },
	{ "clock_settime", p_clock_settime },
	{ "mbind", p_mbind },
};
/* clang-format on */

const size_t probes_proc_n = NELEM(probes_proc);
