/*
 * test_frame_rx.c - the incremental frame reader (proto/frame.c,
 * frame_rx_*): partial and one-byte feeds, many frames in one feed,
 * oversized and bad frames refused as soon as the header is in, fills from
 * a real fd, bounded per call.
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
#include "tests/unit/proto/frame_helpers.h"
#include "tests/unit/proto/proto_helpers.h"

static void
encode_all(struct buf *b)
{
	size_t i;

	for (i = 0; i < NITEMS(samples); i++)
		assert_int_equal(msg_encode(&samples[i], b,
		    PROTO_MAX_FRAME_DEFAULT), 0);
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
	raw_frame(&b, 1, 11, 0, RAW(0x90), 1);	/* no such type */
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rx_partial),
		cmocka_unit_test(test_rx_one_byte_at_a_time),
		cmocka_unit_test(test_rx_many_in_one_feed),
		cmocka_unit_test(test_rx_oversized),
		cmocka_unit_test(test_rx_bad_header),
		cmocka_unit_test(test_rx_bad_body),
		cmocka_unit_test(test_rx_fill),
		cmocka_unit_test(test_rx_fill_bounded),
	};

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return 1;
	return cmocka_run_group_tests_name("frame_rx", tests, NULL, NULL);
}
