/*
 * test_http.c - the HTTP client against a real server on 127.0.0.1.
 *
 * The server is a forked child of this test (its own process group, killed
 * at the end). It reads each request in its main process, where it counts
 * the hits per path, then forks a handler per connection that answers
 * according to the first path segment, so that slow answers overlap and
 * "fail twice, then succeed" scenarios work across connections. Every
 * answer closes the connection. Each test uses its own path, hence its own
 * counter.
 *
 * Callbacks only record; assertions run after loop_run() returns, since a
 * failing assertion must not longjmp through libcurl. Time is measured with
 * the loop's clock, never slept for.
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/model/http.h"
#include "supervisor/loop/loop.h"

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
	char auth[128], ct[128], body[512];
	unsigned sum = 0;
	size_t i;

	(void)n;
	for (i = 0; i < q->len; i++)
		sum = sum * 31 + (unsigned char)q->body[i];
	(void)snprintf(body, sizeof body, "auth=%s;ct=%s;len=%zu;sum=%u",
	    header(q, "authorization", auth, sizeof auth),
	    header(q, "content-type", ct, sizeof ct), q->len, sum);
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

/* ==== the client side ==== */

struct fx {
	struct loop *l;
	struct http *h;
	int pending;		/* done callbacks until loop_stop */
};

/* What the callbacks saw for one request. */
struct got {
	struct fx *fx;
	uint64_t id;
	int done, status_calls, data_calls, data_before_status;
	long status_code;
	char data[8192];
	size_t data_len;
	struct http_result r;	/* pointers below are our copies */
	char error[512], request_id[128];
	char *body;
	uint64_t t0, t_done;
	/* behaviour */
	int abort_on_data;
	int cancel_self_on_data;
	uint64_t cancel_later;	/* cancel from a loop timer on first data */
	const char *repost;	/* done posts this path once more */
	struct got *next_got;
};

static int
fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	if (f == NULL || (f->l = loop_new()) == NULL ||
	    (f->h = http_new(f->l)) == NULL) {
		if (f != NULL)
			loop_free(f->l);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	struct fx *f = *state;

	http_free(f->h);
	loop_free(f->l);
	free(f);
	return 0;
}

static void
on_guard(struct loop *l, void *ctx)
{
	(void)ctx;
	loop_stop(l, 1);
}

/* Runs the loop until every expected done arrived (0) or ms passed (1). */
static int
run(struct fx *f, int pending, uint64_t ms)
{
	uint64_t t = loop_timer(f->l, ms, on_guard, f);
	int rc;

	f->pending = pending;
	rc = loop_run(f->l);
	loop_timer_cancel(f->l, t);
	return rc;
}

static void
cb_status(void *ctx, long code)
{
	struct got *g = ctx;

	g->status_calls++;
	g->status_code = code;
}

static void
cancel_later(struct loop *l, void *ctx)
{
	struct got *g = ctx;

	(void)l;
	http_cancel(g->fx->h, g->id);
}

static uint64_t post(struct fx *f, const char *path,
    struct http_request_opts o, struct got *g);

static int
cb_data(void *ctx, const char *p, size_t n)
{
	struct got *g = ctx;

	if (g->status_calls == 0)
		g->data_before_status = 1;
	g->data_calls++;
	if (n > sizeof g->data - g->data_len)
		n = sizeof g->data - g->data_len;
	memcpy(g->data + g->data_len, p, n);
	g->data_len += n;
	if (g->cancel_self_on_data)
		http_cancel(g->fx->h, g->id);
	if (g->cancel_later == 1)
		g->cancel_later = loop_timer(g->fx->l, 0, cancel_later, g);
	return g->abort_on_data ? -1 : 0;
}

static void
cb_done(void *ctx, const struct http_result *r)
{
	struct got *g = ctx;

	g->done++;
	g->t_done = loop_now_us();
	g->r = *r;
	(void)snprintf(g->error, sizeof g->error, "%s",
	    r->error != NULL ? r->error : "");
	(void)snprintf(g->request_id, sizeof g->request_id, "%s",
	    r->request_id != NULL ? r->request_id : "");
	if (r->body != NULL) {
		g->body = malloc(r->body_len + 1);
		if (g->body != NULL) {
			memcpy(g->body, r->body, r->body_len + 1);
		}
	}
	g->r.error = g->error;
	g->r.request_id = g->request_id;
	g->r.body = g->body;
	if (g->repost != NULL && g->next_got != NULL) {
		struct http_request_opts o = { .base_backoff_ms = 1 };

		g->next_got->id = post(g->fx, g->repost, o, g->next_got);
		g->fx->pending++;
	}
	if (--g->fx->pending == 0)
		loop_stop(g->fx->l, 0);
}

