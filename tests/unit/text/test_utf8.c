/*
 * test_utf8.c - unit tests for supervisor/text/utf8.c: UTF-8 cleaning.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/text/utf8.h"

static void
test_utf8_sanitize(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "plain", 5, "plain" },
		{ "caf\xc3\xa9", 5, "caf\xc3\xa9" },
		{ "a\xff" "b", 3, "a\xef\xbf\xbd" "b" },
		{ "\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd" },		/* overlong */
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80", 4,				/* > U+10FFFF */
		    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd" },		/* truncated */
		{ "\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80" },
	};
	size_t i, n;
	char *s;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		s = utf8_sanitize(cases[i].in, cases[i].len, &n);
		assert_int_equal(n, strlen(cases[i].out));
		assert_memory_equal(s, cases[i].out, n);
		free(s);
	}
	s = utf8_sanitize("a\0b", 3, &n);	/* NUL is valid UTF-8 */
	assert_int_equal(n, 3);
	assert_memory_equal(s, "a\0b", 3);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_sanitize),
	};

	return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
