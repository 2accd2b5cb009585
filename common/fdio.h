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

#endif
