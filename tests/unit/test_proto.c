/*
 * test_proto.c - the control-channel codec: every message round-trips,
 * the wire bytes are the documented ones, and malformed input of every
 * kind is a clean -1 with the documented errno. Malformed bodies are
 * written out by hand as msgpack bytes, so the decoder is not only checked
 * against its own encoder. The I/O tests run over real socketpairs, with a
 * forked peer where the kernel buffer would otherwise fill up.
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

#define NITEMS(a)	(sizeof(a) / sizeof((a)[0]))
#define BYTES(s)	{ (s), sizeof(s) - 1 }
#define NONE		{ NULL, 0 }
#define RAW(...)	((const uint8_t[]){ __VA_ARGS__ })
#define RAWLEN(...)	sizeof((const uint8_t[]){ __VA_ARGS__ })
/* Decodes a hand-written body and expects failure with errno e. */
#define BAD(type, e, ...) \
	expect_bad((type), RAW(__VA_ARGS__), RAWLEN(__VA_ARGS__), (e))
#define GOOD(type, m, ...) \
	expect_good((type), RAW(__VA_ARGS__), RAWLEN(__VA_ARGS__), (m))

static char s_pyver[] = "3.11.2";
static char s_sandbox[] = "seccomp=default,nnp";
static char s_code[] = "print('hi')\n";
static char s_nuls[] = "\0a\0\0b\xff\0";	/* bin with NUL bytes */
static char s_exc[] = "ValueError";
static char s_tb[] = "Traceback (most recent call last):\n  ...\n";
static char s_method[] = "input";
static char s_json[] = "{\"prompt\": \"> \"}";
static char s_empty[] = "";

/* At least one of each type, with the edges: empty fields (NULL ptr and a
 * real "" ptr), NUL bytes in bin fields, largest uints and statuses. */
static const struct msg samples[] = {
	{ .type = MSG_READY, .u.ready = { PROTO_VERSION, 1234,
	    BYTES(s_pyver), BYTES(s_sandbox) } },
	{ .type = MSG_READY, .u.ready = { UINT32_MAX, UINT32_MAX,
	    NONE, BYTES(s_empty) } },
	{ .type = MSG_EXEC, .u.exec = { 7, BYTES(s_code) } },
	{ .type = MSG_EXEC, .u.exec = { UINT32_MAX, BYTES(s_nuls) } },
	{ .type = MSG_EXEC, .u.exec = { 0, NONE } },
	{ .type = MSG_DONE, .u.done = { 7, DONE_OK, NONE, NONE } },
	{ .type = MSG_DONE, .u.done = { 8, DONE_ERROR, BYTES(s_exc),
	    BYTES(s_tb) } },
	{ .type = MSG_DONE, .u.done = { UINT32_MAX, DONE_STATUS_MAX,
	    BYTES(s_empty), BYTES(s_empty) } },
	{ .type = MSG_REQUEST, .u.request = { UINT64_MAX, 3,
	    BYTES(s_method), BYTES(s_json) } },
	{ .type = MSG_REQUEST, .u.request = { 0, 0, NONE, BYTES(s_nuls) } },
	{ .type = MSG_REPLY, .u.reply = { 1, REPLY_OK, BYTES(s_json) } },
	{ .type = MSG_REPLY, .u.reply = { UINT64_MAX, REPLY_STATUS_MAX,
	    BYTES(s_nuls) } },
	{ .type = MSG_EVENT, .u.event = { 2, BYTES(s_json) } },
	{ .type = MSG_EVENT, .u.event = { UINT64_MAX, NONE } },
	{ .type = MSG_SHUTDOWN },
	{ .type = MSG_SNAP, .u.snap = { 9 } },
	{ .type = MSG_SNAPPED, .u.snapped = { 9, 4242, BYTES(s_exc), NONE } },
	{ .type = MSG_SNAPPED, .u.snapped = { UINT32_MAX, 0, NONE,
	    BYTES(s_exc) } },
};

/* ------------------------------------------------------------- helpers */

