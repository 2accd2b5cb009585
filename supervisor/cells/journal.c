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
	int gone;		/* the path no longer names the file we hold */
	char *path;		/* absolute, to compare with the open file */
	off_t size;		/* where the last whole record ends */
	off_t last_off;		/* the last record appended, and its length */
	size_t last_len;
	const struct redact *red;
	int lazy;		/* appends do not wait for the disk */
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

/* path made absolute (the supervisor's working directory may change). */
static char *
absolute(const char *path)
{
	char cwd[4096], *abs;

	if (path[0] == '/')
		return strdup(path);
	if (getcwd(cwd, sizeof cwd) == NULL ||
	    asprintf(&abs, "%s/%s", cwd, path) < 0)
		return NULL;
	return abs;
}

/*
 * Opens the journal without following a link and without blocking on a
 * FIFO; *created says whether this call made it. errno as open(2).
 */
static int
open_file(const char *path, int *created)
{
	const int flags = O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK;
	int fd;

	*created = 1;
	fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	if (fd < 0 && errno == EEXIST) {
		*created = 0;
		fd = open(path, flags);
	}
	return fd;
}

/* Why the open failed, in the operator's words. */
static void
open_err(char **err, const char *path, int e)
{
	if (e == ELOOP)
		set_err(err, "refusing the journal", path, "it is a symbolic "
		    "link (a journal is never followed through a link)");
	else if (e == EISDIR)
		set_err(err, "refusing the journal", path, "it is a directory "
		    "(--journal takes a file, e.g. DIR/journal.jsonl)");
	else
		set_err(err, "cannot open the journal", path, strerror(e));
	errno = e;
}

/*
 * What we opened must be a regular file of ours with no other name,
 * checked before anything is read, cut or written. 0, or -1 with *err.
 */
static int
check_file(int fd, const char *path, char **err)
{
	struct stat st;
	char why[160];

	if (fstat(fd, &st) < 0) {
		set_err(err, "cannot stat the journal", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode))
		(void)snprintf(why, sizeof why, "it is a directory (--journal "
		    "takes a file, e.g. DIR/journal.jsonl)");
	else if (!S_ISREG(st.st_mode))
		(void)snprintf(why, sizeof why, "it is not a regular file "
		    "(mode %06o)", (unsigned)st.st_mode);
	else if (st.st_uid != geteuid())
		(void)snprintf(why, sizeof why, "it belongs to uid %u, not to "
		    "the user running agentz (uid %u)", (unsigned)st.st_uid,
		    (unsigned)geteuid());
	else if (st.st_nlink != 1)
		(void)snprintf(why, sizeof why, "it has %lu names (hard links); "
		    "a journal has one", (unsigned long)st.st_nlink);
	else
		return 0;
	set_err(err, "refusing the journal", path, why);
	errno = EINVAL;
	return -1;
}

struct journal *
journal_open(const char *path, const struct redact *red, char **err)
{
	struct journal *j = calloc(1, sizeof *j);
	int created, e;

	*err = NULL;
	if (j == NULL || (j->path = absolute(path)) == NULL) {
		free(j);
		errno = ENOMEM;
		return NULL;
	}
	j->red = red;
	if ((j->fd = open_file(path, &created)) < 0) {
		e = errno;
		open_err(err, path, e);
		free(j->path);
		free(j);
		errno = e;
		return NULL;
	}
	if (check_file(j->fd, path, err) < 0 ||
	    fcntl(j->fd, F_SETFL, O_APPEND) < 0) {
		if (*err == NULL)
			set_err(err, "cannot open the journal", path,
			    strerror(errno));
		goto fail;
	}
	if (created && sync_dir(path) < 0) {
		set_err(err, "cannot sync the directory of", path,
		    strerror(errno));
		goto fail;
	}
	/* the lock before the tail: two supervisors must not both cut it */
	if (take_lock(j->fd, path, err) < 0 || cut_torn_tail(j, path, err) < 0)
		goto fail;
	return j;
fail:
	e = errno;
	journal_close(j);
	errno = e;
	return NULL;
}

