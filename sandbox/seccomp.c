/*
 * sandbox/seccomp.c - the worker's seccomp profiles, as tables fed to
 * libseccomp (the only <seccomp.h> user).
 *
 * Two filters, two tables:
 *
 *   escape_rules  the "default" profile: default ALLOW, and the kernel
 *                 escape surface denied with EPERM (ENOSYS where libc or
 *                 container runtimes expect "not implemented").  Generated
 *                 rules complete it: personality() other than 0 and the query
 *                 value, and calls aimed at the supervisor.
 *   strict_rules  an allow-list, default ENOSYS, for pure computation.
 *
 * "strict" loads the allow-list first and the escape filter second.  The
 * kernel runs every filter and keeps the most severe action; between two
 * errnos it keeps the one from the filter loaded last.  So strict is exactly
 * "default plus the allow-list": an escape call reads EPERM in both
 * profiles, and no rule of one table has to be re-expressed in the other.
 *
 * Rules on one syscall never overlap with different actions: libseccomp
 * does not define which would win.  An int argument in a deny rule is
 * compared on its low 32 bits (the kernel ignores the high ones); a value an
 * allow rule must match exactly is compared on all 64, which fails closed.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox/seccomp.h"
#include "proto/proto.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* clone()'s flags are its second argument on s390. */
#if defined(__s390__) || defined(__s390x__)
#define CLONE_ARG 1
#else
#define CLONE_ARG 0
#endif

#ifndef SYS_SECCOMP
/* si_code of a seccomp SIGSYS (asm-generic/siginfo.h) */
#define SYS_SECCOMP 1
#endif

/* USERFAULTFD_IOC_NEW: /dev/userfaultfd makes a userfaultfd without the
 * syscall (Linux 6.1). */
#define UFFD_IOC_NEW  _IO(0xAA, 0x00)
#define PERSONA_QUERY 0xffffffffu

/* open_tree_attr (Linux 6.15) is newer than our libseccomp; new syscalls
 * share one number on every architecture except alpha, mips and x32. */
#if defined(__SNR_open_tree_attr)
#define NR_OPEN_TREE_ATTR SCMP_SYS(open_tree_attr)
#elif (defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__)
#define NR_OPEN_TREE_ATTR 467
#else
#define NR_OPEN_TREE_ATTR (-1)
#endif

/* fchmodat2 (Linux 6.6) and setxattrat (6.13): the same. */
#if (defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__)
#define NR_FCHMODAT2 452
#define NR_SETXATTRAT 463
#else
#define NR_FCHMODAT2 (-1)
#define NR_SETXATTRAT (-1)
#endif

enum rule_kind {
	R_ALLOW, /* run the call */
	R_DENY,  /* fail with err; SIGSYS under SANDBOX_DEBUG */
	R_COMPAT /* fail with err always: libc probes it and falls back */
};

struct rule {
	int nr;             /* negative: not on this architecture */
	unsigned char kind; /* enum rule_kind */
	unsigned char ncmp;
	int err;
	struct scmp_arg_cmp cmp[2]; /* all must hold */
};

/* The tables read as tables. */
/* clang-format off */
#define C_NONE         { 0, SCMP_CMP_EQ, 0, 0 }
#define LOW32(a, v)    { a, SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)(v) }
#define BITS(a, m, v)  { a, SCMP_CMP_MASKED_EQ, m, v }
#define EQ64(a, v)     { a, SCMP_CMP_EQ, v, 0 }
#define NE64(a, v)     { a, SCMP_CMP_NE, v, 0 }