static void
bytes_equal(const struct bytes *want, const struct bytes *got)
{
	assert_non_null(got->ptr);
	assert_int_equal(got->len, want->len);
	if (want->len > 0)
		assert_memory_equal(got->ptr, want->ptr, want->len);
	assert_int_equal(got->ptr[got->len], '\0');
}

static void
msg_equal(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case MSG_READY:
		assert_int_equal(a->u.ready.version, b->u.ready.version);
		assert_int_equal(a->u.ready.pid, b->u.ready.pid);
		bytes_equal(&a->u.ready.python_version,
		    &b->u.ready.python_version);
		bytes_equal(&a->u.ready.sandbox, &b->u.ready.sandbox);
		break;
	case MSG_EXEC:
		assert_int_equal(a->u.exec.cell, b->u.exec.cell);
		bytes_equal(&a->u.exec.code, &b->u.exec.code);
		break;
	case MSG_DONE:
		assert_int_equal(a->u.done.cell, b->u.done.cell);
		assert_int_equal(a->u.done.status, b->u.done.status);
		bytes_equal(&a->u.done.exception_type,
		    &b->u.done.exception_type);
		bytes_equal(&a->u.done.traceback, &b->u.done.traceback);
		break;
	case MSG_REQUEST:
		assert_true(a->u.request.id == b->u.request.id);
		assert_int_equal(a->u.request.cell, b->u.request.cell);
		bytes_equal(&a->u.request.method, &b->u.request.method);
		bytes_equal(&a->u.request.body, &b->u.request.body);
		break;
	case MSG_REPLY:
		assert_true(a->u.reply.id == b->u.reply.id);
		assert_int_equal(a->u.reply.status, b->u.reply.status);
		bytes_equal(&a->u.reply.body, &b->u.reply.body);
		break;
	case MSG_EVENT:
		assert_true(a->u.event.id == b->u.event.id);
		bytes_equal(&a->u.event.body, &b->u.event.body);
		break;
	case MSG_SHUTDOWN:
		break;
	case MSG_SNAP:
		assert_int_equal(a->u.snap.cell, b->u.snap.cell);
		break;
	case MSG_SNAPPED:
		assert_int_equal(a->u.snapped.cell, b->u.snapped.cell);
		assert_int_equal(a->u.snapped.pid, b->u.snapped.pid);
		bytes_equal(&a->u.snapped.threads, &b->u.snapped.threads);
		bytes_equal(&a->u.snapped.error, &b->u.snapped.error);
		break;
	}
}

static void
assert_zeroed(const struct msg *m)
{
	static const struct msg zero;

	assert_memory_equal(m, &zero, sizeof(zero));
}

static void
put_header(uint8_t *p, uint32_t len, unsigned type, unsigned reserved)
{
	p[0] = (uint8_t)(len >> 24);
	p[1] = (uint8_t)(len >> 16);
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	p[4] = (uint8_t)(type >> 8);
	p[5] = (uint8_t)type;
	p[6] = (uint8_t)(reserved >> 8);
	p[7] = (uint8_t)reserved;
}

/* Appends a frame with a hand-written header and body to b. */
static void
raw_frame(struct buf *b, uint32_t len, unsigned type, unsigned reserved,
    const void *body, size_t bodylen)
{
	uint8_t hdr[PROTO_HEADER_SIZE];

	put_header(hdr, len, type, reserved);
	assert_int_equal(buf_append(b, hdr, sizeof(hdr)), 0);
	assert_int_equal(buf_append(b, body, bodylen), 0);
}

static void
encode_all(struct buf *b)
{
	size_t i;

	for (i = 0; i < NITEMS(samples); i++)
		assert_int_equal(msg_encode(&samples[i], b,
		    PROTO_MAX_FRAME_DEFAULT), 0);
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
make_pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    sv), 0);
}

static void
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	assert_true(fl != -1);
	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static void
