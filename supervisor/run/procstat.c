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

#include "common/procfs.h"

int
procstat_open(struct procstat *ps, pid_t pid)
{
	ps->stat_fd = procfs_open(pid, "stat", O_RDONLY);
	ps->status_fd = procfs_open(pid, "status", O_RDONLY);
	ps->clear_fd = procfs_open(pid, "clear_refs", O_WRONLY);
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

int
procstat_sample(const struct procstat *ps, long *peak_kb, uint64_t *cpu_us)
{
	char buf[4096];
	struct procfs_stat st;
	long tck = sysconf(_SC_CLK_TCK);

	if (procfs_pread(ps->status_fd, buf, sizeof buf) < 0)
		return -1;
	*peak_kb = procfs_status_num(buf, "VmHWM:");
	if (*peak_kb < 0)
		*peak_kb = 0;
	if (procfs_pread(ps->stat_fd, buf, sizeof buf) < 0)
		return -1;
	if (procfs_stat_parse(buf, &st) < 0 || tck <= 0) {
		errno = EINVAL;
		return -1;
	}
	*cpu_us = (st.utime + st.stime + st.cutime + st.cstime) * 1000000ull /
	    (unsigned long long)tck;
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
