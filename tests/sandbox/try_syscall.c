/*
 * tests/sandbox/try_syscall.c - probes the seccomp profiles from outside,
 * bubblewrap's try-syscall style.
 *
 *   try_syscall [--protect-pid N] [--protect-pgid N] [--debug] PROFILE PROBE...
 *
 * Applies PROFILE (off|default|strict) with N as the supervisor (default:
 * our parent, and its process group), then runs each probe and prints
 * "NAME errno=ENAME" ("errno=0" on success).  Each call is made with
 * arguments the kernel rejects (bad fd, NULL pointer, invalid flags), so an
 * allowed call shows the kernel's EBADF/EFAULT/EINVAL/ENOENT and a filtered
 * one shows the policy's errno.  Every kill-style probe sends signal 0, so
 * a broken filter can never hurt the protected process.
 *
 * Exit: 0 after all probes, 1 if the profile could not be applied, 2 on
 * bad usage.  Built without sanitizers: they make syscalls of their own.
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

#include "sandbox/seccomp.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define HIGHBITS 0xdead00000000UL

extern char **environ;

static pid_t protect_pid;
static pid_t protect_pgid;

/* Result of a call that returns -1 and sets errno on failure. */
static int
res(long r)
{
	return r == -1 ? errno : 0;
}

/* Result of a call that returns a descriptor, which is closed. */
static int
res_fd(long fd)
{
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

/* personality() succeeded when allowed: put the old persona back. */
static int
res_persona(long old)
{
	if (old == -1)
		return errno;
	personality((unsigned long)old);
	return 0;
}

static int
p_ptrace(void)
{
	return res(syscall(SYS_ptrace, 2 /* PEEKDATA */, 0, NULL, NULL));
}

/* A filter the caller loads on top cannot lift an earlier denial. */
static int
p_stacked_ptrace(void)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {1, &allow};

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == -1)
		return errno;
	return p_ptrace();
}

static int
p_process_vm_readv(void)
{
	return res(syscall(SYS_process_vm_readv, 0, NULL, 0, NULL, 0, 1UL));
}

static int
p_pidfd_getfd(void)
{
	return res(syscall(SYS_pidfd_getfd, -1, 0, 0));
}

static int
p_mount(void)
{
	return res(mount(NULL, NULL, NULL, 0, NULL));
}

static int
p_umount2(void)
{
	return res(umount2("/nonexistent", -1));
}

static int
p_pivot_root(void)
{
	return res(syscall(SYS_pivot_root, NULL, NULL));
}

static int
p_chroot(void)
{
	return res(chroot("/nonexistent"));
}

static int
p_unshare_user(void)
{
	/* CLONE_IO is invalid for unshare: the kernel refuses the call. */
	return res(unshare(CLONE_NEWUSER | (int)CLONE_IO));
}

static int
p_setns(void)
{
	return res(setns(-1, 0));
}

static int
p_clone_newuser(void)
{
	/* CLONE_THREAD without CLONE_SIGHAND: always EINVAL in the kernel,
	 * so the raw clone can never return twice. */
	unsigned long fl = CLONE_NEWUSER | CLONE_THREAD;
#if defined(__s390__) || defined(__s390x__)
	return res(syscall(SYS_clone, NULL, fl, NULL, NULL, 0));
#else
	return res(syscall(SYS_clone, fl, NULL, NULL, NULL, 0));
#endif
}

static int
p_clone3(void)
{
	return res(syscall(SYS_clone3, NULL, 0));
}

static int
p_open_tree(void)
{
	return res(syscall(SYS_open_tree, -1, NULL, ~0U));
}

static int
p_fsopen(void)
{
	return res(syscall(SYS_fsopen, NULL, ~0U));
}

static int
p_open_tree_attr(void)
{
#if defined(__x86_64__) && !defined(__ILP32__)
	return res(syscall(467, -1, NULL, ~0U, NULL, 0));
#else
	return ENOSYS;
#endif
}

static int
p_bpf(void)
{
	return res(syscall(SYS_bpf, 0x7fffffff, NULL, 0));
}

static int
p_perf_event_open(void)
{
	return res(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}

static int
p_keyctl(void)
{
	return res(syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0));
}

static int
p_add_key(void)
{
	return res(syscall(SYS_add_key, NULL, NULL, NULL, 0, 0));
}

static int
p_io_uring_setup(void)
{
	return res(syscall(SYS_io_uring_setup, 1, NULL));
}

static int
p_userfaultfd(void)
{
	return res(syscall(SYS_userfaultfd, ~0U));
}

static int
p_userfaultfd_dev(void)
{
	return res(ioctl(-1, _IO(0xAA, 0x00), 0));
}

