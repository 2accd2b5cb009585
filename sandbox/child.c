/*
 * child.c - the steps a forked child of the supervisor takes on itself
 * before exec: joining the jail, the worker's identity, capabilities,
 * Landlock, rlimits (see child.h and contain.h).
 *
 * Runs in the forked child of a possibly multithreaded supervisor:
 * ASYNC-SIGNAL-SAFE only. No malloc, no stdio, no locks; system calls
 * and plain computation on what the supervisor prepared.
 */
#include "sandbox/child.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"
#include "sandbox/contain.h"
#include "sandbox/landlock.h"

static const int ns_types[JAIL_NS_COUNT] = { CLONE_NEWUSER, CLONE_NEWNS,
    CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET };

/* The user namespace first: it gives the rights to join the others. */
int
child_enter(const struct jail_child *c)
{
	int i;

	for (i = 0; i < JAIL_NS_COUNT; i++)
		if (c->ns[i] >= 0 && setns(c->ns[i], ns_types[i]) < 0)
			return -1;
	return 0;
}

/* As root: every capability out of the bounding set while we may, then
 * the worker's ids (which clears the rest). */
static int
become_uid(const struct jail_child *c)
{
	int cap;

	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, c->wgid, c->wgid, c->wgid) < 0 ||
	    syscall(SYS_setresuid, c->wuid, c->wuid, c->wuid) < 0)
		return -1;
	return 0;
}

int
child_worker(const struct jail_child *c, const char **what)
{
	const char *dirs[] = { c->workspace, "/tmp", "/dev/shm", NULL };
	const char *files[] = { "/dev/null", "/dev/zero", "/dev/full", NULL };

	*what = "chdir into the workspace";
	if (chdir(c->workspace) < 0)
		return -1;
	/* before Landlock, which would refuse the write */
	(void)procfs_put("/proc/self/oom_score_adj", "1000");
	*what = "take the worker's uid";
	if (!c->userns && become_uid(c) < 0)
		return -1;
	*what = "drop capabilities";
	if (contain_child_drop_caps() < 0)
		return -1;
	*what = "Landlock";
	if (c->landlock > 0)
		return landlock_restrict(c->rw_dirs != NULL ? c->rw_dirs :
		    dirs, c->rw_files != NULL ? c->rw_files : files,
		    c->landlock);
	*what = "NO_NEW_PRIVS";
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int
contain_child_drop_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	int cap;

	/* Without CAP_SETPCAP (a plain user) the bounding set cannot be
	 * dropped: EPERM. Such a process holds no capability to lose, and
	 * NO_NEW_PRIVS (set with the seccomp filter) stops setuid gains. */
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL &&
		    !(errno == EPERM && geteuid() != 0))
			return -1;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(data, 0, sizeof data);
	return (int)syscall(SYS_capset, &hdr, data);
}

static int
set_limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };

	return setrlimit(res, &rl);
}

int
contain_child_rlimits(const struct contain_limits *lim)
{
	if (set_limit(RLIMIT_CORE, 0) < 0)
		return -1;
	if (lim->nofile > 0 && set_limit(RLIMIT_NOFILE, lim->nofile) < 0)
		return -1;
	if (lim->fsize > 0 && set_limit(RLIMIT_FSIZE, lim->fsize) < 0)
		return -1;
	if (lim->nproc > 0 && set_limit(RLIMIT_NPROC, lim->nproc) < 0)
		return -1;
#ifndef CONTAIN_UNDER_ASAN
	if (lim->as > 0 && set_limit(RLIMIT_AS, lim->as) < 0)
		return -1;
#endif
	return 0;
}
