/*
 * frame.c - frames on a byte stream: the 8-byte header, the incremental
 * reader the supervisor drives from its event loop (frame_rx_*), and the
 * blocking pair the worker uses (frame_read, frame_write).
 *
 * The header is checked as soon as its 8 bytes are in, before the body is
 * waited for or any buffer is sized for it, so a peer announcing a 4 GB
 * body costs us nothing. msg_encode in pack.c writes the header this file
 * reads.
 */
#include "proto/proto.h"

#include "common/fdio.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Most frame_rx_fill reads per call, so one busy worker cannot starve
 * the rest of the supervisor's loop. */
#define FRAME_RX_CHUNK	((size_t)64 << 10)

/*
 * Parses a header { u32 body_len, u16 type, u16 zero }. Returns 0 with the
 * body length and type, or -1 with errno EPROTO (reserved field not zero,
 * type not in MSG_LIST) or EMSGSIZE (body_len over max_frame).
 */
static int
header_parse(const uint8_t *p, size_t max_frame, size_t *len, unsigned *type)
{
	uint32_t n;
	unsigned t;

	n = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
	t = (unsigned)p[4] << 8 | p[5];
	if (p[6] != 0 || p[7] != 0 || msg_direction(t) == 0) {
		errno = EPROTO;
		return -1;
	}
	if (n > max_frame) {
		errno = EMSGSIZE;
		return -1;
	}
	*len = n;
	*type = t;
	return 0;
}

/*
 * Waits until fd is ready for events. Errors and hang-ups count as ready:
 * the read or write that follows reports them.
 */
static int
wait_fd(int fd, short events)
{
	struct pollfd pfd;

	pfd.fd = fd;
	pfd.events = events;
	pfd.revents = 0;
	while (poll(&pfd, 1, -1) == -1) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- frame_rx */

/* Sets up rx with no buffered bytes; frames over max_frame are refused. */
void
frame_rx_init(struct frame_rx *rx, size_t max_frame)
{
	buf_init(&rx->in);
	rx->skip = 0;
	rx->max_frame = max_frame;
}

/* Frees the buffered bytes; rx may be initialised again. */
void
frame_rx_clear(struct frame_rx *rx)
{
	buf_clear(&rx->in);
	rx->skip = 0;
}

/* n bytes read into rx, a skipped frame's first. n, or -1 / ENOMEM. */
static ssize_t
take(struct frame_rx *rx, const uint8_t *chunk, ssize_t n)
{
	size_t drop = rx->skip < (size_t)n ? rx->skip : (size_t)n;

	rx->skip -= drop;
	if (buf_append(&rx->in, chunk + drop, (size_t)n - drop) == -1)
		return -1;
	return n;
}

/*
 * One read(2) of at most 64 KiB from fd, appended to rx. Returns the byte
 * count (> 0), 0 on EOF, or -1 with errno from read (EAGAIN, EINTR passed
 * through) or ENOMEM (the bytes read are then lost: drop the stream).
 */
ssize_t
frame_rx_fill(struct frame_rx *rx, int fd)
{
	uint8_t chunk[FRAME_RX_CHUNK];
	ssize_t n;

	if ((n = read(fd, chunk, sizeof(chunk))) <= 0)
		return n;
	return take(rx, chunk, n);
}

ssize_t
frame_rx_fill_cred(struct frame_rx *rx, int fd, pid_t *sender)
{
	uint8_t chunk[FRAME_RX_CHUNK];
	/* room for the credentials only: descriptors sent along are not
	 * installed (the kernel closes what does not fit) */
	union {
		char b[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} cb;
	struct iovec iov = { chunk, sizeof chunk };
	struct msghdr mh;
	struct cmsghdr *h;
	struct ucred uc;
	ssize_t n;

	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cb.b;
	mh.msg_controllen = sizeof cb.b;
	*sender = 0;
	if ((n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC)) <= 0)
		return n;
	for (h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET &&
		    h->cmsg_type == SCM_CREDENTIALS &&
		    h->cmsg_len == CMSG_LEN(sizeof uc)) {
			memcpy(&uc, CMSG_DATA(h), sizeof uc);
			*sender = uc.pid;
		}
	return take(rx, chunk, n);
}

/* Appends n bytes the caller already has. 0, or -1 with errno ENOMEM. */
int
frame_rx_feed(struct frame_rx *rx, const void *p, size_t n)
{
	return buf_append(&rx->in, p, n);
}

/*
 * Pops the next complete frame. Returns 1 with m filled (the caller owns
 * it and must msg_clear it), 0 when more bytes are needed, -1 with errno
 * EMSGSIZE / EPROTO (bad header, reported as soon as the header is in) or
 * EBADMSG / ENOMEM (from msg_decode). m is zeroed unless 1 is returned.
 * Nothing is consumed on -1, so popping again fails the same way.
 */
int
frame_rx_pop(struct frame_rx *rx, struct msg *m)
{
	const uint8_t *p = buf_rdata(&rx->in);
	size_t have = buf_rlen(&rx->in), len;
	unsigned type;

	memset(m, 0, sizeof(*m));
	if (have < PROTO_HEADER_SIZE)
		return 0;
	if (header_parse(p, rx->max_frame, &len, &type) == -1)
		return -1;
	if (have - PROTO_HEADER_SIZE < len)
		return 0;
	if (msg_decode(type, p + PROTO_HEADER_SIZE, len, m) == -1)
		return -1;
	buf_skip(&rx->in, PROTO_HEADER_SIZE + len);
	return 1;
}

/* See proto.h. */
int
frame_rx_peek(const struct frame_rx *rx, unsigned *type, size_t *len,
    const uint8_t **body, size_t *have)
{
	const uint8_t *p = buf_rdata(&rx->in);
	size_t n = buf_rlen(&rx->in);

	if (rx->skip > 0 || n < PROTO_HEADER_SIZE)
		return 0;
	if (header_parse(p, rx->max_frame, len, type) == -1)
		return -1;
	*body = p + PROTO_HEADER_SIZE;
	*have = n - PROTO_HEADER_SIZE < *len ? n - PROTO_HEADER_SIZE : *len;
	return 1;
}

/* See proto.h. The header was valid (peeked), so its length is trusted. */
void
frame_rx_skip(struct frame_rx *rx)
{
	const uint8_t *p = buf_rdata(&rx->in);
	size_t n = buf_rlen(&rx->in), total;

	total = PROTO_HEADER_SIZE + ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
	    (size_t)p[2] << 8 | p[3]);
	if (n < total)
		rx->skip = total - n;
	buf_skip(&rx->in, total);
}

