/*
 * fdio.c - fd helpers (see fdio.h).
 */
#include "common/fdio.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Waits until fd takes bytes again (a non-blocking fd said EAGAIN). */
static int
wait_writable(int fd)
{
	struct pollfd p = { fd, POLLOUT, 0 };
	int rc;

	while ((rc = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	return rc < 0 ? -1 : 0;
}

int
fd_write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_writable(fd) < 0)
				return -1;
			continue;
		}
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int
fd_send_fds(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(FD_PASS_MAX * sizeof(int))];
	} u;
	struct iovec iov = { (void *)(uintptr_t)msg, len };
	struct msghdr mh;
	struct cmsghdr *c;
	ssize_t n;

	if (nfds < 1 || nfds > FD_PASS_MAX) {
		errno = EINVAL;
		return -1;
	}
	memset(&mh, 0, sizeof mh);
	memset(&u, 0, sizeof u);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n >= 0 && (size_t)n != len)
		errno = EMSGSIZE;
	return n >= 0 && (size_t)n == len ? 0 : -1;
}

int
fd_take_fds(struct msghdr *mh, int *fds, int max)
{
	struct cmsghdr *c;
	int n = 0, k, i;

	for (c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < k; i++, n++)
			if (n < max)
				memcpy(&fds[n], CMSG_DATA(c) + i * sizeof(int),
				    sizeof(int));
	}
	return n;
}