static const struct http_callbacks cbs = { cb_status, cb_data, cb_done };

static uint64_t
post(struct fx *f, const char *path, struct http_request_opts o,
    struct got *g)
{
	char url[256];

	(void)snprintf(url, sizeof url, "http://127.0.0.1:%d%s", srv_port,
	    path);
	o.url = url;
	if (o.body == NULL) {
		o.body = "{}";
		o.body_len = 2;
	}
	g->fx = f;
	g->t0 = loop_now_us();
	g->id = http_post(f->h, &o, &cbs, g);
	return g->id;
}

static uint64_t
elapsed_ms(const struct got *g)
{
	return MS(g->t_done - g->t0);
}

/* Posts one request with o and runs it to its end. */
static void
run_one(struct fx *f, const char *path, struct http_request_opts o,
    struct got *g)
{
	assert_true(post(f, path, o, g) > 0);
	assert_int_equal(run(f, 1, 5000), 0);
	assert_int_equal(g->done, 1);
}

static void
got_clear(struct got *g)
{
	free(g->body);
	g->body = NULL;
}

/* ==== tests ==== */

static void
test_stream_ok(void **state)
{
	struct http_request_opts o = { 0 };
	struct got g = { 0 };

	run_one(*state, "/sse/a", o, &g);
	assert_true(g.r.ok);
	assert_int_equal(g.r.status, 200);
	assert_int_equal(g.r.attempts, 1);
	assert_null(g.body);
	assert_string_equal(g.error, "");
	assert_int_equal(g.status_calls, 1);
	assert_int_equal(g.status_code, 200);
	assert_false(g.data_before_status);
	assert_true(g.data_calls >= 1);
	g.data[g.data_len] = '\0';
	assert_string_equal(g.data,
	    "data: one\n\ndata: two\n\ndata: three\n\n");
	assert_false(g.r.transport || g.r.partial || g.r.timed_out);
}

/* The body (with NUL bytes, and 2 MiB with no Expect stall) and the
 * caller's headers arrive as given. */
static void
test_post_body_and_headers(void **state)
{
	static const char *const hdrs[] = { "Authorization: Bearer sk-test",
	    "Content-Type: application/json", NULL };
	static const char small[] = "a\0b";
	struct http_request_opts o = { .headers = hdrs, .body = small,
	    .body_len = 3 };
	struct got g = { 0 }, g2 = { 0 };
	size_t big_len = (size_t)2 << 20, i;
	char *big = malloc(big_len), want[256];
	unsigned sum = 0;

	assert_non_null(big);
	run_one(*state, "/echo/a", o, &g);
	g.data[g.data_len] = '\0';
	sum = (unsigned)'a' * 31 * 31 + 'b';
	(void)snprintf(want, sizeof want, "auth=Bearer sk-test;"
	    "ct=application/json;len=3;sum=%u", sum);
	assert_string_equal(g.data, want);

	for (i = 0, sum = 0; i < big_len; i++) {
		big[i] = (char)('a' + i % 26);
		sum = sum * 31 + (unsigned char)big[i];
	}
	o.body = big;
	o.body_len = big_len;
	run_one(*state, "/echo/b", o, &g2);
	free(big);
	g2.data[g2.data_len] = '\0';
	(void)snprintf(want, sizeof want, "auth=Bearer sk-test;"
	    "ct=application/json;len=%zu;sum=%u", big_len, sum);
	assert_string_equal(g2.data, want);
	assert_true(elapsed_ms(&g2) < 900);
}

/* retry-after-ms wins over a backoff that would take >= 1 s. */
static void
test_429_retry_after_ms(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 2000 };
	struct got g = { 0 };

	run_one(*state, "/r429/a", o, &g);
	assert_true(g.r.ok);
	assert_int_equal(g.r.attempts, 2);
	assert_int_equal(g.status_calls, 1);
	assert_true(elapsed_ms(&g) >= 50);
	assert_true(elapsed_ms(&g) < 900);
}

