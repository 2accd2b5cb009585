/*
 * http_int.h - private to the HTTP client's files (http.c, http_xfer.c,
 * http_retry.c): the client and request state and the functions they
 * share. With them it is the only place that includes <curl/curl.h>;
 * the client's public face is http.h. libcurl itself is loaded at the
 * first use (http_lib.c): the calls go through http_lib's pointers.
 */
#ifndef AGENTZ_HTTP_INT_H
#define AGENTZ_HTTP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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

/*
 * http_lib.c: libcurl's functions this client calls, set by http_load()
 * (each member is the libcurl function of the same name after curl_).
 */
struct http_lib {
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	const char *(*multi_strerror)(CURLMcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	CURLU *(*url)(void);
	CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
	CURLUcode (*url_get)(CURLU *, CURLUPart, char **, unsigned int);
	void (*url_cleanup)(CURLU *);
	const char *(*url_strerror)(CURLUcode);
	void (*free)(void *);
	time_t (*getdate)(const char *, const time_t *);
	CURLcode (*global_init)(long);
};
extern struct http_lib http_lib;

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
