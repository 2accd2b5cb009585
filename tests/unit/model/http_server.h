/*
 * http_server.h - the HTTP tests' server on 127.0.0.1: a forked child of
 * the test (its own process group, killed at the end). It reads each
 * request in its main process, where it counts the hits per path, then
 * forks a handler per connection that answers according to the first path
 * segment, so that slow answers overlap and "fail twice, then succeed"
 * scenarios work across connections. Every answer closes the connection.
 * Each test uses its own path, hence its own counter.
 */
#ifndef AGENTZ_TEST_HTTP_SERVER_H
#define AGENTZ_TEST_HTTP_SERVER_H

#define NITEMS(a)	(sizeof(a) / sizeof((a)[0]))
#define MS(us)		((us) / 1000u)

/* ==== the server ==== */

struct srq {
	char path[128];
	char head[8192];
	char *body;
	size_t len;
};

static pid_t srv_pid;
static int srv_port;

static void
msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void
putn(int c, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0 && (w = write(c, p, n)) > 0) {
		p += w;
		n -= (size_t)w;
	}
}

static void
put(int c, const char *s)
{
	putn(c, s, strlen(s));
}

static void
reply_n(int c, int code, const char *extra, const char *body, size_t n)
{
	char head[512];

	(void)snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Length: "
	    "%zu\r\nConnection: close\r\n%s\r\n", code, n, extra);
	put(c, head);
	putn(c, body, n);
}

static void
reply(int c, int code, const char *extra, const char *body)
{
	reply_n(c, code, extra, body, strlen(body));
}