/* Copies the journal we hold into fd; 0 or -1. */
static int
copy_out(const struct journal *j, int fd)
{
	char buf[65536];
	off_t at = 0;
	ssize_t n;

	while ((n = pread(j->fd, buf, sizeof buf, at)) > 0) {
		if (fd_write_all(fd, buf, (size_t)n) < 0)
			return -1;
		at += n;
	}
	return n < 0 || fsync(fd) < 0 ? -1 : 0;
}

/*
 * A copy of the journal at target, made whole aside first: over what is
 * there (replace: nothing, or an empty file), or only where nothing is.
 */
static int
write_copy(const struct journal *j, const char *target, int replace)
{
	char *tmp;
	int fd, rc = -1;

	if (asprintf(&tmp, "%s.XXXXXX", target) < 0)
		return -1;
	if ((fd = mkostemp(tmp, O_CLOEXEC)) >= 0) {
		rc = copy_out(j, fd);
		(void)close(fd);
		if (rc == 0)
			rc = replace ? rename(tmp, target) : link(tmp, target);
		if (rc < 0 || !replace)
			(void)unlink(tmp);
		if (rc == 0)
			(void)sync_dir(target);
	}
	free(tmp);
	return rc;
}

/*
 * The journal was deleted, renamed or replaced under the run: its
 * records go back to the path when nothing is there (or an empty file),
 * so the next --resume goes on from them instead of starting over at
 * cell 0; else beside it, when they would be lost (deleted), else the
 * log says where the file is now.
 */
static void
rescue(const struct journal *j)
{
	struct stat mine, there;
	char *target = NULL, self[64], now[4096];
	int free_at = lstat(j->path, &there) < 0 ||
	    (S_ISREG(there.st_mode) && there.st_size == 0);
	ssize_t n;

	if (fstat(j->fd, &mine) < 0)
		return;
	if (free_at) {
		if (write_copy(j, j->path, 1) == 0)
			log_warnx("the journal's records were written back to "
			    "%s: --resume goes on from them", j->path);
		else
			log_warn("cannot write the journal back to %s", j->path);
		return;
	}
	if (mine.st_nlink > 0) {
		(void)snprintf(self, sizeof self, "/proc/self/fd/%d", j->fd);
		n = readlink(self, now, sizeof now - 1);
		now[n > 0 ? n : 0] = '\0';
		log_warnx("%s is now another file, left as it is; the run's "
		    "journal is %s", j->path, n > 0 ? now : "(unknown)");
		return;
	}
	if (asprintf(&target, "%s.saved-%ld", j->path, (long)getpid()) < 0)
		return;
	if (write_copy(j, target, 0) == 0)
		log_warnx("%s is now another file, left as it is; the run's "
		    "journal was saved as %s", j->path, target);
	else
		log_warn("cannot save the deleted journal as %s", target);
	free(target);
}

void
journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	if (j->gone)
		rescue(j);
	(void)close(j->fd);
	free(j->path);
	free(j);
}

/* Writes one line (its newline included) and syncs it; cuts it on error. */
static int
append_line(struct journal *j, const char *line, size_t n)
{
	int saved;

	if (fd_write_all(j->fd, line, n) == 0 &&
	    (j->lazy || fdatasync(j->fd) == 0)) {
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

/*
 * Whether the path still names the file we hold: the journal deleted,
 * renamed or replaced under the run (0 when it does). Said once, in the
 * log; the record then refused is the caller's stop.
 */
static int
check_gone(struct journal *j)
{
	struct stat mine, there;
	const char *what = NULL;

	if (j->gone)
		return 0;	/* said already: the run is stopping */
	if (fstat(j->fd, &mine) < 0)
		return 0;	/* the write says what is wrong */
	if (mine.st_nlink == 0)
		what = "was deleted";
	else if (lstat(j->path, &there) < 0)
		what = "was renamed or deleted";
	else if (there.st_dev != mine.st_dev || there.st_ino != mine.st_ino)
		what = "was replaced by another file";
	if (what == NULL)
		return 0;
	log_warnx("the journal %s %s under the running agentz", j->path, what);
	j->gone = 1;
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
	if (check_gone(j) < 0) {
		errno = ESTALE;
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
journal_lazy(struct journal *j, int on)
{
	if (j != NULL)
		j->lazy = on != 0;
}

int
journal_fd(const struct journal *j)
{
	return j->fd;
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