write_raw(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* A forked peer never outlives a failed test by long. */
static void
child_start(void)
{
	alarm(20);
}

static void
wait_child(pid_t pid)
{
	pid_t r;
	int st;

	do
		r = waitpid(pid, &st, 0);
	while (r == -1 && errno == EINTR);
	assert_int_equal(r, pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A bin of n bytes with a pattern that shows misplaced bytes. */
static char *
pattern(size_t n)
{
	char *p = malloc(n > 0 ? n : 1);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = (char)(i * 7 + i / 251);
	return p;
}

static int
is_pattern(const struct bytes *b, size_t n)
{
	size_t i;

	if (b->len != n)
		return 0;
	for (i = 0; i < n; i++)
		if (b->ptr[i] != (char)(i * 7 + i / 251))
			return 0;
	return 1;
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
	assert_string_equal(msg_name(0), "?");
	assert_string_equal(msg_name(10), "?");
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
	assert_int_equal(msg_direction(0), 0);
	assert_int_equal(msg_direction(UINT32_MAX), 0);
	for (t = 0; t < 70000; t++)
		known += msg_direction(t) != 0;
	assert_int_equal(known, 9);
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
	unsigned seen[10] = { 0 };
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
	m = (struct msg){ .type = (enum msg_type)10 };
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
	BAD(10, EPROTO, 0x90);
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

/* ------------------------------------------------------------- frame_rx */

static void
test_rx_partial(void **state)
{
	struct frame_rx rx;
	struct buf b;
	struct msg m;
	size_t i;

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&samples[2], &b, 1024), 0);
	frame_rx_init(&rx, 1024);
	assert_int_equal(frame_rx_pop(&rx, &m), 0);	/* nothing yet */
	/* every prefix: an incomplete header, then an incomplete body */
	for (i = 0; i + 1 < b.len; i++) {
		assert_int_equal(frame_rx_feed(&rx, b.data + i, 1), 0);
		assert_int_equal(frame_rx_pop(&rx, &m), 0);
		assert_zeroed(&m);
	}
	assert_int_equal(frame_rx_feed(&rx, b.data + i, 1), 0);
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	msg_equal(&samples[2], &m);
	msg_clear(&m);
	assert_int_equal(frame_rx_pop(&rx, &m), 0);
	assert_int_equal(rx.in.len, 0);
	frame_rx_clear(&rx);
	buf_clear(&b);
}

/* Pops every frame in rx, checking them against samples, round after
 * round; returns how many frames were popped. */
static size_t
pop_samples(struct frame_rx *rx, size_t next)
{
	struct msg m;
	int rc;

	while ((rc = frame_rx_pop(rx, &m)) == 1) {
		msg_equal(&samples[next % NITEMS(samples)], &m);
		msg_clear(&m);
		next++;
	}
	assert_int_equal(rc, 0);
	return next;
}

static void
test_rx_one_byte_at_a_time(void **state)
{
	struct frame_rx rx;
	struct buf b;
	size_t i, n = 0;

	(void)state;
	buf_init(&b);
	encode_all(&b);
	encode_all(&b);
	frame_rx_init(&rx, PROTO_MAX_FRAME_DEFAULT);
	for (i = 0; i < b.len; i++) {
		assert_int_equal(frame_rx_feed(&rx, b.data + i, 1), 0);
		n = pop_samples(&rx, n);
	}
	assert_int_equal(n, 2 * NITEMS(samples));
	assert_int_equal(rx.in.len, 0);
	frame_rx_clear(&rx);
	buf_clear(&b);
}

static void
test_rx_many_in_one_feed(void **state)
{
	struct frame_rx rx;
	struct buf b;
	size_t n, cut;

	(void)state;
	buf_init(&b);
	encode_all(&b);
	encode_all(&b);
	frame_rx_init(&rx, PROTO_MAX_FRAME_DEFAULT);
	assert_int_equal(frame_rx_feed(&rx, b.data, b.len), 0);
	n = pop_samples(&rx, 0);
	assert_int_equal(n, 2 * NITEMS(samples));
	/* odd cuts: frames straddle the feeds */
	for (cut = 0; cut < b.len; cut += 13) {
		size_t k = cut + 13 < b.len ? 13 : b.len - cut;

		assert_int_equal(frame_rx_feed(&rx, b.data + cut, k), 0);
		n = pop_samples(&rx, n);
	}
	assert_int_equal(n, 4 * NITEMS(samples));
	frame_rx_clear(&rx);
	buf_clear(&b);
}

static void
expect_rx_fail(const struct buf *b, size_t max_frame, int e)
{
	struct frame_rx rx;
	struct msg m;

	frame_rx_init(&rx, max_frame);
	assert_int_equal(frame_rx_feed(&rx, b->data, b->len), 0);
	errno = 0;
	assert_int_equal(frame_rx_pop(&rx, &m), -1);
	assert_int_equal(errno, e);
	assert_zeroed(&m);
	errno = 0;
	assert_int_equal(frame_rx_pop(&rx, &m), -1);	/* and stays so */
	assert_int_equal(errno, e);
	frame_rx_clear(&rx);
}

static void
test_rx_oversized(void **state)
{
	struct frame_rx rx;
	struct buf b;
	struct msg m;
	uint8_t hdr[PROTO_HEADER_SIZE];

	(void)state;
	/* only the header is fed: the error cannot wait for the body */
	buf_init(&b);
	raw_frame(&b, 17, MSG_EXEC, 0, NULL, 0);
	expect_rx_fail(&b, 16, EMSGSIZE);
	b.len = 0;
	raw_frame(&b, UINT32_MAX, MSG_EXEC, 0, NULL, 0);
	expect_rx_fail(&b, PROTO_MAX_FRAME_DEFAULT, EMSGSIZE);
	buf_clear(&b);

	/* nothing was sized for the announced body */
	frame_rx_init(&rx, PROTO_MAX_FRAME_DEFAULT);
	put_header(hdr, UINT32_MAX, MSG_EXEC, 0);
	assert_int_equal(frame_rx_feed(&rx, hdr, sizeof(hdr)), 0);
	assert_int_equal(frame_rx_pop(&rx, &m), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_true(rx.in.cap < 4096);
	frame_rx_clear(&rx);

	/* exactly max_frame passes */
	frame_rx_init(&rx, 16);
	put_header(hdr, 16, MSG_EVENT, 0);
	assert_int_equal(frame_rx_feed(&rx, hdr, sizeof(hdr)), 0);
	assert_int_equal(frame_rx_feed(&rx, RAW(0x92, 0x01, 0xc4, 12,
	    '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b'), 16),
	    0);
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	assert_int_equal(m.type, MSG_EVENT);
	assert_int_equal(m.u.event.body.len, 12);
	msg_clear(&m);
	frame_rx_clear(&rx);
}

static void
test_rx_bad_header(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b);
	raw_frame(&b, 1, MSG_SHUTDOWN, 1, RAW(0x90), 1);
	expect_rx_fail(&b, 1024, EPROTO);
	b.len = 0;
	raw_frame(&b, 1, MSG_SHUTDOWN, 0x100, RAW(0x90), 1);
	expect_rx_fail(&b, 1024, EPROTO);
	b.len = 0;
	raw_frame(&b, 1, 0, 0, RAW(0x90), 1);
	expect_rx_fail(&b, 1024, EPROTO);
	b.len = 0;
	raw_frame(&b, 1, 10, 0, RAW(0x90), 1);
	expect_rx_fail(&b, 1024, EPROTO);
	b.len = 0;
	raw_frame(&b, 1, 0x100 | MSG_SHUTDOWN, 0, RAW(0x90), 1);
	expect_rx_fail(&b, 1024, EPROTO);
	b.len = 0;
	/* a bad header is reported without its body */
	raw_frame(&b, 100, 0xffff, 0, NULL, 0);
	expect_rx_fail(&b, 1024, EPROTO);
	buf_clear(&b);
}

static void
test_rx_bad_body(void **state)
{
	struct frame_rx rx;
	struct buf b;
	struct msg m;

	(void)state;
	buf_init(&b);
	raw_frame(&b, 3, MSG_EXEC, 0, RAW(0x92, 0x01, 0xa0), 3);
	expect_rx_fail(&b, 1024, EBADMSG);
	b.len = 0;
	raw_frame(&b, 2, MSG_SHUTDOWN, 0, RAW(0x90, 0x00), 2);
	expect_rx_fail(&b, 1024, EBADMSG);
	b.len = 0;
	raw_frame(&b, 0, MSG_SHUTDOWN, 0, NULL, 0);
	expect_rx_fail(&b, 1024, EBADMSG);
	b.len = 0;
	/* a good frame, then a bad one: the good one still comes out */
	assert_int_equal(msg_encode(&samples[0], &b, 1024), 0);
	raw_frame(&b, 1, MSG_EXEC, 0, RAW(0x90), 1);
	frame_rx_init(&rx, 1024);
	assert_int_equal(frame_rx_feed(&rx, b.data, b.len), 0);
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	msg_equal(&samples[0], &m);
	msg_clear(&m);
	assert_int_equal(frame_rx_pop(&rx, &m), -1);
	assert_int_equal(errno, EBADMSG);
	frame_rx_clear(&rx);
	buf_clear(&b);
}

static void
test_rx_fill(void **state)
{
	struct frame_rx rx;
	struct msg m;
	int sv[2];

	(void)state;
	make_pair(sv);
	set_nonblock(sv[0]);
	frame_rx_init(&rx, PROTO_MAX_FRAME_DEFAULT);
	errno = 0;
	assert_int_equal(frame_rx_fill(&rx, sv[0]), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	assert_int_equal(frame_write(sv[1], &samples[0], 1024), 0);
	assert_int_equal(frame_write(sv[1], &samples[3], 1024), 0);
	assert_true(frame_rx_fill(&rx, sv[0]) > 0);
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	msg_equal(&samples[0], &m);
	msg_clear(&m);
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	msg_equal(&samples[3], &m);
	msg_clear(&m);
	assert_int_equal(frame_rx_pop(&rx, &m), 0);
	assert_int_equal(close(sv[1]), 0);
	assert_int_equal(frame_rx_fill(&rx, sv[0]), 0);
	assert_int_equal(close(sv[0]), 0);
	frame_rx_clear(&rx);
}

/* A 1 MiB frame from a forked writer arrives in reads of <= 64 KiB. */
static void
test_rx_fill_bounded(void **state)
{
	const size_t n = (size_t)1 << 20;
	struct frame_rx rx;
	struct msg m;
	char *p = pattern(n);
	pid_t pid;
	int sv[2], rc = 0, reads = 0;

	(void)state;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		m = (struct msg){ .type = MSG_EVENT,
		    .u.event = { 9, { p, n } } };
		_exit(frame_write(sv[1], &m, 2 * n) == 0 ? 0 : 1);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[1]), 0);
	frame_rx_init(&rx, 2 * n);
	while (rc == 0) {
		ssize_t r = frame_rx_fill(&rx, sv[0]);

		assert_true(r > 0);
		assert_true(r <= 65536);
		reads++;
		rc = frame_rx_pop(&rx, &m);
	}
	assert_int_equal(rc, 1);
	assert_true(reads >= 16);
	assert_int_equal(m.type, MSG_EVENT);
	assert_true(is_pattern(&m.u.event.body, n));
	msg_clear(&m);
	wait_child(pid);
	assert_int_equal(close(sv[0]), 0);
	frame_rx_clear(&rx);
	free(p);
}

/* ------------------------------------------------- frame_read/frame_write */

static void
test_rw_roundtrip(void **state)
{
	struct msg m;
	size_t i;
	int sv[2];

	(void)state;
	make_pair(sv);
	for (i = 0; i < NITEMS(samples); i++)
		assert_int_equal(frame_write(sv[1], &samples[i], 4096), 0);
	assert_int_equal(close(sv[1]), 0);
	for (i = 0; i < NITEMS(samples); i++) {
		assert_int_equal(frame_read(sv[0], &m, 4096), 1);
		msg_equal(&samples[i], &m);
		msg_clear(&m);
	}
	assert_int_equal(frame_read(sv[0], &m, 4096), 0);	/* clean EOF */
	assert_zeroed(&m);
	assert_int_equal(close(sv[0]), 0);
}

/* Writes raw bytes, closes the writer, and expects frame_read to fail. */
static void
expect_read_fail(const void *p, size_t n, size_t max_frame, int e)
{
	struct msg m;
	int sv[2];

	make_pair(sv);
	if (n > 0)
		write_raw(sv[1], p, n);
	assert_int_equal(close(sv[1]), 0);
	errno = 0;
	assert_int_equal(frame_read(sv[0], &m, max_frame), -1);
	assert_int_equal(errno, e);
	assert_zeroed(&m);
	assert_int_equal(close(sv[0]), 0);
}

static void
test_rw_eof_mid_frame(void **state)
{
	struct buf b;
	size_t i;

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&samples[0], &b, 4096), 0);
	for (i = 1; i < b.len; i++)
		expect_read_fail(b.data, i, 4096, ECONNRESET);
	buf_clear(&b);
}

