/*
 * egress.c - the proxy's connections: head, decision, lookup, connect,
 * the tunnel (see egress.h). Each connection is one small state machine
 * driven by the loop; nothing here blocks (names are looked up in
 * resolve.c's threads).
 */
#include "supervisor/egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/egress/head.h"
#include "supervisor/egress/resolve.h"
#include "supervisor/loop/loop.h"

/* One direction's bytes in flight: a whole TLS record fits, so the
 * server name is checked before a byte of the hello goes on; 64 KiB so a
 * fast transfer moves in few turns of the loop. */
#define DIR_SIZE (65536 + 512)
/* Read-and-write rounds for one wake-up of a connection: a busy one
 * moves more per poll, without holding the loop from the others. */
#define PUMP_ROUNDS 8

const struct egress_limits egress_default_limits = { 64, 10000, 30000,
    300000, 0, 300000, 0 };

enum conn_state {
	C_HEAD,			/* reading the request head */
	C_HELD,			/* an unlisted host: the operator decides */
	C_RESOLVE,		/* the name is being looked up */
	C_CONNECT,		/* connecting to ai_next's address */
	C_SNI,			/* CONNECT: waiting for the ClientHello */
	C_RELAY,		/* both ways */
	C_CLOSING		/* our answer to the client, then close */
};

/* A relayed direction's bytes go through a pipe of this size, spliced
 * from one socket to the other without a copy to user space. */
#define SPLICE_PIPE (256 << 10)

struct dir {
	unsigned char b[DIR_SIZE];	/* before the relay, and what was
					 * read before it began */
	size_t off, len;
	int pipe[2];		/* the relay's, -1: not yet */
	size_t inpipe, cap;	/* bytes in it, its size */
	int eof;		/* the source ended */
	int shut;		/* and the destination was told */
	uint64_t total;		/* read */
	uint64_t sent;		/* written */
};

struct conn {
	struct conn *next;
	struct egress *e;
	uint64_t id;
	int cfd, ufd;		/* the client's, the upstream's */
	enum conn_state st;
	char head[HEAD_MAX];
	size_t hlen;
	struct head h;
	struct dir up, down;	/* client -> upstream, upstream -> client */
	struct addrinfo *ai, *ai_next;
	char addr[INET6_ADDRSTRLEN + 8];
	char entry[300];
	char refused[200];	/* an address the policy refused: why */
	int last_err;		/* the last connect's errno */
	uint64_t timer;
	uint64_t t0_us, last_us;
	int allowed;		/* the ALLOWED event went */
	enum egress_by by;	/* who decided */
};

struct egress {
	struct loop *loop;
	struct policy policy;
	struct egress_limits lim;
	struct egress_ops ops;
	void *ctx;
	int lfd;
	struct resolver *res;
	struct conn *conns;
	unsigned live;
	uint64_t ids;
	uint64_t bytes;		/* both ways, every connection's */
	int spent;		/* bytes reached lim.max_bytes */
	char always[HEAD_HOST_MAX + 16];	/* egress_last_always */
	char spent_why[160];
};

static void c_client(struct loop *l, int fd, short revents, void *ctx);
static void c_upstream(struct loop *l, int fd, short revents, void *ctx);
static void c_timer(struct loop *l, void *ctx);
static void try_connect(struct conn *c);
static void hold(struct conn *c);
static void go(struct conn *c);

static void
emit(struct conn *c, enum egress_what what, const char *reason)
{
	struct egress_event ev;

	if (c->e->ops.conn == NULL)
		return;
	memset(&ev, 0, sizeof ev);
	ev.what = what;
	ev.by = c->by;
	ev.id = c->id;
	ev.method = c->h.method;
	ev.host = c->h.host;
	ev.port = c->h.port;
	ev.addr = c->addr;
	ev.entry = c->entry[0] ? c->entry : NULL;
	ev.reason = reason;
	ev.up = c->up.total;
	ev.down = c->down.total;
	ev.seconds = (double)(loop_now_us() - c->t0_us) / 1e6;
	c->e->ops.conn(c->e->ctx, &ev);
}

