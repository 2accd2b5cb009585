/*
 * test_jail_exit.c - how a process the jail's init reaped ended: its
 * status and usage, what it has forgotten and what it never reaped
 * (sandbox/jail.c and nsinit.c, against the running kernel; the fixture
 * is jailfix.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/contain.h"
#include "sandbox/jail.h"
#include "tests/unit/sandbox/jailfix.h"


#define BURN_US 20000

/* Until this process has used BURN_US of CPU time. */
static void
burn(void)
{
	struct rusage ru;
	volatile unsigned long x = 0;

	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		(void)getrusage(RUSAGE_SELF, &ru);
	} while ((ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L +
	    ru.ru_utime.tv_usec + ru.ru_stime.tv_usec < BURN_US);
	(void)x;	/* the sum is only the burn: clang warns it is unread */
}

static void
act_exit3(char c)
{
	if (c == 'g') {
		burn();
		_exit(3);
	}
}

static void
act_segv(char c)
{
	if (c == 'g') {
		/* no core dump (the host's core_pattern may be a helper) */
		(void)prctl(PR_SET_DUMPABLE, 0);
		(void)signal(SIGSEGV, SIG_DFL);
		(void)kill(getpid(), SIGSEGV);
	}
}

/* 0: forks 1 (exits 3), 2 (SIGSEGV), 3 (lives), then exits itself, so
 * they become the init's. */
static void
exit_role(struct fixture *f, int idx)
{
	static void (*const acts[4])(char) = { NULL, act_exit3, act_segv,
	    NULL };
	pid_t pid;
	int i;

	(void)idx;
	jf_put(f->rep[1], REC_NSPID, 0, (int)getpid(), 0);
	for (i = 1; i <= 3; i++) {
		if ((pid = fork()) < 0)
			_exit(122);
		if (pid == 0)
			jf_serve(f, i, acts[i]);
	}
	_exit(0);
}

/* Our pid of a child of the jail's init whose pid in the jail is nspid. */
static pid_t
host_pid(const struct fixture *f, pid_t nspid)
{
	char dir[64], line[256], want[32];
	pid_t kids[64];
	FILE *s;
	int i, n, found = 0;

	n = contain_children(jail_init_pid(f->j), kids, 64);
	(void)snprintf(want, sizeof want, "\t%ld\n", (long)nspid);
	for (i = 0; i < n && !found; i++) {
		(void)snprintf(dir, sizeof dir, "/proc/%ld/status",
		    (long)kids[i]);
		if ((s = fopen(dir, "re")) == NULL)
			continue;
		while (!found && fgets(line, sizeof line, s) != NULL)
			found = strncmp(line, "NSpid:", 6) == 0 &&
			    strlen(line) > strlen(want) &&
			    strcmp(line + strlen(line) - strlen(want), want) == 0;
		(void)fclose(s);
		if (found)
			return kids[i];
	}
	return 0;
}

/* A pidfd of process idx (a child of the init), as the supervisor has
 * one for the worker it adopted. */
static int
pidfd_of(const struct fixture *f, int idx)
{
	pid_t pid = host_pid(f, f->ns[idx]);
	int fd;

	assert_true(pid > 0);
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(fd >= 0);
	return fd;
}

/* Until the process of pidfd fd has ended; closes fd. */
static void
await_pidfd(int fd)
{
	struct pollfd pf = { fd, POLLIN, 0 };

	assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
	(void)close(fd);
}

/* Tells process idx (a child of the init) to go and waits for its end. */
static void
end_and_await(struct fixture *f, int idx)
{
	int fd = pidfd_of(f, idx);

	assert_int_equal(write(f->ping[idx][1], "g", 1), 1);
	await_pidfd(fd);
}

static void
test_exit_status_of_reparented(void **state)
{
	struct fixture *f = *state;
	struct jail_exit e;

	jf_need_jail(state);
	jf_start(f, exit_role, 1);
	jf_await_pids(f, 4, 1);
	/* the parent gone, its children are the init's */
	(void)jf_await_event(f, f->host[0], CLD_EXITED, NULL, 0);

	errno = 0;
	assert_int_equal(jail_exit_status(f->j, f->ns[3], &e), -1);
	assert_int_equal(errno, EBUSY);
	jf_ping(f, 3);	/* and still runs */

	end_and_await(f, 1);
	memset(&e, 0, sizeof e);
	assert_int_equal(jail_exit_status(f->j, f->ns[1], &e), 0);
	assert_true(WIFEXITED(e.status));
	assert_int_equal(WEXITSTATUS(e.status), 3);
	assert_true(e.cpu_us >= BURN_US);
	assert_true(e.maxrss_kb > 0);
	/* asked again: still known */
	assert_int_equal(jail_exit_status(f->j, f->ns[1], &e), 0);
	assert_int_equal(WEXITSTATUS(e.status), 3);

	end_and_await(f, 2);
	memset(&e, 0, sizeof e);
	assert_int_equal(jail_exit_status(f->j, f->ns[2], &e), 0);
	assert_true(WIFSIGNALED(e.status));
	assert_int_equal(WTERMSIG(e.status), SIGSEGV);
	assert_true(e.maxrss_kb > 0);
}

