/*
 * test_pack.c - the control-channel codec (proto/pack.c): every message
 * round-trips, the wire bytes are the documented ones, and malformed input
 * of every kind is a clean -1 with the documented errno. Malformed bodies
 * are written out by hand as msgpack bytes, so the decoder is not only
 * checked against its own encoder.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/proto.h"
#include "tests/unit/proto/proto_helpers.h"

static void
expect_good(unsigned type, const uint8_t *body, size_t len,
    const struct msg *want)
{
	struct msg m;

	assert_int_equal(msg_decode(type, body, len, &m), 0);
	msg_equal(want, &m);
	msg_clear(&m);
}

static void
expect_bad(unsigned type, const uint8_t *body, size_t len, int e)
{
	struct msg m;

	memset(&m, 0xa5, sizeof(m));
	errno = 0;
	assert_int_equal(msg_decode(type, body, len, &m), -1);
	assert_int_equal(errno, e);
	assert_zeroed(&m);
}

/* ----------------------------------------------------------------- buf */

static void
test_buf(void **state)
{
	struct buf b;
	char big[1000];
	size_t i;

	(void)state;
	buf_init(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(buf_append(&b, NULL, 0), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(buf_append(&b, "hello", 5), 0);
	assert_int_equal(buf_append(&b, " world", 6), 0);
	assert_int_equal(b.len, 11);
	assert_true(b.cap >= b.len);
	assert_memory_equal(b.data, "hello world", 11);
	buf_consume(&b, 6);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "world", 5);
	buf_consume(&b, 0);
	assert_int_equal(b.len, 5);
	buf_consume(&b, 5);
	assert_int_equal(b.len, 0);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)i;
	for (i = 0; i < 100; i++)
		assert_int_equal(buf_append(&b, big, sizeof(big)), 0);
	assert_int_equal(b.len, 100 * sizeof(big));
	assert_memory_equal(b.data + 99 * sizeof(big), big, sizeof(big));
	buf_clear(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(buf_append(&b, "x", 1), 0);	/* reusable */
	buf_clear(&b);
	buf_clear(&b);
}

/* ----------------------------------------------------- names, clearing */

static void
test_names(void **state)
{
	unsigned t, known = 0;

	(void)state;
	assert_string_equal(msg_name(MSG_READY), "READY");
	assert_string_equal(msg_name(MSG_EXEC), "EXEC");
	assert_string_equal(msg_name(MSG_DONE), "DONE");
	assert_string_equal(msg_name(MSG_REQUEST), "REQUEST");
	assert_string_equal(msg_name(MSG_REPLY), "REPLY");
	assert_string_equal(msg_name(MSG_EVENT), "EVENT");
	assert_string_equal(msg_name(MSG_SHUTDOWN), "SHUTDOWN");
	assert_string_equal(msg_name(MSG_SNAP), "SNAP");
	assert_string_equal(msg_name(MSG_SNAPPED), "SNAPPED");
	assert_string_equal(msg_name(MSG_PIPES), "PIPES");
	assert_string_equal(msg_name(0), "?");
	assert_string_equal(msg_name(11), "?");
	assert_string_equal(msg_name(UINT32_MAX), "?");
	assert_int_equal(msg_direction(MSG_READY), MSG_W2S);
	assert_int_equal(msg_direction(MSG_DONE), MSG_W2S);
	assert_int_equal(msg_direction(MSG_REQUEST), MSG_W2S);
	assert_int_equal(msg_direction(MSG_EXEC), MSG_S2W);
	assert_int_equal(msg_direction(MSG_REPLY), MSG_S2W);
	assert_int_equal(msg_direction(MSG_EVENT), MSG_S2W);
	assert_int_equal(msg_direction(MSG_SHUTDOWN), MSG_S2W);
	assert_int_equal(msg_direction(MSG_SNAP), MSG_S2W);
	assert_int_equal(msg_direction(MSG_SNAPPED), MSG_W2S);
	assert_int_equal(msg_direction(MSG_PIPES), MSG_S2W);
	assert_int_equal(msg_direction(0), 0);
	assert_int_equal(msg_direction(UINT32_MAX), 0);
	for (t = 0; t < 70000; t++)
		known += msg_direction(t) != 0;
	assert_int_equal(known, 10);
}

static void
test_clear(void **state)
{
	struct msg m;

	(void)state;
	memset(&m, 0, sizeof(m));
	msg_clear(&m);
	assert_zeroed(&m);
	m.type = MSG_DONE;
	m.u.done.traceback.ptr = strdup("tb");
	m.u.done.traceback.len = 2;
	msg_clear(&m);		/* frees: LeakSanitizer checks */
	assert_zeroed(&m);
}

/* ----------------------------------------------------------- round trip */

/* Encodes m after existing bytes in b, checks the header, decodes it. */
static void
roundtrip(const struct msg *m)
{
	struct buf b;
	struct msg got;
	const uint8_t *h;
	size_t len;

	buf_init(&b);
	assert_int_equal(buf_append(&b, "junk", 4), 0);
	assert_int_equal(msg_encode(m, &b, PROTO_MAX_FRAME_DEFAULT), 0);
	assert_memory_equal(b.data, "junk", 4);
	h = b.data + 4;
	len = b.len - 4 - PROTO_HEADER_SIZE;
	assert_int_equal((size_t)h[0] << 24 | (size_t)h[1] << 16 |
	    (size_t)h[2] << 8 | h[3], len);
	assert_int_equal(h[4] << 8 | h[5], m->type);
	assert_int_equal(h[6], 0);
	assert_int_equal(h[7], 0);
	assert_int_equal(msg_decode(m->type, h + PROTO_HEADER_SIZE, len,
	    &got), 0);
	msg_equal(m, &got);
	msg_clear(&got);
	assert_zeroed(&got);
	buf_clear(&b);
}

static void
test_roundtrip_samples(void **state)
{
	unsigned seen[11] = { 0 };
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(samples); i++) {
		roundtrip(&samples[i]);
		seen[samples[i].type]++;
	}
	for (i = 1; i < NITEMS(seen); i++)
		assert_true(seen[i] > 0);	/* every type covered */
}

