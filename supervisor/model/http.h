/*
 * http.h - asynchronous HTTP POST on the supervisor's event loop.
 *
 * The model client's transport: libcurl's multi interface driven by
 * loop.h (curl's sockets become fd watchers, its timeout one loop timer),
 * so several requests run at once and nothing ever blocks.
 *
 * Each request retries on its own, up to max_retries times: on HTTP 408,
 * 409, 429 (but not one whose body says insufficient_quota) and every
 * 5xx, and on transport failures (refused, reset, DNS, connect timeout,
 * a 2xx that breaks before its first body byte, a 2xx whose body is
 * empty) that happen before any body byte reached the data callback. The delay is the server's
 * retry-after-ms or retry-after (seconds or an HTTP date; capped at
 * HTTP_RETRY_AFTER_MAX_MS), else base_backoff_ms * 2^retries with equal
 * jitter, capped at HTTP_BACKOFF_MAX_MS. An `x-should-retry: true` or
 * `false` response header overrides the status rule, as in the
 * official SDKs. Other 4xx (400, 401, 403, 404, 422, ...) end the request
 * at once. Once body bytes of a 2xx were delivered the request is never
 * retried: the caller has seen them.
 *
 * The body of a 2xx is streamed to the caller as it arrives; the body of
 * any other status is collected (at most HTTP_ERROR_BODY_MAX bytes) and
 * handed over in the result, for the caller to format "HTTP 401: ...".
 *
 * libcurl is loaded at the first use, not at the program's start.
 * Silent (prints nothing), no signals (CURLOPT_NOSIGNAL), redirects not
 * followed. Nothing here exposes curl types; http.c, http_xfer.c and
 * http_retry.c (sharing http_int.h) are the only files that include
 * <curl/curl.h>.
 */
#ifndef AGENTZ_HTTP_H
#define AGENTZ_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct http;

#define HTTP_RETRIES_DEFAULT		4u	/* max_retries 0 */
#define HTTP_RETRIES_NONE		(~0u)	/* max_retries: no retry */
#define HTTP_BACKOFF_DEFAULT_MS		500u	/* base_backoff_ms 0 */
#define HTTP_BACKOFF_MAX_MS		8000u
#define HTTP_RETRY_AFTER_MAX_MS		60000u
#define HTTP_OUTAGE_BASE_MS		1000u	/* first wait of an outage */
#define HTTP_OUTAGE_MAX_MS		60000u	/* longest wait between tries */
#define HTTP_CONNECT_TIMEOUT_DEFAULT_MS	10000L	/* connect_timeout_ms 0 */
#define HTTP_ERROR_BODY_MAX		((size_t)64 << 10)

/*
 * One request. Everything is borrowed for the duration of http_post()
 * only: url, body and headers are copied.
 */
struct http_request_opts {
	const char *url;		/* http:// or https:// */
	const char *body;		/* body_len bytes; NULL if body_len 0 */
	size_t body_len;
	/* 1: body is not copied; the caller keeps it unchanged until the
	 * done callback or http_cancel (a big body is then not held twice) */
	int body_kept;
	/* "Name: value" strings, NULL-terminated; NULL for none. No CR/LF. */
	const char *const *headers;
	/* Bound on the whole request, from http_post() to done, covering
	 * every attempt, backoff and the streamed body; 0 = none. When it
	 * expires the request ends with timed_out = 1 (never retried). A
	 * retry whose delay would run past it is not made: the last
	 * attempt's outcome is reported at once instead. */
	long timeout_ms;
	long connect_timeout_ms;	/* per attempt; 0 = default (10 s) */
	/* Ends an attempt after this long without a byte from the server
	 * (headers or body), counted from the attempt's start; 0 = none.
	 * A transport failure like any other: retried if no body byte was
	 * delivered yet. */
	long idle_timeout_ms;
	unsigned max_retries;		/* 0 = default (4); HTTP_RETRIES_NONE */
	unsigned base_backoff_ms;	/* 0 = default (500 ms) */
};

