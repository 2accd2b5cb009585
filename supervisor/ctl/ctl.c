/*
 * ctl.c - the control socket's server (see ctl.h).
 *
 * A connection is a small state: the bytes of the request line being
 * read (never more than CTL_LINE_MAX), the replies not yet taken by the
 * client (never more than CTL_OUT_MAX), and whether it is closing (an
 * error was said: the rest is sent, nothing more is read). Every read and
 * write is non-blocking and every send is MSG_NOSIGNAL: a client that
 * goes away or never reads costs the run nothing but its slot.
 *
 * The peer is checked once, at accept, from SO_PEERCRED (ctlpeer.c).
 */
#include "supervisor/ctl/ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "supervisor/text/jsonf.h"

struct conn {
	struct ctl *ctl;
	int fd;
	struct buf in;		/* unread: at most CTL_LINE_MAX */
	struct buf out;
	int closing;
	uint64_t idle;
};

struct ctl {
	struct loop *loop;
	int fd;
	char *path;
	dev_t dev;
	ino_t ino;
	ctl_handle_fn *fn;
	void *ctx;
	pid_t jail_pid;
	pid_t (*jail_fn)(const void *ctx);	/* the init now, or NULL */
	const void *jail_ctx;
	struct conn *conns[CTL_CONNS];
};

/* --- replies ----------------------------------------------------------------- */

static char *
error_reply(const char *why)
{
	struct jf f[] = { JF_B("ok", 0), JF_S("error", why), JF_END };

	return jf_dumps(f, NULL);
}

/* One line to a socket we are about to close: best effort, no wait. */
static void
say_and_close(int fd, const char *why)
{
	char *s = error_reply(why);

	if (s != NULL) {
		(void)send(fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(s);
	(void)close(fd);
}

/* --- connections ------------------------------------------------------------- */

static void conn_io(struct loop *l, int fd, short revents, void *ctx);
static void conn_idle(struct loop *l, void *ctx);

static void
conn_free(struct conn *k)
{
	struct ctl *c = k->ctl;
	size_t i;

	for (i = 0; i < CTL_CONNS; i++)
		if (c->conns[i] == k)
			c->conns[i] = NULL;
	loop_unwatch(c->loop, k->fd);
	loop_timer_cancel(c->loop, k->idle);
	(void)close(k->fd);
	buf_clear(&k->in);
	buf_clear(&k->out);
	free(k);
}

static void
arm_idle(struct conn *k)
{
	loop_timer_cancel(k->ctl->loop, k->idle);
	k->idle = loop_timer(k->ctl->loop, CTL_IDLE_MS, conn_idle, k);
}

static void
conn_idle(struct loop *l, void *ctx)
{
	struct conn *k = ctx;

	(void)l;
	k->idle = 0;
	conn_free(k);
}

/* Sends what the client takes now; 0, or -1 when the conn is gone. */
static int
flush(struct conn *k)
{
	ssize_t n;

	while (buf_rlen(&k->out) > 0) {
		n = send(k->fd, buf_rdata(&k->out), buf_rlen(&k->out),
		    MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			conn_free(k);
			return -1;
		}
		buf_skip(&k->out, (size_t)n);
	}
	if (k->closing && buf_rlen(&k->out) == 0) {
		conn_free(k);
		return -1;
	}
	loop_events(k->ctl->loop, k->fd, (short)((k->closing ? 0 : POLLIN) |
	    (buf_rlen(&k->out) > 0 ? POLLOUT : 0)));
	return 0;
}

/* Queues one reply line (consumed); a client that reads nothing while
 * its replies pile up past CTL_OUT_MAX is dropped. */
static void
queue(struct conn *k, char *reply)
{
	if (reply == NULL || buf_append_str(&k->out, reply) < 0 ||
	    buf_append(&k->out, "\n", 1) < 0) {
		if (reply != NULL)
			log_warnx("control socket: a client that does not read "
			    "its replies (over %d bytes) was dropped",
			    CTL_OUT_MAX);
		k->closing = 1;
		buf_reset(&k->out);
	}
	free(reply);
}

static void
request(struct conn *k, const char *line, size_t n)
{
	struct ctl_req q;
	char err[256];
	char *reply;

	if (n > 0 && line[n - 1] == '\r')
		n--;
	if (ctl_parse(line, n, &q, err, sizeof err) < 0) {
		queue(k, error_reply(err));
		k->closing = 1;
		return;
	}
	reply = k->ctl->fn(k->ctl->ctx, &q);
	queue(k, reply != NULL ? reply : error_reply("out of memory"));
}

/* Every complete line in k->in (each read past, not moved); a full
 * buffer without one is refused. */
static void
lines(struct conn *k)
{
	const char *p, *nl;
	size_t used;

	while (!k->closing && (p = (const char *)buf_rdata(&k->in)) != NULL &&
	    (nl = memchr(p, '\n', buf_rlen(&k->in))) != NULL) {
		used = (size_t)(nl - p) + 1;
		request(k, p, used - 1);
		buf_skip(&k->in, used);
		arm_idle(k);
	}
	if (!k->closing && buf_rlen(&k->in) == CTL_LINE_MAX) {
		queue(k, error_reply("request line too long (the limit is "
		    "4096 bytes with its newline)"));
		k->closing = 1;
	}
}

static void
conn_io(struct loop *l, int fd, short revents, void *ctx)
{
	struct conn *k = ctx;
	char chunk[CTL_LINE_MAX];
	ssize_t n;

	(void)l;
	if ((revents & POLLIN) && !k->closing) {
		n = read(fd, chunk, CTL_LINE_MAX - buf_rlen(&k->in));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
		    (n > 0 && buf_append(&k->in, chunk, (size_t)n) < 0)) {
			conn_free(k);	/* (or no memory to hold it) */
			return;
		}
		if (n > 0)
			lines(k);
	} else if ((revents & (POLLHUP | POLLERR | POLLNVAL)) &&
	    !(revents & POLLOUT)) {
		conn_free(k);
		return;
	}
	(void)flush(k);
}

static void
conn_add(struct ctl *c, int fd)
{
	struct conn *k;
	size_t i;

	for (i = 0; i < CTL_CONNS && c->conns[i] != NULL; i++)
		;
	if (i == CTL_CONNS) {
		say_and_close(fd, "busy: too many clients connected");
		return;
	}
	if ((k = calloc(1, sizeof *k)) == NULL) {
		say_and_close(fd, "out of memory");
		return;
	}
	k->ctl = c;
	k->fd = fd;
	buf_init(&k->in);
	buf_set_max(&k->in, CTL_LINE_MAX);
	buf_init(&k->out);
	buf_set_max(&k->out, CTL_OUT_MAX);
	if (loop_watch(c->loop, fd, POLLIN, conn_io, k) < 0) {
		free(k);
		say_and_close(fd, "out of memory");
		return;
	}
	c->conns[i] = k;
	arm_idle(k);
}

static void
on_accept(struct loop *l, int fd, short revents, void *ctx)
{
	struct ctl *c = ctx;
	struct ucred u;
	socklen_t len = sizeof u;
	char why[160], said[192];
	const char *no;
	int cfd;

	(void)l;
	(void)revents;
	while ((cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK |
	    SOCK_CLOEXEC)) >= 0) {
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &u, &len) < 0) {
			say_and_close(cfd, "refused: no peer credentials");
			continue;
		}
		if ((no = ctl_peer_refusal(c->jail_fn != NULL ?
		    c->jail_fn(c->jail_ctx) : c->jail_pid, &u, why,
		    sizeof why)) != NULL) {
			log_warnx("control socket: refused a client (%s)", no);
			(void)snprintf(said, sizeof said, "refused: %s", no);
			say_and_close(cfd, said);
			continue;
		}
		conn_add(c, cfd);
	}
}

