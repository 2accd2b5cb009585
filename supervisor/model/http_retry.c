/*
 * http_retry.c - the HTTP client's retry rule (see http.h): which
 * transport errors and statuses are retried, what the server's
 * retry-after, retry-after-ms and x-should-retry headers say, the backoff
 * with jitter between attempts, and the delay between calls in an outage.
 */
#include "supervisor/model/http_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- retry policy ---- */

static const CURLcode retryable_curl[] = {
	CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST,
	CURLE_COULDNT_CONNECT, CURLE_WEIRD_SERVER_REPLY, CURLE_PARTIAL_FILE,
	CURLE_OPERATION_TIMEDOUT, CURLE_SSL_CONNECT_ERROR, CURLE_GOT_NOTHING,
	CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
	CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR,
};

int
http_curl_retryable(CURLcode rc)
{
	size_t i;

	for (i = 0; i < sizeof retryable_curl / sizeof retryable_curl[0]; i++)
		if (retryable_curl[i] == rc)
			return 1;
	return 0;
}

int
http_status_retryable(const struct http_req *r)
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
uint64_t
http_retry_after_ms(const struct http_req *r)
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
	uint64_t ra = http_retry_after_ms(r);
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
int
http_req_retry(struct http_req *r)
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
	r->start_timer = loop_timer(r->h->loop, delay, http_req_start, r);
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
	else if (!seconds || (t = http_lib.getdate(v, NULL)) == (time_t)-1)
		return -1;
	else
		d = difftime(t, time(NULL)) * 1000;
	return d > 0 && d < 1e15 ? d : -1;	/* also rejects NaN */
}

void
http_hdr_value(struct http_req *r, const char *name, const char *v)
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
