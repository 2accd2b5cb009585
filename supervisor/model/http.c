/*
 * http.c - HTTP POST over libcurl's multi interface on our loop (see
 * http.h). The only file that includes <curl/curl.h>.
 *
 * curl tells us which sockets to watch (sock_cb -> loop_watch) and when
 * to call it back (timer_cb -> loop_timer); loop events go back in through
 * curl_multi_socket_action(), after which finished transfers are collected
 * with curl_multi_info_read().
 *
 * A request owns one easy handle for its whole life. An attempt adds it to
 * the multi handle; a finished attempt removes it again, and a retry adds
 * it back from a loop timer. Even the first attempt starts from a timer,
 * so no callback ever runs inside http_post().
 *
 * libcurl forbids removing a handle from inside its own callbacks, and our
 * write callback is where the caller's data callback runs. So while curl
 * is on the stack (h->busy), http_cancel() only unlinks the request and
 * parks it on h->zombies; the write callback then refuses further bytes,
 * and the zombies are freed once curl has returned.
 */
#include "supervisor/model/http.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "supervisor/loop/loop.h"

struct http_req {
	struct http *h;
	struct http_req *next;		/* h->reqs or h->zombies */
	uint64_t id;
	CURL *easy;
	struct curl_slist *hdrs;
	struct http_callbacks cb;
	void *ctx;
	long timeout_ms, idle_ms;
	unsigned max_retries, base_backoff_ms;
	unsigned attempts;
	uint64_t start_timer;		/* next attempt (first or retry) */
	uint64_t deadline_timer;	/* timeout_ms */
	uint64_t deadline_us;		/* 0 = none */
	uint64_t idle_timer;		/* idle_ms, while running */
	uint64_t last_us;		/* last header or body byte */
	int running;			/* easy is in the multi handle */
	int cancelled;
	/* Per attempt. */
	long status;			/* final (>= 200) status, else 0 */
	int status_called, delivered, aborted;
	double ra_ms, ra;		/* retry-after-ms, retry-after; -1 */
	int should_retry;		/* x-should-retry: 1, 0, or -1 */
	char request_id[128];
	struct buf ebody;		/* non-2xx body, HTTP_ERROR_BODY_MAX */
	char errbuf[CURL_ERROR_SIZE];
	char msg[CURL_ERROR_SIZE + 64];
};

struct http {
	struct loop *loop;
	CURLM *multi;
	uint64_t timer;			/* curl's timeout */
	struct http_req *reqs;		/* live requests */
	struct http_req *zombies;	/* cancelled while curl was busy */
	uint64_t next_id;
	int busy;			/* curl or a callback is on the stack */
	uint64_t rng;
	int *fds;			/* sockets we watch for curl */
	size_t nfds, capfds;
};

static void req_start(struct loop *l, void *ctx);
static void req_idle(struct loop *l, void *ctx);
static void check_done(struct http *h);

/* ---- bookkeeping of curl's sockets ---- */

static int
fds_add(struct http *h, int fd)
{
	size_t i;
	int *n;

	for (i = 0; i < h->nfds; i++)
		if (h->fds[i] == fd)
			return 0;
	if (h->nfds == h->capfds) {
		size_t cap = h->capfds ? h->capfds * 2 : 8;

		if ((n = realloc(h->fds, cap * sizeof *n)) == NULL)
			return -1;
		h->fds = n;
		h->capfds = cap;
	}
	h->fds[h->nfds++] = fd;
	return 0;
}

static void
fds_del(struct http *h, int fd)
{
	size_t i;

	for (i = 0; i < h->nfds; i++)
		if (h->fds[i] == fd) {
			h->fds[i] = h->fds[--h->nfds];
			return;
		}
}

/* ---- driving curl from the loop ---- */

/* Takes r's easy handle out of the multi handle: the attempt is over. */
static void
req_stop(struct http_req *r)
{
	if (r->running)
		(void)curl_multi_remove_handle(r->h->multi, r->easy);
	r->running = 0;
	loop_timer_cancel(r->h->loop, r->idle_timer);
	r->idle_timer = 0;
}

