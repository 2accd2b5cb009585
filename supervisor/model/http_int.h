/*
 * http_int.h - private to the HTTP client's files (http.c, http_xfer.c,
 * http_retry.c): the client and request state and the functions they
 * share. With them it is the only place that includes <curl/curl.h>;
 * the client's public face is http.h.
 */
#ifndef AGENTZ_HTTP_INT_H
#define AGENTZ_HTTP_INT_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/http.h"

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

/* http.c: the client, curl's sockets and timer on the loop. */
void http_req_stop(struct http_req *r);
void http_req_free(struct http_req *r);
void http_req_unlink(struct http_req *r);
void http_req_timers_cancel(struct http_req *r);
void http_reap_zombies(struct http *h);

/* http_xfer.c: one request, attempt by attempt. */
void http_req_start(struct loop *l, void *ctx);
void http_req_attempt_done(struct http_req *r, CURLcode rc);

/* http_retry.c: the retry rule. */
int http_curl_retryable(CURLcode rc);
int http_status_retryable(const struct http_req *r);
uint64_t http_retry_after_ms(const struct http_req *r);
int http_req_retry(struct http_req *r);
void http_hdr_value(struct http_req *r, const char *name, const char *v);

#endif
