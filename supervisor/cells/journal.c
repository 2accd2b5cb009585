/*
 * journal.c - append-only JSON-lines journal (see journal.h).
 *
 * The lock is a flock(2) on the descriptor we append through: it belongs
 * to the open file description, so reading old records back through
 * another descriptor (and closing it) keeps it, unlike a POSIX record
 * lock, and /proc/locks names its holder, unlike an OFD lock. The
 * descriptor is O_CLOEXEC; the processes the supervisor forks without
 * exec (the worker spawner, the jail's init) close every descriptor
 * above their own with close_range before they wait for anything, so no
 * child keeps the lock once the supervisor is gone.
 */
#include "supervisor/cells/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"

struct journal {
	int fd;
	int broken;		/* a write failed: nothing more is appended */
	off_t size;		/* where the last whole record ends */
	off_t last_off;		/* the last record appended, and its length */
	size_t last_len;
	const struct redact *red;
};

/* *err = "<what> <path>: <why>" */
static void
set_err(char **err, const char *what, const char *path, const char *why)
{
	if (asprintf(err, "%s %s: %s", what, path, why) < 0)
		*err = NULL;
}

/* The pid holding a flock on st's file, from /proc/locks; 0 if unknown. */
static long
lock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256], kind[16];
	unsigned maj, min;
	unsigned long ino;
	long pid, found = 0;

	if (f == NULL)
		return 0;
	while (found == 0 && fgets(line, sizeof line, f) != NULL) {
		if (strstr(line, "->") != NULL)	/* a waiter, not the holder */
			continue;
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &pid,
		    &maj, &min, &ino) != 5 || strcmp(kind, "FLOCK") != 0)
			continue;
		if (ino == (unsigned long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev))
			found = pid;
	}
	(void)fclose(f);
	return found;
}

static int
take_lock(int fd, const char *path, char **err)
{
	struct stat st;
	char what[96];
	long pid;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK) {
		set_err(err, "cannot lock the journal", path,
		    strerror(errno));
		return -1;
	}
	pid = fstat(fd, &st) == 0 ? lock_holder(&st) : 0;
	if (pid > 0)
		(void)snprintf(what, sizeof what, "pid %ld", pid);
	else
		(void)snprintf(what, sizeof what, "a process whose pid is not "
		    "visible here");
	if (asprintf(err, "the journal %s is in use by another agentz (%s): "
	    "one supervisor per journal", path, what) < 0)
		*err = NULL;
	return -1;
}

/* A new file's name is durable only once its directory is synced. */
static int
sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = -1;

	if (copy == NULL)
		return -1;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		rc = fsync(fd);
		(void)close(fd);
	}
	free(copy);
	return rc;
}

/*
 * Where the journal's last whole record ends: just after its last
 * newline, 0 when there is none. Reads backwards from size.
 */
static off_t
last_newline_end(int fd, off_t size)
{
	char buf[8192];
	off_t at = size;
	ssize_t n, i;

	while (at > 0) {
		n = (ssize_t)(at < (off_t)sizeof buf ? at : (off_t)sizeof buf);
		at -= n;
		if (pread(fd, buf, (size_t)n, at) != n)
			return -1;
		for (i = n - 1; i >= 0; i--)
			if (buf[i] == '\n')
				return at + i + 1;
	}
	return 0;
}

/* Cuts a torn tail (bytes after the last newline) off; logs what it did. */
static int
cut_torn_tail(struct journal *j, const char *path, char **err)
{
	struct stat st;
	off_t end;

	if (fstat(j->fd, &st) < 0 || (end = last_newline_end(j->fd,
	    st.st_size)) < 0) {
		set_err(err, "cannot read the journal", path,
		    strerror(errno));
		return -1;
	}
	if (end < st.st_size) {
		log_warnx("journal %s: cutting a torn last line (%lld bytes "
		    "after the last newline: a write that never finished)", path,
		    (long long)(st.st_size - end));
		if (ftruncate(j->fd, end) < 0 || fsync(j->fd) < 0) {
			set_err(err, "cannot cut the torn tail of", path,
			    strerror(errno));
			return -1;
		}
	}
	j->size = end;
	return 0;
}

struct journal *
journal_open(const char *path, const struct redact *red, char **err)
{
	struct journal *j = calloc(1, sizeof *j);
	int created = 1;

	*err = NULL;
	if (j == NULL)
		return NULL;
	j->red = red;
	j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600);
	if (j->fd < 0 && errno == EEXIST) {
		created = 0;
		j->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
	}
	if (j->fd < 0) {
		set_err(err, "cannot open the journal", path,
		    strerror(errno));
		free(j);
		return NULL;
	}
	if (created && sync_dir(path) < 0) {
		set_err(err, "cannot sync the directory of", path,
		    strerror(errno));
		journal_close(j);
		return NULL;
	}
	/* the lock before the tail: two supervisors must not both cut it */
	if (take_lock(j->fd, path, err) < 0 || cut_torn_tail(j, path, err) < 0) {
		journal_close(j);
		return NULL;
	}
	return j;
}

void
journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	(void)close(j->fd);
	free(j);
}

/* Writes one line (its newline included) and syncs it; cuts it on error. */
static int
append_line(struct journal *j, const char *line, size_t n)
{
	int saved;

	if (fd_write_all(j->fd, line, n) == 0 && fdatasync(j->fd) == 0) {
		j->last_off = j->size;
		j->last_len = n;
		j->size += (off_t)n;
		return 0;
	}
	saved = errno;
	/* never half a record: the journal ends at its last whole one */
	if (ftruncate(j->fd, j->size) == 0)
		(void)fdatasync(j->fd);
	j->broken = 1;
	errno = saved;
	return -1;
}

int
journal_write(struct journal *j, const char *text, size_t n)
{
	char *line;
	int rc;

	if (j->broken) {
		errno = EIO;
		return -1;
	}
	if (j->red != NULL && redact_count(j->red) > 0)
		line = redact_string(j->red, text, n, &n);
	else if ((line = malloc(n + 1)) != NULL)
		memcpy(line, text, n);
	if (line == NULL) {
		errno = ENOMEM;
		return -1;
	}
	/* one write of the line and its newline: no interleaving */
	line[n] = '\n';	/* the NUL goes; we never print it */
	rc = append_line(j, line, n + 1);
	free(line);
	return rc;
}

void
journal_last(const struct journal *j, uint64_t *off, size_t *len)
{
	*off = (uint64_t)j->last_off;
	*len = j->last_len;
}

char *
journal_read_line(const struct journal *j, uint64_t off, size_t len)
{
	char *line;
	ssize_t n;

	if (len == 0 || (line = malloc(len)) == NULL) {
		errno = len == 0 ? EIO : ENOMEM;
		return NULL;
	}
	n = pread(j->fd, line, len, (off_t)off);
	if (n != (ssize_t)len || line[len - 1] != '\n') {
		free(line);
		errno = n < 0 ? errno : EIO;
		return NULL;
	}
	line[len - 1] = '\0';
	return line;
}
