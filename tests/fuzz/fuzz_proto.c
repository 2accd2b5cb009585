/*
 * fuzz_proto.c - libFuzzer target for everything proto/ reads from a peer.
 *
 * Each input is used three ways:
 *  - as a byte stream fed whole to a frame_rx and popped until error or
 *    empty;
 *  - as the same stream fed in small chunks, which must pop the same
 *    messages and end the same way (incremental == batch);
 *  - as [type byte][body] for msg_decode.
 * Every message that decodes must re-encode within the limit its input
 * met (canonical msgpack is never longer), decode back to an equal
 * message, pop from a frame_rx unchanged, and re-encode to the same bytes.
 * Any violation aborts, which libFuzzer reports as a crash.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

#define FUZZ_MAX_FRAME	4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int ok)
{
	if (!ok)
		abort();
}

static int
bytes_eq(const struct bytes *a, const struct bytes *b)
{
	return a->ptr != NULL && b->ptr != NULL && a->len == b->len &&
	    memcmp(a->ptr, b->ptr, a->len) == 0 &&
	    a->ptr[a->len] == '\0' && b->ptr[b->len] == '\0';
}

static int
msg_eq(const struct msg *a, const struct msg *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case MSG_READY:
		return a->u.ready.version == b->u.ready.version &&
		    a->u.ready.pid == b->u.ready.pid &&
		    bytes_eq(&a->u.ready.python_version,
		    &b->u.ready.python_version) &&
		    bytes_eq(&a->u.ready.sandbox, &b->u.ready.sandbox);
	case MSG_EXEC:
		return a->u.exec.cell == b->u.exec.cell &&
		    bytes_eq(&a->u.exec.code, &b->u.exec.code);
	case MSG_DONE:
		return a->u.done.cell == b->u.done.cell &&
		    a->u.done.status == b->u.done.status &&
		    a->u.done.status <= DONE_STATUS_MAX &&
		    bytes_eq(&a->u.done.exception_type,
		    &b->u.done.exception_type) &&
		    bytes_eq(&a->u.done.traceback, &b->u.done.traceback);
	case MSG_REQUEST:
		return a->u.request.id == b->u.request.id &&
		    a->u.request.cell == b->u.request.cell &&
		    bytes_eq(&a->u.request.method, &b->u.request.method) &&
		    bytes_eq(&a->u.request.body, &b->u.request.body);
	case MSG_REPLY:
		return a->u.reply.id == b->u.reply.id &&
		    a->u.reply.status == b->u.reply.status &&
		    a->u.reply.status <= REPLY_STATUS_MAX &&
		    bytes_eq(&a->u.reply.body, &b->u.reply.body);
	case MSG_EVENT:
		return a->u.event.id == b->u.event.id &&
		    bytes_eq(&a->u.event.body, &b->u.event.body);
	case MSG_SHUTDOWN:
	case MSG_PIPES:
		return 1;
	case MSG_SNAP:
		return a->u.snap.cell == b->u.snap.cell;
	case MSG_SNAPPED:
		return a->u.snapped.cell == b->u.snapped.cell &&
		    a->u.snapped.pid == b->u.snapped.pid &&
		    bytes_eq(&a->u.snapped.threads, &b->u.snapped.threads) &&
		    bytes_eq(&a->u.snapped.error, &b->u.snapped.error);
	}
	return 0;
}

/* Every byte, padding included: failure paths memset the whole msg. */
static int
is_zero(const struct msg *m)
{
	const unsigned char *p = (const unsigned char *)m;
	size_t i;

	for (i = 0; i < sizeof(*m); i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

/*
 * m was decoded from a body of at most limit bytes: checks the round trip
 * and appends m's canonical frame to out.
 */
static void
check_roundtrip(const struct msg *m, size_t limit, struct buf *out)
{
	struct frame_rx rx;
	struct msg again;
	struct buf a, b;

	buf_init(&a);
	buf_init(&b);
	check(msg_encode(m, &a, limit) == 0);
	check(a.len >= PROTO_HEADER_SIZE);
	check(msg_decode(m->type, a.data + PROTO_HEADER_SIZE,
	    a.len - PROTO_HEADER_SIZE, &again) == 0);
	check(msg_eq(m, &again));
	check(msg_encode(&again, &b, limit) == 0);
	check(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
	msg_clear(&again);

	frame_rx_init(&rx, limit);
	check(frame_rx_feed(&rx, a.data, a.len) == 0);
	check(frame_rx_pop(&rx, &again) == 1);
	check(msg_eq(m, &again));
	msg_clear(&again);
	check(frame_rx_pop(&rx, &again) == 0);
	frame_rx_clear(&rx);

	if (out != NULL)
		check(buf_append(out, a.data, a.len) == 0);
	buf_clear(&a);
	buf_clear(&b);
}

/* Pops until empty or error; returns 0, or the errno of the error. */
static int
drain(struct frame_rx *rx, struct buf *out)
{
	struct msg m;
	int rc;

	while ((rc = frame_rx_pop(rx, &m)) == 1) {
		check_roundtrip(&m, rx->max_frame, out);
		msg_clear(&m);
	}
	if (rc == 0)
		return 0;
	check(is_zero(&m));
	check(errno == EMSGSIZE || errno == EPROTO || errno == EBADMSG ||
	    errno == ENOMEM);
	return errno;
}

/* Feeds data in chunks of n; returns how the stream ended, like drain. */
static int
run_stream(const uint8_t *data, size_t size, size_t n, struct buf *out)
{
	struct frame_rx rx;
	size_t off, k;
	int end = 0;

	frame_rx_init(&rx, FUZZ_MAX_FRAME);
	for (off = 0; end == 0 && off < size; off += k) {
		k = size - off < n ? size - off : n;
		check(frame_rx_feed(&rx, data + off, k) == 0);
		end = drain(&rx, out);
	}
	frame_rx_clear(&rx);
	return end;
}

static void
fuzz_stream(const uint8_t *data, size_t size)
{
	struct buf whole, chunked;
	size_t n = 1 + (size > 0 ? data[size - 1] % 61 : 0);

	buf_init(&whole);
	buf_init(&chunked);
	check(run_stream(data, size, size, &whole) ==
	    run_stream(data, size, n, &chunked));
	check(whole.len == chunked.len);
	check(whole.len == 0 ||
	    memcmp(whole.data, chunked.data, whole.len) == 0);
	buf_clear(&whole);
	buf_clear(&chunked);
}

/* A REQUEST's head read from a prefix agrees with the whole decode, and
 * a prefix never claims more than the whole text gives. */
static void
fuzz_head(const uint8_t *data, size_t size)
{
	struct msg whole, head;
	int rc, full = msg_decode(MSG_REQUEST, data, size, &whole) == 0;

	rc = msg_request_head(data, size, &head);
	check(rc >= -1 && rc <= 1);
	if (full) {
		check(rc == 1);
		check(head.u.request.id == whole.u.request.id &&
		    head.u.request.cell == whole.u.request.cell &&
		    head.u.request.body.len == whole.u.request.body.len &&
		    bytes_eq(&head.u.request.method, &whole.u.request.method));
		msg_clear(&whole);
	}
	if (rc == 1)
		check(head.u.request.body.ptr == NULL);
	msg_clear(&head);
}

static void
fuzz_decode(const uint8_t *data, size_t size)
{
	struct msg m;

	if (size == 0)
		return;
	if (msg_decode(data[0], data + 1, size - 1, &m) == 0) {
		check(msg_direction(data[0]) != 0);
		check_roundtrip(&m, size - 1, NULL);
		msg_clear(&m);
		return;
	}
	check(is_zero(&m));
	check(errno == EPROTO || errno == EBADMSG || errno == ENOMEM);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_stream(data, size);
	fuzz_decode(data, size);
	fuzz_head(data, size);
	return 0;
}