static void
arm(struct conn *c, unsigned ms)
{
	loop_timer_cancel(c->e->loop, c->timer);
	c->timer = loop_timer(c->e->loop, ms, c_timer, c);
}

static void
dir_close(struct dir *d)
{
	if (d->pipe[0] >= 0) {
		(void)close(d->pipe[0]);
		(void)close(d->pipe[1]);
	}
	d->pipe[0] = d->pipe[1] = -1;
}

static void
conn_free(struct conn *c, const char *reason)
{
	struct egress *e = c->e;
	struct conn **pp;

	if (c->allowed)
		emit(c, EGRESS_CLOSED, reason);
	for (pp = &e->conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	loop_timer_cancel(e->loop, c->timer);
	if (c->cfd >= 0) {
		loop_unwatch(e->loop, c->cfd);
		(void)close(c->cfd);
	}
	if (c->ufd >= 0) {
		loop_unwatch(e->loop, c->ufd);
		(void)close(c->ufd);
	}
	dir_close(&c->up);
	dir_close(&c->down);
	if (c->ai != NULL)
		freeaddrinfo(c->ai);
	e->live--;
	free(c);
}

static const char *
status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

/* The answer to a request the proxy does not carry out. */
static size_t
refusal(char *out, size_t len, int status, const char *why)
{
	char body[800];
	int b, n;

	b = snprintf(body, sizeof body, "agentz: %s\n", why);
	if (b < 0 || (size_t)b >= sizeof body)
		b = (int)sizeof body - 1;
	n = snprintf(out, len, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
	    "charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n"
	    "\r\n%.*s", status, status_text(status), b, b, body);
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* Refuses c: the event, the answer to the client, then close. */
static void
refuse(struct conn *c, int status, const char *why)
{
	if (!c->allowed)
		emit(c, EGRESS_REFUSED, why);
	else
		c->allowed = 0, emit(c, EGRESS_CLOSED, why);
	if (c->ufd >= 0) {
		loop_unwatch(c->e->loop, c->ufd);
		(void)close(c->ufd);
		c->ufd = -1;
	}
	c->down.off = 0;
	c->down.len = refusal((char *)c->down.b, sizeof c->down.b, status,
	    why);
	c->down.eof = 1;
	c->up.eof = 1;
	c->st = C_CLOSING;
	(void)loop_watch(c->e->loop, c->cfd, POLLOUT, c_client, c);
	arm(c, c->e->lim.head_ms);
}

/* May d's source be read now: in the relay, once its buffer is empty,
 * into the pipe; else into the buffer. */
static int
room(const struct conn *c, const struct dir *d)
{
	if (d->eof)
		return 0;
	if (c->st == C_RELAY && d->len == 0 && d->pipe[0] >= 0)
		return d->inpipe < d->cap;
	return d->len < DIR_SIZE;
}

static void
interest(struct conn *c)
{
	short ce = 0, ue = 0;

	if (room(c, &c->up))
		ce |= POLLIN;
	if (c->down.len > 0 || c->down.inpipe > 0)
		ce |= POLLOUT;
	loop_events(c->e->loop, c->cfd, ce);
	if (c->ufd < 0)
		return;
	if (room(c, &c->down))
		ue |= POLLIN;
	if ((c->up.len > 0 && c->st == C_RELAY) || c->up.inpipe > 0)
		ue |= POLLOUT;
	loop_events(c->e->loop, c->ufd, ue);
}

/* Reads what fd has into d, counted in *bytes. 0, or -1 with errno
 * (EOF is d->eof). */
static int
fill(int fd, struct dir *d, uint64_t *bytes)
{
	ssize_t n;

	if (d->len == 0)
		d->off = 0;
	else if (d->off > 0 && DIR_SIZE - d->off - d->len < DIR_SIZE / 4) {
		memmove(d->b, d->b + d->off, d->len);
		d->off = 0;
	}
	if (d->eof || d->off + d->len == DIR_SIZE)
		return 0;
	n = recv(fd, d->b + d->off + d->len, DIR_SIZE - d->off - d->len, 0);
	if (n > 0) {
		d->len += (size_t)n;
		d->total += (uint64_t)n;
		*bytes += (uint64_t)n;
	} else if (n == 0)
		d->eof = 1;
	else if (errno != EAGAIN && errno != EINTR)
		return -1;
	return 0;
}

/* Writes what d has to fd; at d's end, shuts fd's writing. */
static int
drain(int fd, struct dir *d)
{
	ssize_t n;

	if (d->len > 0) {
		n = send(fd, d->b + d->off, d->len, MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		d->off += (size_t)n;
		d->len -= (size_t)n;
		d->sent += (uint64_t)n;
		if (d->len == 0)
			d->off = 0;
	}
	if (d->len == 0 && d->eof && !d->shut) {
		d->shut = 1;
		(void)shutdown(fd, SHUT_WR);
	}
	return 0;
}

/* The run's bytes reached --max-egress-bytes: every other connection is
 * closed now (c, the caller's, by the caller); later ones are refused.
 * 1 when spent. */
static int
over_budget(struct egress *e, struct conn *c)
{
	struct conn *o, *next;

	if (e->lim.max_bytes == 0 || e->bytes < e->lim.max_bytes)
		return 0;
	if (e->spent)
		return 1;
	e->spent = 1;
	(void)snprintf(e->spent_why, sizeof e->spent_why, "the run's egress "
	    "budget is spent: %llu bytes (--max-egress-bytes %llu)",
	    (unsigned long long)e->bytes,
	    (unsigned long long)e->lim.max_bytes);
	for (o = e->conns; o != NULL; o = next) {
		next = o->next;
		if (o != c)
			conn_free(o, e->spent_why);
	}
	return 1;
}

/* The relay of one direction whose buffer is empty: src -> pipe -> dst
 * with splice(2), so the bytes never enter user space; at most left
 * taken in (what the run's budget has left). 0, or -1 with errno. */
static int
splice_dir(int src, int dst, struct dir *d, uint64_t *bytes, uint64_t left)
{
	size_t want;
	ssize_t n;
	int cap;

	if (d->pipe[0] < 0) {
		if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
			return -1;
		(void)fcntl(d->pipe[1], F_SETPIPE_SZ, SPLICE_PIPE);
		cap = fcntl(d->pipe[1], F_GETPIPE_SZ);
		d->cap = cap > 0 ? (size_t)cap : 65536;
	}
	want = d->cap - d->inpipe < left ? d->cap - d->inpipe : left;
	if (!d->eof && want > 0) {
		n = splice(src, NULL, d->pipe[1], NULL, want,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n > 0) {
			d->inpipe += (size_t)n;
			d->total += (uint64_t)n;
			*bytes += (uint64_t)n;
		} else if (n == 0)
			d->eof = 1;
		else if (errno != EAGAIN && errno != EINTR)
			return -1;
	}
	if (d->inpipe > 0) {
		n = splice(d->pipe[0], NULL, dst, NULL, d->inpipe,
		    SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
		if (n > 0) {
			d->inpipe -= (size_t)n;
			d->sent += (uint64_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
	}
	if (d->inpipe == 0 && d->eof && !d->shut) {
		d->shut = 1;
		(void)shutdown(dst, SHUT_WR);
	}
	return 0;
}

/* One direction of the relay: what its buffer holds first (the request
 * head, bytes read before the relay began), then spliced. */
static int
move(int src, int dst, struct dir *d, struct egress *e)
{
	uint64_t left = UINT64_MAX;

	if (d->len > 0)
		return drain(dst, d);
	/* a budget stops at its last byte, not a pipe's worth past it */
	if (e->lim.max_bytes > 0)
		left = e->bytes < e->lim.max_bytes ?
		    e->lim.max_bytes - e->bytes : 0;
	return splice_dir(src, dst, d, &e->bytes, left);
}

/* Writes what both directions hold; while relaying, moves bytes both
 * ways as long as they move (PUMP_ROUNDS at most). 0, or -1 with
 * errno. */
static int
pump(struct conn *c)
{
	uint64_t before;
	int i;

	if (c->st != C_RELAY || c->ufd < 0)
		return drain(c->cfd, &c->down);
	for (i = 0; i < PUMP_ROUNDS; i++) {
		before = c->up.total + c->down.total + c->up.sent +
		    c->down.sent;
		if (move(c->cfd, c->ufd, &c->up, c->e) < 0 ||
		    move(c->ufd, c->cfd, &c->down, c->e) < 0)
			return -1;
		if (c->up.total + c->down.total + c->up.sent + c->down.sent ==
		    before)
			break;
	}
	return 0;
}

static void
relay(struct conn *c, short crev, short urev)
{
	int err = 0;

	c->last_us = loop_now_us();
	/* before the relay (the ClientHello, the 200 going out) through
	 * the buffers; in it, pump splices */
	if (c->st != C_RELAY && (crev & (POLLIN | POLLHUP | POLLERR)) &&
	    fill(c->cfd, &c->up, &c->e->bytes) < 0)
		err = errno;
	if (!err && c->st != C_RELAY && c->ufd >= 0 &&
	    (urev & (POLLIN | POLLHUP | POLLERR)) &&
	    fill(c->ufd, &c->down, &c->e->bytes) < 0)
		err = errno;
	if (!err && over_budget(c->e, c)) {
		conn_free(c, c->e->spent_why);
		return;
	}
	if (!err && c->st == C_SNI) {
		char name[HEAD_HOST_MAX];
		int rc = head_sni(c->up.b + c->up.off, c->up.len, name,
		    sizeof name);

		if (rc == 1 && (c->up.eof || c->up.len >= DIR_SIZE))
			rc = -1;
		if (rc == 0 && strcmp(name, c->h.host) != 0) {
			char why[700];

			(void)snprintf(why, sizeof why, "the TLS server name "
			    "%s is not the CONNECT's host %s", name,
			    c->h.host);
			conn_free(c, why);
			return;
		}
		if (rc < 0) {
			conn_free(c, "a TLS ClientHello that cannot be "
			    "checked (malformed or split across records)");
			return;
		}
		if (rc != 1)
			c->st = C_RELAY;
	}
	if (!err && pump(c) < 0)
		err = errno;
	if (!err && over_budget(c->e, c)) {
		conn_free(c, c->e->spent_why);
		return;
	}
	if (err) {
		conn_free(c, strerror(err));
		return;
	}
	if (c->up.shut && c->down.shut) {
		conn_free(c, NULL);
		return;
	}
	interest(c);
}

static void
connected(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	size_t rest = c->hlen - c->h.len, n;

	c->allowed = 1;
	emit(c, EGRESS_ALLOWED, NULL);
	if (c->h.connect) {
		memcpy(c->down.b, ok, sizeof ok - 1);
		c->down.len = sizeof ok - 1;
		c->st = C_SNI;
	} else {
		n = head_rewrite(c->head, &c->h, (char *)c->up.b, DIR_SIZE);
		if (n == 0) {
			refuse(c, 431, "the request head is too long");
			return;
		}
		c->up.len = n;
		c->st = C_RELAY;
	}
	if (rest > DIR_SIZE - c->up.len)
		rest = DIR_SIZE - c->up.len;	/* cannot be: HEAD_MAX */
	memcpy(c->up.b + c->up.len, c->head + c->h.len, rest);
	c->up.len += rest;
	c->up.total += rest;
	(void)loop_watch(c->e->loop, c->ufd, 0, c_upstream, c);
	(void)loop_watch(c->e->loop, c->cfd, 0, c_client, c);
	c->last_us = loop_now_us();
	arm(c, c->e->lim.idle_ms);
	relay(c, 0, 0);
}

static void
addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	const void *a = sa->sa_family == AF_INET ?
	    (const void *)&((const struct sockaddr_in *)(const void *)sa)->
	    sin_addr :
	    (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->
	    sin6_addr;

	if (inet_ntop(sa->sa_family, a, out, (socklen_t)len) == NULL)
		(void)snprintf(out, len, "?");
}

static void
c_upstream(struct loop *l, int fd, short revents, void *ctx)
{
	struct conn *c = ctx;
	int err = 0;
	socklen_t n = sizeof err;

	(void)l;
	if (c->st != C_CONNECT) {
		relay(c, 0, revents);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) < 0)
		err = errno;
	if (err == 0) {
		connected(c);
		return;
	}
	c->last_err = err;
	loop_unwatch(c->e->loop, fd);
	(void)close(fd);
	c->ufd = -1;
	try_connect(c);
}

static void
no_address(struct conn *c)
{
	char why[700];

	if (c->refused[0] != '\0') {
		(void)snprintf(why, sizeof why, "%s:%u %s", c->h.host,
		    c->h.port, c->refused);
		refuse(c, 403, why);
		return;
	}
	(void)snprintf(why, sizeof why, "cannot connect to %s:%u%s%s: %s",
	    c->h.host, c->h.port, c->addr[0] ? " at " : "", c->addr,
	    strerror(c->last_err ? c->last_err : EHOSTUNREACH));
	refuse(c, 502, why);
}

static void
try_connect(struct conn *c)
{
	struct addrinfo *a;
	const char *why;
	char buf[200], text[INET6_ADDRSTRLEN];

	while ((a = c->ai_next) != NULL) {
		c->ai_next = a->ai_next;
		addr_text(a->ai_addr, text, sizeof text);
		if (policy_check_addr(&c->e->policy, a->ai_addr, c->h.port,
		    &why, buf, sizeof buf) < 0) {
			if (c->refused[0] == '\0')
				(void)snprintf(c->refused, sizeof c->refused,
				    "%s%s, %s", strcmp(text, c->h.host) == 0 ?
				    "" : "resolves to ", text, why);
			continue;
		}
		(void)snprintf(c->addr, sizeof c->addr, "%s", text);
		c->ufd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (c->ufd < 0) {
			c->last_err = errno;
			continue;
		}
		if (connect(c->ufd, a->ai_addr, a->ai_addrlen) == 0) {
			connected(c);
			return;
		}
		if (errno == EINPROGRESS) {
			c->st = C_CONNECT;
			(void)loop_watch(c->e->loop, c->ufd, POLLOUT,
			    c_upstream, c);
			return;
		}
		c->last_err = errno;
		(void)close(c->ufd);
		c->ufd = -1;
	}
	no_address(c);
}

static void
on_resolved(void *ctx, uint64_t tag, struct addrinfo *ai, int gai_err)
{
	struct egress *e = ctx;
	struct conn *c;
	char why[700];

	for (c = e->conns; c != NULL && c->id != tag; c = c->next)
		;
	if (c == NULL || c->st != C_RESOLVE) {
		if (ai != NULL)
			freeaddrinfo(ai);
		return;
	}
	if (ai == NULL) {
		(void)snprintf(why, sizeof why, "cannot resolve %s: %s",
		    c->h.host, gai_strerror(gai_err));
		refuse(c, 502, why);
		return;
	}
	c->ai = c->ai_next = ai;
	try_connect(c);
}

/* The head is complete: the policy's word on the name, then look up. */
static void
decide(struct conn *c)
{
	const char *entry;
	char why[700];

	if (c->e->spent) {
		refuse(c, 403, c->e->spent_why);
		return;
	}
	switch (policy_check_name(&c->e->policy, c->h.host, c->h.port,
	    &entry)) {
	case POLICY_DENIED:
		(void)snprintf(why, sizeof why, "%s:%u is denied "
		    "(--deny-host %s)", c->h.host, c->h.port, entry);
		refuse(c, 403, why);
		return;
	case POLICY_UNLISTED:
		if (c->e->lim.ask) {
			hold(c);
			return;
		}
		(void)snprintf(why, sizeof why, "%s:%u is not in the "
		    "allow-list (--allow-host, or agentz ctl RUN allow HOST)",
		    c->h.host, c->h.port);
		refuse(c, 403, why);
		return;
	case POLICY_ALLOWED:
		break;
	}
	(void)snprintf(c->entry, sizeof c->entry, "%s", entry);
	go(c);
}

/* An unlisted host, held: the event asks the operator; the approval's
 * timeout refuses it. */
static void
hold(struct conn *c)
{
	c->st = C_HELD;
	loop_events(c->e->loop, c->cfd, 0);
	arm(c, c->e->lim.approval_ms);
	emit(c, EGRESS_HELD, NULL);
}

/* The asked host is an address: its addrinfo now, without a lookup (a
 * numeric getaddrinfo never blocks). 1 when it is. */
static int
literal(struct conn *c)
{
	struct addrinfo hints, *ai = NULL;
	char port[8];

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	(void)snprintf(port, sizeof port, "%u", c->h.port);
	if (getaddrinfo(c->h.host, port, &hints, &ai) != 0 || ai == NULL)
		return 0;
	c->ai = c->ai_next = ai;
	return 1;
}

/* Allowed: look the name up (then connect). */
static void
go(struct conn *c)
{
	char why[700];

	c->st = C_RESOLVE;
	loop_events(c->e->loop, c->cfd, 0);
	arm(c, c->e->lim.connect_ms);
	if (literal(c)) {	/* an address needs no lookup thread */
		try_connect(c);
		return;
	}
	if (resolver_lookup(c->e->res, c->h.host, c->h.port, c->id) < 0) {
		(void)snprintf(why, sizeof why, "cannot look %s up: %s",
		    c->h.host, strerror(errno));
		refuse(c, 503, why);
	}
}

static void
read_head(struct conn *c)
{
	ssize_t n;
	int status, rc;
	const char *why;

	n = recv(c->cfd, c->head + c->hlen, sizeof c->head - c->hlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(c, NULL);	/* left before asking */
		return;
	}
	c->hlen += (size_t)n;
	rc = head_parse(c->head, c->hlen, &c->h, &status, &why);
	if (rc == 1)
		return;
	if (rc < 0) {
		memset(&c->h, 0, sizeof c->h);
		refuse(c, status, why);
		return;
	}
	decide(c);
}

static void
c_client(struct loop *l, int fd, short revents, void *ctx)
{
	struct conn *c = ctx;

	(void)l;
	(void)fd;
	switch (c->st) {
	case C_HEAD:
		read_head(c);
		return;
	case C_HELD:
	case C_RESOLVE:
	case C_CONNECT:
		if (revents & (POLLHUP | POLLERR))
			conn_free(c, "the client left");
		return;
	case C_CLOSING:
		if (drain(c->cfd, &c->down) < 0 || c->down.len == 0)
			conn_free(c, NULL);
		return;
	case C_SNI:
	case C_RELAY:
		relay(c, revents, 0);
		return;
	}
}

static void
c_timer(struct loop *l, void *ctx)
{
	struct conn *c = ctx;
	uint64_t idle_us, now = loop_now_us();
	char why[700];

	(void)l;
	c->timer = 0;
	switch (c->st) {
	case C_HEAD:
		refuse(c, 408, "no complete request head in time");
		return;
	case C_HELD:
		c->by = EGRESS_BY_TIMEOUT;
		(void)snprintf(why, sizeof why, "%s:%u: no approval in %u s "
		    "(--approval-timeout)", c->h.host, c->h.port,
		    c->e->lim.approval_ms / 1000);
		refuse(c, 403, why);
		return;
	case C_RESOLVE:
	case C_CONNECT:
		(void)snprintf(why, sizeof why, "cannot connect to %s:%u in "
		    "%u s", c->h.host, c->h.port, c->e->lim.connect_ms / 1000);
		refuse(c, 504, why);
		return;
	case C_CLOSING:
		conn_free(c, NULL);
		return;
	case C_SNI:
	case C_RELAY:
		idle_us = (uint64_t)c->e->lim.idle_ms * 1000;
		if (now - c->last_us >= idle_us) {
			(void)snprintf(why, sizeof why, "idle for %u s",
			    c->e->lim.idle_ms / 1000);
			conn_free(c, why);
			return;
		}
		c->timer = loop_timer(c->e->loop,
		    (idle_us - (now - c->last_us)) / 1000 + 1, c_timer, c);
		return;
	}
}

static void
too_many(struct egress *e, int fd)
{
	char out[600], why[120];
	size_t n;

	(void)snprintf(why, sizeof why, "too many connections at once "
	    "(%u)", e->lim.max_conns);
	n = refusal(out, sizeof out, 503, why);
	(void)send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)close(fd);
	if (e->ops.conn != NULL) {
		struct egress_event ev;

		memset(&ev, 0, sizeof ev);
		ev.what = EGRESS_REFUSED;
		ev.id = ++e->ids;
		ev.method = ev.host = ev.addr = "";
		ev.reason = why;
		e->ops.conn(e->ctx, &ev);
	}
}

static void
on_accept(struct loop *l, int fd, short revents, void *ctx)
{
	struct egress *e = ctx;
	struct conn *c;
	int cfd, i;

	(void)l;
	(void)revents;
	for (i = 0; i < 16; i++) {
		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0)
			return;
		if (e->live >= e->lim.max_conns) {
			too_many(e, cfd);
			continue;
		}
		if ((c = calloc(1, sizeof *c)) == NULL) {
			(void)close(cfd);
			return;
		}
		c->e = e;
		c->id = ++e->ids;
		c->cfd = cfd;
		c->ufd = -1;
		c->up.pipe[0] = c->up.pipe[1] = -1;
		c->down.pipe[0] = c->down.pipe[1] = -1;
		c->t0_us = c->last_us = loop_now_us();
		c->next = e->conns;
		e->conns = c;
		e->live++;
		if (loop_watch(e->loop, cfd, POLLIN, c_client, c) < 0) {
			conn_free(c, NULL);
			return;
		}
		arm(c, e->lim.head_ms);
	}
}

struct egress *
egress_new(struct loop *l, struct policy *p, const struct egress_limits *lim,
    const struct egress_ops *ops, void *ctx)
{
	struct egress *e = calloc(1, sizeof *e);

	if (e == NULL)
		return NULL;
	e->loop = l;
	e->lim = lim != NULL ? *lim : egress_default_limits;
	if (ops != NULL)
		e->ops = *ops;
	e->ctx = ctx;
	e->lfd = -1;
	if ((e->res = resolver_new(l, on_resolved, e)) == NULL) {
		free(e);
		return NULL;
	}
	e->policy = *p;
	memset(p, 0, sizeof *p);
	return e;
}

void
egress_free(struct egress *e)
{
	struct conn *c, *next;

	if (e == NULL)
		return;
	e->ops.conn = NULL;		/* the run is ending: no events */
	for (c = e->conns; c != NULL; c = next) {
		next = c->next;
		conn_free(c, NULL);
	}
	if (e->lfd >= 0) {
		loop_unwatch(e->loop, e->lfd);
		(void)close(e->lfd);
	}
	resolver_free(e->res);
	policy_free(&e->policy);
	free(e);
}

int
egress_listen(struct egress *e, int fd)
{
	if (e->lfd >= 0) {
		loop_unwatch(e->loop, e->lfd);
		(void)close(e->lfd);
	}
	e->lfd = fd;
	return loop_watch(e->loop, fd, POLLIN, on_accept, e);
}

int
egress_policy_edit(struct egress *e, int deny, int remove, const char *entry,
    char *err, size_t len)
{
	if (!remove)
		return policy_add(&e->policy, deny, entry, err, len);
	if (policy_remove(&e->policy, deny, entry))
		return 0;
	(void)snprintf(err, len, "'%s' is not in the %s list", entry,
	    deny ? "deny" : "allow");
	return -1;
}

const struct policy *
egress_policy(const struct egress *e)
{
	return &e->policy;
}

static struct conn *
held(struct egress *e, uint64_t id)
{
	struct conn *c;

	for (c = e->conns; c != NULL; c = c->next)
		if (c->id == id && c->st == C_HELD)
			return c;
	errno = ENOENT;
	return NULL;
}

int
egress_approve(struct egress *e, uint64_t id, int always)
{
	struct conn *c = held(e, id);
	char entry[HEAD_HOST_MAX + 16], err[400];
	int v6;

	if (c == NULL)
		return -1;
	c->by = EGRESS_BY_OPERATOR;
	if (always) {
		v6 = strchr(c->h.host, ':') != NULL;
		(void)snprintf(entry, sizeof entry, "%s%s%s:%u", v6 ? "[" : "",
		    c->h.host, v6 ? "]" : "", c->h.port);
		if (policy_add(&e->policy, 0, entry, err, sizeof err) == 0) {
			(void)snprintf(c->entry, sizeof c->entry, "%s", entry);
			(void)snprintf(e->always, sizeof e->always, "%s",
			    entry);
		}
	}
	if (c->entry[0] == '\0')
		(void)snprintf(c->entry, sizeof c->entry, "(approved)");
	go(c);
	return 0;
}

int
egress_reject(struct egress *e, uint64_t id)
{
	struct conn *c = held(e, id);
	char why[400];

	if (c == NULL)
		return -1;
	c->by = EGRESS_BY_OPERATOR;
	(void)snprintf(why, sizeof why, "%s:%u: rejected by the operator",
	    c->h.host, c->h.port);
	refuse(c, 403, why);
	return 0;
}

unsigned
egress_held(const struct egress *e, char *buf, size_t len)
{
	const struct conn *c;
	unsigned n = 0;
	size_t at = 0;
	int w;

	if (len > 0)
		buf[0] = '\0';
	for (c = e->conns; c != NULL; c = c->next) {
		if (c->st != C_HELD)
			continue;
		n++;
		if (at >= len)
			continue;
		w = snprintf(buf + at, len - at, "%s#%llu %s:%u", at ? ", " :
		    "", (unsigned long long)c->id, c->h.host, c->h.port);
		if (w > 0)
			at += (size_t)w;
	}
	return n;
}

const char *
egress_last_always(const struct egress *e)
{
	return e->always;
}

uint64_t
egress_bytes(const struct egress *e)
{
	return e->bytes;
}

int
egress_spent(const struct egress *e)
{
	return e->spent;
}

void
egress_set_max_bytes(struct egress *e, uint64_t max)
{
	e->lim.max_bytes = max;
	if (e->spent && (max == 0 || e->bytes < max)) {
		e->spent = 0;
		e->spent_why[0] = '\0';
	}
	(void)over_budget(e, NULL);
}

uint64_t
egress_max_bytes(const struct egress *e)
{
	return e->lim.max_bytes;
}

void
egress_count_before(struct egress *e, uint64_t bytes)
{
	e->bytes += bytes;
	(void)over_budget(e, NULL);
}

unsigned
egress_live(const struct egress *e)
{
	return e->live;
}

void
egress_list(const struct egress *e, char *buf, size_t len)
{
	const struct conn *c;
	size_t at = 0;
	int n;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (c = e->conns; c != NULL && at < len; c = c->next) {
		n = snprintf(buf + at, len - at, "%s#%llu %s %s:%u%s%s up %llu "
		    "down %llu %.1f s", at ? "\n" : "", (unsigned long long)c->id,
		    c->h.method[0] ? c->h.method : "-", c->h.host[0] ?
		    c->h.host : "-", c->h.port, c->addr[0] ? " -> " : "",
		    c->addr, (unsigned long long)c->up.total,
		    (unsigned long long)c->down.total,
		    (double)(loop_now_us() - c->t0_us) / 1e6);
		if (n < 0)
			break;
		at += (size_t)n;
	}
}