/* Lengths and values on each side of msgpack's format boundaries. */
static void
test_roundtrip_sizes(void **state)
{
	static const size_t lens[] = { 0, 1, 15, 31, 32, 255, 256, 65535,
	    65536, 70000 };
	static const uint64_t ids[] = { 0, 127, 128, 255, 256, 65535, 65536,
	    UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX };
	struct msg m;
	char *p = pattern(70000);
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(lens); i++) {
		m = (struct msg){ .type = MSG_REQUEST, .u.request = {
		    ids[i], (uint32_t)ids[i], { p, lens[i] },
		    { p, lens[i] } } };
		roundtrip(&m);
		m = (struct msg){ .type = MSG_READY, .u.ready = {
		    (uint32_t)ids[i], 1, { p, lens[i] }, NONE } };
		roundtrip(&m);
	}
	free(p);
}

/* The exact bytes on the wire, canonical msgpack. */
static void
test_wire_bytes(void **state)
{
	static const uint8_t exec[] = { 0, 0, 0, 6, 0, 2, 0, 0,
	    0x92, 0x01, 0xc4, 0x02, 'a', 0 };
	static const uint8_t done[] = { 0, 0, 0, 12, 0, 3, 0, 0,
	    0x94, 0xce, 0xff, 0xff, 0xff, 0xff, 0x03, 0xa1, 'E', 0xa2, 't',
	    '\n' };
	static const uint8_t reply[] = { 0, 0, 0, 13, 0, 5, 0, 0,
	    0x93, 0xcf, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	    0x01, 0xc4, 0x00 };
	static const uint8_t shutdown[] = { 0, 0, 0, 1, 0, 7, 0, 0, 0x90 };
	static char a0[] = "a", e[] = "E", t[] = "t\n";
	struct msg m;
	struct buf b;

	(void)state;
	buf_init(&b);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { a0, 2 } } };
	assert_int_equal(msg_encode(&m, &b, 64), 0);
	assert_int_equal(b.len, sizeof(exec));
	assert_memory_equal(b.data, exec, sizeof(exec));
	b.len = 0;
	m = (struct msg){ .type = MSG_DONE, .u.done = { UINT32_MAX, 3,
	    BYTES(e), BYTES(t) } };
	assert_int_equal(msg_encode(&m, &b, 64), 0);
	assert_int_equal(b.len, sizeof(done));
	assert_memory_equal(b.data, done, sizeof(done));
	b.len = 0;
	m = (struct msg){ .type = MSG_REPLY, .u.reply = {
	    0x0102030405060708, REPLY_ERROR, NONE } };
	assert_int_equal(msg_encode(&m, &b, 64), 0);
	assert_int_equal(b.len, sizeof(reply));
	assert_memory_equal(b.data, reply, sizeof(reply));
	b.len = 0;
	m = (struct msg){ .type = MSG_SHUTDOWN };
	assert_int_equal(msg_encode(&m, &b, 64), 0);
	assert_int_equal(b.len, sizeof(shutdown));
	assert_memory_equal(b.data, shutdown, sizeof(shutdown));
	buf_clear(&b);
}

