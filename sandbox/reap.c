/*
 * reap.c - the supervisor as subreaper of its workers' trees, and the
 * sweep of the orphans that come to it (see contain.h).
 *
 * Runs in the supervisor's main thread (it forks and reaps there only):
 * may allocate; system calls and /proc reads (common/procfs.c).
 */
#include "sandbox/contain.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procfs.h"

int
contain_subreaper(void)
{
	return prctl(PR_SET_CHILD_SUBREAPER, 1);
}

/* The state letter of pid from /proc/<pid>/stat, or 0. */
static char
proc_state(long pid)
{
	struct procfs_stat st;

	return procfs_stat((pid_t)pid, &st) == 0 ? st.state : 0;
}

/*
 * Whether pid is PID 1 of a namespace of its own (a jail's init, the run's
 * or one lost). A dying init waits until every task of its namespace is
 * reaped, and some are children of ours we keep (the other worker's
 * spawner): a blocking wait for it would wait for ourselves.
 */
static int
ns_init(pid_t pid)
{
	char text[4096];

	return procfs_read(pid, "status", text, sizeof text) > 0 &&
	    procfs_status_nspid(text) == 1;
}

int
contain_children(pid_t parent, pid_t *out, int max)
{
	return procfs_children(parent, parent, out, max);
}

/*
 * Our children other than keep (the supervisor forks and reaps from its
 * main thread only, and orphans are reparented to it): with kill set,
 * every one is SIGKILLed (a namespace init is then left to a later round:
 * see ns_init); without, only zombies are collected. Their pids
 * go to out (at most max). Returns how many were found.
 */
static int
kept(pid_t pid, const pid_t *keep, int nkeep)
{
	int i;

	for (i = 0; i < nkeep; i++)
		if (keep[i] > 0 && keep[i] == pid)
			return 1;
	return 0;
}

static int
scan_children(const pid_t *keep, int nkeep, int kill_them, pid_t *out,
    int max)
{
	pid_t all[1024];
	int i, found = contain_children(getpid(), all, 1024), n = 0;

	for (i = 0; i < found && n < max; i++) {
		if (kept(all[i], keep, nkeep) ||
		    (!kill_them && proc_state(all[i]) != 'Z'))
			continue;
		/* An unreaped child of ours: its pid cannot be reused. */
		if (kill_them)
			(void)kill(all[i], SIGKILL);
		/* a namespace init ends after what we keep: reaped as a
		 * zombie by a later round (SIGCHLD), never waited for */
		if (kill_them && proc_state(all[i]) != 'Z' && ns_init(all[i]))
			continue;
		out[n++] = all[i];
	}
	return n;
}

static int
sweep_round(const pid_t *keep, int nkeep, int kill_them)
{
	pid_t pids[1024];
	int n, i;

	n = scan_children(keep, nkeep, kill_them, pids, 1024);
	for (i = 0; i < n; i++)
		while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
			;
	return n;
}

int
contain_sweep_except(const pid_t *keep, int nkeep)
{
	int total = 0, n, round;

	/* Killing an orphan can reparent its own children to us: repeat. */
	for (round = 0; round < 64; round++) {
		n = sweep_round(keep, nkeep, 1);
		total += n;
		if (n == 0)
			break;
	}
	return total;
}

int
contain_reap_except(const pid_t *keep, int nkeep)
{
	return sweep_round(keep, nkeep, 0);
}