static void
test_retry_after_seconds(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 2000 };
	struct got g = { 0 };

	run_one(*state, "/ra/a", o, &g);
	assert_true(g.r.ok);
	assert_int_equal(g.r.attempts, 2);
	assert_true(elapsed_ms(&g) >= 100);
	assert_true(elapsed_ms(&g) < 900);
}

/* A date 2 s ahead means a delay of 1 or 2 s (whole seconds), where the
 * backoff would be about 1 ms. */
static void
test_retry_after_date(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 1 };
	struct got g = { 0 };

	run_one(*state, "/radate/a", o, &g);
	assert_true(g.r.ok);
	assert_int_equal(g.r.attempts, 2);
	assert_true(elapsed_ms(&g) >= 900);
	assert_true(elapsed_ms(&g) < 3000);
}

/* Equal jitter: the two delays are at least 10 + 20 ms. */
static void
test_503_twice_then_ok(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 20 };
	struct got g = { 0 };

	run_one(*state, "/r503x2/a", o, &g);
	assert_true(g.r.ok);
	assert_int_equal(g.r.attempts, 3);
	assert_int_equal(g.r.status, 200);
	assert_null(g.body);
	assert_true(elapsed_ms(&g) >= 30);
	assert_true(elapsed_ms(&g) < 900);
}

static void
test_401_not_retried(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 1 };
	struct got g = { 0 };

	run_one(*state, "/e401/a", o, &g);
	assert_false(g.r.ok);
	assert_int_equal(g.r.status, 401);
	assert_int_equal(g.r.attempts, 1);
	assert_string_equal(g.error, "HTTP 401");
	assert_non_null(g.body);
	assert_string_equal(g.body, "{\"error\":{\"message\":\"Incorrect API "
	    "key provided\",\"type\":\"invalid_request_error\",\"code\":"
	    "\"invalid_api_key\"}}");
	assert_int_equal(g.r.body_len, strlen(g.body));
	assert_string_equal(g.request_id, "req_123");
	assert_false(g.r.transport || g.r.partial);
	assert_false(g.r.retryable);
	assert_int_equal(g.status_calls, 0);
	assert_int_equal(g.data_calls, 0);
	got_clear(&g);
}

static void
test_error_body_bounded(void **state)
{
	struct http_request_opts o = { 0 };
	struct got g = { 0 };
	size_t i;

	run_one(*state, "/big401/a", o, &g);
	assert_int_equal(g.r.status, 401);
	assert_int_equal(g.r.body_len, HTTP_ERROR_BODY_MAX);
	assert_non_null(g.body);
	for (i = 0; i < g.r.body_len && g.body[i] == 'x'; i++)
		;
	assert_int_equal(i, HTTP_ERROR_BODY_MAX);
	assert_int_equal(g.body[i], '\0');
	got_clear(&g);
}

static void
test_retries_exhausted(void **state)
{
	struct http_request_opts o = { .max_retries = 2, .base_backoff_ms = 1 };
	struct got g = { 0 }, d = { 0 }, none = { 0 };

	run_one(*state, "/a503/a", o, &g);
	assert_false(g.r.ok);
	assert_int_equal(g.r.attempts, 3);
	assert_int_equal(g.r.status, 503);
	assert_string_equal(g.error, "HTTP 503");
	assert_string_equal(g.body, "overloaded");
	assert_false(g.r.transport);
	assert_true(g.r.retryable);	/* a caller may wait it out */
	assert_int_equal(g.r.retry_after_ms, 0);

	o.max_retries = 0;	/* the default: 4 */
	run_one(*state, "/a503/b", o, &d);
	assert_int_equal(d.r.attempts, HTTP_RETRIES_DEFAULT + 1);

	o.max_retries = HTTP_RETRIES_NONE;
	run_one(*state, "/a503/c", o, &none);
	assert_int_equal(none.r.attempts, 1);
	got_clear(&g);
	got_clear(&d);
	got_clear(&none);
}

static void
test_x_should_retry(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 1 };
	struct got yes = { 0 }, no = { 0 };

	run_one(*state, "/xsr/a", o, &yes);
	assert_true(yes.r.ok);
	assert_int_equal(yes.r.attempts, 2);

	run_one(*state, "/xsrf/a", o, &no);
	assert_false(no.r.ok);
	assert_int_equal(no.r.status, 503);
	assert_int_equal(no.r.attempts, 1);
	assert_false(no.r.retryable);	/* the server said so */
	got_clear(&no);
}

