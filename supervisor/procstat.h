/*
 * procstat.h - per-cell accounting of a live worker from /proc: peak RSS
 * (VmHWM, reset at cell start through clear_refs) and CPU time (utime +
 * stime of the worker and its reaped children).
 */
#ifndef AGENTZ_PROCSTAT_H
#define AGENTZ_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* Resets the peak RSS counter of pid. 0, or -1 with errno. */
int procstat_reset_peak(pid_t pid);
/* Current peak RSS (kB) and total CPU (us) of pid. 0, or -1 with errno. */
int procstat_sample(pid_t pid, long *peak_kb, uint64_t *cpu_us);

#endif
