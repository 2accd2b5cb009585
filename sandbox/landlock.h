/*
 * landlock.h - Landlock for the worker tree: writes only to the places the
 * view makes writable, and (Landlock ABI >= 6) no signal and no abstract
 * unix socket connection out of the tree.
 *
 * Landlock is a second wall behind the mount view: it holds even where a
 * bind mount is writable by mistake, and it is what keeps a cell from
 * signalling the supervisor when both share a PID namespace.  A domain is
 * inherited by every later child and cannot be lifted.
 *
 * Functions return -1 with errno and never log (the caller reports).
 */
#ifndef AGENTZ_SANDBOX_LANDLOCK_H
#define AGENTZ_SANDBOX_LANDLOCK_H

/* The first ABI versions that know a right this module uses. */
#define LANDLOCK_ABI_REFER	2	/* rename/link across directories */
#define LANDLOCK_ABI_TRUNCATE	3	/* truncate(2), O_TRUNC */
#define LANDLOCK_ABI_SCOPES	6	/* signal and abstract unix scoping */

/*
 * The Landlock ABI version the running kernel offers, 0 when it offers none
 * (no Landlock built in, disabled at boot, or the call is refused, e.g. by
 * a seccomp filter).  Async-signal-safe (one syscall).
 */
int landlock_abi(void);

/*
 * Restricts the calling thread, and every process it forks or execs from
 * now on, for good.  Call it in a single-threaded process (a forked child
 * before exec): other threads that already exist stay unrestricted.
 *
 * Handled (denied unless a rule allows them): opening a file for writing,
 * creating or removing any node (file, dir, symlink, fifo, socket,
 * device), with abi >= 2 linking or renaming across directories, with
 * abi >= 3 truncating.  Allowed:
 *  - rw_dirs: every right above, beneath each directory;
 *  - rw_files: writing (and truncating) each file; no rename or unlink,
 *    since those are rights of the parent directory.
 * Both are NULL-ended lists of absolute paths (a NULL list is empty);
 * symlinks are followed; a path that does not exist (ENOENT) is skipped.
 * Reading, listing and executing stay as the mount view allows.
 * With abi >= 6 the domain is also scoped: kill(2) (sig 0 included),
 * pidfd_send_signal(2), rt_sigqueueinfo(2) and abstract unix socket
 * connect/send toward a process outside it fail with EPERM; a SIGIO whose
 * owner was set (F_SETOWN) from inside the domain is dropped silently.
 * Measured on 6.18: an owner set on a file description before this call
 * still receives its SIGIO afterwards; a group kill (kill(-pgid)) returns
 * 0 when a member inside the domain got it, and skips the others.
 *
 * abi is what landlock_abi() returned: only the rights that version knows
 * are handled.  An abi above the kernel's is refused (EINVAL), never
 * silently lowered: the caller reports the abi it asked for.
 *
 * Order: the ruleset is built and every path checked first, then
 * PR_SET_NO_NEW_PRIVS is set, then the ruleset is enforced.  Only a failure
 * of those last two steps can leave no_new_privs set; any earlier failure
 * leaves the process unchanged.
 *
 * Async-signal-safe: raw syscalls only (open, fstat, close, prctl,
 * landlock_*), no allocation; safe between fork and exec in a child of a
 * multithreaded process.
 *
 * Returns 0, or -1 with errno:
 *   EOPNOTSUPP  abi 0, or the kernel has no Landlock (nothing is changed);
 *   EINVAL      abi < 0 or above the kernel's, or a path not absolute;
 *   ENOTDIR     an entry of rw_dirs is not a directory;
 *   EISDIR      an entry of rw_files is a directory;
 *   otherwise   from open(2), fstat(2), prctl(2) or the landlock calls.
 */
int landlock_restrict(const char *const *rw_dirs, const char *const *rw_files,
    int abi);

/*
 * landlock_restrict, and reading too: with it reading a file, listing a
 * directory and executing are handled as well, allowed beneath each of
 * ro_dirs and rw_dirs and on each of rw_files, denied elsewhere. For a
 * worker without the mount view (a best-effort jail that could not be
 * built): the files it may reach are then those the view would show.
 */
int landlock_restrict_reads(const char *const *ro_dirs,
    const char *const *rw_dirs, const char *const *rw_files, int abi);

#endif
