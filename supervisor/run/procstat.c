/*
 * procstat.c - /proc readers for per-cell accounting (see procstat.h).
 */
#include "supervisor/run/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
open_proc(pid_t pid, const char *name, int flags)
{
	char path[64];

	(void)snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, name);
	return open(path, flags | O_CLOEXEC);
}

int
procstat_open(struct procstat *ps, pid_t pid)
{
	ps->stat_fd = open_proc(pid, "stat", O_RDONLY);
	ps->status_fd = open_proc(pid, "status", O_RDONLY);
	ps->clear_fd = open_proc(pid, "clear_refs", O_WRONLY);
	if (ps->stat_fd < 0 || ps->status_fd < 0) {
		procstat_close(ps);
		return -1;
	}
	return 0;
}

void
procstat_close(struct procstat *ps)
{
	int *fds[3] = { &ps->stat_fd, &ps->status_fd, &ps->clear_fd };
	int i;

	for (i = 0; i < 3; i++) {
		if (*fds[i] >= 0)
			(void)close(*fds[i]);
		*fds[i] = -1;
	}
}

int
procstat_reset_peak(const struct procstat *ps)
{
	if (ps->clear_fd < 0) {
		errno = EBADF;
		return -1;
	}
	/* "5": reset the peak RSS (proc(5), clear_refs) */
	return pwrite(ps->clear_fd, "5", 1, 0) == 1 ? 0 : -1;
}

static ssize_t
read_at(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

int
procstat_sample(const struct procstat *ps, long *peak_kb, uint64_t *cpu_us)
{
	char buf[4096], *p;
	unsigned long long ut, st, cut, cst;
	long tck = sysconf(_SC_CLK_TCK);

	if (read_at(ps->status_fd, buf, sizeof buf) < 0)
		return -1;
	p = strstr(buf, "VmHWM:");
	*peak_kb = p != NULL ? strtol(p + 6, NULL, 10) : 0;
	if (read_at(ps->stat_fd, buf, sizeof buf) < 0)
		return -1;
	p = strrchr(buf, ')');
	/* fields 14-17 after the comm: utime stime cutime cstime */
	if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u "
	    "%*u %*u %llu %llu %llu %llu", &ut, &st, &cut, &cst) != 4 ||
	    tck <= 0) {
		errno = EINVAL;
		return -1;
	}
	*cpu_us = (ut + st + cut + cst) * 1000000ull / (unsigned long long)tck;
	return 0;
}

int
procstat_sample_pid(pid_t pid, long *peak_kb, uint64_t *cpu_us)
{
	struct procstat ps;
	int rc;

	if (procstat_open(&ps, pid) < 0)
		return -1;
	rc = procstat_sample(&ps, peak_kb, cpu_us);
	procstat_close(&ps);
	return rc;
}
