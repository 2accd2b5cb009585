/*
 * procfs.h - reading and writing /proc, one parser per kind of file
 * (stat, status, children lists, cgroup, id maps), for both binaries.
 *
 * procfs_put is system calls only (async-signal-safe: it serves clone
 * and fork children); the rest may use stdio. Functions return -1 with
 * errno and never log.
 */
#ifndef AGENTZ_PROCFS_H
#define AGENTZ_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* Writes s to the file at path in one write. 0, or -1 (errno; a short
 * write leaves it as it was). Async-signal-safe. */
int procfs_put(const char *path, const char *s);

/* Opens /proc/<pid>/<file> (pid 0: self) with flags | O_CLOEXEC: an fd,
 * or -1 with errno. */
int procfs_open(pid_t pid, const char *file, int flags);
/* /proc/<pid>/<file> (pid 0: self) into buf, NUL-ended (at most size - 1
 * bytes, one read). Its length, or -1 with errno. */
ssize_t procfs_read(pid_t pid, const char *file, char *buf, size_t size);
/* The same from offset 0 of an fd procfs_open gave (no new open). */
ssize_t procfs_pread(int fd, char *buf, size_t size);
/* procfs_put of /proc/<pid>/<file> (pid 0: self). 0, or -1 with errno. */
int procfs_write(pid_t pid, const char *file, const char *s);

/* The fields of /proc/<pid>/stat we use (after the comm, which may hold
 * anything but ends at the last ')'). Times in clock ticks. */
struct procfs_stat {
	char state;		/* 'R', 'S', 'Z', ... */
	pid_t ppid;
	unsigned flags;		/* field 9, the kernel's PF_* */
	unsigned long long utime, stime, cutime, cstime;
	long threads;		/* field 20 (0 when the text stops before) */
	/* field 22: since boot (0 when the text stops before it) */
	unsigned long long starttime;
};

/* PF_EXITING: the task is in exit(), past any fork of its own. */
#define PROCFS_PF_EXITING 0x4u

/* Parses a stat text. 0, or -1 with EINVAL (a field is missing). */
int procfs_stat_parse(const char *text, struct procfs_stat *st);
/* procfs_read and procfs_stat_parse of pid's stat. 0, or -1 with errno. */
int procfs_stat(pid_t pid, struct procfs_stat *st);

/* In a status text, the number after key (e.g. "VmHWM:"), or -1 when
 * the key is absent. */
long procfs_status_num(const char *text, const char *key);
/* PID namespaces nest 32 deep at most. */
#define PROCFS_NS_MAX 33
/* In a status text, the pids of the NSpid line, outermost first, into
 * out (at most max): how many there are (1: in our PID namespace), or
 * -1 when there is no such line. */
int procfs_status_nspids(const char *text, pid_t *out, int max);
/* The last of them (the pid as the innermost PID namespace sees it), or
 * 0. */
pid_t procfs_status_nspid(const char *text);

/* The pids of a whitespace-separated list (a children file,
 * cgroup.procs) into out, at most max, skipping those <= 0. How many. */
int procfs_pids(const char *text, pid_t *out, int max);
/* The children of thread tid of pid, from /proc/<pid>/task/<tid>/
 * children, into out (at most max). How many; 0 when unreadable. */
int procfs_children(pid_t pid, pid_t tid, pid_t *out, int max);

/* Our own cgroup path for v1 controller ctl, or for v2 (ctl NULL: the
 * "0::" line), from /proc/self/cgroup. 0, or -1 (not found, or errno). */
int procfs_self_cgroup(const char *ctl, char *out, size_t len);
/* The first line of pid's uid_map or gid_map (file): inside, outside
 * and count. 0, or -1 (unreadable or malformed). */
int procfs_id_map(pid_t pid, const char *file, unsigned long v[3]);

#endif