/* ----------------------------------------------------------- encode errors */

static void
expect_encode_fail(const struct msg *m, size_t max_frame, int e)
{
	struct buf b;

	buf_init(&b);
	assert_int_equal(buf_append(&b, "keep", 4), 0);
	errno = 0;
	assert_int_equal(msg_encode(m, &b, max_frame), -1);
	assert_int_equal(errno, e);
	assert_int_equal(b.len, 4);		/* out unchanged */
	assert_memory_equal(b.data, "keep", 4);
	buf_clear(&b);
}

static void
test_encode_errors(void **state)
{
	static char one[] = "x";
	struct msg m;

	(void)state;
	m = (struct msg){ .type = (enum msg_type)0 };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EINVAL);
	m = (struct msg){ .type = (enum msg_type)11 };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EINVAL);
	m = (struct msg){ .type = MSG_DONE, .u.done = { 1,
	    DONE_STATUS_MAX + 1, NONE, NONE } };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EINVAL);
	m = (struct msg){ .type = MSG_REPLY, .u.reply = { 1,
	    REPLY_STATUS_MAX + 1, NONE } };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EINVAL);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { NULL, 3 } } };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EINVAL);
	/*
	 * Announced lengths far beyond the 2-byte buffer behind them: the
	 * limit must be applied before the bytes are read or room is made
	 * for them (ASan would catch the overread).
	 */
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1,
	    { one, (size_t)1 << 30 } } };
	expect_encode_fail(&m, 4096, EMSGSIZE);
	m = (struct msg){ .type = MSG_READY, .u.ready = { 1, 1,
	    { one, (size_t)1 << 30 }, NONE } };
	expect_encode_fail(&m, PROTO_MAX_FRAME_DEFAULT, EMSGSIZE);
	m = (struct msg){ .type = MSG_EVENT, .u.event = { 1,
	    { one, (size_t)UINT32_MAX + 1 } } };
	expect_encode_fail(&m, SIZE_MAX, EMSGSIZE);
}

/* max_frame bounds the body exactly: len == max passes, max - 1 fails. */
static void
test_encode_limit(void **state)
{
	struct msg m = samples[0];
	struct buf b;
	size_t body;

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&m, &b, PROTO_MAX_FRAME_DEFAULT), 0);
	body = b.len - PROTO_HEADER_SIZE;
	b.len = 0;
	assert_int_equal(msg_encode(&m, &b, body), 0);
	assert_int_equal(b.len, PROTO_HEADER_SIZE + body);
	buf_clear(&b);
	expect_encode_fail(&m, body - 1, EMSGSIZE);
	m = (struct msg){ .type = MSG_SHUTDOWN };
	expect_encode_fail(&m, 0, EMSGSIZE);
}

/* -------------------------------------------------------- decode errors */

