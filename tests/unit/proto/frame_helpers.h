/*
 * frame_helpers.h - what the frame tests share besides proto_helpers.h:
 * hand-made headers and frames, socketpairs, non-blocking fds, forked
 * peers, patterned bodies.
 */
#ifndef AGENTZ_TEST_FRAME_HELPERS_H
#define AGENTZ_TEST_FRAME_HELPERS_H

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

#endif
