/*
 * procstat.h - per-cell accounting of a live worker from /proc: peak RSS
 * (VmHWM, reset at cell start through clear_refs) and CPU time (utime +
 * stime of the worker and its reaped children). The files stay open for
 * the worker's life and are read with pread: a cell costs one write and
 * two reads, no open.
 */
#ifndef AGENTZ_PROCSTAT_H
#define AGENTZ_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

struct procstat {
	int stat_fd, status_fd, clear_fd;
};

/* Opens pid's files (-1 fds when closed). 0, or -1 with errno. */
int procstat_open(struct procstat *ps, pid_t pid);
void procstat_close(struct procstat *ps);	/* safe to repeat */
/* Resets the peak RSS counter. 0, or -1 with errno. */
int procstat_reset_peak(const struct procstat *ps);
/* Current peak RSS (kB) and total CPU (us). 0, or -1 with errno. */
int procstat_sample(const struct procstat *ps, long *peak_kb,
    uint64_t *cpu_us);
/* The same for a pid, opening its files for this one sample. */
int procstat_sample_pid(pid_t pid, long *peak_kb, uint64_t *cpu_us);

#endif