/* Frees r, which is on no list and not in the multi handle. */
static void
req_free(struct http_req *r)
{
	curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	buf_clear(&r->ebody);
	free(r);
}

/* Only when curl is not on the stack (h->busy == 0). */
static void
reap_zombies(struct http *h)
{
	struct http_req *r;

	while ((r = h->zombies) != NULL) {
		h->zombies = r->next;
		req_stop(r);
		req_free(r);
	}
}

static void
drive(struct http *h, curl_socket_t s, int flags)
{
	int running;

	h->busy++;
	(void)curl_multi_socket_action(h->multi, s, flags, &running);
	h->busy--;
	reap_zombies(h);
	check_done(h);
}

static void
on_sock(struct loop *l, int fd, short revents, void *ctx)
{
	int flags = 0;

	(void)l;
	if (revents & (POLLIN | POLLHUP))
		flags |= CURL_CSELECT_IN;
	if (revents & POLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (revents & (POLLERR | POLLNVAL))
		flags |= CURL_CSELECT_ERR;
	drive(ctx, fd, flags);
}

static void
on_timer(struct loop *l, void *ctx)
{
	struct http *h = ctx;

	(void)l;
	h->timer = 0;
	drive(h, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_SOCKETFUNCTION: mirror curl's interest in s onto the loop. */
static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http *h = userp;
	short ev = 0;

	(void)e;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		loop_unwatch(h->loop, s);
		fds_del(h, s);
		return 0;
	}
	if (what & CURL_POLL_IN)
		ev |= POLLIN;
	if (what & CURL_POLL_OUT)
		ev |= POLLOUT;
	if (loop_watch(h->loop, s, ev, on_sock, h) < 0)
		return -1;
	if (fds_add(h, s) < 0) {
		loop_unwatch(h->loop, s);
		return -1;
	}
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: one loop timer stands for curl's timeout. */
static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	struct http *h = userp;

	(void)m;
	loop_timer_cancel(h->loop, h->timer);
	h->timer = 0;
	if (timeout_ms < 0)
		return 0;
	h->timer = loop_timer(h->loop, (uint64_t)timeout_ms, on_timer, h);
	return h->timer != 0 ? 0 : -1;
}

/* ---- client ---- */

struct http *
http_new(struct loop *l)
{
	static int global_done;
	struct http *h;

	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			errno = EIO;
			return NULL;
		}
		global_done = 1;
	}
	if ((h = calloc(1, sizeof *h)) == NULL)
		return NULL;
	h->loop = l;
	h->next_id = 1;
	h->rng = loop_now_us() ^ ((uint64_t)getpid() << 32) ^
	    (uint64_t)(uintptr_t)h;
	if (h->rng == 0)
		h->rng = 1;
	if ((h->multi = curl_multi_init()) == NULL ||
	    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, sock_cb) ||
	    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) ||
	    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb) ||
	    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h)) {
		if (h->multi != NULL)
			(void)curl_multi_cleanup(h->multi);
		free(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

/* ---- requests: lifetime ---- */

static void
req_unlink(struct http_req *r)
{
	struct http_req **pp;

	for (pp = &r->h->reqs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	r->next = NULL;
}

/* Unlinks r and parks it on the zombie list; freed by reap_zombies(). */
static void
req_bury(struct http_req *r)
{
	struct http *h = r->h;

	req_unlink(r);
	loop_timer_cancel(h->loop, r->start_timer);
	loop_timer_cancel(h->loop, r->deadline_timer);
	loop_timer_cancel(h->loop, r->idle_timer);
	r->start_timer = r->deadline_timer = r->idle_timer = 0;
	r->cancelled = 1;
	r->next = h->zombies;
	h->zombies = r;
}

void
http_free(struct http *h)
{
	size_t i;

	if (h == NULL)
		return;
	while (h->reqs != NULL)
		req_bury(h->reqs);
	reap_zombies(h);
	/* May still call sock_cb and timer_cb, which need h and the loop. */
	(void)curl_multi_cleanup(h->multi);
	loop_timer_cancel(h->loop, h->timer);
	for (i = 0; i < h->nfds; i++)
		loop_unwatch(h->loop, h->fds[i]);
	free(h->fds);
	free(h);
}

void
http_cancel(struct http *h, uint64_t id)
{
	struct http_req *r;

	if (h == NULL || id == 0)
		return;
	for (r = h->reqs; r != NULL && r->id != id; r = r->next)
		;
	if (r == NULL)
		return;
	req_bury(r);
	if (h->busy == 0)
		reap_zombies(h);
}

/* Ends r: no more attempts, done with *res, then r is freed. */
static void
req_finish(struct http_req *r, struct http_result *res)
{
	struct http *h = r->h;

	req_unlink(r);
	req_stop(r);
	loop_timer_cancel(h->loop, r->start_timer);
	loop_timer_cancel(h->loop, r->deadline_timer);
	r->start_timer = r->deadline_timer = 0;
	res->attempts = r->attempts;
	res->status = r->status;
	res->request_id = r->request_id[0] != '\0' ? r->request_id : NULL;
	if (!res->ok && r->status >= 300) {
		res->body = buf_str(&r->ebody);
		res->body_len = r->ebody.len;
	}
	/* Parked as a zombie: a cancel from inside done finds nothing. */
	r->next = h->zombies;
	h->zombies = r;
	h->busy++;
	if (r->cb.done != NULL)
		r->cb.done(r->ctx, res);
	h->busy--;
	if (h->busy == 0)
		reap_zombies(h);
}

/* Copies src into r->msg as one printable line. */
static const char *
req_msg(struct http_req *r, const char *src)
{
	size_t i;

	(void)snprintf(r->msg, sizeof r->msg, "%s", src);
	for (i = 0; r->msg[i] != '\0'; i++)
		if ((unsigned char)r->msg[i] < 0x20 || r->msg[i] == 0x7f)
			r->msg[i] = ' ';
	while (i > 0 && r->msg[i - 1] == ' ')
		r->msg[--i] = '\0';
	return r->msg;
}

static uint64_t retry_after_ms(const struct http_req *r);

/* retryable: the retry rule would try again (see http_result). */
static void
req_fail_status(struct http_req *r, int retryable)
{
	struct http_result res = { 0 };

	(void)snprintf(r->msg, sizeof r->msg, "HTTP %ld", r->status);
	res.error = r->msg;
	res.retryable = retryable;
	res.retry_after_ms = retry_after_ms(r);
	req_finish(r, &res);
}

static void
req_fail_transport(struct http_req *r, const char *why, int retryable)
{
	struct http_result res = { 0 };

	res.error = req_msg(r, why);
	res.transport = 1;
	res.partial = r->delivered;
	res.retryable = retryable && !r->delivered;
	req_finish(r, &res);
}

/* ---- retry policy ---- */

static const CURLcode retryable_curl[] = {
	CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST,
	CURLE_COULDNT_CONNECT, CURLE_WEIRD_SERVER_REPLY, CURLE_PARTIAL_FILE,
	CURLE_OPERATION_TIMEDOUT, CURLE_SSL_CONNECT_ERROR, CURLE_GOT_NOTHING,
	CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
	CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR,
};

static int
curl_retryable(CURLcode rc)
{
	size_t i;

	for (i = 0; i < sizeof retryable_curl / sizeof retryable_curl[0]; i++)
		if (retryable_curl[i] == rc)
			return 1;
	return 0;
}

static int
status_retryable(const struct http_req *r)
{
	static const char quota[] = "insufficient_quota";

	if (r->should_retry >= 0)
		return r->should_retry;
	/* An exhausted quota is a 429 that waiting will not fix. */
	if (r->status == 429 && memmem(buf_str(&r->ebody), r->ebody.len,
	    quota, sizeof quota - 1) != NULL)
		return 0;
	return r->status == 408 || r->status == 409 || r->status == 429 ||
	    r->status >= 500;
}

static uint64_t
rng_next(struct http *h)
{
	/* xorshift64: jitter needs spread, not secrecy. */
	h->rng ^= h->rng << 13;
	h->rng ^= h->rng >> 7;
	h->rng ^= h->rng << 17;
	return h->rng;
}

/* The server's retry-after-ms, else retry-after, in whole ms rounded up
 * and capped; 0 when the last attempt sent neither. */
static uint64_t
retry_after_ms(const struct http_req *r)
{
	double ra = r->ra_ms > 0 ? r->ra_ms : r->ra;

	if (!(ra > 0))
		return 0;
	return ra >= HTTP_RETRY_AFTER_MAX_MS ? HTTP_RETRY_AFTER_MAX_MS :
	    (uint64_t)ra + (ra > (double)(uint64_t)ra);
}

/* The server's retry-after, else exponential backoff with equal jitter:
 * half the step fixed, half random. */
static uint64_t
retry_delay_ms(struct http_req *r)
{
	uint64_t ra = retry_after_ms(r);
	unsigned n = r->attempts - 1;	/* retries so far */
	uint64_t d;

	if (ra > 0)
		return ra;
	d = (uint64_t)r->base_backoff_ms << (n < 20 ? n : 20);
	if (d > HTTP_BACKOFF_MAX_MS)
		d = HTTP_BACKOFF_MAX_MS;
	return d / 2 + rng_next(r->h) % (d - d / 2 + 1);
}

/* Schedules another attempt if the budget allows. 1 if scheduled. */
static int
req_retry(struct http_req *r)
{
	uint64_t delay;

	if (r->attempts > r->max_retries)
		return 0;
	delay = retry_delay_ms(r);
	/* Waiting past the deadline would only trade the server's answer
	 * for a timeout: report the answer now. */
	if (r->deadline_us != 0 &&
	    loop_now_us() + delay * 1000 >= r->deadline_us)
		return 0;
	r->start_timer = loop_timer(r->h->loop, delay, req_start, r);
	return r->start_timer != 0;
}

uint64_t
http_outage_delay_ms(unsigned n, uint64_t retry_after_ms)
{
	uint64_t d = (uint64_t)HTTP_OUTAGE_BASE_MS << (n < 20 ? n : 20);

	if (d > HTTP_OUTAGE_MAX_MS)
		d = HTTP_OUTAGE_MAX_MS;
	if (retry_after_ms > HTTP_RETRY_AFTER_MAX_MS)
		retry_after_ms = HTTP_RETRY_AFTER_MAX_MS;
	return retry_after_ms > d ? retry_after_ms : d;
}

/* ---- one attempt ---- */

/* Calls the status callback once; 1 if r was cancelled meanwhile. */
static int
req_status(struct http_req *r)
{
	if (r->status_called)
		return 0;
	r->status_called = 1;
	if (r->cb.status == NULL)
		return 0;
	r->h->busy++;
	r->cb.status(r->ctx, r->status);
	r->h->busy--;
	return r->cancelled;
}

/* A transfer finished with rc; r is out of the multi handle. */
static void
req_attempt_done(struct http_req *r, CURLcode rc)
{
	struct http_result res = { 0 };
	struct http *h = r->h;

	if (r->aborted) {
		res.error = req_msg(r, "aborted by the data callback");
		res.aborted = 1;
		res.partial = r->delivered;
		req_finish(r, &res);
	} else if (r->status >= 200 && r->status < 300 && rc == CURLE_OK &&
	    !r->delivered) {
		/* No byte of a body to stream: a connection that broke. */
		(void)snprintf(r->errbuf, sizeof r->errbuf, "HTTP %ld with an "
		    "empty body (the server closed the response before its "
		    "first byte)", r->status);
		if (!req_retry(r))
			req_fail_transport(r, r->errbuf, 1);
	} else if (r->status >= 200 && r->status < 300 && rc == CURLE_OK) {
		if (req_status(r)) {
			reap_zombies(h);
			return;
		}
		res.ok = 1;
		req_finish(r, &res);
	} else if (r->status >= 300) {
		if (!status_retryable(r))
			req_fail_status(r, 0);
		else if (!req_retry(r))
			req_fail_status(r, 1);
	} else {
		int again = !r->delivered && curl_retryable(rc);

		if (!again || !req_retry(r))
			req_fail_transport(r, r->errbuf[0] != '\0' ? r->errbuf :
			    curl_easy_strerror(rc), again);
	}
}

static void
check_done(struct http *h)
{
	struct http_req *r;
	CURLMsg *m;
	CURLcode rc;
	char *priv;
	int left;

	/* One message at a time: a done callback may cancel other requests,
	 * which drops their pending messages. */
	while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		rc = m->data.result;
		priv = NULL;
		if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
		    &priv) != CURLE_OK || priv == NULL)
			continue;
		r = (struct http_req *)(void *)priv;
		req_stop(r);
		req_attempt_done(r, rc);
	}
}