static void
test_rw_bad_frames(void **state)
{
	uint8_t hdr[PROTO_HEADER_SIZE];
	struct buf b;

	(void)state;
	/* oversized: refused from the header alone, not ECONNRESET */
	put_header(hdr, UINT32_MAX, MSG_EXEC, 0);
	expect_read_fail(hdr, sizeof(hdr), PROTO_MAX_FRAME_DEFAULT, EMSGSIZE);
	put_header(hdr, 4097, MSG_EXEC, 0);
	expect_read_fail(hdr, sizeof(hdr), 4096, EMSGSIZE);
	put_header(hdr, 1, MSG_SHUTDOWN, 1);
	expect_read_fail(hdr, sizeof(hdr), 4096, EPROTO);
	put_header(hdr, 1, 10, 0);
	expect_read_fail(hdr, sizeof(hdr), 4096, EPROTO);
	buf_init(&b);
	raw_frame(&b, 3, MSG_EXEC, 0, RAW(0x92, 0x01, 0xa0), 3);
	expect_read_fail(b.data, b.len, 4096, EBADMSG);
	buf_clear(&b);
}

/* frame_read takes one frame and leaves the next one in the socket. */
static void
test_rw_no_overread(void **state)
{
	struct buf b;
	struct msg m;
	int sv[2];

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&samples[6], &b, 4096), 0);
	assert_int_equal(msg_encode(&samples[8], &b, 4096), 0);
	make_pair(sv);
	write_raw(sv[1], b.data, b.len);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[6], &m);
	msg_clear(&m);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[8], &m);
	msg_clear(&m);
	assert_int_equal(close(sv[0]), 0);
	assert_int_equal(close(sv[1]), 0);
	buf_clear(&b);
}

