/*
 * test_contain.c - per-worker cgroups (sandbox/contain.c) against the
 * running kernel: two groups killed, measured and removed independently,
 * and a group freed while its task is still there removed later.
 *
 * Needs a machine where contain_new gets cgroups (root on cgroup v1, or a
 * delegated cgroup v2 subtree); else each case skips and says why. This
 * kind of machine has cgroup v1: the v2 paths are not exercised here.
 *
 * The tasks are children of the test that wait on a pipe: they are put
 * into their group before they do anything, report on a pipe what they
 * did, and their ends are awaited with waitpid. A group's directory is
 * found from outside, through /proc/<pid>/cgroup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/contain.h"

#define WAIT_MS 10000
#define MB (1024u * 1024u)
#define PATH_LEN 512

/* A child that waits for orders: 'a' allocates and touches 32 MB, 'p'
 * answers; each order is answered with one byte. */
struct task {
	pid_t pid;
	int to;			/* orders */
	int from;		/* answers */
};

static const struct contain_limits limits = { 256u * MB, 64, 0, 0, 0, 0 };

static _Noreturn void
task_main(int in, int out)
{
	char c, *mem = NULL;

	for (;;) {
		if (read(in, &c, 1) != 1)
			_exit(0);
		if (c == 'a' && mem == NULL && (mem = malloc(32 * MB)) != NULL)
			memset(mem, 1, 32 * MB);
		if (write(out, &c, 1) != 1)
			_exit(1);
	}
}

static void
task_start(struct task *t)
{
	int to[2], from[2];

	assert_int_equal(pipe2(to, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from, O_CLOEXEC), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		(void)close(to[1]);
		(void)close(from[0]);
		task_main(to[0], from[1]);
	}
	(void)close(to[0]);
	(void)close(from[1]);
	t->to = to[1];
	t->from = from[0];
}

/* Sends an order and waits for its answer: 1, or 0 when the task is
 * gone (EOF) or does not answer in WAIT_MS. */
static int
task_order(const struct task *t, char c)
{
	struct pollfd pf = { t->from, POLLIN, 0 };
	char got;

	if (write(t->to, &c, 1) != 1 || poll(&pf, 1, WAIT_MS) != 1)
		return 0;
	return read(t->from, &got, 1) == 1 && got == c;
}

/* Waits for the task's end; its wait status. */
static int
task_wait(struct task *t)
{
	int status = -1;

	assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
	(void)close(t->to);
	(void)close(t->from);
	t->pid = 0;
	return status;
}

static void
task_kill(struct task *t)
{
	if (t->pid > 0) {
		(void)kill(t->pid, SIGKILL);
		(void)task_wait(t);
	}
}

/* The group directory pid is in (the memory controller's on v1). */
static void
cg_dir(pid_t pid, char *out, size_t len)
{
	char path[64], line[PATH_LEN - 32];
	FILE *f;
	int found = 0;

	(void)snprintf(path, sizeof path, "/proc/%ld/cgroup", (long)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	out[0] = '\0';
	while (fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line, ":memory:") != NULL) {
			(void)snprintf(out, len, "/sys/fs/cgroup/memory%s",
			    strstr(line, ":memory:") + 8);
			found = 1;
		} else if (!found && strncmp(line, "0::", 3) == 0) {
			(void)snprintf(out, len, "/sys/fs/cgroup%s", line + 3);
		}
	}
	(void)fclose(f);
	assert_true(out[0] != '\0');
}

static int
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static int
setup(void **state)
{
	struct contain *c = contain_new(&limits);

	assert_non_null(c);
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	contain_free(*state);
	return 0;
}

static void
need_cgroups(struct contain *c)
{
	if (!contain_has_cgroup(c)) {
		print_message("no cgroups for this process (%s)\n",
		    contain_mechanisms(c));
		skip();
	}
}

/* A task in a fresh group of c, attached before it does anything. */
static struct contain_group *
group_with_task(struct contain *c, unsigned id, struct task *t)
{
	struct contain_group *g = contain_group_new(c, id);

	assert_non_null(g);
	task_start(t);
	assert_int_equal(contain_group_attach(g, t->pid), 0);
	return g;
}

/* --- two groups, independent ---------------------------------------------- */

static void
test_kill_one_group_other_lives(void **state)
{
	struct contain *c = *state;
	struct contain_group *g1, *g2;
	struct contain_stats s1, s2;
	struct task t1, t2;
	char d1[PATH_LEN], d2[PATH_LEN];
	int status;

	need_cgroups(c);
	g1 = group_with_task(c, 101, &t1);
	g2 = group_with_task(c, 102, &t2);
	cg_dir(t1.pid, d1, sizeof d1);
	cg_dir(t2.pid, d2, sizeof d2);
	assert_string_not_equal(d1, d2);
	assert_non_null(strstr(d1, "/worker-101"));
	assert_non_null(strstr(d2, "/worker-102"));

	/* each group measures its own task */
	assert_true(task_order(&t2, 'a'));
	assert_true(task_order(&t1, 'p'));
	contain_group_stats(g1, &s1);
	contain_group_stats(g2, &s2);
	assert_true(s2.memory_peak >= 32u * MB);
	assert_true(s1.memory_peak < 16u * MB);
	assert_int_equal(s1.oom_kills, 0);
	assert_int_equal(s2.oom_kills, 0);

	assert_int_equal(contain_group_kill(g1), 0);
	status = task_wait(&t1);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_true(task_order(&t2, 'p'));	/* the other one runs */

	contain_group_free(g1);
	assert_false(exists(d1));	/* empty: removed at once */
	assert_true(exists(d2));
	task_kill(&t2);
	contain_group_free(g2);
	assert_false(exists(d2));
}