#define ALLOW(s)          { SCMP_SYS(s), R_ALLOW, 0, 0, { C_NONE, C_NONE } }
#define ALLOW_IF(s, c)    { SCMP_SYS(s), R_ALLOW, 1, 0, { c, C_NONE } }
#define ALLOW_IF2(s, c, d) { SCMP_SYS(s), R_ALLOW, 2, 0, { c, d } }
#define DENY(s, e)        { SCMP_SYS(s), R_DENY, 0, e, { C_NONE, C_NONE } }
#define DENY_IF(s, e, c)  { SCMP_SYS(s), R_DENY, 1, e, { c, C_NONE } }
#define DENY_IF2(s, e, c, d) { SCMP_SYS(s), R_DENY, 2, e, { c, d } }
#define COMPAT(s, e)      { SCMP_SYS(s), R_COMPAT, 0, e, { C_NONE, C_NONE } }
#define CLONE_HAS(f)      DENY_IF(clone, EPERM, BITS(CLONE_ARG, f, f))
/* A mode argument (argument a) carrying S_ISUID or S_ISGID: EPERM. */
#define SETID_NR(nr, a)   { nr, R_DENY, 1, EPERM, \
			    { BITS(a, S_ISUID, S_ISUID), C_NONE } }, \
			  { nr, R_DENY, 1, EPERM, \
			    { BITS(a, S_ISGID, S_ISGID), C_NONE } }
#define SETID(s, a)       SETID_NR(SCMP_SYS(s), a)

/* The default profile (also loaded by strict).  SPEC section 7. */
static const struct rule escape_rules[] = {
	/* Other processes' memory and descriptors. */
	DENY(ptrace, EPERM), DENY(process_vm_readv, EPERM),
	DENY(process_vm_writev, EPERM), DENY(pidfd_getfd, EPERM),
	/* A pidfd can be opened as /proc/PID: the target is not checkable. */
	DENY(pidfd_send_signal, EPERM),

	/* Mounts and namespaces.  The new mount API answers ENOSYS (flatpak,
	 * CVE-2021-41133), so callers fall back to mount(2), denied. */
	DENY(mount, EPERM), DENY(umount, EPERM), DENY(umount2, EPERM),
	DENY(pivot_root, EPERM), DENY(chroot, EPERM),
	DENY(unshare, EPERM), DENY(setns, EPERM),
	DENY(open_tree, ENOSYS), DENY(move_mount, ENOSYS),
	DENY(fsopen, ENOSYS), DENY(fsconfig, ENOSYS), DENY(fsmount, ENOSYS),
	DENY(fspick, ENOSYS), DENY(mount_setattr, ENOSYS),
	{ NR_OPEN_TREE_ATTR, R_DENY, 0, ENOSYS, { C_NONE, C_NONE } },
	CLONE_HAS(CLONE_NEWNS), CLONE_HAS(CLONE_NEWCGROUP),
	CLONE_HAS(CLONE_NEWUTS), CLONE_HAS(CLONE_NEWIPC),
	CLONE_HAS(CLONE_NEWUSER), CLONE_HAS(CLONE_NEWPID),
	CLONE_HAS(CLONE_NEWNET),
	/* clone3's flags sit behind a pointer.  ENOSYS, not EPERM: glibc then
	 * retries with clone(), and pthread_create keeps working. */
	COMPAT(clone3, ENOSYS),

	/* Kernel attack surface. */
	DENY(bpf, EPERM), DENY(perf_event_open, EPERM),
	DENY(keyctl, EPERM), DENY(add_key, EPERM), DENY(request_key, EPERM),
	DENY(io_uring_setup, EPERM), DENY(io_uring_enter, EPERM),
	DENY(io_uring_register, EPERM),
	DENY(userfaultfd, EPERM), DENY_IF(ioctl, EPERM, LOW32(1, UFFD_IOC_NEW)),
	DENY(modify_ldt, EPERM), DENY(uselib, EPERM),
	DENY(iopl, EPERM), DENY(ioperm, EPERM),
	DENY(mbind, EPERM), DENY(set_mempolicy, EPERM),
	DENY(get_mempolicy, EPERM), DENY(migrate_pages, EPERM),
	DENY(move_pages, EPERM), DENY(set_mempolicy_home_node, EPERM),

	/* Whole-system state. */
	DENY(kexec_load, EPERM), DENY(kexec_file_load, EPERM),
	DENY(init_module, EPERM), DENY(finit_module, EPERM),
	DENY(delete_module, EPERM), DENY(reboot, EPERM),
	DENY(swapon, EPERM), DENY(swapoff, EPERM), DENY(acct, EPERM),
	DENY(syslog, EPERM), DENY(quotactl, EPERM), DENY(quotactl_fd, EPERM),
	DENY(open_by_handle_at, EPERM), DENY(name_to_handle_at, EPERM),
	DENY(fanotify_init, EPERM),
	DENY(settimeofday, EPERM), DENY(clock_settime, EPERM),
	DENY(clock_adjtime, EPERM), DENY(adjtimex, EPERM),
	DENY(sethostname, EPERM), DENY(setdomainname, EPERM),
	DENY(vhangup, EPERM),

	/* Typing into the controlling terminal (CVE-2017-5226, -2023-28100);
	 * low 32 bits, so garbage above them cannot slip by (CVE-2019-10063). */
	DENY_IF(ioctl, EPERM, LOW32(1, TIOCSTI)),
	DENY_IF(ioctl, EPERM, LOW32(1, TIOCLINUX)),

	/* No set-id file and no file capability: through the workspace's
	 * id-mapped bind a cell's file belongs to the operator (root), and a
	 * set-uid copy of python3 there would give any local user euid 0.
	 * Every mode argument with S_ISUID or S_ISGID is refused, directories
	 * included (a folder still inherits S_ISGID from its parent: the
	 * kernel does that, no mode asks for it).  openat2's mode sits behind
	 * a pointer: ENOSYS, and callers fall back to openat.  The xattr
	 * name is a string seccomp cannot read: setting any xattr answers
	 * EOPNOTSUPP, what copying tools (shutil.copystat, cp -a) take as "no
	 * xattrs here" and go on; the kernel's CAP_SETFCAP check behind it is
	 * a second wall for security.capability. */
	SETID(chmod, 1), SETID(fchmod, 1), SETID(fchmodat, 2),
	SETID_NR(NR_FCHMODAT2, 2),
	SETID(mknod, 1), SETID(mknodat, 2),
	SETID(open, 2), SETID(openat, 3), SETID(creat, 1),
	SETID(mkdir, 1), SETID(mkdirat, 2),
	COMPAT(openat2, ENOSYS),
	COMPAT(setxattr, EOPNOTSUPP), COMPAT(lsetxattr, EOPNOTSUPP),
	COMPAT(fsetxattr, EOPNOTSUPP),
	{ NR_SETXATTRAT, R_COMPAT, 0, EOPNOTSUPP, { C_NONE, C_NONE } },
};

