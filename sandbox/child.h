/*
 * child.h - what a forked child of the supervisor does to itself before
 * it execs the worker (internal to sandbox/: jail.c and contain.h's
 * contain_child_* are the entries others call).
 *
 * Everything here is ASYNC-SIGNAL-SAFE: it runs between fork and exec of
 * a process that may have been multithreaded.
 */
#ifndef AGENTZ_SANDBOX_CHILD_H
#define AGENTZ_SANDBOX_CHILD_H

#include <sys/types.h>

/* The jail's namespaces, in the order they are joined. */
enum jail_ns { JAIL_NS_USER, JAIL_NS_MNT, JAIL_NS_PID, JAIL_NS_IPC,
    JAIL_NS_UTS, JAIL_NS_NET, JAIL_NS_COUNT };

/* What a child needs of the jail, filled by the supervisor beforehand. */
struct jail_child {
	int ns[JAIL_NS_COUNT];	/* open namespaces; -1 = not joined */
	int userns;		/* a user namespace maps our own ids */
	uid_t wuid;		/* the worker's ids (as root) */
	gid_t wgid;
	int landlock;		/* ABI, 0 = none */
	const char *workspace;
	const char **rw_dirs;	/* where the worker writes (Landlock),
				 * NULL-ended; NULL: the workspace, /tmp,
				 * /dev/shm */
	const char **rw_files;	/* NULL: /dev/null, /dev/zero, /dev/full */
};

/* Joins c's namespaces, the user namespace first. 0, or -1 with errno. */
int child_enter(const struct jail_child *c);
/*
 * The workspace as cwd, oom_score_adj 1000, the worker's uid and gid (as
 * root), no capabilities, the Landlock domain or else NO_NEW_PRIVS.
 * 0, or -1 with errno and *what naming the step that failed.
 */
int child_worker(const struct jail_child *c, const char **what);

#endif
