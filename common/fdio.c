/*
 * fdio.c - fd helpers (see fdio.h).
 */
#include "common/fdio.h"

#include <errno.h>
#include <poll.h>
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