static int
p_tiocsti(void)
{
	return res(ioctl(-1, TIOCSTI, NULL));
}

static int
p_tiocsti_highbits(void)
{
	return res(
	    syscall(SYS_ioctl, -1, (unsigned long)TIOCSTI | HIGHBITS, NULL));
}

static int
p_tioclinux(void)
{
	return res(ioctl(-1, TIOCLINUX, NULL));
}

static int
p_ioctl_tcgets(void)
{
	return res(ioctl(-1, TCGETS, NULL));
}

static int
p_ioctl_other(void)
{
	return res(ioctl(-1, FIOASYNC, NULL));
}

static int
p_personality_rie(void)
{
	return res_persona(personality(READ_IMPLIES_EXEC));
}

static int
p_personality_highbits(void)
{
	return res_persona(
	    syscall(SYS_personality, HIGHBITS | READ_IMPLIES_EXEC));
}

static int
p_personality_bit31(void)
{
	return res_persona(
	    syscall(SYS_personality, 0x80000000UL | READ_IMPLIES_EXEC));
}

/* Only the rule for the wrap-around pair (bit 31 set, bit 0 clear)
 * catches this one. */
static int
p_personality_wrap(void)
{
	return res_persona(syscall(SYS_personality, 0xfffffffeUL));
}

static int
p_personality_query(void)
{
	return res(personality(0xffffffff));
}

static int
p_personality_linux(void)
{
	return res(personality(PER_LINUX));
}

static int
p_kill_protect(void)
{
	return res(kill(protect_pid, 0));
}

static int
p_kill_protect_highbits(void)
{
	return res(syscall(SYS_kill, (long)protect_pid | (long)HIGHBITS, 0));
}

static int
p_kill_minus1(void)
{
	return res(kill(-1, 0));
}

static int
p_killpg_protect(void)
{
	return res(kill(-protect_pgid, 0));
}

static int
p_kill_self(void)
{
	return res(kill(getpid(), 0));
}

static int
p_kill_group(void)
{
	return res(kill(0, 0));
}

static int
p_tgkill_protect(void)
{
	return res(syscall(SYS_tgkill, protect_pid, protect_pid, 0));
}

static int
p_tkill_protect(void)
{
	return res(syscall(SYS_tkill, protect_pid, 0));
}

static int
p_sigqueue_protect(void)
{
	return res(syscall(SYS_rt_sigqueueinfo, protect_pid, 0, NULL));
}

static int
p_pidfd_open_protect(void)
{
	return res_fd(syscall(SYS_pidfd_open, protect_pid, 0));
}

static int
p_pidfd_send_signal(void)
{
	return res(syscall(SYS_pidfd_send_signal, -1, 0, NULL, 0));
}

static int
p_prlimit_protect(void)
{
	struct rlimit old;

	return res(
	    syscall(SYS_prlimit64, protect_pid, RLIMIT_NOFILE, NULL, &old));
}

static int
p_prlimit_self(void)
{
	struct rlimit old;

	return res(getrlimit(RLIMIT_NOFILE, &old));
}

static int
p_sched_setaffinity_protect(void)
{
	return res(syscall(SYS_sched_setaffinity, protect_pid, 4096, NULL));
}

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

/* Set-id modes: every path is under /nonexistent, every fd is -1, so an
 * allowed call answers ENOENT or EBADF and creates nothing. */
#define NOWHERE "/nonexistent/agentz-probe"
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#endif

static int
p_chmod_plain(void)
{
	return res(chmod(NOWHERE, 0755));
}

static int
p_chmod_setuid(void)
{
	return res(chmod(NOWHERE, 04755));
}

static int
p_chmod_setgid(void)
{
	return res(chmod(NOWHERE, 02755));
}

static int
p_fchmod_setuid(void)
{
	return res(fchmod(-1, 06755));
}

static int
p_fchmodat_setgid(void)
{
	return res(syscall(SYS_fchmodat, AT_FDCWD, NOWHERE, 02755));
}

static int
p_fchmodat2_setuid(void)
{
	return res(syscall(SYS_fchmodat2, AT_FDCWD, NOWHERE, 04755, 0));
}

static int
p_mknod_setuid(void)
{
	return res(syscall(SYS_mknod, NOWHERE, S_IFREG | 04755, 0));
}

static int
p_mknodat_setgid(void)
{
	return res(syscall(SYS_mknodat, AT_FDCWD, NOWHERE, S_IFREG | 02755, 0));
}

static int
p_open_setuid(void)
{
	return res_fd(syscall(SYS_open, NOWHERE, O_CREAT | O_WRONLY, 04755));
}

