/*
 * sandbox/seccomp.h - the worker's seccomp policy (SPEC section 7).
 *
 * The worker applies one profile to itself, once, before it runs the first
 * cell.  Profiles:
 *
 *   off      nothing is loaded (no_new_privs is not set either).
 *   default  default-allow deny-list for a general agent that may use files,
 *            network and subprocesses: the kernel escape surface and signals
 *            aimed at the supervisor fail with EPERM (ENOSYS for clone3 and
 *            the new mount API).
 *   strict   everything in default plus an allow-list for pure computation:
 *            unlisted syscalls fail with ENOSYS, new sockets are AF_UNIX
 *            stream or seqpacket only, no connect/bind/listen/accept, no
 *            exec, no new processes (threads still work).
 *
 * A denied call fails with an errno; nothing is killed except a syscall made
 * through a foreign ABI (i386, x32), which kills the whole process with
 * SIGSYS.  This module never logs and never exits, with one exception: the
 * debug SIGSYS handler below, which the worker installs on purpose.
 */
#ifndef AGENTZ_SANDBOX_SECCOMP_H
#define AGENTZ_SANDBOX_SECCOMP_H

#include <sys/types.h>

enum sandbox_profile { SANDBOX_OFF, SANDBOX_DEFAULT, SANDBOX_STRICT };

/* Flags for sandbox_seccomp_apply(). */
#define SANDBOX_DEBUG 0x1u /* denials and unlisted calls raise SIGSYS */
#define SANDBOX_NO_SYSV 0x2u /* deny SysV IPC: no IPC namespace of our own */

/*
 * Parses "off", "default" or "strict" into *out.
 * Returns 0, or -1 with errno EINVAL (s NULL or unknown; *out untouched).
 */
int sandbox_profile_parse(const char *s, enum sandbox_profile *out);

/* Returns the profile's name as parse accepts it, or "?" if out of range. */
const char *sandbox_profile_name(enum sandbox_profile p);

/*
 * Sets PR_SET_NO_NEW_PRIVS and loads profile p onto the calling process
 * (TSYNC: every existing thread is covered, and every later thread
 * inherits it).  Irreversible.
 *
 * supervisor_pid / supervisor_pgid: kill, tkill, tgkill, rt_sigqueueinfo,
 * rt_tgsigqueueinfo, pidfd_open, prlimit64 and sched_set* aimed at
 * supervisor_pid, at -supervisor_pgid or at -1 fail with EPERM (pids are
 * compared on their low 32 bits, as the kernel reads them).  0 means "no
 * such process": its rules are left out.  If the caller still shares
 * supervisor_pgid, kill(0, ...) is denied too; call setsid() first.
 *
 * flags: 0, SANDBOX_DEBUG, SANDBOX_NO_SYSV (SysV IPC fails with EPERM, for
 * a worker in the host's IPC namespace), or both.  A foreign-ABI call always raises SIGSYS
 * (it is never executed), so sandbox_seccomp_debug_install()'s handler can
 * name it; with SANDBOX_DEBUG every denial (and, in strict, every
 * unlisted syscall) raises SIGSYS too instead of failing.
 * clone3 still returns ENOSYS, since libc probes it on every thread start.
 *
 * Returns 0 (also for SANDBOX_OFF, which does nothing), or -1 with errno:
 * EINVAL for a bad profile, flag or pid; otherwise what prctl(2) or
 * libseccomp report (ESRCH: a thread could not be synchronised; a refused
 * load may come back with an imprecise errno such as EFAULT).  The load
 * needs the seccomp(2) syscall itself (TSYNC has no prctl fallback): a
 * systemd unit with SystemCallFilter=@system-service must add "seccomp".
 * After a failure the process may hold part of the policy: the caller must
 * not run cells.
 */
int sandbox_seccomp_apply(enum sandbox_profile p, pid_t supervisor_pid,
    pid_t supervisor_pgid, unsigned flags);

/*
 * Installs a SIGSYS handler that writes
 *   "agentz-worker: seccomp blocked syscall NAME (NR)\n"
 * to fd 2 (and to report_fd when >= 0, for the supervisor's record) and
 * _exits with WEXIT_SECCOMP (proto/wexit.h).  Syscall names are resolved
 * here, up front, so the handler itself is async-signal-safe.  Install it
 * before sandbox_seccomp_apply(..., SANDBOX_DEBUG); Python code that sets
 * its own SIGSYS handler replaces it (the call is still not executed).
 * A call trapped while SIGSYS is blocked (libc blocks every signal around
 * fork, vfork and thread start) kills the process by SIGSYS, unnamed.
 * Returns 0, or -1 with errno from sigaction(2).
 */
int sandbox_seccomp_debug_install(int report_fd);

#endif /* AGENTZ_SANDBOX_SECCOMP_H */