static void
req_start(struct loop *l, void *ctx)
{
	struct http_req *r = ctx;
	CURLMcode mc;

	(void)l;
	r->start_timer = 0;
	r->attempts++;
	r->status = 0;
	r->status_called = r->delivered = r->aborted = 0;
	r->ra_ms = r->ra = -1;
	r->should_retry = -1;
	r->request_id[0] = '\0';
	buf_reset(&r->ebody);
	r->errbuf[0] = '\0';
	mc = curl_multi_add_handle(r->h->multi, r->easy);
	if (mc != CURLM_OK) {
		char why[128];

		(void)snprintf(why, sizeof why, "cannot start the transfer: %s",
		    curl_multi_strerror(mc));
		req_fail_transport(r, why, 0);
		return;
	}
	r->running = 1;
	r->last_us = loop_now_us();
	if (r->idle_ms > 0 && (r->idle_timer = loop_timer(r->h->loop,
	    (uint64_t)r->idle_ms, req_idle, r)) == 0) {
		req_stop(r);
		req_fail_transport(r, "cannot start the transfer: no memory",
		    0);
	}
}

/* Fires idle_ms after the attempt started, then re-arms itself to the
 * last byte + idle_ms, so the hot path only stores a time stamp. */
static void
req_idle(struct loop *l, void *ctx)
{
	struct http_req *r = ctx;
	uint64_t now = loop_now_us();
	uint64_t due = r->last_us + (uint64_t)r->idle_ms * 1000;

	r->idle_timer = 0;
	if (now < due) {
		r->idle_timer = loop_timer(l, (due - now + 999) / 1000,
		    req_idle, r);
		if (r->idle_timer != 0)
			return;
	}
	req_stop(r);
	(void)snprintf(r->errbuf, sizeof r->errbuf,
	    "no data received for %g s", (double)r->idle_ms / 1000.0);
	req_attempt_done(r, CURLE_OPERATION_TIMEDOUT);
}

