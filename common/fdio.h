/*
 * fdio.h - small fd helpers both binaries may use.
 */
#ifndef AGENTZ_FDIO_H
#define AGENTZ_FDIO_H

#include <stddef.h>

/*
 * Writes all n bytes to fd, through short writes, EINTR and EAGAIN (by
 * polling for POLLOUT, so a non-blocking fd works too): the one write
 * loop. 0, or -1 with errno from write or poll (EIO when write returned
 * 0); part of the bytes may have gone out then.
 */
int fd_write_all(int fd, const void *p, size_t n);

/*
 * Sends one datagram on the socket sock without waiting: msg (len bytes)
 * and the descriptors fds[0..nfds) as SCM_RIGHTS (nfds <= FD_PASS_MAX).
 * 0 when it went out whole, else -1 with errno.
 */
#define FD_PASS_MAX 8
int fd_send_fds(int sock, const void *msg, size_t len, const int *fds,
    int nfds);

struct msghdr;
/*
 * The descriptors of every SCM_RIGHTS message in mh, received (the first
 * max kept in fds); how many came. The caller closes them all.
 */
int fd_take_fds(struct msghdr *mh, int *fds, int max);

#endif