/*
 * Child: reads one frame in 8 KiB pieces and checks it is the n-byte
 * pattern. With sig, it pauses and signals the parent after each piece,
 * while the parent's write is blocked on the full socket.
 */
static void
slow_reader(int fd, size_t n, int sig)
{
	struct frame_rx rx;
	struct timespec ts = { 0, 20000 };
	struct msg m;
	char chunk[8192];
	int rc = 0;

	frame_rx_init(&rx, 2 * n);
	while (rc == 0) {
		ssize_t r = read(fd, chunk, sizeof(chunk));

		if (r <= 0)
			_exit(2);
		if (frame_rx_feed(&rx, chunk, (size_t)r) == -1)
			_exit(3);
		rc = frame_rx_pop(&rx, &m);
		if (sig != 0) {
			nanosleep(&ts, NULL);
			kill(getppid(), sig);
		}
	}
	_exit(rc == 1 && m.type == MSG_EXEC && is_pattern(&m.u.exec.code, n) ?
	    0 : 1);
}

/* A non-blocking writer: EAGAIN must turn into a poll, not an error. */
static void
test_rw_nonblocking_write(void **state)
{
	const size_t n = (size_t)4 << 20;
	struct msg m;
	char *p = pattern(n);
	pid_t pid;
	int sv[2];

	(void)state;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[1]);
		slow_reader(sv[0], n, 0);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[0]), 0);
	set_nonblock(sv[1]);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { p, n } } };
	assert_int_equal(frame_write(sv[1], &m, 2 * n), 0);
	wait_child(pid);
	assert_int_equal(close(sv[1]), 0);
	free(p);
}

