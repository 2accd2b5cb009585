/*
 * jailfix.c - the fixture of the jail's unit tests (see jailfix.h).
 *
 * Each case builds a real jail (root, or a plain user with user
 * namespaces; else it skips and says why) and a spawner: a child of the
 * test that joins the jail (jail_child_enter) and forks the cases'
 * processes into it, then reports every wait event of its children
 * (exited, killed, stopped, continued) on the record pipe. The processes
 * report their pid as the jail sees it on the same pipe and answer pings
 * on their own pipe: an answer shows that a process runs.
 *
 * Nothing is ordered by sleeping: records, pidfds and wait events are.
 * Where the end of a set of processes is awaited whose pids the test
 * cannot all know (the children of a fork loop), the namespace's
 * processes are polled until only the expected remain, with a deadline.
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

#include "tests/unit/sandbox/jailfix.h"


char jf_skip_why[600];

/* --- the processes in the jail ----------------------------------------- */

void
jf_put(int fd, int kind, int idx, int a, int b)
{
	struct rec r = { kind, idx, a, b };

	if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
		_exit(120);
}

/* Says who it is, then answers every 'p' on its ping pipe; other bytes
 * go to act (NULL: none). */
_Noreturn void
jf_serve(struct fixture *f, int idx, void (*act)(char))
{
	char c;
	ssize_t n;

	jf_put(f->rep[1], REC_NSPID, idx, (int)getpid(), 0);
	for (;;) {
		n = read(f->ping[idx][0], &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1)
			_exit(121);
		if (c == 'p')
			jf_put(f->rep[1], REC_PONG, idx, 0, 0);
		else if (act != NULL)
			act(c);
	}
}

/* Forks role(idx) for each idx < n, then reports its children's wait
 * events until it has none. Never returns. */
static _Noreturn void
jf_spawner(struct fixture *f, role_fn *role, int n)
{
	siginfo_t si;
	pid_t pid;
	int i;

	if (jail_child_enter(f->j) < 0)
		_exit(110);
	for (i = 0; i < n; i++) {
		if ((pid = fork()) < 0)
			_exit(111);
		if (pid == 0) {
			role(f, i);
			_exit(0);
		}
		jf_put(f->rep[1], REC_HOSTPID, i, (int)pid, 0);
	}
	for (;;) {
		memset(&si, 0, sizeof si);
		if (waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WCONTINUED) < 0) {
			if (errno == EINTR)
				continue;
			_exit(0);
		}
		jf_put(f->rep[1], REC_EVENT, (int)si.si_pid, si.si_code,
		    si.si_status);
	}
}

/* --- the test's side ----------------------------------------------------- */

int
jf_fixture_setup(void **state)
{
	struct jail_config jc;
	struct fixture *f;
	char err[512];
	int i;

	if (jf_skip_why[0] != '\0')
		return 0;
	f = calloc(1, sizeof *f);
	assert_non_null(f);
	(void)snprintf(f->ws, sizeof f->ws, "/tmp/agentz-jail-XXXXXX");
	assert_non_null(mkdtemp(f->ws));
	memset(&jc, 0, sizeof jc);
	jc.mode = JAIL_REQUIRED;
	jc.workspace = f->ws;
	jc.tmp_size = 1u << 20;
	f->j = jail_new(&jc, err, sizeof err);
	if (f->j == NULL) {
		(void)snprintf(jf_skip_why, sizeof jf_skip_why, "no jail here: %s",
		    err);
		(void)rmdir(f->ws);
		free(f);
		return 0;
	}
	assert_int_equal(pipe2(f->rep, O_CLOEXEC), 0);
	for (i = 0; i < NPROC; i++)
		assert_int_equal(pipe2(f->ping[i], O_CLOEXEC), 0);
	*state = f;
	return 0;
}

int
jf_fixture_teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	if (f == NULL)
		return 0;
	/* the spawner first: jail_free reaps our children until the init */
	if (f->spawner > 0) {
		(void)kill(f->spawner, SIGKILL);
		(void)waitpid(f->spawner, NULL, 0);
	}
	jail_free(f->j);
	(void)close(f->rep[0]);
	(void)close(f->rep[1]);
	for (i = 0; i < NPROC; i++) {
		(void)close(f->ping[i][0]);
		(void)close(f->ping[i][1]);
	}
	(void)rmdir(f->ws);
	free(f);
	*state = NULL;
	return 0;
}

