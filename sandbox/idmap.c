/*
 * idmap.c - the worker's uid as root (see idmap.h): a slot per concurrent
 * run, and the user namespace whose id map makes the workspace's bind
 * write as the invoking user.
 *
 * Runs in the supervisor: may allocate, logs nothing. idmap_holder runs
 * in a clone child of idmap_userns: system calls only (net_lo_up is).
 */
#include "sandbox/idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procfs.h"
#include "sandbox/jail.h"
#include "sandbox/net.h"

/* One uid per concurrent run: the slot is an abstract socket name we
 * hold for the run (it goes with us when we die). */
int
idmap_take_slot(int *fd_out)
{
	struct sockaddr_un a;
	unsigned slot;
	int fd;

	for (slot = 0; slot < JAIL_UID_SLOTS; slot++) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return -1;
		memset(&a, 0, sizeof a);
		a.sun_family = AF_UNIX;
		(void)snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
		    "agentz-uid-%u", slot);
		if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			*fd_out = fd;
			return (int)slot;
		}
		(void)close(fd);
		if (errno != EADDRINUSE)
			return -1;
	}
	errno = EAGAIN;
	return -1;
}

/* The helper of idmap_userns: a user namespace (and network namespace,
 * lo up, when net) held open while the parent maps it; it says when it
 * may be opened (0, or the errno of lo), and waits for EOF. */
static _Noreturn void
idmap_holder(int fd, int net)
{
	int err = 0;
	char c;

	/* ours to open without CAP_SYS_PTRACE, for the moment */
	(void)prctl(PR_SET_DUMPABLE, 1);
	if (net && net_lo_up() < 0)
		err = errno != 0 ? errno : EIO;
	if (write(fd, &err, sizeof err) == (ssize_t)sizeof err)
		(void)!read(fd, &c, 1);
	_exit(0);
}

static int
map_ids(pid_t pid, const char *file, unsigned inside, unsigned outside)
{
	char line[64];

	(void)snprintf(line, sizeof line, "%u %u 1", inside, outside);
	return procfs_write(pid, file, line);
}

/* A user namespace mapping our (the invoking user's) ids to the worker's:
 * through an id-mapped bind, the worker's files land as ours. With netfd,
 * the same clone makes the worker's network namespace (one short-lived
 * process, not two: each fork and exit of the supervisor costs ~1.5 ms
 * here). */
int
idmap_userns(uid_t ours, gid_t ourg, uid_t theirs, gid_t theirg, int *netfd)
{
	int sv[2], fd = -1, err = 0, saved = 0;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | (netfd != NULL ?
	    CLONE_NEWNET : 0) | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		(void)close(sv[0]);
		idmap_holder(sv[1], netfd != NULL);
	}
	saved = errno;
	(void)close(sv[1]);
	if (pid > 0) {
		if (read(sv[0], &err, sizeof err) != (ssize_t)sizeof err)
			saved = ESRCH;
		else if (err != 0)
			saved = err;
		else if (map_ids(pid, "uid_map", ours, theirs) < 0 ||
		    map_ids(pid, "gid_map", ourg, theirg) < 0 ||
		    (fd = procfs_open(pid, "ns/user", O_RDONLY)) < 0 ||
		    (netfd != NULL &&
		    (*netfd = procfs_open(pid, "ns/net", O_RDONLY)) < 0)) {
			saved = errno;
			if (fd >= 0)
				(void)close(fd);
			fd = -1;
		}
	}
	(void)close(sv[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	errno = saved;
	return fd;
}