static void
req_deadline(struct loop *l, void *ctx)
{
	struct http_req *r = ctx;
	struct http_result res = { 0 };

	(void)l;
	r->deadline_timer = 0;
	(void)snprintf(r->msg, sizeof r->msg, "request timed out after %g s",
	    (double)r->timeout_ms / 1000.0);
	res.error = r->msg;
	res.transport = 1;
	res.timed_out = 1;
	res.partial = r->delivered;
	req_finish(r, &res);
}

/* ---- curl's per-transfer callbacks ---- */

static void
ebody_add(struct http_req *r, const char *p, size_t n)
{
	size_t room = HTTP_ERROR_BODY_MAX - r->ebody.len;

	if (n > room)
		n = room;
	/* Best effort: the status still counts without the body. */
	(void)buf_append(&r->ebody, p, n);
}

static size_t
write_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct http_req *r = ud;
	size_t n = size * nmemb;
	int rc;

	if (r->cancelled || r->aborted)
		return 0;
	r->last_us = loop_now_us();
	if (r->status == 0)
		(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE,
		    &r->status);
	if (r->status < 200 || r->status >= 300) {
		ebody_add(r, p, n);
		return n;
	}
	if (n == 0 || req_status(r))
		return 0;
	r->delivered = 1;
	if (r->cb.data == NULL)
		return n;
	r->h->busy++;
	rc = r->cb.data(r->ctx, p, n);
	r->h->busy--;
	if (r->cancelled)
		return 0;
	if (rc < 0) {
		r->aborted = 1;
		return 0;
	}
	return n;
}