static int
p_openat_setuid(void)
{
	return res_fd(syscall(SYS_openat, AT_FDCWD, NOWHERE,
	    O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
}

static int
p_openat_plain(void)
{
	return res_fd(syscall(SYS_openat, AT_FDCWD, NOWHERE,
	    O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
}

static int
p_creat_setgid(void)
{
	return res_fd(syscall(SYS_creat, NOWHERE, 02755));
}

static int
p_mkdir_setgid(void)
{
	return res(syscall(SYS_mkdir, NOWHERE, 02775));
}

static int
p_mkdirat_setuid(void)
{
	return res(syscall(SYS_mkdirat, AT_FDCWD, NOWHERE, 04775));
}

static int
p_mkdir_plain(void)
{
	return res(mkdir(NOWHERE, 0755));
}

/* The mode bit above the low 32: the kernel truncates, the rule masks. */
static int
p_chmod_setuid_highbits(void)
{
	return res(syscall(SYS_chmod, NOWHERE, HIGHBITS | 04755));
}

static int
p_openat2(void)
{
	return res_fd(syscall(SYS_openat2, AT_FDCWD, NOWHERE, NULL, 0));
}

static int
p_setxattr(void)
{
	return res(syscall(SYS_setxattr, NOWHERE, "security.capability", "",
	    0, 0));
}

static int
p_lsetxattr(void)
{
	return res(syscall(SYS_lsetxattr, NOWHERE, "user.x", "", 0, 0));
}

static int
p_fsetxattr(void)
{
	return res(syscall(SYS_fsetxattr, -1, "security.capability", "", 0,
	    0));
}

static int
p_setxattrat(void)
{
	return res(syscall(SYS_setxattrat, -1, NOWHERE, 0, "user.x", NULL,
	    0));
}

static int
p_getxattr(void)
{
	char b[8];

	return res(syscall(SYS_getxattr, NOWHERE, "user.x", b, sizeof(b)));
}

static int
p_x32(void)
{
	/* Under a filter this kills the process: run it last, alone. */
#if defined(__x86_64__) && !defined(__ILP32__)
	return res(syscall(0x40000000 | SYS_getpid));
#else
	return ENOSYS;
#endif
}

/* clang-format off */
static const struct probe {
	const char *name;
	int (*fn)(void);
} probes[] = {
	{ "ptrace", p_ptrace },
	{ "stacked_ptrace", p_stacked_ptrace },
	{ "process_vm_readv", p_process_vm_readv },
	{ "pidfd_getfd", p_pidfd_getfd },
	{ "mount", p_mount },
	{ "umount2", p_umount2 },
	{ "pivot_root", p_pivot_root },
	{ "chroot", p_chroot },
	{ "unshare_user", p_unshare_user },
	{ "setns", p_setns },
	{ "clone_newuser", p_clone_newuser },
	{ "clone3", p_clone3 },
	{ "open_tree", p_open_tree },
	{ "fsopen", p_fsopen },
	{ "open_tree_attr", p_open_tree_attr },
	{ "bpf", p_bpf },
	{ "perf_event_open", p_perf_event_open },
	{ "keyctl", p_keyctl },
	{ "add_key", p_add_key },
	{ "io_uring_setup", p_io_uring_setup },
	{ "userfaultfd", p_userfaultfd },
	{ "userfaultfd_dev", p_userfaultfd_dev },
	{ "tiocsti", p_tiocsti },
	{ "tiocsti_highbits", p_tiocsti_highbits },
	{ "tioclinux", p_tioclinux },
	{ "ioctl_tcgets", p_ioctl_tcgets },
	{ "ioctl_other", p_ioctl_other },
	{ "personality_rie", p_personality_rie },
	{ "personality_highbits", p_personality_highbits },
	{ "personality_bit31", p_personality_bit31 },
	{ "personality_wrap", p_personality_wrap },
	{ "personality_query", p_personality_query },
	{ "personality_linux", p_personality_linux },
	{ "kill_protect", p_kill_protect },
	{ "kill_protect_highbits", p_kill_protect_highbits },
	{ "kill_minus1", p_kill_minus1 },
	{ "killpg_protect", p_killpg_protect },
	{ "kill_self", p_kill_self },
	{ "kill_group", p_kill_group },
	{ "tgkill_protect", p_tgkill_protect },
	{ "tkill_protect", p_tkill_protect },
	{ "sigqueue_protect", p_sigqueue_protect },
	{ "pidfd_open_protect", p_pidfd_open_protect },
	{ "pidfd_send_signal", p_pidfd_send_signal },
	{ "prlimit_protect", p_prlimit_protect },
	{ "prlimit_self", p_prlimit_self },
	{ "sched_setaffinity_protect", p_sched_setaffinity_protect },
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
	{ "chmod_plain", p_chmod_plain },
	{ "chmod_setuid", p_chmod_setuid },
	{ "chmod_setgid", p_chmod_setgid },
	{ "chmod_setuid_highbits", p_chmod_setuid_highbits },
	{ "fchmod_setuid", p_fchmod_setuid },
	{ "fchmodat_setgid", p_fchmodat_setgid },
	{ "fchmodat2_setuid", p_fchmodat2_setuid },
	{ "mknod_setuid", p_mknod_setuid },
	{ "mknodat_setgid", p_mknodat_setgid },
	{ "open_setuid", p_open_setuid },
	{ "openat_setuid", p_openat_setuid },
	{ "openat_plain", p_openat_plain },
	{ "creat_setgid", p_creat_setgid },
	{ "mkdir_setgid", p_mkdir_setgid },
	{ "mkdirat_setuid", p_mkdirat_setuid },
	{ "mkdir_plain", p_mkdir_plain },
	{ "openat2", p_openat2 },
	{ "setxattr", p_setxattr },
	{ "lsetxattr", p_lsetxattr },
	{ "fsetxattr", p_fsetxattr },
	{ "setxattrat", p_setxattrat },
	{ "getxattr", p_getxattr },
	{ "x32", p_x32 },
};
/* clang-format on */

static const struct probe *
probe_find(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(probes); i++)
		if (strcmp(probes[i].name, name) == 0)
			return &probes[i];
	return NULL;
}

static void
probe_run(const struct probe *p)
{
	int e = p->fn();
	const char *en = e == 0 ? "0" : strerrorname_np(e);

	if (en != NULL)
		(void)printf("%s errno=%s\n", p->name, en);
	else
		(void)printf("%s errno=%d\n", p->name, e);
}

static int
usage(void)
{
	size_t i;

	(void)fprintf(stderr,
	    "usage: try_syscall [--protect-pid N] "
	    "[--protect-pgid N] [--debug] off|default|strict PROBE...\n"
	    "probes:");
	for (i = 0; i < NELEM(probes); i++)
		(void)fprintf(stderr, " %s", probes[i].name);
	(void)fprintf(stderr, "\n");
	return 2;
}

static int
parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > 0x7fffffff)
		return -1;
	*out = (pid_t)v;
	return 0;
}

/* Parses one option at argv[*i], stepping over its value. */
static int
parse_opt(int argc, char **argv, int *i, unsigned *flags)
{
	const char *opt = argv[*i];

	if (strcmp(opt, "--debug") == 0) {
		*flags |= SANDBOX_DEBUG;
		return 0;
	}
	if (*i + 1 >= argc)
		return -1;
	++*i;
	if (strcmp(opt, "--protect-pid") == 0)
		return parse_pid(argv[*i], &protect_pid);
	if (strcmp(opt, "--protect-pgid") == 0)
		return parse_pid(argv[*i], &protect_pgid);
	return -1;
}

/* Parses the options and the profile; returns the index of the first
 * probe, or -1 on bad usage. */
static int
parse_args(int argc, char **argv, enum sandbox_profile *prof, unsigned *flags)
{
	int i, j;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
		if (parse_opt(argc, argv, &i, flags) == -1)
			return -1;
	if (i >= argc || sandbox_profile_parse(argv[i], prof) == -1)
		return -1;
	for (j = i + 1; j < argc; j++)
		if (probe_find(argv[j]) == NULL)
			return -1;
	return i + 1;
}

int
main(int argc, char **argv)
{
	enum sandbox_profile prof;
	unsigned flags = 0;
	int i;

	protect_pid = getppid();
	if ((i = parse_args(argc, argv, &prof, &flags)) == -1)
		return usage();
	if (protect_pgid == 0 && (protect_pgid = getpgid(protect_pid)) == -1)
		protect_pgid = 0;

	(void)setvbuf(stdout, NULL, _IOLBF, 0);
	if ((flags & SANDBOX_DEBUG) && sandbox_seccomp_debug_install(-1) == -1) {
		(void)fprintf(stderr, "try_syscall: debug handler: %s\n",
		    strerror(errno));
		return 1;
	}
	if (sandbox_seccomp_apply(prof, protect_pid, protect_pgid, flags) ==
	    -1) {
		(void)fprintf(stderr, "try_syscall: apply %s: %s\n",
		    sandbox_profile_name(prof), strerror(errno));
		return 1;
	}
	for (; i < argc; i++)
		probe_run(probe_find(argv[i]));
	return 0;
}
