/*
 * test_dirsize.c - unit tests for supervisor/run/dirsize.c: what a tree
 * takes on disk, walked a slice at a time, hard links once, symlinks and
 * sparse holes not counted, a tree deeper than the walk allows refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/run/dirsize.h"

#define MIB (1024u * 1024u)

static char root[64];

static void
path(char *buf, size_t len, const char *rel)
{
	(void)snprintf(buf, len, "%s/%s", root, rel);
}

static void
write_file(const char *rel, size_t n)
{
	char p[256], *b = malloc(n);
	int fd;

	assert_non_null(b);
	memset(b, 'x', n);
	path(p, sizeof p, rel);
	assert_true((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	assert_int_equal(fsync(fd), 0);	/* blocks allocated, not delayed */
	assert_int_equal(close(fd), 0);
	free(b);
}

static void
make_dir(const char *rel)
{
	char p[512];

	path(p, sizeof p, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* The whole walk in slices of n entries. */
static uint64_t
walk(unsigned n, unsigned max_depth)
{
	struct dirsize *d = dirsize_start(root, max_depth, 0);
	uint64_t b;
	int rc;

	assert_non_null(d);
	while ((rc = dirsize_step(d, n)) == 0)
		;
	assert_int_equal(rc, 1);
	b = dirsize_bytes(d);
	dirsize_free(d);
	return b;
}

static int
setup(void **state)
{
	(void)state;
	(void)snprintf(root, sizeof root, "/tmp/dirsize.XXXXXX");
	return mkdtemp(root) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	(void)snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_counts_what_files_hold(void **state)
{
	uint64_t empty, b;

	(void)state;
	empty = walk(1000, 8);
	make_dir("a");
	make_dir("a/b");
	write_file("a/b/one", MIB);
	write_file("two", 2 * MIB);
	b = walk(1000, 8);
	assert_true(b >= empty + 3 * MIB);
	assert_true(b < empty + 3 * MIB + 256 * 1024);
	/* one entry a slice: the same total */
	assert_true(walk(1, 8) == b);
}

static void
test_hard_links_count_once(void **state)
{
	char p[256], q[256];
	uint64_t before, after;
	int i;

	(void)state;
	write_file("big", 4 * MIB);
	before = walk(1000, 8);
	path(p, sizeof p, "big");
	for (i = 0; i < 8; i++) {
		char name[32];

		(void)snprintf(name, sizeof name, "link%d", i);
		path(q, sizeof q, name);
		assert_int_equal(link(p, q), 0);
	}
	after = walk(1000, 8);
	assert_true(after < before + MIB / 2);
	assert_true(after + MIB / 2 > before);
}

static void
test_symlinks_and_holes_are_not_counted(void **state)
{
	char p[256], outside[] = "/tmp/dirsize-out.XXXXXX";
	uint64_t before, after;
	int fd;

	(void)state;
	before = walk(1000, 8);
	/* a symlink to a big file and one to / are not followed */
	assert_true((fd = mkstemp(outside)) >= 0);
	{
		static char mib[MIB];

		memset(mib, 'x', sizeof mib);
		assert_int_equal(write(fd, mib, sizeof mib), (ssize_t)MIB);
		assert_int_equal(fsync(fd), 0);
	}
	assert_int_equal(close(fd), 0);
	path(p, sizeof p, "to-big");
	assert_int_equal(symlink(outside, p), 0);
	path(p, sizeof p, "to-root");
	assert_int_equal(symlink("/", p), 0);
	path(p, sizeof p, "to-usr");
	assert_int_equal(symlink("/usr", p), 0);
	/* a sparse file of 1 GiB holds nothing */
	path(p, sizeof p, "sparse");
	assert_true((fd = open(p, O_WRONLY | O_CREAT, 0644)) >= 0);
	assert_int_equal(ftruncate(fd, 1024 * (off_t)MIB), 0);
	assert_int_equal(close(fd), 0);
	after = walk(1000, 8);
	assert_true(after < before + 64 * 1024);
	(void)unlink(outside);
}

static void
test_a_tree_deeper_than_allowed_is_refused(void **state)
{
	struct dirsize *d;
	char rel[512] = "";
	int i, rc;

	(void)state;
	for (i = 0; i < 10; i++) {
		(void)strcat(rel, i == 0 ? "d" : "/d");
		make_dir(rel);
	}
	/* the root and 10 levels */
	(void)walk(1000, 11);
	assert_non_null(d = dirsize_start(root, 10, 0));
	while ((rc = dirsize_step(d, 3)) == 0)
		;
	assert_int_equal(rc, -1);
	assert_int_equal(errno, ELOOP);
	assert_string_equal(dirsize_where(d), "d");
	dirsize_free(d);
}

static void
test_a_root_that_is_no_folder_is_an_error(void **state)
{
	char p[256];

	(void)state;
	write_file("file", 10);
	path(p, sizeof p, "file");
	assert_null(dirsize_start(p, 4, 0));
	assert_int_equal(errno, ENOTDIR);
	path(p, sizeof p, "missing");
	assert_null(dirsize_start(p, 4, 0));
	assert_int_equal(errno, ENOENT);
	assert_null(dirsize_start(root, 0, 0));
	assert_int_equal(errno, EINVAL);
}

/* In a child that is no root (DAC applies): a folder made unreadable
 * fails the walk, unless DIRSIZE_READABLE gives its owner's bits back.
 * The child's exit code is the step that failed. */
static int
unreadable_steps(void)
{
	char top[] = "/tmp/dirsize-user.XXXXXX", sub[64], file[80];
	struct dirsize *d;
	struct stat st;
	int fd, rc;
	static char mib[MIB];

	if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
		return 2;
	if (mkdtemp(top) == NULL)
		return 3;
	(void)snprintf(sub, sizeof sub, "%s/hid", top);
	(void)snprintf(file, sizeof file, "%s/a", sub);
	if (mkdir(sub, 0700) < 0 ||
	    (fd = open(file, O_WRONLY | O_CREAT, 0600)) < 0 ||
	    write(fd, mib, sizeof mib) != (ssize_t)sizeof mib ||
	    fsync(fd) < 0 || close(fd) < 0 || chmod(sub, 0) < 0)
		return 4;
	if ((d = dirsize_start(top, 8, 0)) == NULL)
		return 5;
	while ((rc = dirsize_step(d, 100)) == 0)
		;
	if (rc != -1 || errno != EACCES || strcmp(dirsize_where(d), "hid"))
		return 6;
	dirsize_free(d);
	if ((d = dirsize_start(top, 8, DIRSIZE_READABLE)) == NULL)
		return 7;
	while ((rc = dirsize_step(d, 100)) == 0)
		;
	if (rc != 1 || dirsize_bytes(d) < MIB)
		return 8;
	dirsize_free(d);
	if (stat(sub, &st) < 0 || (st.st_mode & 07777) != 0500)
		return 9;
	(void)unlink(file);
	(void)rmdir(sub);
	(void)rmdir(top);
	return 0;
}

static void
test_an_unreadable_folder_is_made_readable_when_asked(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	assert_true((pid = fork()) >= 0);
	if (pid == 0)
		_exit(unreadable_steps());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counts_what_files_hold,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_hard_links_count_once,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_symlinks_and_holes_are_not_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_tree_deeper_than_allowed_is_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_root_that_is_no_folder_is_an_error, setup,
		    teardown),
		cmocka_unit_test(
		    test_an_unreadable_folder_is_made_readable_when_asked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
