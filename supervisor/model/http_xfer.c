/*
 * http_xfer.c - one HTTP request of the client (see http.h, http_int.h):
 * building its easy handle, each attempt from start to end, curl's write
 * and header callbacks, the idle and overall timeouts, the error body of
 * a non-2xx answer, and the one result handed to the done callback.
 *
 * A request owns one easy handle for its whole life. An attempt adds it to
 * the multi handle; a finished attempt removes it again, and a retry adds
 * it back from a loop timer. Even the first attempt starts from a timer,
 * so no callback ever runs inside http_post().
 */
#include "supervisor/model/http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/size.h"

static void req_idle(struct loop *l, void *ctx);

/* Ends r: no more attempts, done with *res, then r is freed. */
static void
req_finish(struct http_req *r, struct http_result *res)
{
	struct http *h = r->h;

	http_req_unlink(r);
	http_req_stop(r);
	http_req_timers_cancel(r);
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
		http_reap_zombies(h);
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

/* retryable: the retry rule would try again (see http_result). */
static void
req_fail_status(struct http_req *r, int retryable)
{
	struct http_result res = { 0 };

	(void)snprintf(r->msg, sizeof r->msg, "HTTP %ld", r->status);
	res.error = r->msg;
	res.retryable = retryable;
	res.retry_after_ms = http_retry_after_ms(r);
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
void
http_req_attempt_done(struct http_req *r, CURLcode rc)
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
		if (!http_req_retry(r))
			req_fail_transport(r, r->errbuf, 1);
	} else if (r->status >= 200 && r->status < 300 && rc == CURLE_OK) {
		if (req_status(r)) {
			http_reap_zombies(h);
			return;
		}
		res.ok = 1;
		req_finish(r, &res);
	} else if (r->status >= 300) {
		if (!http_status_retryable(r))
			req_fail_status(r, 0);
		else if (!http_req_retry(r))
			req_fail_status(r, 1);
	} else {
		int again = !r->delivered && http_curl_retryable(rc);

		if (!again || !http_req_retry(r))
			req_fail_transport(r, r->errbuf[0] != '\0' ? r->errbuf :
			    http_lib.easy_strerror(rc), again);
	}
}

void
http_req_start(struct loop *l, void *ctx)
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
	mc = http_lib.multi_add_handle(r->h->multi, r->easy);
	if (mc != CURLM_OK) {
		char why[128];

		(void)snprintf(why, sizeof why, "cannot start the transfer: %s",
		    http_lib.multi_strerror(mc));
		req_fail_transport(r, why, 0);
		return;
	}
	r->running = 1;
	r->last_us = loop_now_us();
	if (r->idle_ms > 0 && (r->idle_timer = loop_timer(r->h->loop,
	    (uint64_t)r->idle_ms, req_idle, r)) == 0) {
		http_req_stop(r);
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
	char secs[32];

	r->idle_timer = 0;
	if (now < due) {
		r->idle_timer = loop_timer(l, (due - now + 999) / 1000,
		    req_idle, r);
		if (r->idle_timer != 0)
			return;
	}
	http_req_stop(r);
	size_plain((double)r->idle_ms / 1000.0, secs, sizeof secs);
	(void)snprintf(r->errbuf, sizeof r->errbuf,
	    "no data received for %s s", secs);
	http_req_attempt_done(r, CURLE_OPERATION_TIMEDOUT);
}

static void
req_deadline(struct loop *l, void *ctx)
{
	struct http_req *r = ctx;
	struct http_result res = { 0 };
	char secs[32];

	(void)l;
	r->deadline_timer = 0;
	size_plain((double)r->timeout_ms / 1000.0, secs, sizeof secs);
	(void)snprintf(r->msg, sizeof r->msg, "request timed out after %s s",
	    secs);
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
		(void)http_lib.easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE,
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
	http_hdr_value(r, name, val);
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
		(void)http_lib.easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
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
		if ((n = http_lib.slist_append(r->hdrs, *hp)) == NULL)
			return -1;
		r->hdrs = n;
	}
	if ((n = http_lib.slist_append(r->hdrs, "Expect:")) == NULL)
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
		if (http_lib.easy_setopt(e, longs[i].opt, longs[i].val) != CURLE_OK)
			return -1;
	/* POSTFIELDSIZE before COPYPOSTFIELDS: copy body_len bytes. */
	if (http_lib.easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK ||
	    http_lib.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") ||
	    http_lib.easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs) ||
	    http_lib.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		(curl_off_t)o->body_len) ||
	    http_lib.easy_setopt(e, o->body_kept ? CURLOPT_POSTFIELDS :
		CURLOPT_COPYPOSTFIELDS, o->body != NULL ? o->body : "") ||
	    http_lib.easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb) ||
	    http_lib.easy_setopt(e, CURLOPT_WRITEDATA, r) ||
	    http_lib.easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb) ||
	    http_lib.easy_setopt(e, CURLOPT_HEADERDATA, r) ||
	    http_lib.easy_setopt(e, CURLOPT_PRIVATE, (void *)r) ||
	    http_lib.easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf))
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
	if ((r->easy = http_lib.easy_init()) == NULL ||
	    req_headers(r, o->headers) < 0 || req_easy(r, o) < 0) {
		http_lib.easy_cleanup(r->easy);
		http_lib.slist_free_all(r->hdrs);
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
	r->start_timer = loop_timer(h->loop, 0, http_req_start, r);
	if (r->timeout_ms > 0) {
		r->deadline_us = loop_now_us() + (uint64_t)r->timeout_ms * 1000;
		r->deadline_timer = loop_timer(h->loop,
		    (uint64_t)r->timeout_ms, req_deadline, r);
	}
	if (r->start_timer == 0 || (r->timeout_ms > 0 &&
	    r->deadline_timer == 0)) {
		http_req_timers_cancel(r);
		http_req_free(r);
		errno = ENOMEM;
		return 0;
	}
	r->id = h->next_id++;
	r->next = h->reqs;
	h->reqs = r;
	return r->id;
}
