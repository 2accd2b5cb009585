/*
 * ctlfind.c - the runs' control sockets found, asked and named for agentz
 * ctl and agentz runs (see ctlfind.h): short-lived blocking requests,
 * each bounded by a timeout.
 */
#include "supervisor/front/ctlfind.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/text/jsonf.h"

#define REPLY_MAX (1 << 20)
#define FOUND_MAX 256

/* --- one request ---------------------------------------------------------------- */

static int
connect_to(const char *path, int timeout_s)
{
	struct timeval tv = { timeout_s, 0 };
	struct sockaddr_un sa;
	int fd, e;

	if (ctl_sockaddr(path, &sa) < 0)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Sends the line and its newline: fd_write_all writes with write(2),
 * which has no MSG_NOSIGNAL, so SIGPIPE is ignored while it does (a run
 * that refused us has closed: EPIPE, not death) and put back after. The
 * line is under CTL_LINE_MAX, which a fresh socket takes at once (the
 * loop's wait for POLLOUT, which ignores SO_SNDTIMEO, is not reached).
 */
static int
send_line(int fd, const char *line)
{
	struct sigaction ign, old;
	int rc, e;

	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	(void)sigemptyset(&ign.sa_mask);
	if (sigaction(SIGPIPE, &ign, &old) < 0)
		return -1;
	rc = fd_write_all(fd, line, strlen(line));
	if (rc == 0)
		rc = fd_write_all(fd, "\n", 1);
	e = errno;
	(void)sigaction(SIGPIPE, &old, NULL);
	errno = e;
	return rc;
}

/* The reply line (malloc'ed, no newline), or NULL with errno. */
static char *
read_line(int fd)
{
	struct buf b;
	char chunk[4096], *nl;
	ssize_t n;

	buf_init(&b);
	buf_set_max(&b, REPLY_MAX);
	for (;;) {
		n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || buf_append(&b, chunk, (size_t)n) < 0)
			break;
		if ((nl = memchr(b.data, '\n', b.len)) != NULL) {
			*nl = '\0';
			return buf_detach(&b, NULL);
		}
	}
	if (n == 0)
		errno = EPIPE;	/* closed without a reply */
	buf_clear(&b);
	return NULL;
}

char *
ctl_ask(const char *path, const char *line, int timeout_s)
{
	char *reply = NULL;
	int fd = connect_to(path, timeout_s), e;

	if (fd < 0)
		return NULL;
	/* a run that refuses us says why and closes at once: the reply may
	 * be there even when the request could not be sent */
	if (send_line(fd, line) == 0 || errno == EPIPE || errno == ECONNRESET)
		reply = read_line(fd);
	e = errno;
	(void)close(fd);
	errno = e;
	return reply;
}

/* --- the sockets found ------------------------------------------------------------ */

static int
is_sock_name(const char *name)
{
	size_t n = strlen(name);

	return n > 5 && strcmp(name + n - 5, ".sock") == 0;
}

/* The socket's file name without ".sock" (a socket given by another
 * name: the whole file name). malloc'ed or NULL. */
static char *
stem_of(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base != NULL ? base + 1 : path;
	return strndup(base, is_sock_name(base) ? strlen(base) - 5 :
	    strlen(base));
}

static struct ctl_found *
find_same(struct ctl_founds *fs, const struct stat *st)
{
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i].dev == st->st_dev && fs->v[i].ino == st->st_ino)
			return &fs->v[i];
	return NULL;
}

/* The socket at path, added once (a second way to it adds its flags). */
static void
add(struct ctl_founds *fs, const char *path, const struct stat *st,
    int searched, int shown)
{
	struct ctl_found *f = find_same(fs, st), *v;

	if (f == NULL && fs->n < FOUND_MAX) {
		if (fs->n == fs->cap) {
			v = realloc(fs->v, (fs->cap * 2 + 8) * sizeof *v);
			if (v == NULL)
				return;
			fs->v = v;
			fs->cap = fs->cap * 2 + 8;
		}
		f = &fs->v[fs->n];
		memset(f, 0, sizeof *f);
		f->path = strdup(path);
		f->stem = stem_of(path);
		if (f->path == NULL || f->stem == NULL) {
			free(f->path);
			free(f->stem);
			return;
		}
		f->dev = st->st_dev;
		f->ino = st->st_ino;
		fs->n++;
	}
	if (f != NULL) {
		f->searched |= searched;
		f->shown |= shown;
	}
}

struct scan_how {
	int searched, shown;
	int (*keep)(const char *stem, const void *arg);
	const void *arg;
};

/* dir/name when a socket the filter keeps. */
static void
add_entry(struct ctl_founds *fs, const char *dir, const char *name,
    const struct scan_how *how)
{
	struct stat st;
	char *p, *stem;

	if ((stem = strndup(name, strlen(name) - 5)) == NULL)
		return;
	if ((how->keep == NULL || how->keep(stem, how->arg)) &&
	    asprintf(&p, "%s/%s", dir, name) >= 0) {
		if (stat(p, &st) == 0 && S_ISSOCK(st.st_mode))
			add(fs, p, &st, how->searched, how->shown);
		free(p);
	}
	free(stem);
}

