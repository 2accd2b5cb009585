/*
 * test_report.c - the report's escaping (supervisor/report/report_html.c):
 * every byte value, alone and in invalid UTF-8, comes out as text that
 * cannot open a tag, an entity or an attribute; a capped text keeps its
 * head and tail on character boundaries and says how much is not shown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/report/report_int.h"

/* What html_text / html_capped write for s[0..n), NUL-terminated. */
static char *
render(const char *s, size_t n, size_t cap)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	if (cap == 0)
		html_text(f, s, n);
	else
		html_capped(f, s, n, cap);
	assert_int_equal(fclose(f), 0);
	return out;
}

static void
test_every_byte(void **state)
{
	char in[2], *out;
	int b;

	(void)state;
	for (b = 0; b < 256; b++) {
		in[0] = (char)b;
		in[1] = 'x';
		out = render(in, 2, 0);
		if (strpbrk(out, "<>\"'") != NULL)
			fail_msg("byte 0x%02x came out as '%s'", b, out);
		if (strchr(out, '&') != NULL && strncmp(out, "&amp;", 5) &&
		    strncmp(out, "&lt;", 4) && strncmp(out, "&gt;", 4) &&
		    strncmp(out, "&quot;", 6) && strncmp(out, "&#39;", 5))
			fail_msg("byte 0x%02x came out as '%s'", b, out);
		if (b < 0x20 && b != '\n' && b != '\t')
			assert_true(out[0] == '\\');
		if (b >= 0x80)		/* a lone byte: not UTF-8 */
			assert_string_equal(out, "\xef\xbf\xbdx");
		free(out);
	}
}

static void
test_markup_is_text(void **state)
{
	static const char hostile[] =
	    "</script><script>alert(1)</script><img src=x onerror='a()'>&#60;";
	char *out = render(hostile, sizeof hostile - 1, 0);

	(void)state;
	assert_string_equal(out, "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/"
	    "script&gt;&lt;img src=x onerror=&#39;a()&#39;&gt;&amp;#60;");
	free(out);
	out = render("a\r\nb\rc\x1b[2J\x7f", 11, 0);
	assert_string_equal(out, "a\nb\\rc\\x1b[2J\\x7f");
	free(out);
}

static void
test_capped(void **state)
{
	char big[10000], *out;
	const char *mark;

	(void)state;
	memset(big, 'a', sizeof big);
	memcpy(big + 3071, "\xc3\xa9", 2);	/* an é across the head's cut */
	big[sizeof big - 1] = 'Z';
	out = render(big, sizeof big, 4096);
	mark = strstr(out, "<span class=\"cut\">[");
	assert_non_null(mark);
	/* the head ends before the é the cut would split, not inside it */
	assert_int_equal(mark - out, 3071);
	assert_non_null(strstr(mark, "[5905 bytes not shown]</span>"));
	assert_true(out[strlen(out) - 1] == 'Z');
	assert_null(strstr(out, "\xef\xbf\xbd"));	/* nothing split */
	free(out);
	out = render("short", 5, 4096);
	assert_string_equal(out, "short");
	free(out);
}

static void
test_classes(void **state)
{
	(void)state;
	assert_string_equal(html_class("timeout"), "timeout");
	assert_string_equal(html_class("ok"), "ok");
	assert_string_equal(html_class("x\" onclick=\"y"), "other");
	assert_string_equal(html_class(NULL), "other");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_markup_is_text),
		cmocka_unit_test(test_capped),
		cmocka_unit_test(test_classes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
