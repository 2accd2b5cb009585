/*
 * dirsize.c - a folder tree's size on disk, a slice at a time (see
 * dirsize.h).
 *
 * The walk is a stack of open folders, one per level: the deepest is
 * read an entry at a time, a subfolder found is opened (openat, relative
 * to its parent's descriptor: no path is ever built, so no depth is too
 * long to name) and pushed, a folder read to its end is popped.
 */
#include "supervisor/run/dirsize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dirsize {
	dev_t dev;		/* the root's filesystem */
	unsigned depth;		/* folders open */
	unsigned max_depth;
	int flags;
	uint64_t bytes;
	char where[256];	/* the entry a failure is about */
	DIR *stack[];		/* [0] the root */
};

/* What st takes on disk; a file's share of it when it has several
 * links. */
static uint64_t
on_disk(const struct stat *st)
{
	uint64_t b = (uint64_t)st->st_blocks * 512u;

	if (!S_ISDIR(st->st_mode) && st->st_nlink > 1)
		b /= (uint64_t)st->st_nlink;
	return b;
}

static DIR *
open_dir(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC | O_NONBLOCK);
	DIR *dir;

	if (fd < 0)
		return NULL;
	if ((dir = fdopendir(fd)) == NULL) {
		int e = errno;

		(void)close(fd);
		errno = e;
	}
	return dir;
}

struct dirsize *
dirsize_start(const char *root, unsigned max_depth, int flags)
{
	struct dirsize *d;
	struct stat st;

	if (max_depth == 0) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof *d + max_depth * sizeof d->stack[0]);
	if (d == NULL)
		return NULL;
	d->max_depth = max_depth;
	d->flags = flags;
	if ((d->stack[0] = open_dir(AT_FDCWD, root)) != NULL)
		d->depth = 1;
	if (d->depth == 0 || fstat(dirfd(d->stack[0]), &st) < 0) {
		int e = errno;

		dirsize_free(d);
		errno = e;
		return NULL;
	}
	d->dev = st.st_dev;
	d->bytes = on_disk(&st);
	return d;
}

static int
fail(struct dirsize *d, const char *name, int e)
{
	(void)snprintf(d->where, sizeof d->where, "%s", name);
	errno = e;
	return -1;
}

/* One entry of the deepest folder: counted, and pushed if a folder. */
static int
take(struct dirsize *d, const char *name)
{
	DIR *top = d->stack[d->depth - 1];
	struct stat st;
	DIR *sub;

	if (fstatat(dirfd(top), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(d, name, errno);
	if (st.st_dev != d->dev)
		return 0;		/* something mounted here */
	d->bytes += on_disk(&st);
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (d->depth == d->max_depth)
		return fail(d, name, ELOOP);
	sub = open_dir(dirfd(top), name);
	if (sub == NULL && errno == EACCES && (d->flags & DIRSIZE_READABLE) &&
	    fchmodat(dirfd(top), name, (st.st_mode & 07777) | S_IRUSR |
	    S_IXUSR, AT_SYMLINK_NOFOLLOW) == 0)
		sub = open_dir(dirfd(top), name);
	if (sub == NULL)
		/* gone, or replaced by something else since the stat */
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ?
		    0 : fail(d, name, errno);
	d->stack[d->depth++] = sub;
	return 0;
}

int
dirsize_step(struct dirsize *d, unsigned n)
{
	struct dirent *e;

	while (d->depth > 0 && n-- > 0) {
		errno = 0;
		if ((e = readdir(d->stack[d->depth - 1])) == NULL) {
			if (errno != 0)
				return fail(d, ".", errno);
			(void)closedir(d->stack[--d->depth]);
			continue;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (take(d, e->d_name) < 0)
			return -1;
	}
	return d->depth == 0;
}

uint64_t
dirsize_bytes(const struct dirsize *d)
{
	return d->bytes;
}

const char *
dirsize_where(const struct dirsize *d)
{
	return d->where;
}

void
dirsize_free(struct dirsize *d)
{
	if (d == NULL)
		return;
	while (d->depth > 0)
		(void)closedir(d->stack[--d->depth]);
	free(d);
}
