/*
 * ctlpeer.c - who may talk to a run's control socket (see ctl.h).
 *
 * The peer must live in our own PID namespace (the run's workers live in
 * the jail's, and that is refused first, by name: a worker in a user
 * namespace shows up with uid 0; a peer visible in our /proc with as many
 * NSpid entries as we have is in ours), must not descend from the
 * supervisor (its workers and their orphans, also without a jail), and
 * must be our uid or root. Only /proc is read; nothing here logs.
 */
#include "supervisor/ctl/ctl.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/procfs.h"

#define ANCESTRY_MAX 256	/* parent links followed, at most */

static int
ns_of(pid_t pid, struct stat *st)
{
	char p[64];

	if (pid == 0)
		(void)snprintf(p, sizeof p, "/proc/self/ns/pid");
	else
		(void)snprintf(p, sizeof p, "/proc/%ld/ns/pid", (long)pid);
	return stat(p, st);
}

/* 1 when pid's PID namespace is other's (0: ours), 0 if not, -1 unknown. */
static int
same_pidns(pid_t pid, pid_t other)
{
	struct stat a, b;

	if (ns_of(pid, &a) < 0 || ns_of(other, &b) < 0)
		return -1;
	return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static pid_t
parent_of(pid_t pid)
{
	struct procfs_stat st;

	return procfs_stat(pid, &st) == 0 ? st.ppid : -1;
}

/*
 * How deep pid's PID namespace is below our /proc's: the pids on its
 * NSpid line (1: ours), or -1. Unlike the ns/pid link this needs no
 * ptrace access, which a unit without CAP_SYS_PTRACE lacks towards a root
 * client with more capabilities, or a worker of another uid.
 */
static int
nspid_depth(pid_t pid)
{
	char buf[4096];
	pid_t ns[PROCFS_NS_MAX];
	int n;

	if (procfs_read(pid, "status", buf, sizeof buf) <= 0)
		return -1;
	n = procfs_status_nspids(buf, ns, PROCFS_NS_MAX);
	return n > 0 ? n : -1;
}

/* 1 when pid descends from ancestor, 0 when not, -1 unknown. */
static int
descends_from(pid_t pid, pid_t ancestor)
{
	int i;

	for (i = 0; i < ANCESTRY_MAX && pid > 1; i++) {
		if ((pid = parent_of(pid)) < 0)
			return -1;
		if (pid == ancestor)
			return 1;
	}
	return pid <= 1 ? 0 : -1;
}

/*
 * 1 when pid is in the run's worker PID namespace: its ns/pid link is the
 * jail init's, or (where we may not read those links: a plain user's
 * jail, a unit without CAP_SYS_PTRACE) it is our descendant in a PID
 * namespace below ours.
 */
static int
in_workers_ns(pid_t jail_pid, pid_t pid)
{
	int depth;

	if (jail_pid <= 0)
		return 0;
	if (same_pidns(pid, jail_pid) == 1)
		return 1;
	depth = nspid_depth(pid);
	return depth > 0 && depth > nspid_depth(getpid()) &&
	    descends_from(pid, getpid()) == 1;
}

/*
 * NULL when the peer may talk to us, else why not (in buf). The ns/pid
 * links are compared where we may read them (else -1, unknown), the
 * NSpid depth always: what cannot be read counts against the peer.
 */
const char *
ctl_peer_refusal(pid_t jail_pid, const struct ucred *u, char *buf,
    size_t n)
{
	if (u->pid <= 0)
		(void)snprintf(buf, n, "the peer's pid is not visible here "
		    "(another PID namespace)");
	else if (in_workers_ns(jail_pid, u->pid))
		(void)snprintf(buf, n, "pid %ld is inside the run's worker PID "
		    "namespace", (long)u->pid);
	else if (same_pidns(u->pid, 0) == 0 || nspid_depth(u->pid) < 0 ||
	    nspid_depth(u->pid) != nspid_depth(getpid()))
		(void)snprintf(buf, n, "pid %ld is in another PID namespace",
		    (long)u->pid);
	else if (descends_from(u->pid, getpid()) != 0)
		(void)snprintf(buf, n, "pid %ld is the supervisor's own "
		    "descendant (a worker's process)", (long)u->pid);
	else if (u->uid != geteuid() && u->uid != 0)
		(void)snprintf(buf, n, "uid %ld is neither the run's (%ld) nor "
		    "root", (long)u->uid, (long)geteuid());
	else
		return NULL;
	return buf;
}
