/*
 * test_capture.c - unit tests for supervisor/cells/capture.c: output
 * capture with its head+tail cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/cells/capture.h"

static void
test_capture_small_is_kept_whole(void **state)
{
	struct capture c;
	size_t n;
	char *s;

	(void)state;
	capture_init(&c, 64);
	assert_int_equal(capture_append(&c, "hello ", 6), 0);
	assert_int_equal(capture_append(&c, "world", 5), 0);
	s = capture_text(&c, &n);
	assert_int_equal(n, 11);
	assert_string_equal(s, "hello world");
	assert_int_equal(capture_dropped(&c), 0);
	free(s);
	capture_clear(&c);
}

static void
test_capture_keeps_head_and_tail(void **state)
{
	struct capture c;
	char buf[1000], *s;
	size_t n, i;

	(void)state;
	for (i = 0; i < sizeof buf; i++)
		buf[i] = (char)('a' + i % 26);
	capture_init(&c, 100);
	for (i = 0; i < sizeof buf; i += 7)	/* odd chunks wrap the ring */
		assert_int_equal(capture_append(&c, buf + i,
		    i + 7 <= sizeof buf ? 7 : sizeof buf - i), 0);
	assert_int_equal(c.total, 1000);
	assert_int_equal(capture_dropped(&c), 900);
	s = capture_text(&c, &n);
	assert_memory_equal(s, buf, 50);
	assert_non_null(strstr(s, "[... 900 bytes dropped ...]"));
	assert_memory_equal(s + n - 50, buf + 950, 50);
	free(s);
	capture_clear(&c);
}

static void
test_capture_freeze_keeps_the_text_exactly_sized(void **state)
{
	struct capture c;
	char buf[1000], *before, *after;
	size_t n, m;

	(void)state;
	memset(buf, 'a', sizeof buf);
	capture_init(&c, 100);
	assert_int_equal(capture_append(&c, buf, sizeof buf), 0);
	before = capture_text(&c, &n);
	assert_int_equal(capture_bytes(&c), 100);
	assert_int_equal(capture_freeze(&c), 0);
	assert_int_equal(capture_bytes(&c), n + 1);
	assert_int_equal(capture_dropped(&c), 900);
	assert_int_equal(capture_append(&c, "late", 4), 0);
	assert_int_equal(capture_dropped(&c), 904);
	after = capture_text(&c, &m);
	assert_int_equal(m, n);
	assert_memory_equal(before, after, n);
	free(before);
	free(after);
	assert_int_equal(capture_restore(&c, "abc", 3, 10, 7), 0);
	after = capture_text(&c, &m);
	assert_string_equal(after, "abc");
	assert_int_equal(c.total, 10);
	assert_int_equal(capture_dropped(&c), 7);
	free(after);
	capture_clear(&c);
}

static void
test_capture_one_huge_chunk(void **state)
{
	struct capture c;
	char *big = malloc(1 << 20), *s;
	size_t n;

	(void)state;
	memset(big, 'x', 1 << 20);
	memcpy(big, "HEAD", 4);
	memcpy(big + (1 << 20) - 4, "TAIL", 4);
	capture_init(&c, 4096);
	assert_int_equal(capture_append(&c, big, 1 << 20), 0);
	s = capture_text(&c, &n);
	assert_memory_equal(s, "HEAD", 4);
	assert_memory_equal(s + n - 4, "TAIL", 4);
	assert_int_equal(capture_dropped(&c), (1 << 20) - 4096);
	free(s);
	free(big);
	capture_clear(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_small_is_kept_whole),
		cmocka_unit_test(test_capture_keeps_head_and_tail),
		cmocka_unit_test(test_capture_one_huge_chunk),
		cmocka_unit_test(
		    test_capture_freeze_keeps_the_text_exactly_sized),
	};

	return cmocka_run_group_tests_name("capture", tests, NULL, NULL);
}
