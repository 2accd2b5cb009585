/*
 * contain.h - process-tree containment and limits for the worker, on the
 * supervisor's side (the worker's own seccomp is sandbox/seccomp.h).
 *
 * Mechanisms, used where the machine permits:
 *  - a cgroup per worker generation: cgroup v2 (memory.max,
 *    memory.swap.max=0, memory.oom.group, pids.max, cgroup.kill) or v1
 *    (memory.limit_in_bytes + memsw, pids.max, freezer for an atomic kill);
 *  - a PID namespace (wspawn.c clones the worker into one when allowed);
 *  - the supervisor as child subreaper with a sweep of orphans (always).
 * Functions return -1 with errno and never log (the caller reports).
 */
#ifndef AGENTZ_CONTAIN_H
#define AGENTZ_CONTAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct contain;

struct contain_limits {
	uint64_t memory;	/* bytes; 0 = no memory ceiling */
	unsigned pids;		/* tasks in the worker's tree; 0 = none */
	unsigned nofile;	/* RLIMIT_NOFILE */
	uint64_t fsize;		/* RLIMIT_FSIZE bytes; 0 = unlimited */
};

struct contain_stats {
	uint64_t memory_peak;	/* bytes, 0 if unknown */
	uint64_t oom_kills;	/* OOM kills in the worker's group */
	uint64_t cpu_ns;	/* from cpuacct / cpu.stat, 0 if unknown */
};

/*
 * Detects what this machine permits and creates the run's cgroup
 * (agentz-<pid>) when it can. Never fails for lack of cgroups: the
 * mechanisms list says what is active. NULL only on ENOMEM.
 */
struct contain *contain_new(const struct contain_limits *lim);
/* Kills what is left, removes the cgroups. Accepts NULL. */
void contain_free(struct contain *c);

/* Creates the cgroup for a new worker generation (before the fork). */
int contain_prepare(struct contain *c, unsigned generation);
/* Moves pid into the current generation's cgroup (before it execs). */
int contain_attach(struct contain *c, pid_t pid);
/* SIGKILLs every task of the current generation's cgroup. */
int contain_kill(struct contain *c);
/* Reads the current generation's accounting. */
void contain_stats(struct contain *c, struct contain_stats *st);
/* Removes the current generation's cgroup once it is empty. */
void contain_release(struct contain *c);

/* Which mechanisms are active, e.g. "cgroup-v1,pid-namespace,subreaper". */
const char *contain_mechanisms(const struct contain *c);
/* Records that the worker was cloned into a PID namespace (or not). */
void contain_set_pidns(struct contain *c, int active);
int contain_has_cgroup(const struct contain *c);

/*
 * Makes the calling process the subreaper of its descendants. Call once at
 * start-up, before the first worker.
 */
int contain_subreaper(void);
/*
 * Kills and reaps every child of ours that is not `keep` (orphans of an
 * earlier worker, reparented to us). Returns how many were swept.
 */
int contain_sweep(pid_t keep);
/*
 * The children of parent's main thread, from /proc/<parent>/task/<parent>/
 * children, into out (at most max). Returns how many.
 */
int contain_children(pid_t parent, pid_t *out, int max);
/* Reaps exited children of ours other than keep (on SIGCHLD). */
int contain_reap(pid_t keep);

/*
 * For the forked child, before exec (async-signal-safe): drops every
 * capability, bounding set included, and applies the rlimits.
 * 0, or -1 with errno.
 */
int contain_child_drop_caps(void);
int contain_child_rlimits(const struct contain_limits *lim);

#endif