/* The sockets in dir, and in its folders one level down. */
static int
scan_dir(struct ctl_founds *fs, const char *dir, int depth,
    const struct scan_how *how)
{
	struct dirent *de;
	struct stat st;
	char *sub;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (is_sock_name(de->d_name)) {
			add_entry(fs, dir, de->d_name, how);
		} else if (depth == 0 && asprintf(&sub, "%s/%s", dir,
		    de->d_name) >= 0) {
			if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
				(void)scan_dir(fs, sub, 1, how);
			free(sub);
		}
	}
	(void)closedir(d);
	return 0;
}

int
ctl_found_scan(struct ctl_founds *fs, const char *where, int searched,
    int shown, int (*keep)(const char *stem, const void *arg),
    const void *arg)
{
	struct scan_how how = { searched, shown, keep, arg };
	struct stat st;

	if (stat(where, &st) < 0)
		return -1;
	if (S_ISSOCK(st.st_mode)) {
		add(fs, where, &st, searched, shown);
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return scan_dir(fs, where, 0, &how);
}

void
ctl_found_search(struct ctl_founds *fs, int shown,
    int (*keep)(const char *stem, const void *arg), const void *arg)
{
	char *dirs[3];
	size_t n = ctl_search_dirs(dirs), i;

	for (i = 0; i < n; i++) {
		(void)ctl_found_scan(fs, dirs[i], 1, shown, keep, arg);
		free(dirs[i]);
	}
}

/* --- their status and handles ------------------------------------------------- */

/* The fields of a status reply the handles and the rows need. */
static void
read_status(struct ctl_found *f)
{
	struct jf_in in[] = {
		{ .key = "name", .kind = JF_KSTR, .dst = &f->name },
		{ .key = "pid", .kind = JF_KINT, .dst = &f->pid },
		{ .key = "cwd", .kind = JF_KSTR, .dst = &f->cwd },
		{ .key = "task", .kind = JF_KSTR, .dst = &f->task },
		{ .key = NULL }
	};

	if (jf_parse(f->status, strlen(f->status), in) < 0) {
		free(f->status);
		f->status = NULL;
		f->err = EPROTO;
	}
}

static void
ask_one(struct ctl_found *f, int timeout_s)
{
	f->asked = 1;
	if ((f->status = ctl_ask(f->path, "status", timeout_s)) == NULL)
		f->err = errno;
	else
		read_status(f);
	if (f->name == NULL)
		f->name = strdup(f->stem);
}

void
ctl_found_ask(struct ctl_founds *fs, int timeout_s)
{
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (!fs->v[i].asked)
			ask_one(&fs->v[i], timeout_s);
}

/* How many live runs in the searched folders are named name. */
static size_t
live_named(const struct ctl_founds *fs, const char *name)
{
	size_t i, k = 0;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i].searched && fs->v[i].status != NULL &&
		    fs->v[i].name != NULL && strcmp(fs->v[i].name, name) == 0)
			k++;
	return k;
}

void
ctl_found_handles(struct ctl_founds *fs)
{
	struct ctl_found *f;
	size_t i;

	for (i = 0; i < fs->n; i++) {
		f = &fs->v[i];
		free(f->handle);
		if (!f->searched)
			f->handle = strdup(f->path);
		else if (f->status == NULL || f->name == NULL || f->pid <= 0)
			f->handle = strdup(f->stem);
		else if (live_named(fs, f->name) == 1)
			f->handle = strdup(f->name);
		else if (asprintf(&f->handle, "%s-%lld", f->name, f->pid) < 0)
			f->handle = NULL;
	}
}

void
ctl_found_free(struct ctl_founds *fs)
{
	size_t i;

	for (i = 0; i < fs->n; i++) {
		free(fs->v[i].path);
		free(fs->v[i].stem);
		free(fs->v[i].status);
		free(fs->v[i].name);
		free(fs->v[i].cwd);
		free(fs->v[i].task);
		free(fs->v[i].handle);
	}
	free(fs->v);
	memset(fs, 0, sizeof *fs);
}

/* --- which sockets a name may mean ------------------------------------------------ */

/* s is n bytes of prefix then "-DIGITS". */
static int
dash_digits(const char *s, size_t n)
{
	size_t i;

	if (s[n] != '-' || s[n + 1] == '\0')
		return 0;
	for (i = n + 1; s[i] != '\0'; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* stem is base or base-DIGITS, base its first n bytes. */
static int
named_as(const char *stem, const char *base, size_t n)
{
	return strncmp(stem, base, n) == 0 && (stem[n] == '\0' ||
	    dash_digits(stem, n));
}

int
ctl_found_family(const char *stem, const void *arg)
{
	const char *name = arg, *dash = strrchr(name, '-');

	if (named_as(stem, name, strlen(name)))
		return 1;
	return dash != NULL && dash > name &&
	    dash_digits(name, (size_t)(dash - name)) &&
	    named_as(stem, name, (size_t)(dash - name));
}