/* -------------------------------------------------------------- blocking */

/*
 * Reads until n bytes or EOF, through EINTR and EAGAIN. Returns 0 with
 * *got < n only at EOF, or -1 with errno from read or poll.
 */
static int
read_full(int fd, uint8_t *p, size_t n, size_t *got)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, p + *got, n - *got);

		if (r > 0) {
			*got += (size_t)r;
		} else if (r == 0) {
			break;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (wait_fd(fd, POLLIN) == -1)
				return -1;
		} else if (errno != EINTR)
			return -1;
	}
	return 0;
}

/*
 * Encodes m and writes the whole frame to fd, retrying on short writes,
 * EINTR and EAGAIN. Returns 0, or -1 with errno from msg_encode (EINVAL,
 * EMSGSIZE, ENOMEM) or write (EPIPE when the peer is gone: the caller
 * ignores SIGPIPE). After a write error part of the frame may have gone
 * out, so the stream is unusable.
 */
int
frame_write(int fd, const struct msg *m, size_t max_frame)
{
	struct buf b;
	int rc, saved;

	buf_init(&b);
	if ((rc = msg_encode(m, &b, max_frame)) == 0)
		rc = fd_write_all(fd, b.data, b.len);
	saved = errno;
	buf_clear(&b);
	errno = saved;
	return rc;
}

/*
 * Reads exactly one frame from fd, never more bytes than it holds.
 * Returns 1 with m filled (caller msg_clears), 0 on EOF before any header
 * byte, -1 with errno from read, ECONNRESET for EOF inside a frame,
 * EMSGSIZE / EPROTO for a bad header (found before the body is read or
 * allocated), or msg_decode's. m is zeroed unless 1 is returned.
 */
int
frame_read(int fd, struct msg *m, size_t max_frame)
{
	uint8_t hdr[PROTO_HEADER_SIZE], *body;
	size_t got, len;
	unsigned type;
	int rc, saved;

	memset(m, 0, sizeof(*m));
	if (read_full(fd, hdr, sizeof(hdr), &got) == -1)
		return -1;
	if (got == 0)
		return 0;
	if (got < sizeof(hdr)) {
		errno = ECONNRESET;
		return -1;
	}
	if (header_parse(hdr, max_frame, &len, &type) == -1)
		return -1;
	if ((body = malloc(len > 0 ? len : 1)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if ((rc = read_full(fd, body, len, &got)) == 0 && got < len) {
		errno = ECONNRESET;
		rc = -1;
	}
	if (rc == 0)
		rc = msg_decode(type, body, len, m);
	saved = errno;
	free(body);
	errno = saved;
	return rc == 0 ? 1 : -1;
}
