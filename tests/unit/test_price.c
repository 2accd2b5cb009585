/*
 * test_price.c - the cost budget's arithmetic: --price IN,CACHED,OUT and
 * --max-cost parsing (good and bad values, through config_parse too), the
 * built-in table's lookup (exact names and dated snapshots only, never a
 * longer name sharing a prefix), the cost of a usage and its formatting;
 * --max-parallel-calls, the cap of a cell's model calls (its default and
 * range).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/front/config.h"
#include "supervisor/agent/price.h"

#define NITEMS(a)	(sizeof(a) / sizeof((a)[0]))

static void
test_parse_good(void **state)
{
	struct price p;

	(void)state;
	assert_int_equal(price_parse("1.25,0.125,10", &p), 0);
	assert_true(p.input == 1.25 && p.cached == 0.125 && p.output == 10);
	assert_int_equal(price_parse("0,0,0", &p), 0);
	assert_true(p.input == 0 && p.cached == 0 && p.output == 0);
	assert_int_equal(price_parse(".5,1e-1,1000000", &p), 0);
	assert_true(p.input == 0.5 && p.output == 1e6);
}

static void
test_parse_bad(void **state)
{
	static const char *bad[] = {
		"", "1", "1,2", "1,2,", ",1,2", "1,2,3,", "1,2,3,4", "a,b,c",
		"-1,0,1", "1,-0.5,1", "+1,0,1", " 1,0,1", "1 ,0,1", "1,0,1 ",
		"inf,0,1", "nan,0,1", "1,0,2000000", "1;0;1", "1,,1", "1e999,0,1",
	};
	struct price p = { 7, 8, 9 };
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(bad); i++) {
		if (price_parse(bad[i], &p) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_true(p.input == 7 && p.cached == 8 && p.output == 9);
	}
}

static void
test_lookup(void **state)
{
	struct price p;

	(void)state;
	assert_int_equal(price_lookup("gpt-4o", &p), 0);
	assert_true(p.input == 2.5 && p.cached == 1.25 && p.output == 10);
	assert_int_equal(price_lookup("gpt-4o-mini", &p), 0);
	assert_true(p.input == 0.15 && p.output == 0.6);
	assert_int_equal(price_lookup("gpt-4o-2024-08-06", &p), 0);
	assert_true(p.input == 2.5);
	assert_int_equal(price_lookup("gpt-5.4-mini-2026-03-17", &p), 0);
	assert_true(p.input == 0.75);
	/* the default model has no built-in price */
	assert_int_equal(price_lookup("gpt-6-astra", &p), -1);
	/* a longer name is another model, not the prefix's */
	assert_int_equal(price_lookup("gpt-5.45", &p), -1);
	assert_int_equal(price_lookup("gpt-4o-audio", &p), -1);
	assert_int_equal(price_lookup("gpt-4o-2024-08", &p), -1);
	assert_int_equal(price_lookup("gpt-4o-2024-08-06x", &p), -1);
	assert_int_equal(price_lookup("gpt-4", &p), -1);
	assert_int_equal(price_lookup("", &p), -1);
}

static void
test_cost(void **state)
{
	struct price p = { 1, 0.1, 10 };
	char buf[32];

	(void)state;
	/* 600k uncached + 400k cached input, 100k output */
	assert_true(fabs(price_cost(&p, 1000000, 400000, 100000) - 1.64) <
	    1e-9);
	assert_true(price_cost(&p, 0, 0, 0) == 0);
	/* cached beyond input is capped; negative counts are 0 */
	assert_true(fabs(price_cost(&p, 100, 500, -3) - 100 * 0.1 / 1e6) <
	    1e-15);
	assert_string_equal(price_format(1.64, buf, sizeof buf), "$1.64");
	assert_string_equal(price_format(0.0421, buf, sizeof buf), "$0.0421");
	assert_string_equal(price_format(0, buf, sizeof buf), "$0.0000");
}

static int
parse(struct config *c, const char *a1, const char *a2)
{
	char *argv[] = { (char *)(uintptr_t)"agentz", (char *)(uintptr_t)a1,
	    (char *)(uintptr_t)a2, (char *)(uintptr_t)"task", NULL };
	int rc = config_parse(c, 4, argv, "agentz");

	config_clear(c);
	return rc;
}

static void
test_config(void **state)
{
	static const char *bad_cost[] = { "0", "-1", "abc", "1x", "", "$",
	    "inf", "nan", "1e10" };
	struct config c;
	size_t i;

	(void)state;
	assert_int_equal(parse(&c, "--price", "2,0.5,8"), 0);
	assert_true(c.has_price && c.price.input == 2 && c.price.cached ==
	    0.5 && c.price.output == 8);
	assert_int_equal(parse(&c, "--max-cost", "2.50"), 0);
	assert_true(c.max_cost == 2.5 && !c.has_price);
	assert_int_equal(parse(&c, "--max-cost", "$3"), 0);
	assert_true(c.max_cost == 3);
	assert_int_equal(parse(&c, "--price", "1,2"), -1);
	for (i = 0; i < NITEMS(bad_cost); i++)
		if (parse(&c, "--max-cost", bad_cost[i]) != -1)
			fail_msg("--max-cost accepted '%s'", bad_cost[i]);
}

static void
test_parallel_calls(void **state)
{
	static const char *bad[] = { "0", "-1", "257", "100000", "x", "8x",
	    "" };
	struct config c;
	size_t i;

	(void)state;
	assert_int_equal(parse(&c, "--max-cells", "3"), 0);
	assert_int_equal(c.max_parallel_calls, MAX_PARALLEL_CALLS_DEFAULT);
	assert_int_equal(MAX_PARALLEL_CALLS_DEFAULT, 8);
	assert_int_equal(parse(&c, "--max-parallel-calls", "1"), 0);
	assert_int_equal(c.max_parallel_calls, 1);
	assert_int_equal(parse(&c, "--max-parallel-calls", "256"), 0);
	assert_int_equal(c.max_parallel_calls, 256);
	for (i = 0; i < NITEMS(bad); i++)
		if (parse(&c, "--max-parallel-calls", bad[i]) != -1)
			fail_msg("--max-parallel-calls accepted '%s'", bad[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_cost),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_parallel_calls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