/* --- the socket -------------------------------------------------------------- */

/* A socket file left by a run that died is replaced; a live one is not. */
static int
clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		errno = EEXIST;
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
	(void)close(fd);
	if (rc == 0) {
		errno = EADDRINUSE;
		return -1;
	}
	return errno == ECONNREFUSED ? unlink(path) : -1;
}

static int
listen_on(const char *path)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd, rc;

	if (ctl_sockaddr(path, &sa) < 0)
		return -1;
	if (clear_stale(path, &sa) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	old = umask(0177);	/* born 0600: never a moment wider */
	rc = bind(fd, (const struct sockaddr *)&sa, sizeof sa);
	(void)umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, CTL_CONNS) < 0) {
		rc = errno;
		(void)close(fd);
		errno = rc;
		return -1;
	}
	return fd;
}

struct ctl *
ctl_new(struct loop *l, const char *path, ctl_handle_fn *fn, void *ctx)
{
	struct ctl *c = calloc(1, sizeof *c);
	struct stat st;
	int e;

	if (c == NULL || (c->path = strdup(path)) == NULL) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->loop = l;
	c->fn = fn;
	c->ctx = ctx;
	if ((c->fd = listen_on(path)) < 0 || stat(path, &st) < 0 ||
	    loop_watch(l, c->fd, POLLIN, on_accept, c) < 0) {
		e = errno;
		if (c->fd >= 0) {
			(void)close(c->fd);
			(void)unlink(path);
		}
		free(c->path);
		free(c);
		errno = e;
		return NULL;
	}
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return c;
}

void
ctl_set_jail(struct ctl *c, pid_t init_pid)
{
	if (c != NULL)
		c->jail_pid = init_pid;
}

void
ctl_set_jail_fn(struct ctl *c, pid_t (*fn)(const void *ctx), const void *ctx)
{
	if (c != NULL) {
		c->jail_fn = fn;
		c->jail_ctx = ctx;
	}
}

void
ctl_free(struct ctl *c)
{
	struct stat st;
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < CTL_CONNS; i++)
		if (c->conns[i] != NULL)
			conn_free(c->conns[i]);
	loop_unwatch(c->loop, c->fd);
	(void)close(c->fd);
	if (lstat(c->path, &st) == 0 && st.st_dev == c->dev &&
	    st.st_ino == c->ino)
		(void)unlink(c->path);
	free(c->path);
	free(c);
}
