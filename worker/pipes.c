/*
 * pipes.c - the worker's output pipes, fresh after a cell that may have
 * left a process holding them (see pipes.h, proto.h WORKER_OUT_FD).
 *
 * The supervisor sends the next pipes before the worker needs them, so
 * they are taken without waiting; it closes a cell's pipes once it has
 * read what they held at the cell's DONE. A child the cell left running
 * keeps the old pipes and gets EPIPE (or SIGPIPE) from then on; our own
 * threads write into the new ones.
 *
 * A cell may leave the descriptor table full (it opened files until
 * EMFILE): the pipes could then not be received, and the old ones are
 * closed by the supervisor. So the worker keeps three descriptors in
 * reserve (dups of one memfd of its own: fstat tells them from anything
 * a cell may have put at their numbers) and frees them just before it
 * takes the pipes: two for the pipes, one to move them.
 */
#include "worker/pipes.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fdio.h"
#include "proto/proto.h"

#define NRESERVE (OUTPIPES_NFDS + 1)

static int pipes_on;
static int reserve[NRESERVE] = { -1, -1, -1 };
static ino_t reserve_ino;

/* Fills the reserve again: one memfd (a new one when none is left),
 * its dups in the other places; what cannot be had now is tried at the
 * next cell. */
static void
reserve_fill(void)
{
	struct stat st;
	int i, src = -1;

	for (i = 0; i < NRESERVE && src < 0; i++)
		src = reserve[i];
	if (src < 0) {
		if ((src = memfd_create("agentz-reserve", MFD_CLOEXEC)) < 0)
			return;
		if (fstat(src, &st) < 0) {
			(void)close(src);
			return;
		}
		reserve_ino = st.st_ino;
		reserve[0] = src;
	}
	for (i = 0; i < NRESERVE; i++)
		if (reserve[i] < 0)
			reserve[i] = fcntl(src, F_DUPFD_CLOEXEC, 0);
}

/* Frees the reserve for the pipes; a number that no longer holds our
 * memfd (a cell closed it and reused the number) is left alone. */
static void
reserve_free(void)
{
	struct stat st;
	int i;

	for (i = 0; i < NRESERVE; i++) {
		if (reserve[i] >= 0 && fstat(reserve[i], &st) == 0 &&
		    st.st_ino == reserve_ino)
			(void)close(reserve[i]);
		reserve[i] = -1;
	}
}

void
pipes_init(void)
{
	int v;
	socklen_t n = sizeof v;

	pipes_on = getsockopt(WORKER_OUT_FD, SOL_SOCKET, SO_TYPE, &v, &n) ==
	    0 && v == SOCK_SEQPACKET;
	n = sizeof v;
	pipes_on = pipes_on && getsockopt(WORKER_OUT_FD, SOL_SOCKET,
	    SO_DOMAIN, &v, &n) == 0 && v == AF_UNIX;
	if (pipes_on) {
		(void)fcntl(WORKER_OUT_FD, F_SETFD, FD_CLOEXEC);
		reserve_fill();
	}
}

/*
 * got[0..1] onto 1 and 2. A received descriptor may have landed on a low
 * number a cell closed (0-6): each is moved above the layout first, so
 * no dup2 overwrites the other.
 */
static void
install(int *got)
{
	int i, fd;

	for (i = 0; i < OUTPIPES_NFDS; i++) {
		if (got[i] > WORKER_OUT_FD)
			continue;
		fd = fcntl(got[i], F_DUPFD_CLOEXEC, WORKER_OUT_FD + 1);
		(void)close(got[i]);
		got[i] = fd;
	}
	for (i = 0; i < OUTPIPES_NFDS; i++)
		if (got[i] >= 0)
			(void)dup2(got[i], i + 1);
}

void
pipes_next(void)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * (OUTPIPES_NFDS + 1))];
		struct cmsghdr align;
	} cb;
	int got[OUTPIPES_NFDS + 1], n, i;
	struct outpipes_msg om;
	char data[sizeof om + 1];
	struct iovec iov = { data, sizeof data };
	struct msghdr mh;
	ssize_t len;

	if (!pipes_on)
		return;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cb.b;
	mh.msg_controllen = sizeof cb.b;
	reserve_free();
	do
		len = recvmsg(WORKER_OUT_FD, &mh, MSG_DONTWAIT |
		    MSG_CMSG_CLOEXEC);
	while (len < 0 && errno == EINTR);
	if (len < 0) {
		reserve_fill();
		return;
	}
	n = fd_take_fds(&mh, got, OUTPIPES_NFDS + 1);
	memset(&om, 0, sizeof om);
	memcpy(&om, data, (size_t)len < sizeof om ? (size_t)len : sizeof om);
	if ((size_t)len == sizeof om && n == OUTPIPES_NFDS &&
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
	    om.magic == OUTPIPES_MAGIC)
		install(got);
	for (i = 0; i < n && i < OUTPIPES_NFDS + 1; i++)
		if (got[i] >= 0)
			(void)close(got[i]);
	reserve_fill();
}