/*
 * SysV IPC, denied only when the worker shares the host's IPC namespace
 * (no jail): there another root process's segments would be in reach.
 */
static const struct rule sysv_rules[] = {
	DENY(shmget, EPERM), DENY(shmat, EPERM), DENY(shmctl, EPERM),
	DENY(msgget, EPERM), DENY(msgctl, EPERM), DENY(msgsnd, EPERM),
	DENY(msgrcv, EPERM), DENY(semget, EPERM), DENY(semctl, EPERM),
	DENY(semop, EPERM), DENY(semtimedop, EPERM),
};

/*
 * Calls whose first argument names a process: aimed at the supervisor, at
 * its process group or at -1 (every process we may signal) they fail with
 * EPERM.  prlimit64 and sched_set* can stop or starve a same-uid process
 * as surely as a signal.
 */
static const int pid_target_nrs[] = {
	SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(tgkill),
	SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo),
	SCMP_SYS(pidfd_open), SCMP_SYS(prlimit64),
	SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_setscheduler),
	SCMP_SYS(sched_setparam), SCMP_SYS(sched_setattr),
};

/* The strict profile's own filter: default ENOSYS. */
static const struct rule strict_rules[] = {
	/* Files and descriptors (imports, tempfile, shutil). */
	ALLOW(read), ALLOW(write), ALLOW(readv), ALLOW(writev),
	ALLOW(pread64), ALLOW(pwrite64), ALLOW(preadv), ALLOW(pwritev),
	ALLOW(preadv2), ALLOW(pwritev2), ALLOW(lseek), ALLOW(close),
	ALLOW(close_range), ALLOW(dup), ALLOW(dup2), ALLOW(dup3),
	ALLOW(fcntl), ALLOW(flock), ALLOW(fsync), ALLOW(fdatasync),
	ALLOW(open), ALLOW(openat), ALLOW(openat2), ALLOW(creat),
	ALLOW(stat), ALLOW(fstat), ALLOW(lstat), ALLOW(newfstatat),
	ALLOW(statx), ALLOW(statfs), ALLOW(fstatfs),
	ALLOW(access), ALLOW(faccessat), ALLOW(faccessat2),
	ALLOW(readlink), ALLOW(readlinkat), ALLOW(getdents),
	ALLOW(getdents64), ALLOW(getcwd), ALLOW(chdir), ALLOW(fchdir),
	ALLOW(umask), ALLOW(truncate), ALLOW(ftruncate), ALLOW(fallocate),
	ALLOW(fadvise64), ALLOW(sendfile), ALLOW(copy_file_range),
	ALLOW(mkdir), ALLOW(mkdirat), ALLOW(rmdir), ALLOW(unlink),
	ALLOW(unlinkat), ALLOW(rename), ALLOW(renameat), ALLOW(renameat2),
	ALLOW(link), ALLOW(linkat), ALLOW(symlink), ALLOW(symlinkat),
	ALLOW(mknod), ALLOW(mknodat),
	ALLOW(chmod), ALLOW(fchmod), ALLOW(fchmodat), ALLOW(chown),
	ALLOW(fchown), ALLOW(fchownat), ALLOW(lchown),
	ALLOW(utime), ALLOW(utimes), ALLOW(futimesat), ALLOW(utimensat),
	ALLOW(getxattr), ALLOW(lgetxattr), ALLOW(fgetxattr),
	ALLOW(listxattr), ALLOW(llistxattr), ALLOW(flistxattr),
	ALLOW(setxattr), ALLOW(lsetxattr), ALLOW(fsetxattr),
	ALLOW(removexattr), ALLOW(lremovexattr), ALLOW(fremovexattr),
	ALLOW(inotify_init), ALLOW(inotify_init1),
	ALLOW(inotify_add_watch), ALLOW(inotify_rm_watch),
	ALLOW(pipe), ALLOW(pipe2), ALLOW(memfd_create),

	/* Memory (memfd_create above: libffi's W^X fallback). */
	ALLOW(brk), ALLOW(mmap), ALLOW(munmap), ALLOW(mremap),
	ALLOW(mprotect), ALLOW(madvise), ALLOW(msync), ALLOW(mincore),
	ALLOW(membarrier),

	/* Threads and scheduling. */
	ALLOW(futex), ALLOW(futex_waitv), ALLOW(set_robust_list),
	ALLOW(set_tid_address), ALLOW(rseq), ALLOW(arch_prctl),
	ALLOW(sched_yield), ALLOW(sched_getaffinity),
	ALLOW(sched_setaffinity), ALLOW(sched_getparam),
	ALLOW(sched_getscheduler), ALLOW(sched_getattr),
	ALLOW(sched_get_priority_max), ALLOW(sched_get_priority_min),
	ALLOW(sched_rr_get_interval), ALLOW(getpriority), ALLOW(getcpu),
	ALLOW_IF(clone, BITS(CLONE_ARG, CLONE_THREAD, CLONE_THREAD)),
	COMPAT(clone3, ENOSYS),
	ALLOW(exit), ALLOW(exit_group), ALLOW(wait4), ALLOW(waitid),
	ALLOW(restart_syscall),

	/* Signals, timers and time (faulthandler, asyncio, time.sleep). */
	ALLOW(rt_sigaction), ALLOW(rt_sigprocmask), ALLOW(rt_sigreturn),
	ALLOW(rt_sigpending), ALLOW(rt_sigtimedwait), ALLOW(rt_sigsuspend),
	ALLOW(sigaltstack), ALLOW(pause), ALLOW(alarm),
	ALLOW(kill), ALLOW(tkill), ALLOW(tgkill),
	ALLOW(rt_sigqueueinfo), ALLOW(rt_tgsigqueueinfo),
	ALLOW(getitimer), ALLOW(setitimer), ALLOW(timer_create),
	ALLOW(timer_settime), ALLOW(timer_gettime), ALLOW(timer_getoverrun),
	ALLOW(timer_delete), ALLOW(clock_gettime), ALLOW(clock_getres),
	ALLOW(clock_nanosleep), ALLOW(nanosleep), ALLOW(gettimeofday),
	ALLOW(time), ALLOW(times),

	/* Waiting on descriptors. */
	ALLOW(poll), ALLOW(ppoll), ALLOW(select), ALLOW(pselect6),
	ALLOW(epoll_create), ALLOW(epoll_create1), ALLOW(epoll_ctl),
	ALLOW(epoll_wait), ALLOW(epoll_pwait), ALLOW(epoll_pwait2),
	ALLOW(eventfd), ALLOW(eventfd2), ALLOW(signalfd), ALLOW(signalfd4),
	ALLOW(timerfd_create), ALLOW(timerfd_settime), ALLOW(timerfd_gettime),

	/* Identity and limits. */
	ALLOW(getpid), ALLOW(getppid), ALLOW(gettid), ALLOW(getuid),
	ALLOW(geteuid), ALLOW(getgid), ALLOW(getegid), ALLOW(getresuid),
	ALLOW(getresgid), ALLOW(getgroups), ALLOW(getpgrp), ALLOW(getpgid),
	ALLOW(getsid), ALLOW(getrusage), ALLOW(getrlimit), ALLOW(setrlimit),
	ALLOW_IF(prlimit64, EQ64(0, 0)),
	DENY_IF(prlimit64, EPERM, NE64(0, 0)),
	ALLOW(uname), ALLOW(sysinfo), ALLOW(getrandom), ALLOW(capget),
	ALLOW(seccomp), /* a further filter can only narrow this one */
	ALLOW_IF(personality, EQ64(0, 0)),
	ALLOW_IF(personality, EQ64(0, PERSONA_QUERY)),

	/* Data on sockets that exist (asyncio's self-pipe is sendto and
	 * recvfrom on a socketpair): never filtered. */
	ALLOW(sendto), ALLOW(recvfrom), ALLOW(sendmsg), ALLOW(recvmsg),
	ALLOW(sendmmsg), ALLOW(recvmmsg), ALLOW(shutdown),
	ALLOW(getsockname), ALLOW(getpeername),
	ALLOW(getsockopt), ALLOW(setsockopt),

	/* New sockets: AF_UNIX only, and no datagrams, which sendto() could
	 * address to any socket path on the host.  Compared on all 64 bits. */
	ALLOW_IF2(socket, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_STREAM)),
	ALLOW_IF2(socket, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_SEQPACKET)),
	DENY_IF2(socket, EPERM, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_DGRAM)),
	DENY_IF(socket, EAFNOSUPPORT, NE64(0, AF_UNIX)),
	ALLOW_IF2(socketpair, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_STREAM)),
	ALLOW_IF2(socketpair, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_SEQPACKET)),
	DENY_IF2(socketpair, EPERM, EQ64(0, AF_UNIX), BITS(1, 0xf, SOCK_DGRAM)),
	DENY_IF(socketpair, EAFNOSUPPORT, NE64(0, AF_UNIX)),
	DENY(connect, EPERM), DENY(bind, EPERM), DENY(listen, EPERM),
	DENY(accept, EPERM), DENY(accept4, EPERM),

	/* No new programs, no new processes: threads only. */
	DENY(execve, EPERM), DENY(execveat, EPERM),
	DENY(fork, EPERM), DENY(vfork, EPERM),
	DENY_IF(clone, EPERM, BITS(CLONE_ARG, CLONE_THREAD, 0)),

	/* ioctl and prctl requests CPython and libc make; option and request
	 * are ints, so the low 32 bits are what the kernel acts on. */
	ALLOW_IF(ioctl, LOW32(1, TCGETS)), ALLOW_IF(ioctl, LOW32(1, TIOCGWINSZ)),
	ALLOW_IF(ioctl, LOW32(1, TIOCGPGRP)), ALLOW_IF(ioctl, LOW32(1, FIONREAD)),
	ALLOW_IF(ioctl, LOW32(1, FIONBIO)), ALLOW_IF(ioctl, LOW32(1, FIOCLEX)),
	ALLOW_IF(ioctl, LOW32(1, FIONCLEX)),
	ALLOW_IF(prctl, LOW32(0, PR_SET_NAME)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_NAME)),
	ALLOW_IF(prctl, LOW32(0, PR_SET_NO_NEW_PRIVS)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_NO_NEW_PRIVS)),
	ALLOW_IF(prctl, LOW32(0, PR_SET_SECCOMP)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_SECCOMP)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_DUMPABLE)),
	ALLOW_IF(prctl, LOW32(0, PR_CAPBSET_READ)),
	ALLOW_IF(prctl, LOW32(0, PR_SET_VMA)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_PDEATHSIG)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_KEEPCAPS)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_TIMERSLACK)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_THP_DISABLE)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_CHILD_SUBREAPER)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_SECUREBITS)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_SPECULATION_CTRL)),
	ALLOW_IF(prctl, LOW32(0, PR_GET_TID_ADDRESS)),
	ALLOW_IF(prctl, LOW32(0, PR_MCE_KILL_GET)),
};