void
jf_need_jail(void **state)
{
	if (jf_skip_why[0] != '\0' || *state == NULL) {
		print_message("%s\n", jf_skip_why);
		skip();
	}
}

void
jf_start(struct fixture *f, role_fn *role, int n)
{
	f->spawner = fork();
	assert_true(f->spawner >= 0);
	if (f->spawner == 0)
		jf_spawner(f, role, n);
}

/* The next record, within WAIT_MS; a failed test when none comes. */
static void
jf_next_rec(struct fixture *f, struct rec *r)
{
	struct pollfd pf = { f->rep[0], POLLIN, 0 };

	assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
	assert_int_equal(read(f->rep[0], r, sizeof *r), (ssize_t)sizeof *r);
	if (r->kind == REC_NSPID)
		f->ns[r->idx] = (pid_t)r->a;
	else if (r->kind == REC_HOSTPID)
		f->host[r->idx] = (pid_t)r->a;
	else if (r->kind == REC_PONG)
		f->pongs[r->idx]++;
	else if (f->nev < MAX_EVENTS)
		f->ev[f->nev++] = *r;
}

/* Reads records until the pids of the first n processes are known. */
void
jf_await_pids(struct fixture *f, int n, int nhost)
{
	struct rec r;
	int i, missing;

	for (;;) {
		missing = 0;
		for (i = 0; i < n; i++)
			missing += f->ns[i] == 0 || (i < nhost && f->host[i] == 0);
		if (missing == 0)
			return;
		jf_next_rec(f, &r);
	}
}

/* Reads records until the event (pid, code) has come (maybe before the
 * call); returns its status. An end of a pid in `never` (n of them)
 * fails the test. */
int
jf_await_event(struct fixture *f, pid_t pid, int code, const pid_t *never,
    int n)
{
	const struct rec *r;
	struct rec next;
	int i, k;

	for (k = 0;; k++) {
		while (k == f->nev)
			jf_next_rec(f, &next);
		r = &f->ev[k];
		for (i = 0; i < n; i++)
			if (r->idx == never[i] && (r->a == CLD_KILLED ||
			    r->a == CLD_EXITED || r->a == CLD_DUMPED))
				fail_msg("process %d ended (code %d, status "
				    "%d)", r->idx, r->a, r->b);
		if (r->idx == pid && r->a == code)
			return r->b;
	}
}

/* Process idx answers a ping: it runs. */
void
jf_ping(struct fixture *f, int idx)
{
	struct rec r;
	int before = f->pongs[idx];

	assert_int_equal(write(f->ping[idx][1], "p", 1), 1);
	while (f->pongs[idx] == before)
		jf_next_rec(f, &r);
}

/* The pid namespace of host pid, as "pid:[inode]", or "". */
void
jf_pidns_of(long pid, char *out, size_t len)
{
	char path[64];
	ssize_t n;

	(void)snprintf(path, sizeof path, "/proc/%ld/ns/pid", pid);
	n = readlink(path, out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* The processes of the jail's namespace but its init and those in keep
 * (n >= 1), counted from the host's /proc. The namespace is read from
 * keep[0] (the init is not dumpable: a plain user cannot read its link;
 * links we cannot read are of processes that are not ours, so not the
 * jail's). */
int
jf_others_in_jail(const struct fixture *f, const pid_t *keep, int n)
{
	char ns[64], that[64];
	struct dirent *de;
	DIR *d = opendir("/proc");
	long pid;
	int i, count = 0;

	assert_non_null(d);
	jf_pidns_of(keep[0], ns, sizeof ns);
	assert_true(ns[0] != '\0');
	while ((de = readdir(d)) != NULL) {
		pid = strtol(de->d_name, NULL, 10);
		if (pid <= 0 || pid == (long)jail_init_pid(f->j))
			continue;
		for (i = 0; i < n && keep[i] != (pid_t)pid; i++)
			;
		if (i < n)
			continue;
		jf_pidns_of(pid, that, sizeof that);
		count += that[0] != '\0' && strcmp(that, ns) == 0;
	}
	(void)closedir(d);
	return count;
}

long
jf_ms_now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


int
jf_group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0 && access("/proc/self/ns/user", F_OK) < 0)
		(void)snprintf(jf_skip_why, sizeof jf_skip_why, "not root and no "
		    "user namespaces");
	return 0;
}

