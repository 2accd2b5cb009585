/*
 * fdio.h - small fd helpers both binaries may use.
 */
#ifndef AGENTZ_FDIO_H
#define AGENTZ_FDIO_H

#include <stddef.h>

/*
 * Writes all n bytes to a blocking fd, retrying short writes and EINTR.
 * 0, or -1 with errno (EIO when write returned 0).
 */
int fd_write_all(int fd, const void *p, size_t n);

#endif