static volatile sig_atomic_t signals;

static void
on_signal(int sig)
{
	(void)sig;
	signals++;
}

/*
 * Signals without SA_RESTART while a blocking write waits on a slow
 * reader: EINTR and short writes must be retried. The reader sends one
 * signal per read, so there is progress between signals even on a slow
 * machine (a fast timer livelocks under valgrind).
 */
static void
test_rw_write_signals(void **state)
{
	const size_t n = (size_t)1 << 20;
	struct sigaction sa, old;
	struct msg m;
	char *p = pattern(n);
	pid_t pid;
	int sv[2];

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART */
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	signals = 0;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[1]);
		slow_reader(sv[0], n, SIGUSR1);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[0]), 0);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { p, n } } };
	assert_int_equal(frame_write(sv[1], &m, 2 * n), 0);
	assert_true(signals > 0);
	wait_child(pid);	/* no signal can come after this */
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	assert_int_equal(close(sv[1]), 0);
	free(p);
}

/*
 * The state letter of pid from /proc/<pid>/stat ('R', 'S', ...), or 0.
 * The comm field may hold spaces and parentheses: the state follows the
 * last ')'.
 */
static char
proc_state(pid_t pid)
{
	char path[64], line[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, line, sizeof line - 1);
	close(fd);
	if (n <= 0)
		return 0;
	line[n] = '\0';
	p = strrchr(line, ')');
	return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/*
 * frame_read on a non-blocking fd waits for a late writer. The child
 * writes only once the parent sleeps: a non-blocking read never sleeps,
 * so the parent is then in the poll after EAGAIN, the path under test.
 */
static void
test_rw_nonblocking_read(void **state)
{
	pid_t pid, parent = getpid();
	struct msg m;
	int sv[2];

	(void)state;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[0]);
		while (proc_state(parent) != 'S')
			sched_yield();
		_exit(frame_write(sv[1], &samples[9], 4096) == 0 ? 0 : 1);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[1]), 0);
	set_nonblock(sv[0]);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[9], &m);
	msg_clear(&m);
	assert_int_equal(frame_read(sv[0], &m, 4096), 0);
	wait_child(pid);
	assert_int_equal(close(sv[0]), 0);
}