/* Parses a positive delay; "seconds" scales by 1000 and allows an HTTP
 * date. -1 when absent, malformed, not positive or in the past. */
static double
parse_delay(const char *v, int seconds)
{
	char *end;
	double d = strtod(v, &end);
	time_t t;

	if (end != v && *end == '\0')
		d = seconds ? d * 1000 : d;
	else if (!seconds || (t = curl_getdate(v, NULL)) == (time_t)-1)
		return -1;
	else
		d = difftime(t, time(NULL)) * 1000;
	return d > 0 && d < 1e15 ? d : -1;	/* also rejects NaN */
}

static void
hdr_value(struct http_req *r, const char *name, const char *v)
{
	size_t n;

	if (strcasecmp(name, "retry-after-ms") == 0)
		r->ra_ms = parse_delay(v, 0);
	else if (strcasecmp(name, "retry-after") == 0)
		r->ra = parse_delay(v, 1);
	else if (strcasecmp(name, "x-should-retry") == 0)
		r->should_retry = strcasecmp(v, "true") == 0 ? 1 :
		    strcasecmp(v, "false") == 0 ? 0 : -1;
	else if (strcasecmp(name, "x-request-id") == 0) {
		n = strnlen(v, sizeof r->request_id - 1);
		memcpy(r->request_id, v, n);
		r->request_id[n] = '\0';
	}
}

