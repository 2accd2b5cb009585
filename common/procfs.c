/*
 * procfs.c - /proc files read and written in one place (see procfs.h).
 *
 * Runs in either binary's main process, except procfs_put, which also
 * runs in clone and fork children (system calls only).
 */
#include "common/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
procfs_put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = -1;

	if (fd >= 0) {
		n = write(fd, s, strlen(s));
		(void)close(fd);
	}
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static void
proc_path(char *out, size_t size, pid_t pid, const char *file)
{
	if (pid > 0)
		(void)snprintf(out, size, "/proc/%ld/%s", (long)pid, file);
	else
		(void)snprintf(out, size, "/proc/self/%s", file);
}

int
procfs_open(pid_t pid, const char *file, int flags)
{
	char path[96];

	proc_path(path, sizeof path, pid, file);
	return open(path, flags | O_CLOEXEC);
}

ssize_t
procfs_read(pid_t pid, const char *file, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	if ((fd = procfs_open(pid, file, O_RDONLY)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	(void)close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

ssize_t
procfs_pread(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

int
procfs_write(pid_t pid, const char *file, const char *s)
{
	char path[96];

	proc_path(path, sizeof path, pid, file);
	return procfs_put(path, s);
}

int
procfs_stat_parse(const char *text, struct procfs_stat *st)
{
	const char *p = strrchr(text, ')');
	int ppid = 0;

	memset(st, 0, sizeof *st);
	/* fields 3-4, 9, 14-17, 20 and 22: state ppid ... flags ...
	 * utime stime cutime cstime ... num_threads ... starttime (the
	 * last two optional) */
	if (p == NULL || sscanf(p + 1, " %c %d %*d %*d %*d %*d %u %*u %*u "
	    "%*u %*u %llu %llu %llu %llu %*d %*d %ld %*d %llu", &st->state,
	    &ppid, &st->flags, &st->utime, &st->stime, &st->cutime,
	    &st->cstime, &st->threads, &st->starttime) < 7) {
		errno = EINVAL;
		return -1;
	}
	st->ppid = (pid_t)ppid;
	return 0;
}

int
procfs_stat(pid_t pid, struct procfs_stat *st)
{
	char buf[1024];

	if (procfs_read(pid, "stat", buf, sizeof buf) < 0)
		return -1;
	return procfs_stat_parse(buf, st);
}

long
procfs_status_num(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p != NULL ? strtol(p + strlen(key), NULL, 10) : -1;
}

int
procfs_status_nspids(const char *text, pid_t *out, int max)
{
	const char *p = strstr(text, "\nNSpid:");
	char *end;
	long v;
	int n = 0;

	if (p == NULL)
		return -1;
	for (p += 7; *p != '\n' && *p != '\0'; p = end) {
		v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (n < max)
			out[n] = (pid_t)v;
		n++;
	}
	return n;
}

pid_t
procfs_status_nspid(const char *text)
{
	pid_t ns[PROCFS_NS_MAX];
	int n = procfs_status_nspids(text, ns, PROCFS_NS_MAX);

	return n > 0 && n <= PROCFS_NS_MAX ? ns[n - 1] : 0;
}

int
procfs_pids(const char *text, pid_t *out, int max)
{
	const char *p;
	char *end;
	long pid;
	int n = 0;

	for (p = text; n < max; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0)
			out[n++] = (pid_t)pid;
	}
	return n;
}

int
procfs_children(pid_t pid, pid_t tid, pid_t *out, int max)
{
	char file[64], buf[16384];

	(void)snprintf(file, sizeof file, "task/%ld/children", (long)tid);
	if (procfs_read(pid, file, buf, sizeof buf) < 0)
		return 0;
	return procfs_pids(buf, out, max);
}

int
procfs_self_cgroup(const char *ctl, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int found = -1;
	char *a, *b;

	if (f == NULL)
		return -1;
	while (found < 0 && fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		a = strchr(line, ':');
		b = a != NULL ? strchr(a + 1, ':') : NULL;
		if (b == NULL)
			continue;
		*b = '\0';
		if ((ctl == NULL && a[1] == '\0') || (ctl != NULL &&
		    strcmp(a + 1, ctl) == 0)) {
			(void)snprintf(out, len, "%s", b + 1);
			found = 0;
		}
	}
	(void)fclose(f);
	return found;
}

int
procfs_id_map(pid_t pid, const char *file, unsigned long v[3])
{
	char buf[256], *p, *end;
	int i;

	if (procfs_read(pid, file, buf, sizeof buf) < 0)
		return -1;
	for (i = 0, p = buf; i < 3; i++, p = end) {
		v[i] = strtoul(p, &end, 10);
		if (end == p)
			return -1;
	}
	return 0;
}