static void
test_rw_write_errors(void **state)
{
	struct msg m = { .type = (enum msg_type)0 };
	char c;
	int sv[2];

	(void)state;
	make_pair(sv);
	set_nonblock(sv[0]);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &m, 4096), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &samples[0], 4), -1);
	assert_int_equal(errno, EMSGSIZE);
	/* nothing went out for either */
	assert_int_equal(read(sv[0], &c, 1), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	/* the peer is gone (SIGPIPE is ignored, as in the binaries) */
	assert_int_equal(close(sv[0]), 0);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &samples[0], 4096), -1);
	assert_int_equal(errno, EPIPE);
	assert_int_equal(close(sv[1]), 0);
	/* a bad fd */
	errno = 0;
	assert_int_equal(frame_write(-1, &samples[0], 4096), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(frame_read(-1, &m, 4096), -1);
	assert_int_equal(errno, EBADF);
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
		cmocka_unit_test(test_rx_partial),
		cmocka_unit_test(test_rx_one_byte_at_a_time),
		cmocka_unit_test(test_rx_many_in_one_feed),
		cmocka_unit_test(test_rx_oversized),
		cmocka_unit_test(test_rx_bad_header),
		cmocka_unit_test(test_rx_bad_body),
		cmocka_unit_test(test_rx_fill),
		cmocka_unit_test(test_rx_fill_bounded),
		cmocka_unit_test(test_rw_roundtrip),
		cmocka_unit_test(test_rw_eof_mid_frame),
		cmocka_unit_test(test_rw_bad_frames),
		cmocka_unit_test(test_rw_no_overread),
		cmocka_unit_test(test_rw_nonblocking_write),
		cmocka_unit_test(test_rw_write_signals),
		cmocka_unit_test(test_rw_nonblocking_read),
		cmocka_unit_test(test_rw_write_errors),
	};

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return 1;
	return cmocka_run_group_tests_name("proto", tests, NULL, NULL);
}