static const char *const profile_names[] = {
	[SANDBOX_OFF] = "off",
	[SANDBOX_DEFAULT] = "default",
	[SANDBOX_STRICT] = "strict",
};
/* clang-format on */

int
sandbox_profile_parse(const char *s, enum sandbox_profile *out)
{
	size_t i;

	for (i = 0; s != NULL && i < NELEM(profile_names); i++) {
		if (strcmp(s, profile_names[i]) == 0) {
			*out = (enum sandbox_profile)i;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

const char *
sandbox_profile_name(enum sandbox_profile p)
{
	if ((unsigned)p >= NELEM(profile_names))
		return "?";
	return profile_names[p];
}

static uint32_t
deny_action(int err, unsigned flags)
{
	if (flags & SANDBOX_DEBUG)
		return SCMP_ACT_TRAP;
	return SCMP_ACT_ERRNO((uint32_t)err);
}

static uint32_t
rule_action(const struct rule *r, unsigned flags)
{
	switch ((enum rule_kind)r->kind) {
	case R_ALLOW:
		return SCMP_ACT_ALLOW;
	case R_COMPAT:
		return SCMP_ACT_ERRNO((uint32_t)r->err);
	case R_DENY:
		break;
	}
	return deny_action(r->err, flags);
}

/* A rule with the filter's default action is redundant, and libseccomp
 * refuses it (EACCES): skip it.  Returns 0 or a negative errno. */
static int
add_rule(scmp_filter_ctx ctx, uint32_t def, uint32_t action, int nr,
    unsigned ncmp, const struct scmp_arg_cmp *cmp)
{
	if (nr < 0 || action == def)
		return 0;
	return seccomp_rule_add_array(ctx, action, nr, ncmp, cmp);
}

static int
add_table(scmp_filter_ctx ctx, uint32_t def, const struct rule *t, size_t n,
    unsigned flags)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int rc = add_rule(ctx, def, rule_action(&t[i], flags), t[i].nr,
		    t[i].ncmp, t[i].cmp);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * personality(2) reads an unsigned int; allowed are 0 (PER_LINUX) and the
 * query 0xffffffff.  One rule may compare an argument only once, so "the
 * low 32 bits are neither all 0 nor all 1" is written as "some bit i is 1
 * and bit i+1 (mod 32) is 0": every other word has such a pair.
 */
static int
add_personality(scmp_filter_ctx ctx, uint32_t action)
{
	struct scmp_arg_cmp c = BITS(0, 0, 0);
	unsigned i;

	for (i = 0; i < 32; i++) {
		int rc;

		c.datum_a = (1u << i) | (1u << ((i + 1) % 32));
		c.datum_b = 1u << i;
		rc = seccomp_rule_add_array(
		    ctx, action, SCMP_SYS(personality), 1, &c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Every pid_target_nrs call aimed at -1, sup or -pgid; and kill(0), which
 * names our own process group: the supervisor's too while we share it. */
static int
add_pid_targets(scmp_filter_ctx ctx, uint32_t action, pid_t sup, pid_t pgid)
{
	uint32_t targets[3];
	struct scmp_arg_cmp c = LOW32(0, 0);
	size_t i, j, nt = 0;

	targets[nt++] = (uint32_t)-1;
	if (sup > 0)
		targets[nt++] = (uint32_t)sup;
	if (pgid > 1)
		targets[nt++] = (uint32_t)-pgid;
	for (i = 0; i < NELEM(pid_target_nrs); i++) {
		for (j = 0; j < nt; j++) {
			int rc;

			c.datum_b = targets[j];
			rc = add_rule(ctx, SCMP_ACT_ALLOW, action,
			    pid_target_nrs[i], 1, &c);
			if (rc < 0)
				return rc;
		}
	}
	if (pgid > 0 && getpgrp() == pgid) {
		c.datum_b = 0;
		return add_rule(
		    ctx, SCMP_ACT_ALLOW, action, SCMP_SYS(kill), 1, &c);
	}
	return 0;
}

/* Returns a new filter with default action def, or NULL and *rc. */
static scmp_filter_ctx
filter_new(uint32_t def, int *rc)
{
	scmp_filter_ctx ctx = seccomp_init(def);

	if (ctx == NULL) {
		*rc = -ENOMEM;
		return NULL;
	}
	/* A foreign ABI (i386's int 0x80, x32) would bypass every rule.
	 * TRAP: the call is not executed either way, and a handler can name
	 * it; unhandled (or blocked) SIGSYS still kills the process. */
	*rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_TRAP);
	if (*rc == 0)
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (*rc == 0)
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (*rc == 0) /* the kernel's errno, not ECANCELED */
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static scmp_filter_ctx
escape_filter(pid_t sup, pid_t pgid, unsigned flags, int *rc)
{
	uint32_t action = deny_action(EPERM, flags);
	scmp_filter_ctx ctx = filter_new(SCMP_ACT_ALLOW, rc);

	if (ctx == NULL)
		return NULL;
	*rc = add_table(
	    ctx, SCMP_ACT_ALLOW, escape_rules, NELEM(escape_rules), flags);
	if (*rc == 0 && (flags & SANDBOX_NO_SYSV))
		*rc = add_table(
		    ctx, SCMP_ACT_ALLOW, sysv_rules, NELEM(sysv_rules), flags);
	if (*rc == 0)
		*rc = add_personality(ctx, action);
	if (*rc == 0)
		*rc = add_pid_targets(ctx, action, sup, pgid);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static scmp_filter_ctx
strict_filter(unsigned flags, int *rc)
{
	uint32_t def = deny_action(ENOSYS, flags);
	scmp_filter_ctx ctx = filter_new(def, rc);

	if (ctx == NULL)
		return NULL;
	*rc = add_table(ctx, def, strict_rules, NELEM(strict_rules), flags);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

int
sandbox_seccomp_apply(enum sandbox_profile p, pid_t supervisor_pid,
    pid_t supervisor_pgid, unsigned flags)
{
	scmp_filter_ctx strict = NULL, escape = NULL;
	int rc = 0;

	if ((flags & ~(SANDBOX_DEBUG | SANDBOX_NO_SYSV)) != 0 ||
	    supervisor_pid < 0 ||
	    supervisor_pgid < 0) {
		errno = EINVAL;
		return -1;
	}
	switch (p) {
	case SANDBOX_OFF:
		return 0;
	case SANDBOX_DEFAULT:
	case SANDBOX_STRICT:
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;

	/* Both filters are built before either is loaded: once the strict
	 * one is in, only what it allows is left to finish with.  Strict is
	 * loaded first: between two errnos the kernel keeps the one of the
	 * filter loaded last, so escape calls read as they do in default. */
	if (p == SANDBOX_STRICT)
		strict = strict_filter(flags, &rc);
	if (rc == 0)
		escape =
		    escape_filter(supervisor_pid, supervisor_pgid, flags, &rc);
	if (rc == 0 && strict != NULL)
		rc = seccomp_load(strict);
	if (rc == 0)
		rc = seccomp_load(escape);
	if (strict != NULL)
		seccomp_release(strict);
	if (escape != NULL)
		seccomp_release(escape);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/*
 * Debug mode.  Names are resolved when the handler is installed, into
 * static storage, because libseccomp's resolver allocates.
 */
#define NAME_NR_MAX 512

static char name_pool[8192];
static uint16_t name_off[NAME_NR_MAX]; /* offset + 1 into name_pool; 0: none */
static uint32_t name_arch;

static void
name_add(int nr, const char *name, size_t *used)
{
	size_t len = strlen(name) + 1;

	if (nr < 0 || nr >= NAME_NR_MAX || name_off[nr] != 0 ||
	    len > sizeof(name_pool) - *used)
		return;
	memcpy(name_pool + *used, name, len);
	name_off[nr] = (uint16_t)(*used + 1);
	*used += len;
}

static void
names_load(void)
{
	size_t used = 0;
	int nr;

	memset(name_off, 0, sizeof(name_off));
	name_arch = seccomp_arch_native();
	for (nr = 0; nr < NAME_NR_MAX; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(name_arch, nr);

		if (name != NULL)
			name_add(nr, name, &used);
		free(name);
	}
	name_add(NR_OPEN_TREE_ATTR, "open_tree_attr", &used);
	name_add(NR_FCHMODAT2, "fchmodat2", &used);
	name_add(NR_SETXATTRAT, "setxattrat", &used);
}

static size_t
put_str(char *buf, size_t n, size_t cap, const char *s)
{
	while (*s != '\0' && n < cap)
		buf[n++] = *s++;
	return n;
}

static size_t
put_num(char *buf, size_t n, size_t cap, unsigned long v, unsigned base)
{
	char tmp[24];
	size_t i = 0;

	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v != 0 && i < sizeof(tmp));
	while (i > 0 && n < cap)
		buf[n++] = tmp[--i];
	return n;
}

static int report_to = -1;	/* a second fd for the handler's line */

static void
on_sigsys(int sig, siginfo_t *si, void *uctx)
{
	char buf[160];
	size_t n, cap = sizeof(buf) - 1;
	const char *name = "?";
	unsigned nr = (unsigned)si->si_syscall;
	ssize_t w;

	(void)sig;
	(void)uctx;
	n = put_str(buf, 0, cap, "agentz-worker: ");
	if (si->si_code != SYS_SECCOMP) {
		n = put_str(buf, n, cap, "SIGSYS not from seccomp, si_code ");
		n = put_num(
		    buf, n, cap, (unsigned long)(unsigned)si->si_code, 10);
	} else {
		if (si->si_arch == name_arch && nr < NAME_NR_MAX &&
		    name_off[nr] != 0)
			name = name_pool + name_off[nr] - 1;
		n = put_str(buf, n, cap, "seccomp blocked syscall ");
		n = put_str(buf, n, cap, name);
		n = put_str(buf, n, cap, " (");
		n = put_num(buf, n, cap, nr, 10);
#if defined(__x86_64__) && !defined(__ILP32__)
		if (si->si_arch == name_arch && (nr & 0x40000000u) != 0)
			n = put_str(buf, n, cap, ", x32 ABI");
#endif
		if (si->si_arch != name_arch) {
			n = put_str(buf, n, cap, ", arch 0x");
			n = put_num(buf, n, cap, si->si_arch, 16);
		}
		n = put_str(buf, n, cap, ")");
	}
	buf[n++] = '\n';
	w = write(STDERR_FILENO, buf, n);
	if (report_to >= 0)
		w = write(report_to, buf, n);
	(void)w;
	_exit(WEXIT_SECCOMP);
}

int
sandbox_seccomp_debug_install(int report_fd)
{
	struct sigaction sa;

	report_to = report_fd;
	names_load();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	return sigaction(SIGSYS, &sa, NULL);
}