/* Valid only during the done callback; copy what you keep. */
struct http_result {
	int ok;			/* a 2xx was received in full */
	long status;		/* final HTTP status of the last attempt, 0 if
				   none arrived */
	/* One line, NUL-terminated, when !ok; NULL when ok. "HTTP 401" for
	 * a status, curl's message for a transport failure, "request timed
	 * out after 30 s", "aborted by the data callback". */
	const char *error;
	/* Non-2xx: the response body, at most HTTP_ERROR_BODY_MAX bytes, NUL
	 * terminated (may hold NULs); NULL and 0 otherwise. */
	const char *body;
	size_t body_len;
	/* The x-request-id response header of the last attempt, or NULL. */
	const char *request_id;
	unsigned attempts;	/* attempts started, >= 1 */
	int transport;		/* a connection or timeout failure */
	int partial;		/* ended after 2xx body bytes were delivered */
	int timed_out;		/* timeout_ms expired */
	int aborted;		/* the data callback returned -1 */
	/* !ok and the last failure is one the retry rule above retries
	 * (unreachable, reset, 408/409/429/5xx, x-should-retry: true), no
	 * body byte was delivered and timeout_ms did not expire: only the
	 * retry budget (or the deadline) ended it. A later try may work. */
	int retryable;
	/* The last attempt's retry-after-ms or retry-after in ms (rounded
	 * up, capped at HTTP_RETRY_AFTER_MAX_MS); 0 when it sent none. */
	uint64_t retry_after_ms;
};

/*
 * Called from the loop, never from inside http_post(). A callback may call
 * http_post() and http_cancel() (on any request, its own included), but
 * never http_free(). Any member may be NULL.
 */
struct http_callbacks {
	/* The 2xx status, at most once per request: just before the first
	 * data call, or before done when the body is empty. */
	void (*status)(void *ctx, long code);
	/* Body bytes of a 2xx response as they arrive. Return 0, or -1 to
	 * abort the request (done follows with aborted = 1). */
	int (*data)(void *ctx, const char *p, size_t n);
	/* Exactly once per request unless it was cancelled. */
	void (*done)(void *ctx, const struct http_result *r);
};

/*
 * Loads libcurl (once; every function here does it at its first call):
 * 0, or -1 with one line that names the library and why in err (at most
 * len bytes; err may be NULL). Only what uses the client pays for it.
 */
int http_load(char *err, size_t len);
/* A client on l, which must outlive it. NULL / ENOMEM (or EIO when
 * libcurl cannot be loaded or initialised). */
struct http *http_new(struct loop *l);
/* Cancels every request (no done callbacks) and frees h. Not from inside
 * an http callback. Accepts NULL. */
void http_free(struct http *h);

/*
 * Starts a POST of o->body to o->url; cb is copied, ctx is passed back to
 * every callback. Returns a request id > 0, or 0 with errno EINVAL (no
 * url, body NULL with body_len > 0, a header with CR or LF, a negative
 * timeout) or ENOMEM. The first attempt begins on the next loop turn.
 */
uint64_t http_post(struct http *h, const struct http_request_opts *o,
    const struct http_callbacks *cb, void *ctx);

/*
 * The wait before try n + 1 of a caller that waits out an outage after
 * the quick retries (n = waits so far, from 0): HTTP_OUTAGE_BASE_MS * 2^n
 * capped at HTTP_OUTAGE_MAX_MS, or the server's retry_after_ms when that
 * is longer (itself capped at HTTP_RETRY_AFTER_MAX_MS). No jitter: one
 * client, seconds apart. Pure.
 */
/*
 * Whether url can be a model endpoint's base: absolute, http or https, a
 * host (libcurl's parser, the one the requests use). 0, or -1 with why
 * ("no scheme", "scheme ftp is not http or https", ...) in why.
 */
int http_url_check(const char *url, char *why, size_t len);
/*
 * url as it may be shown: without its user name and password (they may
 * be a secret). Malloc'ed; NULL when url does not parse (then it is not
 * shown at all) or ENOMEM.
 */
char *http_url_shown(const char *url);
uint64_t http_outage_delay_ms(unsigned n, uint64_t retry_after_ms);

/* Stops request id at once, in flight or waiting to retry; no callback
 * for it runs afterwards. Unknown and finished ids are ignored. */
void http_cancel(struct http *h, uint64_t id);

#endif
