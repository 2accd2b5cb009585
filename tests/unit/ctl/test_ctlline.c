/*
 * test_ctlline.c - unit tests for supervisor/ctl/ctlline.c: every command,
 * blanks around them, the note's text, and the refusals (unknown words,
 * arguments where none belong, control characters, bytes that are not
 * UTF-8, overlongs and surrogates), each naming what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/ctl/ctl.h"

static int
parse(const char *s, struct ctl_req *q, char *err)
{
	return ctl_parse(s, strlen(s), q, err, 256);
}

static void
test_commands(void **state)
{
	static const struct { const char *line; enum ctl_cmd cmd; } t[] = {
		{ "status", CTL_STATUS }, { "stop", CTL_STOP },
		{ "stop --now", CTL_STOP_NOW }, { "stop   --now ", CTL_STOP_NOW },
		{ "pause", CTL_PAUSE }, { " resume\t", CTL_RESUME },
		{ "kill-cell", CTL_KILL_CELL },
	};
	struct ctl_req q;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		assert_int_equal(parse(t[i].line, &q, err), 0);
		assert_int_equal(q.cmd, t[i].cmd);
		assert_null(q.arg);
	}
	assert_int_equal(parse("budgets", &q, err), 0);
	assert_int_equal(q.cmd, CTL_BUDGETS);
	assert_non_null(q.arg);
	assert_int_equal(q.arg_len, 0);
	assert_int_equal(parse("budgets  --max-cells 3 ", &q, err), 0);
	assert_int_equal(q.arg_len, strlen("--max-cells 3"));
	assert_memory_equal(q.arg, "--max-cells 3", q.arg_len);
	assert_string_equal(ctl_cmd_name(CTL_STOP_NOW), "stop --now");
	assert_string_equal(ctl_cmd_name(CTL_KILL_CELL), "kill-cell");
}

static void
test_note_text(void **state)
{
	struct ctl_req q;
	char err[256];

	(void)state;
	assert_int_equal(parse("note  look at x.csv first  ", &q, err), 0);
	assert_int_equal(q.cmd, CTL_NOTE);
	assert_int_equal(q.arg_len, strlen("look at x.csv first"));
	assert_memory_equal(q.arg, "look at x.csv first", q.arg_len);
	assert_int_equal(parse("note caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	    &q, err), 0);
	assert_int_equal(parse("note", &q, err), -1);
	assert_non_null(strstr(err, "needs a text"));
	assert_int_equal(parse("note   ", &q, err), -1);
}

static void
test_refusals(void **state)
{
	struct ctl_req q;
	char err[256];

	(void)state;
	assert_int_equal(parse("", &q, err), -1);
	assert_non_null(strstr(err, "unknown command"));
	assert_int_equal(parse("statusx", &q, err), -1);
	assert_non_null(strstr(err, "'statusx'"));
	assert_int_equal(parse("STATUS", &q, err), -1);
	assert_int_equal(parse("status now", &q, err), -1);
	assert_non_null(strstr(err, "takes no argument"));
	assert_int_equal(parse("stop --later", &q, err), -1);
	assert_non_null(strstr(err, "'--later'"));
	assert_int_equal(parse("kill-cell 3", &q, err), -1);
	assert_int_equal(ctl_parse("stat\0us", 7, &q, err, sizeof err), -1);
	assert_non_null(strstr(err, "control character 0x00 at byte 4"));
	assert_int_equal(parse("note a\x1b[2Jb", &q, err), -1);
	assert_non_null(strstr(err, "0x1b"));
	assert_int_equal(parse("note \x7f", &q, err), -1);
}

static void
test_not_utf8(void **state)
{
	static const char *const bad[] = {
		"note \xff", "note \xc0\xaf", "note \xe0\x80\xaf",
		"note \xed\xa0\x80", "note \xf4\x90\x80\x80", "note \xc3",
		"note \xe2\x82", "note \x80",
	};
	struct ctl_req q;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(parse(bad[i], &q, err), -1);
		assert_non_null(strstr(err, "not UTF-8"));
	}
}

static void
test_small_error_buffer(void **state)
{
	struct ctl_req q;
	char err[8];

	(void)state;
	assert_int_equal(ctl_parse("bogus command here", 18, &q, err,
	    sizeof err), -1);
	assert_int_equal(strlen(err), sizeof err - 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_note_text),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_not_utf8),
		cmocka_unit_test(test_small_error_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
