/*
 * test_buf.c - unit tests for common/buf.c: appends and growth, the NUL
 * kept after the bytes, consume/truncate/reset, detach, the read position
 * (skip without a move, the prefix dropped when an append needs room),
 * and the limit and size-overflow refusals that leave the buffer as it
 * was.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void
test_buf_empty(void **state)
{
	struct buf b;
	size_t n = 99;
	char *s;

	(void)state;
	buf_init(&b);
	assert_null(b.data);
	assert_string_equal(buf_str(&b), "");
	assert_int_equal(buf_append(&b, NULL, 0), 0);
	assert_null(b.data);
	s = buf_detach(&b, &n);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(n, 0);
	free(s);
	buf_clear(&b);
	buf_clear(&b);
}

static void
test_buf_grows_and_keeps_nul(void **state)
{
	struct buf b;
	size_t i;

	(void)state;
	buf_init(&b);
	for (i = 0; i < 10000; i++) {
		assert_int_equal(buf_append(&b, "ab", 2), 0);
		assert_true(b.cap > b.len);
		assert_int_equal(b.data[b.len], '\0');
	}
	assert_int_equal(b.len, 20000);
	assert_int_equal(memcmp(b.data + 19998, "ab", 2), 0);
	assert_int_equal(strlen(buf_str(&b)), 20000);
	buf_clear(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
}

static void
test_buf_binary_bytes(void **state)
{
	struct buf b;
	static const uint8_t bin[] = { 0, 1, 0, 255 };

	(void)state;
	buf_init(&b);
	assert_int_equal(buf_append(&b, bin, sizeof bin), 0);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, bin, 4);
	buf_clear(&b);
}

static void
test_buf_consume_truncate_reset(void **state)
{
	struct buf b;
	size_t cap;

	(void)state;
	buf_init(&b);
	assert_int_equal(buf_append_str(&b, "hello world"), 0);
	buf_consume(&b, 6);
	assert_string_equal(buf_str(&b), "world");
	assert_int_equal(b.len, 5);
	buf_truncate(&b, 3);
	assert_string_equal(buf_str(&b), "wor");
	buf_truncate(&b, 10);
	assert_int_equal(b.len, 3);
	cap = b.cap;
	buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, cap);
	assert_string_equal(buf_str(&b), "");
	assert_int_equal(buf_append_str(&b, "x"), 0);
	buf_consume(&b, 5);		/* more than held: empties */
	assert_int_equal(b.len, 0);
	assert_non_null(b.data);	/* small: memory kept */
	buf_clear(&b);
}

static void
test_buf_consume_frees_big(void **state)
{
	struct buf b;
	char *big = calloc(1, (size_t)2 << 20);

	(void)state;
	assert_non_null(big);
	buf_init(&b);
	assert_int_equal(buf_append(&b, big, (size_t)2 << 20), 0);
	buf_consume(&b, b.len);
	assert_null(b.data);
	assert_int_equal(b.cap, 0);
	free(big);
}

static void
test_buf_detach(void **state)
{
	struct buf b;
	size_t n;
	char *s;

	(void)state;
	buf_init(&b);
	buf_set_max(&b, 100);
	assert_int_equal(buf_append_str(&b, "abc"), 0);
	s = buf_detach(&b, &n);
	assert_string_equal(s, "abc");
	assert_int_equal(n, 3);
	free(s);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.max, 100);	/* the limit stays */
	assert_int_equal(buf_append_str(&b, "d"), 0);
	buf_clear(&b);
}