static void
test_decode_good_handmade(void **state)
{
	static char z[] = "z", x[] = "x", py[] = "3.11";
	struct msg m;

	(void)state;
	/* array 16 and uint 8 where fixarray and fixint would do */
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 5, BYTES(z) } };
	GOOD(MSG_EXEC, &m, 0xdc, 0x00, 0x02, 0xcc, 0x05, 0xc5, 0x00, 0x01,
	    'z');
	/* array 32, str 8, uint 16 */
	m = (struct msg){ .type = MSG_READY, .u.ready = { 1, 65535,
	    BYTES(py), BYTES(x) } };
	GOOD(MSG_READY, &m, 0xdd, 0, 0, 0, 4, 0x01, 0xcd, 0xff, 0xff,
	    0xd9, 0x04, '3', '.', '1', '1', 0xa1, 'x');
	/* the largest u32 in a uint 64 */
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { UINT32_MAX, NONE } };
	GOOD(MSG_EXEC, &m, 0x92, 0xcf, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
	    0xc4, 0x00);
	/* the largest u64, the largest status */
	m = (struct msg){ .type = MSG_REPLY, .u.reply = { UINT64_MAX,
	    REPLY_STATUS_MAX, NONE } };
	GOOD(MSG_REPLY, &m, 0x93, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0x01, 0xc4, 0x00);
	m = (struct msg){ .type = MSG_SHUTDOWN };
	GOOD(MSG_SHUTDOWN, &m, 0x90);
}

static void
test_decode_unknown_type(void **state)
{
	(void)state;
	BAD(0, EPROTO, 0x90);
	BAD(11, EPROTO, 0x90);
	BAD(0x0101, EPROTO, 0x92, 0x01, 0xc4, 0x00);
	BAD(UINT32_MAX, EPROTO, 0x90);
}

static void
test_decode_wrong_field_type(void **state)
{
	(void)state;
	/* str where bin expected, and bin where str expected */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xa1, 'x');
	BAD(MSG_EVENT, EBADMSG, 0x92, 0x01, 0xa0);
	BAD(MSG_READY, EBADMSG, 0x94, 0x01, 0x02, 0xc4, 0x01, 'x', 0xa0);
	BAD(MSG_REQUEST, EBADMSG, 0x94, 0x01, 0x02, 0xc4, 0x00, 0xc4, 0x00);
	BAD(MSG_DONE, EBADMSG, 0x94, 0x01, 0x00, 0xa0, 0xc4, 0x00);
	/* negative ints: fixint, int 8, int 64 */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xff, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xd0, 0x80, 0xc4, 0x00);
	BAD(MSG_EVENT, EBADMSG, 0x92, 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xc4, 0x00);
	/* uint too large for a u32 field */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0,
	    0xc4, 0x00);
	BAD(MSG_READY, EBADMSG, 0x94, 0x01, 0xcf, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xa0, 0xa0);
	/* nil, bool, float, ext where a uint, str or bin is expected */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xc0, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xc0);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xc3, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xca, 0x3f, 0x80, 0, 0, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xd4, 0x01, 0x00);
	BAD(MSG_EVENT, EBADMSG, 0x92, 0x01, 0xc7, 0x01, 0x05, 'x');
	/* uint where str or bin expected, str where uint expected */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0x01);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xa1, '1', 0xc4, 0x00);
	/* nested containers, including ones announcing 4G elements */
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0x90);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0x80);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x91, 0x01, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xdf, 0xff, 0xff, 0xff, 0xff);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xdc, 0xff, 0xff, 0xc4, 0x00);
}

static void
test_decode_status_range(void **state)
{
	struct msg m;

	(void)state;
	BAD(MSG_DONE, EBADMSG, 0x94, 0x01, DONE_STATUS_MAX + 1, 0xa0, 0xa0);
	BAD(MSG_DONE, EBADMSG, 0x94, 0x01, 0xce, 0xff, 0xff, 0xff, 0xff,
	    0xa0, 0xa0);
	BAD(MSG_REPLY, EBADMSG, 0x93, 0x01, REPLY_STATUS_MAX + 1, 0xc4, 0x00);
	BAD(MSG_REPLY, EBADMSG, 0x93, 0x01, 0xcc, 0x80, 0xc4, 0x00);
	m = (struct msg){ .type = MSG_DONE, .u.done = { 1, DONE_STATUS_MAX,
	    BYTES(s_empty), BYTES(s_empty) } };
	GOOD(MSG_DONE, &m, 0x94, 0x01, DONE_STATUS_MAX, 0xa0, 0xa0);
}

