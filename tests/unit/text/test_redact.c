/*
 * test_redact.c - secret redaction over whole texts: exact outputs for the
 * edge cases (overlapping, prefix and adjacent secrets, NUL bytes, every
 * byte value, short values) and loading from an environment.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/text/redact.h"
#include "tests/unit/text/redact_helpers.h"

/* Appends the C string s to buf (of size cap), aborting on overflow. */
static void
append(char *buf, size_t cap, const char *s)
{
	size_t len = strlen(buf), n = strlen(s);

	if (n >= cap - len)
		abort();
	memcpy(buf + len, s, n + 1);
}

/* --------------------------------------------------------------- tests */

static void
test_exact(void **state)
{
	static const char *const s[] = { "sk-abcdef123456" };
	struct redact *r = set_of(s, NITEMS(s));

	(void)state;
	assert_int_equal(redact_count(r), 1);
	expect_one(r, "key=sk-abcdef123456 end", "key=" M " end");
	expect_one(r, "no secret here", "no secret here");
	expect_one(r, "sk-abcdef12345 almost", "sk-abcdef12345 almost");
	expect_one(r, "", "");
	redact_free(r);
}

static void
test_multiple(void **state)
{
	static const char *const s[] = { "alpha-secret", "BETA_TOKEN_VAL",
	    "gamma99" };
	struct redact *r = set_of(s, NITEMS(s));

	(void)state;
	assert_int_equal(redact_count(r), 3);
	expect_one(r, "a=alpha-secret b=BETA_TOKEN_VAL c=gamma99 "
	    "again alpha-secret, gamma99!",
	    "a=" M " b=" M " c=" M " again " M ", " M "!");
	redact_free(r);
}

static void
test_prefix_secrets(void **state)
{
	static const char *const s[] = { "sk-abc1", "sk-abc1def" };
	struct redact *r = set_of(s, NITEMS(s));
	/* The same set added the other way round must act the same. */
	static const char *const s2[] = { "sk-abc1def", "sk-abc1" };
	struct redact *r2 = set_of(s2, NITEMS(s2));

	(void)state;
	expect_one(r, "x sk-abc1def y", "x " M " y");
	expect_one(r, "x sk-abc1 y", "x " M " y");
	expect_one(r, "x sk-abc1de y", "x " M "de y");
	expect_one(r, "sk-abc sk-ab", "sk-abc sk-ab");
	expect_one(r2, "x sk-abc1def y", "x " M " y");
	expect_one(r2, "x sk-abc1de y", "x " M "de y");
	redact_free(r);
	redact_free(r2);
}

static void
test_overlapping_secrets(void **state)
{
	static const char *const s[] = { "1234abcd", "abcd5678", "mysecret1",
	    "secret1", "abab", "bcde", "abcdef", "MYsecret1XYZ" };
	struct redact *r = set_of(s, NITEMS(s));

	(void)state;
	/* Longest-first alone would leave "5678" of the second in clear. */
	expect_one(r, "<1234abcd5678>", "<" M ">");
	expect_one(r, "<abcd5678>", "<" M ">");
	/* One secret is a suffix of the other. */
	expect_one(r, "<mysecret1>", "<" M ">");
	expect_one(r, "<secret1>", "<" M ">");
	/* A shorter one inside a longer one, which ends later and starts
	 * earlier: the clear "a" must not escape before "abcdef" is seen. */
	expect_one(r, "<abcdef>", "<" M ">");
	expect_one(r, "<abcdeX>", "<a" M "X>");
	/* Found on the way along a longer secret that does not complete. */
	expect_one(r, "<MYsecret1XY>", "<MY" M "XY>");
	/* A secret overlapping itself. */
	expect_one(r, "<ababab>", "<" M ">");
	expect_one(r, "<abababa>", "<" M "a>");
	redact_free(r);
}

static void
test_start_end(void **state)
{
	static const char *const s[] = { "TOPSECRET" };
	struct redact *r = set_of(s, NITEMS(s));

	(void)state;
	expect_one(r, "TOPSECRET", M);
	expect_one(r, "TOPSECRET tail", M " tail");
	expect_one(r, "head TOPSECRET", "head " M);
	expect_one(r, "TOPSECRETTOPSECRE", M "TOPSECRE");
	redact_free(r);
}

static void
test_adjacent(void **state)
{
	static const char *const s[] = { "KEY1abcd", "zzzz9999", "KEY2KEY2" };
	struct redact *r = set_of(s, NITEMS(s));

	(void)state;
	/* Touching occurrences: one marker each. */
	expect_one(r, "KEY1abcdKEY1abcd", M M);
	expect_one(r, "KEY1abcdzzzz9999", M M);
	expect_one(r, "zzzz9999KEY1abcdzzzz9999", M M M);
	/* Overlapping copies of one secret: one marker. */
	expect_one(r, "KEY2KEY2KEY2", M);
	expect_one(r, "KEY2KEY2KEY2KEY2", M);
	redact_free(r);
}