/* Splits "Name: value\r\n" (not NUL-terminated) into two strings. */
static void
hdr_line(struct http_req *r, const char *p, size_t n)
{
	char name[64], val[256];
	const char *colon = memchr(p, ':', n), *v, *e = p + n;

	if (colon == NULL || (size_t)(colon - p) >= sizeof name)
		return;
	memcpy(name, p, (size_t)(colon - p));
	name[colon - p] = '\0';
	for (v = colon + 1; v < e && (*v == ' ' || *v == '\t'); v++)
		;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' ||
	    e[-1] == '\t'))
		e--;
	if ((size_t)(e - v) >= sizeof val)
		return;
	memcpy(val, v, (size_t)(e - v));
	val[e - v] = '\0';
	hdr_value(r, name, val);
}

static size_t
header_cb(char *p, size_t size, size_t nitems, void *ud)
{
	struct http_req *r = ud;
	size_t n = size * nitems;
	long code = 0;

	if (r->cancelled)
		return 0;
	r->last_us = loop_now_us();
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* A new header block (after 1xx ones): forget the last. */
		r->ra_ms = r->ra = -1;
		r->should_retry = -1;
		r->request_id[0] = '\0';
	} else if (n > 0 && n <= 2 && (p[0] == '\r' || p[0] == '\n')) {
		(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200)
			r->status = code;
	} else {
		hdr_line(r, p, n);
	}
	return n;
}

/* ---- starting a request ---- */

static int
opts_valid(const struct http_request_opts *o)
{
	const char *const *hp;

	if (o == NULL || o->url == NULL || o->url[0] == '\0' ||
	    (o->body == NULL && o->body_len > 0) || o->timeout_ms < 0 ||
	    o->connect_timeout_ms < 0 || o->idle_timeout_ms < 0)
		return 0;
	for (hp = o->headers; hp != NULL && *hp != NULL; hp++)
		if (strpbrk(*hp, "\r\n") != NULL)
			return 0;
	return 1;
}

/* Builds the header list: the caller's, and no "Expect: 100-continue"
 * (curl adds it to large bodies, costing a round trip or a 1 s stall). */