/* Closed without a response, reset, a 2xx that closes before its first
 * body byte, and a 2xx with an empty body: all retried; the failed 2xx is
 * never announced. */
static void
test_drop_before_body_retried(void **state)
{
	static const char *const paths[] = { "/drop/a", "/reset/a",
	    "/midhead/a", "/empty0/a", "/emptyclose/a", "/emptychunk/a" };
	struct http_request_opts o = { .base_backoff_ms = 1 };
	size_t i;

	for (i = 0; i < NITEMS(paths); i++) {
		struct got g = { 0 };

		run_one(*state, paths[i], o, &g);
		assert_true(g.r.ok);
		assert_int_equal(g.r.attempts, 2);
		assert_int_equal(g.status_calls, 1);
		assert_int_equal(g.data_len, 2);
	}
}

static void
test_connection_refused(void **state)
{
	struct http_request_opts o = { .max_retries = 2, .base_backoff_ms = 1 };
	struct got g = { 0 };
	char url[64];
	int port = 0;

	assert_int_equal(bind_local(0, &port), 0);
	(void)snprintf(url, sizeof url, "http://127.0.0.1:%d/x", port);
	o.url = url;
	g.fx = *state;
	g.t0 = loop_now_us();
	assert_true(http_post(g.fx->h, &o, &cbs, &g) > 0);
	assert_int_equal(run(g.fx, 1, 5000), 0);
	assert_false(g.r.ok);
	assert_true(g.r.transport);
	assert_false(g.r.partial);
	assert_int_equal(g.r.status, 0);
	assert_int_equal(g.r.attempts, 3);
	assert_true(g.r.retryable);
	assert_non_null(strstr(g.error, "127.0.0.1"));
	assert_null(g.body);
}

static void
test_drop_after_data_not_retried(void **state)
{
	struct http_request_opts o = { .base_backoff_ms = 1 };
	struct got g = { 0 };

	run_one(*state, "/mid/a", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.partial);
	assert_true(g.r.transport);
	assert_false(g.r.timed_out);
	assert_int_equal(g.r.attempts, 1);
	assert_int_equal(g.r.status, 200);
	assert_true(strlen(g.error) > 0);
	assert_int_equal(g.data_len, 9);
	assert_memory_equal(g.data, "data: a\n\n", 9);
}

static void
test_timeout_mid_body(void **state)
{
	struct http_request_opts o = { .timeout_ms = 300 };
	struct got g = { 0 };

	run_one(*state, "/slow/a", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.timed_out);
	assert_true(g.r.partial);
	assert_true(g.r.transport);
	assert_int_equal(g.r.attempts, 1);
	assert_string_equal(g.error, "request timed out after 0.3 s");
	assert_true(elapsed_ms(&g) >= 300);
	assert_true(elapsed_ms(&g) < 1500);
}

static void
test_timeout_before_headers(void **state)
{
	struct http_request_opts o = { .timeout_ms = 300 };
	struct got g = { 0 };

	run_one(*state, "/slowhead/a", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.timed_out);
	assert_false(g.r.partial);
	assert_int_equal(g.r.status, 0);
	assert_int_equal(g.r.attempts, 1);
	assert_non_null(strstr(g.error, "0.3 s"));
	assert_true(elapsed_ms(&g) >= 300);
	assert_true(elapsed_ms(&g) < 1500);
}

/* A retry-after beyond the deadline: the server's answer, at once. */
static void
test_deadline_cuts_backoff(void **state)
{
	struct http_request_opts o = { .timeout_ms = 2000 };
	struct got g = { 0 };

	run_one(*state, "/a503ra/a", o, &g);
	assert_false(g.r.ok);
	assert_false(g.r.timed_out);
	assert_int_equal(g.r.status, 503);
	assert_int_equal(g.r.attempts, 1);
	assert_string_equal(g.body, "overloaded");
	assert_true(elapsed_ms(&g) < 1000);
	/* cut by the deadline, not by the rule: the server's delay is kept */
	assert_true(g.r.retryable);
	assert_int_equal(g.r.retry_after_ms, 5000);
	got_clear(&g);
}