static void
test_nul_bytes(void **state)
{
	static const char sec[] = "ab\0cd\0ef";
	static const char text[] = "\0x ab\0cd\0ef \0ab\0cd\0e\0";
	static const char want[] = "\0x " M " \0ab\0cd\0e\0";
	struct redact *r = redact_new();
	size_t len;
	char *got;

	(void)state;
	assert_non_null(r);
	assert_int_equal(redact_add(r, sec, sizeof sec - 1), 0);
	got = redact_string(r, text, sizeof text - 1, &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof want - 1);
	assert_memory_equal(got, want, len);
	assert_int_equal(got[len], '\0');
	free(got);
	redact_free(r);
}

static void
test_every_byte_value(void **state)
{
	char text[2 + 256 + 2] = "<<", *sec = text + 2;
	struct redact *r = redact_new();
	size_t i, len;
	char *got;

	(void)state;
	assert_non_null(r);
	for (i = 0; i < 256; i++)
		sec[i] = (char)(255 - i);
	sec[256] = sec[257] = '>';
	assert_int_equal(redact_add(r, sec, 256), 0);
	got = redact_string(r, text, sizeof text, &len);
	assert_non_null(got);
	assert_int_equal(len, 4 + REDACT_MARKER_LEN);
	assert_memory_equal(got, "<<" M ">>", len);
	free(got);
	redact_free(r);
}

static void
test_short_ignored(void **state)
{
	struct redact *r = redact_new();

	(void)state;
	assert_non_null(r);
	assert_int_equal(redact_add(r, "1", 1), 0);
	assert_int_equal(redact_add(r, "abc", 3), 0);
	assert_int_equal(redact_add(r, "", 0), 0);
	assert_int_equal(redact_count(r), 0);
	expect_one(r, "1 abc 1abc", "1 abc 1abc");
	assert_int_equal(redact_add(r, "abcd", REDACT_MIN_LEN), 0);
	assert_int_equal(redact_add(r, "abcd", REDACT_MIN_LEN), 0);
	assert_int_equal(redact_count(r), 1);
	expect_one(r, "1 abc abcd", "1 abc " M);
	redact_free(r);
}

static void
test_environ(void **state)
{
	extern char **environ;
	static const char *const cases[][2] = {
		{ "MY_API_KEY", "value-of-my-api-key" },
		{ "X_TOKEN", "value-of-x-token" },
		{ "DB_PASSWORD", "value-of-db-password" },
		{ "CUSTOM_ONE", "value-of-custom-one" },
		{ "CUSTOM_TWO", "value-of-custom-two" },
	};
	struct redact *r = redact_new();
	char text[512] = "", want[512] = "";
	size_t i;

	(void)state;
	assert_non_null(r);
	for (i = 0; i < NITEMS(cases); i++)
		assert_int_equal(setenv(cases[i][0], cases[i][1], 1), 0);
	assert_int_equal(setenv("AGENTZ_SECRETS", "CUSTOM_ONE,CUSTOM_TWO", 1),
	    0);
	assert_int_equal(setenv("PLAIN_VAR", "value-of-plain-var", 1), 0);
	assert_int_equal(setenv("X_TOKEN_NOT", "value-of-x-token-not", 1), 0);
	assert_int_equal(setenv("SHORT_TOKEN", "abc", 1), 0);
	assert_int_equal(redact_add_from_environ(r, environ), 0);
	for (i = 0; i < NITEMS(cases); i++) {
		append(text, sizeof text, cases[i][1]);
		append(text, sizeof text, " ");
		append(want, sizeof want, M " ");
	}
	append(text, sizeof text, "value-of-plain-var value-of-x-token-not? abc");
	/* "value-of-x-token" is a secret even inside the longer value. */
	append(want, sizeof want, "value-of-plain-var " M "-not? abc");
	expect_one(r, text, want);
	unsetenv("AGENTZ_SECRETS");
	unsetenv("X_TOKEN_NOT");
	unsetenv("PLAIN_VAR");
	unsetenv("SHORT_TOKEN");
	for (i = 0; i < NITEMS(cases); i++)
		unsetenv(cases[i][0]);
	redact_free(r);
}

static void
test_environ_array(void **state)
{
	char e1[] = "A_TOKEN=tok-1234", e2[] = "NOEQUALS_TOKEN";
	char e3[] = "B_SECRET=", e4[] = "HOME=/home/secret-home";
	char e5[] = "OPENAI_API_KEY=sk-proj-xyz=with=equals";
	char *envp[] = { e1, e2, e3, e4, e5, NULL };
	struct redact *r = redact_new();

	(void)state;
	assert_non_null(r);
	assert_int_equal(redact_add_from_environ(r, NULL), 0);
	assert_int_equal(redact_add_from_environ(r, envp), 0);
	assert_int_equal(redact_count(r), 2);
	expect_one(r, "tok-1234 /home/secret-home sk-proj-xyz=with=equals "
	    "NOEQUALS_TOKEN",
	    M " /home/secret-home " M " NOEQUALS_TOKEN");
	redact_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_multiple),
		cmocka_unit_test(test_prefix_secrets),
		cmocka_unit_test(test_overlapping_secrets),
		cmocka_unit_test(test_start_end),
		cmocka_unit_test(test_adjacent),
		cmocka_unit_test(test_nul_bytes),
		cmocka_unit_test(test_every_byte_value),
		cmocka_unit_test(test_short_ignored),
		cmocka_unit_test(test_environ),
		cmocka_unit_test(test_environ_array),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
