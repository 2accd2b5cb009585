/*
 * procstat.c - /proc readers for per-cell accounting (see procstat.h).
 */
#include "supervisor/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ssize_t
read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	(void)snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	(void)close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

int
procstat_reset_peak(pid_t pid)
{
	char path[64];
	int fd, rc;

	(void)snprintf(path, sizeof path, "/proc/%ld/clear_refs", (long)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = write(fd, "5", 1) == 1 ? 0 : -1;	/* 5: reset peak RSS */
	(void)close(fd);
	return rc;
}

int
procstat_sample(pid_t pid, long *peak_kb, uint64_t *cpu_us)
{
	char buf[4096], *p;
	unsigned long long ut, st, cut, cst;
	long tck = sysconf(_SC_CLK_TCK);

	if (read_proc(pid, "status", buf, sizeof buf) < 0)
		return -1;
	p = strstr(buf, "VmHWM:");
	*peak_kb = p != NULL ? strtol(p + 6, NULL, 10) : 0;
	if (read_proc(pid, "stat", buf, sizeof buf) < 0)
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