/* The outage schedule: 1 s doubling, capped at 60 s; a longer
 * retry-after wins, itself capped. */
static void
test_outage_delay(void **state)
{
	static const uint64_t want[] = { 1000, 2000, 4000, 8000, 16000,
	    32000, 60000, 60000 };
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(want); i++)
		assert_int_equal(http_outage_delay_ms((unsigned)i, 0), want[i]);
	assert_int_equal(http_outage_delay_ms(40, 0), HTTP_OUTAGE_MAX_MS);
	assert_int_equal(http_outage_delay_ms(~0u, 0), HTTP_OUTAGE_MAX_MS);
	assert_int_equal(http_outage_delay_ms(0, 500), 1000);
	assert_int_equal(http_outage_delay_ms(0, 7000), 7000);
	assert_int_equal(http_outage_delay_ms(3, 7000), 8000);
	assert_int_equal(http_outage_delay_ms(0, 3600000),
	    HTTP_RETRY_AFTER_MAX_MS);
}

static void
test_idle_timeout(void **state)
{
	struct http_request_opts o = { .idle_timeout_ms = 250 };
	struct got g = { 0 };

	run_one(*state, "/slow/b", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.partial);
	assert_true(g.r.transport);
	assert_false(g.r.timed_out);
	assert_int_equal(g.r.attempts, 1);
	assert_string_equal(g.error, "no data received for 0.25 s");
	assert_true(elapsed_ms(&g) >= 250);
	assert_true(elapsed_ms(&g) < 1500);
}

/* Three 200 ms answers in flight together take about 200 ms. */
static void
test_concurrent(void **state)
{
	static const char *const paths[] = { "/delay/1", "/delay/2",
	    "/delay/3" };
	struct http_request_opts o = { 0 };
	struct got g[3] = { { 0 } };
	uint64_t t0 = loop_now_us(), ids[3];
	size_t i;

	for (i = 0; i < 3; i++)
		ids[i] = post(*state, paths[i], o, &g[i]);
	assert_true(ids[0] > 0 && ids[1] > ids[0] && ids[2] > ids[1]);
	assert_int_equal(run(*state, 3, 5000), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(g[i].done, 1);
		assert_true(g[i].r.ok);
		g[i].data[g[i].data_len] = '\0';
		assert_string_equal(g[i].data, paths[i]);
	}
	assert_true(MS(loop_now_us() - t0) >= 200);
	assert_true(MS(loop_now_us() - t0) < 550);
}

/* Cancelled from a loop timer while streaming: no done, no more data,
 * and the client goes on working. */
static void
test_cancel_in_flight(void **state)
{
	struct http_request_opts o = { 0 };
	struct got g = { .cancel_later = 1 }, after = { 0 };
	int calls;

	assert_true(post(*state, "/stream/a", o, &g) > 0);
	assert_int_equal(run(*state, 1, 300), 1);
	assert_int_equal(g.done, 0);
	calls = g.data_calls;
	assert_true(calls >= 1);
	assert_int_equal(run(*state, 1, 150), 1);
	assert_int_equal(g.data_calls, calls);
	assert_int_equal(g.done, 0);

	run_one(*state, "/ok/cancel", o, &after);
	assert_true(after.r.ok);
	http_cancel(((struct fx *)*state)->h, g.id);	/* stale: ignored */
	http_cancel(((struct fx *)*state)->h, 0);
}

/* Cancelled from inside its own data callback (curl on the stack), next
 * to a request that must still complete. */
static void
test_cancel_from_callback(void **state)
{
	struct http_request_opts o = { 0 };
	struct got self = { .cancel_self_on_data = 1 }, other = { 0 };

	assert_true(post(*state, "/stream/b", o, &self) > 0);
	assert_true(post(*state, "/sse/b", o, &other) > 0);
	assert_int_equal(run(*state, 1, 3000), 0);
	assert_int_equal(other.done, 1);
	assert_true(other.r.ok);
	assert_int_equal(run(*state, 1, 150), 1);
	assert_int_equal(self.done, 0);
	assert_int_equal(self.data_calls, 1);
}

