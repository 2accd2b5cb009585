/*
 * tests/sandbox/try_probes_kernel.c - try_syscall's probes: the kernel's escape surface: ptrace, mounts and namespaces, kernel
 * interfaces, ioctls on the terminal, personality, and calls aimed at the
 * supervisor.
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

/* clang-format off */
const struct probe probes_kernel[] = {
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
};
/* clang-format on */

const size_t probes_kernel_n = NELEM(probes_kernel);
