/*
 * test_procfs_stat.c - unit tests for common/procfs.c's stat parser: the
 * fields after a comm holding spaces and ')', the start time (field 22,
 * which the snapshot's check compares with the SNAP's time), a text that
 * stops before it, and a truncated one refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/procfs.h"

static void
test_stat_fields_and_starttime(void **state)
{
	const char *t = "42 (a) b) c) S 7 42 42 0 -1 4194560 100 0 0 0 "
	    "11 22 33 44 20 0 3 0 987654 1000 50 18446744073709551615";
	struct procfs_stat st;

	(void)state;
	assert_int_equal(procfs_stat_parse(t, &st), 0);
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.ppid, 7);
	assert_int_equal(st.utime, 11);
	assert_int_equal(st.stime, 22);
	assert_int_equal(st.cutime, 33);
	assert_int_equal(st.cstime, 44);
	assert_int_equal(st.flags, 4194560);
	assert_int_equal(st.threads, 3);
	assert_int_equal(st.starttime, 987654);
}

static void
test_stat_without_starttime(void **state)
{
	struct procfs_stat st;

	(void)state;
	assert_int_equal(procfs_stat_parse("1 (x) R 0 1 1 0 -1 0 0 0 0 0 "
	    "5 6 7 8", &st), 0);
	assert_int_equal(st.utime, 5);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.starttime, 0);
}

static void
test_stat_truncated(void **state)
{
	struct procfs_stat st;

	(void)state;
	errno = 0;
	assert_int_equal(procfs_stat_parse("1 (x) R 0 1 1 0", &st), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(procfs_stat_parse("no paren", &st), -1);
}

static void
test_stat_self(void **state)
{
	struct procfs_stat st;

	(void)state;
	assert_int_equal(procfs_stat(0, &st), 0);
	assert_int_equal(st.ppid, getppid());
	assert_true(st.starttime > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_fields_and_starttime),
		cmocka_unit_test(test_stat_without_starttime),
		cmocka_unit_test(test_stat_truncated),
		cmocka_unit_test(test_stat_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
