/*
 * contain.h - process-tree containment and limits for the worker, on the
 * supervisor's side (the worker's own seccomp is sandbox/seccomp.h).
 *
 * Mechanisms, used where the machine permits:
 *  - a cgroup per worker: cgroup v2 (memory.max,
 *    memory.swap.max=0, memory.oom.group, pids.max, cgroup.kill) or v1
 *    (memory.limit_in_bytes + memsw, pids.max, freezer for an atomic kill);
 *  - a PID namespace (wspawn.c clones the worker into one when allowed);
 *  - the supervisor as child subreaper with a sweep of orphans (always).
 * contain.c has the cgroups, reap.c the subreaper and its sweep, child.c
 * the forked child's capabilities and rlimits (contain_child_*).
 * Functions return -1 with errno and never log (the caller reports).
 */
#ifndef AGENTZ_CONTAIN_H
#define AGENTZ_CONTAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct contain;

/* AddressSanitizer's shadow needs terabytes of address space: no
 * RLIMIT_AS (nor the worker's RLIMIT_DATA) in a sanitizer build. */
#if defined(__SANITIZE_ADDRESS__)
#define CONTAIN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONTAIN_UNDER_ASAN 1
#endif
#endif

struct contain_limits {
	uint64_t memory;	/* bytes; 0 = no memory ceiling */
	unsigned pids;		/* tasks in the worker's tree; 0 = none */
	unsigned nofile;	/* RLIMIT_NOFILE */
	uint64_t fsize;		/* RLIMIT_FSIZE bytes; 0 = unlimited */
	unsigned nproc;		/* RLIMIT_NPROC (tasks of the worker's uid,
				 * counted in its user namespace); 0 = none */
	uint64_t as;		/* RLIMIT_AS bytes, where no memory cgroup
				 * holds (ignored under AddressSanitizer,
				 * whose shadow needs terabytes); 0 = none */
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
/* Kills what is left in the groups freed while busy, waits a bounded
 * time for them to empty and removes the run's cgroups. Accepts NULL. */
void contain_free(struct contain *c);

/*
 * Per-worker groups, so that two workers (the current one and a warm
 * standby, or a dying one and its successor) are contained, killed,
 * measured and removed independently. A group is worker-<id> under the
 * run's cgroup (one directory per v1 controller: memory, pids, freezer),
 * with the run's limits each; ids must differ between live groups.
 */
struct contain_group;

/*
 * Creates worker-<id> with the run's limits (an existing one is reused;
 * a freed one of that id still waiting for its tasks becomes this one).
 * Retries first the removal of groups freed while busy. NULL with errno:
 * ENOTSUP when the run has no cgroups, else what creation failed with.
 */
struct contain_group *contain_group_new(struct contain *c, unsigned id);
/* Moves pid into the group (before it execs). 0, or -1 with errno. */
int contain_group_attach(struct contain_group *g, pid_t pid);
/*
 * SIGKILLs every task of the group, atomically where the machine permits:
 * v2 cgroup.kill (else each listed pid), v1 freeze, kill, thaw (nothing
 * forks meanwhile). The tasks may still be exiting on return. 0, or -1
 * with errno when the group's tasks cannot be listed.
 */
int contain_group_kill(struct contain_group *g);
/*
 * Does the group hold a process that is not one of known[0..n-1] (a
 * process a cell left, for the output pipes' sake)? 1 yes (or perhaps:
 * more than one look shows), 0 no, -1 with errno when it cannot tell.
 */
int contain_group_others(struct contain_group *g, const pid_t *known, int n);
/* Reads the group's accounting (fields it cannot read are 0). */
void contain_group_stats(struct contain_group *g, struct contain_stats *st);
/*
 * v2: whether an OOM kill takes the whole group (memory.oom.group; on
 * by default when there is a memory ceiling). Off while a snapshot must
 * survive the OOM kill of its worker. v1 has no such switch: 0, nothing
 * done. 0, or -1 with errno.
 */
int contain_group_oom_group(struct contain_group *g, int on);
/*
 * Forgets the group and removes its directories once empty. Kills
 * nothing: while tasks are still there (still exiting), contain keeps it
 * and retries at the next contain_group_new and at contain_free (which
 * kills what is left then). Accepts NULL.
 */
void contain_group_free(struct contain_group *g);

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
 * The children of parent's main thread, from /proc/<parent>/task/<parent>/
 * children, into out (at most max). Returns how many.
 */
int contain_children(pid_t parent, pid_t *out, int max);
/*
 * Kills and reaps every child of ours that is not one of keep[nkeep] (the
 * jail's init and the spawners of the run's workers; orphans of an
 * earlier worker are reparented to us). Returns how many were swept.
 */
int contain_sweep_except(const pid_t *keep, int nkeep);
/* Reaps exited children of ours other than keep[nkeep] (on SIGCHLD).
 * Returns how many. */
int contain_reap_except(const pid_t *keep, int nkeep);

/*
 * For the forked child, before exec (async-signal-safe): drops every
 * capability, bounding set included, and applies the rlimits.
 * 0, or -1 with errno.
 */
int contain_child_drop_caps(void);
int contain_child_rlimits(const struct contain_limits *lim);

#endif