static void
test_cancel_in_backoff(void **state)
{
	struct fx *f = *state;
	struct http_request_opts o = { 0 };
	struct got g = { 0 };

	assert_true(post(f, "/a503ra/b", o, &g) > 0);
	assert_int_equal(run(f, 1, 200), 1);
	assert_int_equal(g.done, 0);
	http_cancel(f->h, g.id);
	assert_int_equal(run(f, 1, 100), 1);
	assert_int_equal(g.done, 0);
}

static void
test_abort_from_data(void **state)
{
	struct http_request_opts o = { 0 };
	struct got g = { .abort_on_data = 1 };

	run_one(*state, "/sse/c", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.aborted);
	assert_true(g.r.partial);
	assert_false(g.r.transport);
	assert_int_equal(g.r.attempts, 1);
	assert_int_equal(g.data_calls, 1);
	assert_string_equal(g.error, "aborted by the data callback");
}

/* A done callback starts the next request. */
static void
test_post_from_done(void **state)
{
	struct http_request_opts o = { 0 };
	struct got second = { 0 }, first = { .repost = "/ok/second",
	    .next_got = &second };

	assert_true(post(*state, "/ok/first", o, &first) > 0);
	assert_int_equal(run(*state, 1, 3000), 0);
	assert_int_equal(first.done, 1);
	assert_int_equal(second.done, 1);
	assert_true(second.r.ok);
}

/* Freed with requests in flight and in backoff: no callbacks, no leaks. */
static void
test_free_busy(void **state)
{
	struct fx *f = *state;
	struct http_request_opts o = { 0 };
	struct got a = { 0 }, b = { 0 }, c = { 0 };

	assert_true(post(f, "/stream/c", o, &a) > 0);
	assert_true(post(f, "/a503ra/c", o, &b) > 0);
	assert_true(post(f, "/ok/never", o, &c) > 0);	/* not started */
	http_free(f->h);
	f->h = http_new(f->l);
	assert_non_null(f->h);
	assert_true(post(f, "/stream/d", o, &a) > 0);
	assert_true(post(f, "/a503ra/d", o, &b) > 0);
	assert_int_equal(run(f, 1, 200), 1);
	http_free(f->h);
	f->h = NULL;
	assert_int_equal(run(f, 1, 50), 1);	/* nothing left on the loop */
	assert_int_equal(a.done + b.done + c.done, 0);
}

static void
test_bad_args(void **state)
{
	struct fx *f = *state;
	static const char *const crlf[] = { "X-A: b\r\nX-Evil: 1", NULL };
	struct http_request_opts o = { .url = "http://127.0.0.1:1/" };
	struct got g = { 0 };

	o.url = NULL;
	errno = 0;
	assert_int_equal(http_post(f->h, &o, &cbs, &g), 0);
	assert_int_equal(errno, EINVAL);
	o.url = "http://127.0.0.1:1/";
	o.headers = crlf;
	assert_int_equal(http_post(f->h, &o, &cbs, &g), 0);
	o.headers = NULL;
	o.body_len = 5;
	assert_int_equal(http_post(f->h, &o, &cbs, &g), 0);
	o.body_len = 0;
	o.timeout_ms = -1;
	assert_int_equal(http_post(f->h, &o, &cbs, &g), 0);
	assert_int_equal(http_post(NULL, &o, &cbs, &g), 0);
	assert_int_equal(http_post(f->h, NULL, &cbs, &g), 0);
	http_cancel(f->h, 12345);
	http_free(NULL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_stream_ok),
		T(test_post_body_and_headers),
		T(test_429_retry_after_ms),
		T(test_retry_after_seconds),
		T(test_retry_after_date),
		T(test_503_twice_then_ok),
		T(test_401_not_retried),
		T(test_error_body_bounded),
		T(test_retries_exhausted),
		T(test_x_should_retry),
		T(test_drop_before_body_retried),
		T(test_connection_refused),
		T(test_drop_after_data_not_retried),
		T(test_timeout_mid_body),
		T(test_timeout_before_headers),
		T(test_deadline_cuts_backoff),
		T(test_outage_delay),
		T(test_idle_timeout),
		T(test_concurrent),
		T(test_cancel_in_flight),
		T(test_cancel_from_callback),
		T(test_cancel_in_backoff),
		T(test_abort_from_data),
		T(test_post_from_done),
		T(test_free_busy),
		T(test_bad_args),
	};

	return cmocka_run_group_tests(tests, server_start, server_stop);
}
