/*
 * test_jsonf.c - unit tests for supervisor/text/jsonf.c: JSON objects
 * from typed fields, and fields read back.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/text/jsonf.h"

static void
expect_dump(const struct jf *f, const char *want)
{
	size_t n = 0;
	char *s = jf_dumps(f, &n);

	assert_non_null(s);
	assert_string_equal(s, want);
	assert_int_equal(n, strlen(want));
	free(s);
}

static void
test_kinds(void **state)
{
	static const long long ids[] = { 3, -1, 9007199254740993LL };
	struct jf inner[] = { JF_I("n", 2), JF_END };
	struct jf f[] = {
		JF_I("i", -42), JF_R("r", 1.5), JF_S("s", "caf\xc3\xa9"),
		JF_SN("sn", "a\"b\nc", 3), JF_B("t", 7), JF_B("f", 0),
		JF_N("z"), JF_O("o", inner), JF_O("no", NULL),
		JF_IA("ids", ids, 3), JF_IA("none", ids, 0),
		JF_J("raw", "[1,{\"x\":null}]"), JF_S("null", NULL),
		JF_SKIP, JF_END
	};

	(void)state;
	expect_dump(f, "{\"i\":-42,\"r\":1.5,\"s\":\"caf\xc3\xa9\","
	    "\"sn\":\"a\\\"b\",\"t\":true,\"f\":false,\"z\":null,"
	    "\"o\":{\"n\":2},\"no\":null,\"ids\":[3,-1,9007199254740993],"
	    "\"none\":[],\"raw\":[1,{\"x\":null}],\"null\":null}");
}

/* What json_pack refused (a bad byte, a NaN) is written, not lost. */
static void
test_hostile_values(void **state)
{
	struct jf f[] = { JF_S("s", "a\xff" "b"), JF_R("nan", NAN),
	    JF_R("inf", INFINITY), JF_SN("nul", "x\0y", 3), JF_END };
	struct jf bad[] = { JF_J("raw", "{not json"), JF_END };
	int cond = 0;
	struct jf opt[] = { cond ? JF_R("cost", 1) : JF_SKIP, JF_I("k", 1),
	    JF_END };

	(void)state;
	expect_dump(f, "{\"s\":\"a\xef\xbf\xbd" "b\",\"nan\":null,"
	    "\"inf\":null,\"nul\":\"x\\u0000y\"}");
	errno = 0;
	assert_null(jf_dumps(bad, NULL));
	assert_int_equal(errno, EINVAL);
	expect_dump(opt, "{\"k\":1}");
}

static void
test_parse(void **state)
{
	long long n = -1, used = -1, max = -1;
	double at = 0, whole = 0;
	char *code = NULL, *none = NULL, *wrong = NULL;
	size_t len = 0;
	int ok = -1;
	struct jf_in sub[] = {
		{ "used", JF_KINT, &used, NULL, NULL, 0 },
		{ "max", JF_KINT, &max, NULL, NULL, 0 },
		{ NULL, JF_KEND, NULL, NULL, NULL, 0 },
	};
	struct jf_in in[] = {
		{ "n", JF_KINT, &n, NULL, NULL, 0 },
		{ "at", JF_KREAL, &at, NULL, NULL, 0 },
		{ "whole", JF_KREAL, &whole, NULL, NULL, 0 },
		{ "code", JF_KSTR, &code, &len, NULL, 0 },
		{ "absent", JF_KSTR, &none, NULL, NULL, 0 },
		{ "wrong", JF_KSTR, &wrong, NULL, NULL, 0 },
		{ "ok", JF_KBOOL, &ok, NULL, NULL, 0 },
		{ "cells", JF_KOBJ, NULL, NULL, sub, 0 },
		{ NULL, JF_KEND, NULL, NULL, NULL, 0 },
	};
	static const char text[] = "{\"n\":7,\"at\":1.25,\"whole\":3,"
	    "\"code\":\"print(1)\\nx\",\"wrong\":5,\"ok\":true,"
	    "\"cells\":{\"used\":4,\"max\":null}}";

	(void)state;
	assert_int_equal(jf_parse(text, sizeof text - 1, in), 0);
	assert_int_equal(n, 7);
	assert_true(at == 1.25);
	assert_true(whole == 3.0);
	assert_string_equal(code, "print(1)\nx");
	assert_int_equal(len, 10);
	assert_int_equal(in[3].found, 1);
	assert_int_equal(in[4].found, 0);
	assert_null(none);
	assert_int_equal(in[5].found, -1);	/* another type: untouched */
	assert_null(wrong);
	assert_int_equal(ok, 1);
	assert_int_equal(in[7].found, 1);
	assert_int_equal(used, 4);
	assert_int_equal(sub[1].found, 0);	/* null */
	assert_int_equal(max, -1);
	jf_in_free(in);
	assert_null(code);
	assert_int_equal(in[3].found, 0);
}

static void
test_parse_refuses(void **state)
{
	long long n = 0;
	struct jf_in in[] = {
		{ "n", JF_KINT, &n, NULL, NULL, 0 },
		{ NULL, JF_KEND, NULL, NULL, NULL, 0 },
	};
	static const char *const bad[] = { "", "[1]", "\"s\"", "{\"n\":",
	    "{\"n\":1} x", "null" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		assert_int_equal(jf_parse(bad[i], strlen(bad[i]), in), -1);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(in[0].found, 0);
	}
	assert_int_equal(jf_parse(NULL, 0, in), -1);
	/* a real is not an integer */
	assert_int_equal(jf_parse("{\"n\":1.5}", 9, in), 0);
	assert_int_equal(in[0].found, -1);
	assert_int_equal(n, 0);
}

static void
test_string(void **state)
{
	char *s;

	(void)state;
	s = jf_string("say \"hi\"\n\x01 caf\xc3\xa9 \xff", (size_t)-1);
	assert_non_null(s);
	assert_string_equal(s, "\"say \\\"hi\\\"\\n\\u0001 caf\xc3\xa9 "
	    "\xef\xbf\xbd\"");
	free(s);
	s = jf_string("a\0b", 3);
	assert_string_equal(s, "\"a\\u0000b\"");
	free(s);
}

/* Written then read back: the same values. */
static void
test_round_trip(void **state)
{
	struct jf f[] = { JF_I("big", -9007199254740993LL),
	    JF_S("s", "line\n\ttab \"q\" \\ \xe2\x80\xa8"), JF_END };
	long long big = 0;
	char *s = NULL, *text;
	size_t len;
	struct jf_in in[] = {
		{ "big", JF_KINT, &big, NULL, NULL, 0 },
		{ "s", JF_KSTR, &s, NULL, NULL, 0 },
		{ NULL, JF_KEND, NULL, NULL, NULL, 0 },
	};

	(void)state;
	text = jf_dumps(f, &len);
	assert_non_null(text);
	assert_int_equal(jf_parse(text, len, in), 0);
	assert_true(big == -9007199254740993LL);
	assert_string_equal(s, "line\n\ttab \"q\" \\ \xe2\x80\xa8");
	jf_in_free(in);
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_hostile_values),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests_name("jsonf", tests, NULL, NULL);
}