static int
req_headers(struct http_req *r, const char *const *headers)
{
	const char *const *hp;
	struct curl_slist *n;

	for (hp = headers; hp != NULL && *hp != NULL; hp++) {
		if ((n = curl_slist_append(r->hdrs, *hp)) == NULL)
			return -1;
		r->hdrs = n;
	}
	if ((n = curl_slist_append(r->hdrs, "Expect:")) == NULL)
		return -1;
	r->hdrs = n;
	return 0;
}

static int
req_easy(struct http_req *r, const struct http_request_opts *o)
{
	CURL *e = r->easy;
	long conn = o->connect_timeout_ms ? o->connect_timeout_ms :
	    HTTP_CONNECT_TIMEOUT_DEFAULT_MS;
	const struct { CURLoption opt; long val; } longs[] = {
		{ CURLOPT_NOSIGNAL, 1L },
		{ CURLOPT_TCP_KEEPALIVE, 1L },
		{ CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L },
		{ CURLOPT_CONNECTTIMEOUT_MS, conn },
		/* Larger reads: a long stream then takes ~20x fewer recv()
		 * and poll() calls than with the 16 KiB default. */
		{ CURLOPT_BUFFERSIZE, 512L * 1024 },
	};
	size_t i;

	for (i = 0; i < sizeof longs / sizeof longs[0]; i++)
		if (curl_easy_setopt(e, longs[i].opt, longs[i].val) != CURLE_OK)
			return -1;
	/* POSTFIELDSIZE before COPYPOSTFIELDS: copy body_len bytes. */
	if (curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") ||
	    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs) ||
	    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		(curl_off_t)o->body_len) ||
	    curl_easy_setopt(e, o->body_kept ? CURLOPT_POSTFIELDS :
		CURLOPT_COPYPOSTFIELDS, o->body != NULL ? o->body : "") ||
	    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb) ||
	    curl_easy_setopt(e, CURLOPT_WRITEDATA, r) ||
	    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb) ||
	    curl_easy_setopt(e, CURLOPT_HEADERDATA, r) ||
	    curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)r) ||
	    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf))
		return -1;
	return 0;
}

static struct http_req *
req_new(struct http *h, const struct http_request_opts *o)
{
	struct http_req *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->h = h;
	if ((r->easy = curl_easy_init()) == NULL ||
	    req_headers(r, o->headers) < 0 || req_easy(r, o) < 0) {
		curl_easy_cleanup(r->easy);
		curl_slist_free_all(r->hdrs);
		free(r);
		return NULL;
	}
	r->timeout_ms = o->timeout_ms;
	r->idle_ms = o->idle_timeout_ms;
	r->max_retries = o->max_retries == 0 ? HTTP_RETRIES_DEFAULT :
	    o->max_retries == HTTP_RETRIES_NONE ? 0 : o->max_retries;
	r->base_backoff_ms = o->base_backoff_ms ? o->base_backoff_ms :
	    HTTP_BACKOFF_DEFAULT_MS;
	return r;
}

uint64_t
http_post(struct http *h, const struct http_request_opts *o,
    const struct http_callbacks *cb, void *ctx)
{
	struct http_req *r;

	if (h == NULL || !opts_valid(o)) {
		errno = EINVAL;
		return 0;
	}
	if ((r = req_new(h, o)) == NULL) {
		errno = ENOMEM;
		return 0;
	}
	if (cb != NULL)
		r->cb = *cb;
	r->ctx = ctx;
	r->start_timer = loop_timer(h->loop, 0, req_start, r);
	if (r->timeout_ms > 0) {
		r->deadline_us = loop_now_us() + (uint64_t)r->timeout_ms * 1000;
		r->deadline_timer = loop_timer(h->loop,
		    (uint64_t)r->timeout_ms, req_deadline, r);
	}
	if (r->start_timer == 0 || (r->timeout_ms > 0 &&
	    r->deadline_timer == 0)) {
		loop_timer_cancel(h->loop, r->start_timer);
		loop_timer_cancel(h->loop, r->deadline_timer);
		req_free(r);
		errno = ENOMEM;
		return 0;
	}
	r->id = h->next_id++;
	r->next = h->reqs;
	h->reqs = r;
	return r->id;
}
