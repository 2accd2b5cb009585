/*
 * sandbox/seccomp_rules.c - the worker's seccomp policy as tables: what
 * each profile denies, allows and answers (SPEC section 7). Data only;
 * seccomp.c turns them into filters (see there for how the two filters
 * of strict combine).
 *
 * Read by the worker before its first cell (seccomp.c): plain data.
 * Rules on one syscall never overlap with different actions: libseccomp
 * does not define which would win.  An int argument in a deny rule is
 * compared on its low 32 bits (the kernel ignores the high ones); a value
 * an allow rule must match exactly is compared on all 64, which fails
 * closed.
 */
#include "sandbox/seccomp_rules.h"

#include <errno.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* USERFAULTFD_IOC_NEW: /dev/userfaultfd makes a userfaultfd without the
 * syscall (Linux 6.1). */
#define UFFD_IOC_NEW  _IO(0xAA, 0x00)

/* The tables read as tables. */
/* clang-format off */

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
const struct rule seccomp_escape_rules[] = {
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
const struct rule seccomp_sysv_rules[] = {
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
const int seccomp_pid_target_nrs[] = {
	SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(tgkill),
	SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo),
	SCMP_SYS(pidfd_open), SCMP_SYS(prlimit64),
	SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_setscheduler),
	SCMP_SYS(sched_setparam), SCMP_SYS(sched_setattr),
};

/* The strict profile's own filter: default ENOSYS. */
const struct rule seccomp_strict_rules[] = {
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
/* clang-format on */

const size_t seccomp_escape_nrules = NELEM(seccomp_escape_rules);
const size_t seccomp_sysv_nrules = NELEM(seccomp_sysv_rules);
const size_t seccomp_pid_target_nnrs = NELEM(seccomp_pid_target_nrs);
const size_t seccomp_strict_nrules = NELEM(seccomp_strict_rules);