static void
chunked(int c)
{
	put(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
}

static void
chunk(int c, const char *s)
{
	char len[32];

	(void)snprintf(len, sizeof len, "%zx\r\n", strlen(s));
	put(c, len);
	put(c, s);
	put(c, "\r\n");
}

/* The value of header name in q, or "". */
static const char *
header(const struct srq *q, const char *name, char *out, size_t size)
{
	const char *p = q->head;
	size_t n = strlen(name), i;

	out[0] = '\0';
	while ((p = strstr(p, "\r\n")) != NULL) {
		p += 2;
		if (strncasecmp(p, name, n) != 0 || p[n] != ':')
			continue;
		for (p += n + 1; *p == ' '; p++)
			;
		for (i = 0; i + 1 < size && p[i] != '\r'; i++)
			out[i] = p[i];
		out[i] = '\0';
		break;
	}
	return out;
}

static void
sc_ok(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	reply(c, 200, "", "ok");
}

static void
sc_sse(int c, const struct srq *q, int n)
{
	static const char *const ev[] = { "data: one\n\n", "data: two\n\n",
	    "data: three\n\n" };
	size_t i;

	(void)q;
	(void)n;
	chunked(c);
	for (i = 0; i < NITEMS(ev); i++) {
		msleep(20);
		chunk(c, ev[i]);
	}
	put(c, "0\r\n\r\n");
}

static void
sc_echo(int c, const struct srq *q, int n)
{
	char auth[128], ct[128], expect[128], body[640];
	unsigned sum = 0;
	size_t i;

	(void)n;
	for (i = 0; i < q->len; i++)
		sum = sum * 31 + (unsigned char)q->body[i];
	(void)snprintf(body, sizeof body,
	    "auth=%s;ct=%s;len=%zu;sum=%u;expect=%s",
	    header(q, "authorization", auth, sizeof auth),
	    header(q, "content-type", ct, sizeof ct), q->len, sum,
	    header(q, "expect", expect, sizeof expect));
	reply(c, 200, "", body);
}

static void
sc_r429(int c, const struct srq *q, int n)
{
	if (n == 1)
		reply(c, 429, "retry-after-ms: 50\r\n",
		    "{\"error\":{\"message\":\"slow down\"}}");
	else
		sc_ok(c, q, n);
}

static void
sc_ra(int c, const struct srq *q, int n)
{
	if (n == 1)
		reply(c, 503, "Retry-After: 0.1\r\n", "busy");
	else
		sc_ok(c, q, n);
}

/* Retry-After as an HTTP date two seconds ahead. */
static void
sc_radate(int c, const struct srq *q, int n)
{
	char hdr[128];
	time_t t = time(NULL) + 2;
	struct tm tm;

	if (n > 1) {
		sc_ok(c, q, n);
		return;
	}
	(void)strftime(hdr, sizeof hdr,
	    "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", gmtime_r(&t, &tm));
	reply(c, 503, hdr, "busy");
}

static void
sc_r503x2(int c, const struct srq *q, int n)
{
	if (n <= 2)
		reply(c, 503, "", "busy");
	else
		sc_ok(c, q, n);
}

static void
sc_a503(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	reply(c, 503, "", "overloaded");
}

static void
sc_a503ra(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	reply(c, 503, "retry-after-ms: 5000\r\n", "overloaded");
}

static void
sc_e401(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	reply(c, 401, "x-request-id: req_123\r\n"
	    "Content-Type: application/json\r\n",
	    "{\"error\":{\"message\":\"Incorrect API key provided\","
	    "\"type\":\"invalid_request_error\","
	    "\"code\":\"invalid_api_key\"}}");
}

static void
sc_big401(int c, const struct srq *q, int n)
{
	static char big[100000];

	(void)q;
	(void)n;
	memset(big, 'x', sizeof big);
	reply_n(c, 401, "", big, sizeof big);
}

static void
sc_xsr(int c, const struct srq *q, int n)
{
	if (n == 1)
		reply(c, 400, "x-should-retry: true\r\n", "bad");
	else
		sc_ok(c, q, n);
}

static void
sc_xsrf(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	reply(c, 503, "X-Should-Retry: false\r\n", "no");
}

static void
sc_drop(int c, const struct srq *q, int n)
{
	if (n > 1)
		sc_ok(c, q, n);
}

static void
sc_reset(int c, const struct srq *q, int n)
{
	struct linger lg = { 1, 0 };

	if (n > 1)
		sc_ok(c, q, n);
	else
		(void)setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

/* A 2xx that promises a body and closes before its first byte. */
static void
sc_midhead(int c, const struct srq *q, int n)
{
	if (n > 1)
		sc_ok(c, q, n);
	else
		put(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
}

/* A 2xx with an empty body: of length 0, ended by the close, or chunked. */
static void
sc_empty0(int c, const struct srq *q, int n)
{
	if (n > 1)
		sc_ok(c, q, n);
	else
		put(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

static void
sc_emptyclose(int c, const struct srq *q, int n)
{
	if (n > 1)
		sc_ok(c, q, n);
	else
		put(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
}

static void
sc_emptychunk(int c, const struct srq *q, int n)
{
	if (n > 1) {
		sc_ok(c, q, n);
	} else {
		chunked(c);
		put(c, "0\r\n\r\n");
	}
}

static void
sc_mid(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	chunked(c);
	chunk(c, "data: a\n\n");
	msleep(20);
}

static void
sc_slow(int c, const struct srq *q, int n)
{
	(void)q;
	(void)n;
	chunked(c);
	chunk(c, "data: a\n\n");
	msleep(3000);
	chunk(c, "data: b\n\n");
	put(c, "0\r\n\r\n");
}

static void
sc_slowhead(int c, const struct srq *q, int n)
{
	msleep(3000);
	sc_ok(c, q, n);
}

static void
sc_delay(int c, const struct srq *q, int n)
{
	(void)n;
	msleep(200);
	reply(c, 200, "", q->path);
}

static void
sc_stream(int c, const struct srq *q, int n)
{
	int i;

	(void)q;
	(void)n;
	chunked(c);
	for (i = 0; i < 40; i++) {
		chunk(c, "data: tick\n\n");
		msleep(50);
	}
	put(c, "0\r\n\r\n");
}

static const struct {
	const char *name;
	void (*fn)(int c, const struct srq *q, int n);
} scenarios[] = {
	{ "ok", sc_ok }, { "sse", sc_sse }, { "echo", sc_echo },
	{ "r429", sc_r429 }, { "ra", sc_ra }, { "radate", sc_radate },
	{ "r503x2", sc_r503x2 },
	{ "a503", sc_a503 }, { "a503ra", sc_a503ra }, { "e401", sc_e401 },
	{ "big401", sc_big401 }, { "xsr", sc_xsr }, { "xsrf", sc_xsrf },
	{ "drop", sc_drop }, { "reset", sc_reset }, { "midhead", sc_midhead },
	{ "empty0", sc_empty0 }, { "emptyclose", sc_emptyclose },
	{ "emptychunk", sc_emptychunk },
	{ "mid", sc_mid }, { "slow", sc_slow }, { "slowhead", sc_slowhead },
	{ "delay", sc_delay }, { "stream", sc_stream },
};

static void
respond(int c, const struct srq *q, int n)
{
	size_t i, len = strcspn(q->path + 1, "/");

	for (i = 0; i < NITEMS(scenarios); i++)
		if (strlen(scenarios[i].name) == len &&
		    strncmp(q->path + 1, scenarios[i].name, len) == 0) {
			scenarios[i].fn(c, q, n);
			return;
		}
	reply(c, 404, "", "no such scenario");
}

/* Hits so far on path, this one included. */
static int
hit(const char *path)
{
	static struct { char path[128]; int n; } hits[128];
	size_t i;

	for (i = 0; i < NITEMS(hits) && hits[i].path[0] != '\0'; i++)
		if (strcmp(hits[i].path, path) == 0)
			return ++hits[i].n;
	if (i == NITEMS(hits))
		return 1;
	(void)snprintf(hits[i].path, sizeof hits[i].path, "%s", path);
	return hits[i].n = 1;
}

/* Reads one request: head into q->head, body (Content-Length) into
 * q->body. -1 if the client went away first. */
static int
read_request(int c, struct srq *q)
{
	static char buf[(4 << 20) + sizeof q->head];
	size_t got = 0, hlen = 0, blen = 0;
	char cl[32];

	for (;;) {
		const char *end = hlen == 0 ? memmem(buf, got, "\r\n\r\n", 4) :
		    NULL;
		ssize_t n;

		if (end != NULL) {
			hlen = (size_t)(end - buf) + 4;
			if (hlen >= sizeof q->head)
				return -1;
			memcpy(q->head, buf, hlen);
			q->head[hlen] = '\0';
			blen = strtoul(header(q, "content-length", cl,
			    sizeof cl), NULL, 10);
			if (hlen + blen > sizeof buf)
				return -1;
		}
		if (hlen != 0 && got >= hlen + blen)
			break;
		if (got == sizeof buf || (n = read(c, buf + got,
		    sizeof buf - got)) <= 0)
			return -1;
		got += (size_t)n;
	}
	q->body = buf + hlen;
	q->len = blen;
	if (sscanf(q->head, "POST %127s HTTP/1.1", q->path) != 1)
		return -1;
	return 0;
}

static _Noreturn void
serve(int lfd)
{
	struct timeval tv = { 2, 0 };
	struct srq q;

	(void)signal(SIGCHLD, SIG_IGN);	/* handlers reap themselves */
	(void)signal(SIGPIPE, SIG_IGN);
	for (;;) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			continue;
		(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		if (read_request(c, &q) == 0) {
			int n = hit(q.path);

			if (fork() == 0) {
				close(lfd);
				respond(c, &q, n);
				close(c);
				_exit(0);
			}
		}
		close(c);
	}
}

/* A port on 127.0.0.1 with a listening socket, or (listening 0) one that
 * was just closed, where connections are refused. */
static int
bind_local(int listening, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0 ||
	    (listening && listen(fd, 64) < 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	if (!listening) {
		close(fd);
		return 0;
	}
	return fd;
}

static int
server_start(void **state)
{
	int lfd = bind_local(1, &srv_port);
	pid_t parent = getpid();

	(void)state;
	if (lfd < 0)
		return -1;
	if ((srv_pid = fork()) < 0)
		return -1;
	if (srv_pid == 0) {
		/* Dies with the test, even when the test crashes. */
		(void)setpgid(0, 0);
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		serve(lfd);
	}
	(void)setpgid(srv_pid, srv_pid);
	close(lfd);
	return 0;
}

static int
server_stop(void **state)
{
	(void)state;
	/* The server and its handlers: a group of our own making. */
	(void)kill(-srv_pid, SIGKILL);
	(void)kill(srv_pid, SIGKILL);
	(void)waitpid(srv_pid, NULL, 0);
	return 0;
}

#endif