static void
test_decode_wrong_count(void **state)
{
	(void)state;
	/* extra field */
	BAD(MSG_EXEC, EBADMSG, 0x93, 0x01, 0xc4, 0x00, 0x01);
	BAD(MSG_SHUTDOWN, EBADMSG, 0x91, 0x00);
	BAD(MSG_READY, EBADMSG, 0x95, 0x01, 0x02, 0xa0, 0xa0, 0xa0);
	/* missing field, announced or not */
	BAD(MSG_EXEC, EBADMSG, 0x91, 0x01);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01);
	BAD(MSG_EXEC, EBADMSG, 0x90);
	BAD(MSG_DONE, EBADMSG, 0x93, 0x01, 0x00, 0xa0);
	BAD(MSG_EXEC, EBADMSG, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0xc4,
	    0x00);
}

static void
test_decode_trailing(void **state)
{
	(void)state;
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xc4, 0x00, 0x00);
	BAD(MSG_SHUTDOWN, EBADMSG, 0x90, 0x90);
	BAD(MSG_SHUTDOWN, EBADMSG, 0x90, 0xc0);
	BAD(MSG_EVENT, EBADMSG, 0x92, 0x01, 0xc4, 0x01, 'x', 0xff);
}

static void
test_decode_not_array(void **state)
{
	struct msg m;

	(void)state;
	memset(&m, 0xa5, sizeof(m));
	assert_int_equal(msg_decode(MSG_SHUTDOWN, NULL, 0, &m), -1);
	assert_int_equal(errno, EBADMSG);
	assert_zeroed(&m);
	assert_int_equal(msg_decode(MSG_SHUTDOWN, "", 0, &m), -1);
	assert_int_equal(errno, EBADMSG);
	BAD(MSG_SHUTDOWN, EBADMSG, 0x80);
	BAD(MSG_EXEC, EBADMSG, 0x82, 0x00, 0x01, 0x01, 0xc4, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x01);
	BAD(MSG_EXEC, EBADMSG, 0xc0);
	BAD(MSG_EXEC, EBADMSG, 0xc4, 0x02, 0x92, 0x01);
	BAD(MSG_EXEC, EBADMSG, 0xc1, 0x92, 0x01, 0xc4, 0x00);	/* never used */
}

static void
test_decode_truncated(void **state)
{
	static const uint8_t ok[] = { 0x94, 0x01, 0x02, 0xa3, 'a', 'b', 'c',
	    0xa2, 'd', 'e' };
	struct msg m;
	size_t i;

	(void)state;
	assert_int_equal(msg_decode(MSG_READY, ok, sizeof(ok), &m), 0);
	msg_clear(&m);
	for (i = 0; i < sizeof(ok); i++)
		expect_bad(MSG_READY, ok, i, EBADMSG);
	BAD(MSG_EXEC, EBADMSG, 0xdc, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0xdd, 0x00, 0x00, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0xce, 0x00, 0x00);
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xc4, 0x05, 'a');
	BAD(MSG_EXEC, EBADMSG, 0x92, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff, 'a');
	BAD(MSG_EVENT, EBADMSG, 0x92, 0x01, 0xc5, 0x01);
}

/* A failure after some byte strings were copied frees them (LSan) and
 * leaves m zeroed. */
static void
test_decode_fail_late(void **state)
{
	(void)state;
	BAD(MSG_READY, EBADMSG, 0x94, 0x01, 0x02, 0xa2, 'p', 'y', 0xc4, 0x01,
	    's');
	BAD(MSG_REQUEST, EBADMSG, 0x94, 0x01, 0x02, 0xa1, 'm', 0xc4, 0x01,
	    'b', 0x00);
	BAD(MSG_DONE, EBADMSG, 0x94, 0x01, 0x01, 0xa1, 'E', 0xa1, 'T', 0x00);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_roundtrip_samples),
		cmocka_unit_test(test_roundtrip_sizes),
		cmocka_unit_test(test_wire_bytes),
		cmocka_unit_test(test_encode_errors),
		cmocka_unit_test(test_encode_limit),
		cmocka_unit_test(test_decode_good_handmade),
		cmocka_unit_test(test_decode_unknown_type),
		cmocka_unit_test(test_decode_wrong_field_type),
		cmocka_unit_test(test_decode_status_range),
		cmocka_unit_test(test_decode_wrong_count),
		cmocka_unit_test(test_decode_trailing),
		cmocka_unit_test(test_decode_not_array),
		cmocka_unit_test(test_decode_truncated),
		cmocka_unit_test(test_decode_fail_late),
	};

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return 1;
	return cmocka_run_group_tests_name("pack", tests, NULL, NULL);
}