static void
test_buf_limit(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	buf_set_max(&b, 8);
	assert_int_equal(buf_append_str(&b, "12345"), 0);
	errno = 0;
	assert_int_equal(buf_append_str(&b, "6789"), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_string_equal(buf_str(&b), "12345");	/* unchanged */
	assert_int_equal(buf_reserve(&b, 4), -1);
	assert_int_equal(buf_reserve(&b, 3), 0);
	assert_int_equal(buf_append_str(&b, "678"), 0);	/* exactly max */
	assert_int_equal(b.len, 8);
	assert_int_equal(buf_append(&b, "9", 1), -1);
	assert_int_equal(buf_append(&b, NULL, 0), 0);
	buf_consume(&b, 4);
	assert_int_equal(buf_append_str(&b, "9abc"), 0);
	assert_string_equal(buf_str(&b), "56789abc");
	buf_clear(&b);
	assert_int_equal(b.max, 8);
	buf_set_max(&b, 0);
	assert_int_equal(buf_append(&b, "123456789", 9), 0);
	buf_clear(&b);
}

static void
test_buf_size_overflow(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	assert_int_equal(buf_append_str(&b, "ab"), 0);
	errno = 0;
	assert_int_equal(buf_reserve(&b, SIZE_MAX), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(buf_reserve(&b, SIZE_MAX - 2), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(b.len, 2);
	assert_string_equal(buf_str(&b), "ab");
	buf_clear(&b);
}

static void
test_buf_read_position(void **state)
{
	struct buf b;
	uint8_t *data;
	size_t cap;

	(void)state;
	buf_init(&b);
	assert_null(buf_rdata(&b));
	assert_int_equal(buf_rlen(&b), 0);
	assert_int_equal(buf_append_str(&b, "abcdef"), 0);
	data = b.data;
	cap = b.cap;
	buf_skip(&b, 2);			/* no move: the bytes stay put */
	assert_ptr_equal(b.data, data);
	assert_int_equal(buf_rlen(&b), 4);
	assert_memory_equal(buf_rdata(&b), "cdef", 4);
	assert_int_equal(buf_append_str(&b, "g"), 0);	/* room: no move */
	assert_int_equal(b.rpos, 2);
	assert_memory_equal(buf_rdata(&b), "cdefg", 5);
	/* an append that needs the read prefix's room drops it first */
	assert_int_equal(buf_reserve(&b, cap - b.len), 0);
	assert_int_equal(b.rpos, 0);
	assert_int_equal(b.cap, cap);
	assert_string_equal(buf_str(&b), "cdefg");
	/* consume after skip removes unread bytes */
	buf_skip(&b, 1);
	buf_consume(&b, 2);
	assert_int_equal(b.rpos, 0);
	assert_string_equal(buf_str(&b), "fg");
	/* read to the end: emptied */
	buf_skip(&b, 2);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.rpos, 0);
	/* detach hands over the unread bytes only */
	assert_int_equal(buf_append_str(&b, "xyz"), 0);
	buf_skip(&b, 1);
	data = (uint8_t *)buf_detach(&b, &cap);
	assert_int_equal(cap, 2);
	assert_string_equal((char *)data, "yz");
	free(data);
	buf_clear(&b);
}

static void
test_buf_limit_counts_unread(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	buf_set_max(&b, 4);
	assert_int_equal(buf_append_str(&b, "abcd"), 0);
	assert_int_equal(buf_append_str(&b, "e"), -1);
	assert_int_equal(errno, EMSGSIZE);
	buf_skip(&b, 3);
	assert_int_equal(buf_append_str(&b, "efg"), 0);
	assert_int_equal(buf_rlen(&b), 4);
	assert_memory_equal(buf_rdata(&b), "defg", 4);
	assert_int_equal(buf_append_str(&b, "h"), -1);
	assert_int_equal(errno, EMSGSIZE);
	buf_clear(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_empty),
		cmocka_unit_test(test_buf_grows_and_keeps_nul),
		cmocka_unit_test(test_buf_binary_bytes),
		cmocka_unit_test(test_buf_consume_truncate_reset),
		cmocka_unit_test(test_buf_consume_frees_big),
		cmocka_unit_test(test_buf_detach),
		cmocka_unit_test(test_buf_limit),
		cmocka_unit_test(test_buf_size_overflow),
		cmocka_unit_test(test_buf_read_position),
		cmocka_unit_test(test_buf_limit_counts_unread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
