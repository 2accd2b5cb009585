/*
 * test_size.c - unit tests for common/size.c's size_plain: seconds and
 * amounts written plainly (no exponent, no trailing zeros, at most three
 * decimals; tiny positive values with up to six), whatever their size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/size.h"

static void
check(double v, const char *want)
{
	char buf[64];

	size_plain(v, buf, sizeof buf);
	assert_string_equal(buf, want);
}

static void
test_plain_whole_and_fractions(void **state)
{
	(void)state;
	check(3600, "3600");
	check(31536000, "31536000");
	check(0.5, "0.5");
	check(1.25, "1.25");
	check(1.125, "1.125");
	check(2, "2");
	check(0, "0");
	check(0.001, "0.001");
	check(100000000, "100000000");
}

static void
test_plain_rounds_to_three_decimals(void **state)
{
	(void)state;
	check(1.23456, "1.235");
	check(0.9999, "1");
	check(0.0001, "0.0001");
	check(0.0000015, "0.000002");
}

static void
test_plain_fits_the_buffer(void **state)
{
	char buf[4];

	(void)state;
	size_plain(3600, buf, sizeof buf);
	assert_string_equal(buf, "360");	/* cut, still a string */
	size_plain(1, buf, 0);			/* nothing written */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_whole_and_fractions),
		cmocka_unit_test(test_plain_rounds_to_three_decimals),
		cmocka_unit_test(test_plain_fits_the_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