/* v1 has no memory.oom.group: a no-op that succeeds. */
static void
test_oom_group_switch(void **state)
{
	struct contain *c = *state;
	struct contain_group *g;
	struct task t;
	char d[PATH_LEN], path[PATH_LEN + 32];

	need_cgroups(c);
	g = group_with_task(c, 103, &t);
	cg_dir(t.pid, d, sizeof d);
	assert_int_equal(contain_group_oom_group(g, 0), 0);
	assert_int_equal(contain_group_oom_group(g, 1), 0);
	(void)snprintf(path, sizeof path, "%s/memory.oom.group", d);
	if (!exists(path))
		print_message("no memory.oom.group here (cgroup v1)\n");
	task_kill(&t);
	contain_group_free(g);
	assert_false(exists(d));
}

/* --- a group freed while busy ------------------------------------------------ */

/* Kills nothing; the directory goes at the next contain_group_new once
 * the task has ended. */
static void
test_free_busy_retried_at_new(void **state)
{
	struct contain *c = *state;
	struct contain_group *g, *g2;
	struct task t;
	char d[PATH_LEN];

	need_cgroups(c);
	g = group_with_task(c, 201, &t);
	cg_dir(t.pid, d, sizeof d);
	contain_group_free(g);
	assert_true(task_order(&t, 'p'));	/* not killed */
	assert_true(exists(d));			/* busy: kept */

	task_kill(&t);
	assert_true(exists(d));			/* nobody retried yet */
	g2 = contain_group_new(c, 202);
	assert_non_null(g2);
	assert_false(exists(d));
	contain_group_free(g2);
}

/* contain_free kills what is left of a freed group, waits for it and
 * leaves no directory behind, the run's own included. */
static void
test_free_busy_removed_at_contain_free(void **state)
{
	struct contain *c = *state;
	struct contain_group *g1, *g2;
	struct task t1, t2;
	char d1[PATH_LEN], d2[PATH_LEN], run[PATH_LEN];
	int status;

	need_cgroups(c);
	g1 = group_with_task(c, 301, &t1);
	g2 = group_with_task(c, 302, &t2);
	cg_dir(t1.pid, d1, sizeof d1);
	cg_dir(t2.pid, d2, sizeof d2);
	(void)snprintf(run, sizeof run, "%s", d1);
	*strrchr(run, '/') = '\0';
	contain_group_free(g1);
	contain_group_free(g2);
	task_kill(&t1);		/* ended: only to be removed */
	assert_true(task_order(&t2, 'p'));

	contain_free(c);
	*state = NULL;
	status = task_wait(&t2);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_false(exists(d1));
	assert_false(exists(d2));
	assert_false(exists(run));
}

/* --- one worker after another ---------------------------------------------- */

/* A worker's group as the runner uses it (run/workers.c): created per
 * generation, measured at the worker's death, killed, freed; the next
 * generation gets its own group and the old directory is gone. */
static void
test_generation_after_generation(void **state)
{
	struct contain *c = *state;
	struct contain_group *g;
	struct contain_stats st;
	struct task t;
	char d[PATH_LEN];
	int status;

	need_cgroups(c);
	g = group_with_task(c, 7, &t);
	cg_dir(t.pid, d, sizeof d);
	assert_non_null(strstr(d, "/worker-7"));
	assert_true(task_order(&t, 'a'));
	contain_group_stats(g, &st);
	assert_true(st.memory_peak >= 32u * MB);
	assert_int_equal(contain_group_kill(g), 0);
	status = task_wait(&t);
	assert_int_equal(WTERMSIG(status), SIGKILL);
	contain_group_free(g);
	g = contain_group_new(c, 8);
	assert_non_null(g);
	assert_false(exists(d));
	contain_group_free(g);
}

/* The forked child's rlimits: RLIMIT_NPROC and (not under ASan) RLIMIT_AS
 * where set, untouched where 0. The child reports through its status. */
static void
test_child_rlimits(void **state)
{
	struct contain_limits l = { 0, 0, 512, 1 << 20, 77, 1024u * MB };
	struct rlimit nproc0;
	int st;
	pid_t pid;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NPROC, &nproc0), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit r;

		if (contain_child_rlimits(&l) < 0 ||
		    getrlimit(RLIMIT_NPROC, &r) < 0 || r.rlim_max != 77)
			_exit(1);
#ifndef CONTAIN_UNDER_ASAN
		if (getrlimit(RLIMIT_AS, &r) < 0 || r.rlim_max != 1024u * MB)
			_exit(2);
#endif
		l.nproc = 0;
		l.as = 0;
		_exit(getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_max == 512 ?
		    0 : 3);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

#define T(f)	cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_kill_one_group_other_lives),
		T(test_oom_group_switch),
		T(test_free_busy_retried_at_new),
		T(test_free_busy_removed_at_contain_free),
		T(test_generation_after_generation),
		cmocka_unit_test(test_child_rlimits),
	};

	return cmocka_run_group_tests_name("contain", tests, NULL, NULL);
}
