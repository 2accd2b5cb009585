/*
 * proto_helpers.h - what the proto tests share: sample messages of every
 * type with their edges, message comparison, hand-made frames and bodies,
 * socketpairs and forked peers.
 */
#ifndef AGENTZ_TEST_PROTO_HELPERS_H
#define AGENTZ_TEST_PROTO_HELPERS_H

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
	{ .type = MSG_PIPES },
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
	case MSG_PIPES:
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

#endif