/* Never reaped by the init (its parent, the spawner, reaped it), never
 * there at all, and out of range. */
static void
test_exit_status_unknown(void **state)
{
	struct fixture *f = *state;
	struct jail_exit e;

	jf_need_jail(state);
	jf_start(f, exit_role, 1);
	jf_await_pids(f, 4, 1);
	(void)jf_await_event(f, f->host[0], CLD_EXITED, NULL, 0);
	errno = 0;
	assert_int_equal(jail_exit_status(f->j, f->ns[0], &e), -1);
	assert_int_equal(errno, ESRCH);
	errno = 0;
	assert_int_equal(jail_exit_status(f->j, 4000000, &e), -1);
	assert_int_equal(errno, ESRCH);
	errno = 0;
	assert_int_equal(jail_exit_status(f->j, 1, &e), -1);
	assert_int_equal(errno, EINVAL);
}

/* A kill sparing the process asked about next: the init answers both in
 * turn on one socket. */
static void
test_exit_status_after_kill_spare(void **state)
{
	struct fixture *f = *state;
	struct jail_exit e;
	pid_t spare;
	int fd1, fd3;

	jf_need_jail(state);
	jf_start(f, exit_role, 1);
	jf_await_pids(f, 4, 1);
	(void)jf_await_event(f, f->host[0], CLD_EXITED, NULL, 0);
	fd1 = pidfd_of(f, 1);
	fd3 = pidfd_of(f, 3);
	spare = f->ns[2];
	assert_int_equal(jail_kill_spare(f->j, &spare, 1), 0);
	jf_ping(f, 2);
	/* 1 and 3 were killed: the init reaped them */
	await_pidfd(fd1);
	await_pidfd(fd3);
	assert_int_equal(jail_exit_status(f->j, f->ns[1], &e), 0);
	assert_true(WIFSIGNALED(e.status));
	assert_int_equal(WTERMSIG(e.status), SIGKILL);
	assert_int_equal(jail_exit_status(f->j, f->ns[3], &e), 0);
	assert_int_equal(WTERMSIG(e.status), SIGKILL);
	end_and_await(f, 2);
	assert_int_equal(jail_exit_status(f->j, f->ns[2], &e), 0);
	assert_int_equal(WTERMSIG(e.status), SIGSEGV);
}

#define CROWD 70		/* more than the init remembers (64) */

/* 0: forks 1 (exits 3), 2 (SIGSEGV) and CROWD that exit when they read a
 * byte on pipe 4, then exits itself. */
static void
crowd_role(struct fixture *f, int idx)
{
	static void (*const acts[3])(char) = { NULL, act_exit3, act_segv };
	pid_t pid;
	char c;
	int i;

	(void)idx;
	jf_put(f->rep[1], REC_NSPID, 0, (int)getpid(), 0);
	for (i = 1; i < 3 + CROWD; i++) {
		if ((pid = fork()) < 0)
			_exit(122);
		if (pid == 0 && i < 3)
			jf_serve(f, i, acts[i]);
		if (pid == 0)
			_exit(read(f->ping[4][0], &c, 1) == 1 ? 7 : 123);
	}
	_exit(0);
}

/* The init forgets the oldest: one that ended before CROWD others is
 * ESRCH, one that ended after them is known. */
static void
test_exit_status_forgotten(void **state)
{
	struct fixture *f = *state;
	char bytes[CROWD];
	struct jail_exit e;
	pid_t kids[CROWD + 8];
	long deadline;

	jf_need_jail(state);
	jf_start(f, crowd_role, 1);
	jf_await_pids(f, 3, 1);
	(void)jf_await_event(f, f->host[0], CLD_EXITED, NULL, 0);
	end_and_await(f, 1);
	assert_int_equal(jail_exit_status(f->j, f->ns[1], &e), 0);

	memset(bytes, 'g', sizeof bytes);
	assert_int_equal(write(f->ping[4][1], bytes, sizeof bytes),
	    (ssize_t)sizeof bytes);
	/* the crowd reaped: the init's only child left is 2 (polled) */
	deadline = jf_ms_now() + WAIT_MS;
	while (contain_children(jail_init_pid(f->j), kids, CROWD + 8) > 1 &&
	    jf_ms_now() < deadline)
		(void)sched_yield();
	assert_int_equal(contain_children(jail_init_pid(f->j), kids,
	    CROWD + 8), 1);
	errno = 0;
	assert_int_equal(jail_exit_status(f->j, f->ns[1], &e), -1);
	assert_int_equal(errno, ESRCH);

	end_and_await(f, 2);
	assert_int_equal(jail_exit_status(f->j, f->ns[2], &e), 0);
	assert_int_equal(WTERMSIG(e.status), SIGSEGV);
}


#define T(f)	cmocka_unit_test_setup_teardown(f, jf_fixture_setup, \
		    jf_fixture_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_exit_status_of_reparented),
		T(test_exit_status_unknown),
		T(test_exit_status_after_kill_spare),
		T(test_exit_status_forgotten),
	};

	return cmocka_run_group_tests_name("jail_exit", tests, jf_group_setup,
	    NULL);
}
