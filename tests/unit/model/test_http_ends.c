/*
 * test_http_ends.c - the HTTP client against a real server on 127.0.0.1:
 * how requests end early: timeouts (mid-body, before headers, idle), the
 * deadline cutting a backoff, the outage delay, concurrency, cancels (in
 * flight, from a callback, in backoff), aborts, reentry from callbacks,
 * freeing a busy client, bad arguments.
 *
 * Callbacks only record; assertions run after loop_run() returns, since a
 * failing assertion must not longjmp through libcurl. Time is measured with
 * the loop's clock, never slept for. The server: http_server.h.
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
#include "tests/unit/model/http_server.h"
#include "tests/unit/model/http_client.h"

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

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
	/* 1 s, not less: the test server's first chunk must come within it
	 * even on a loaded machine (else that attempt is retried as one that
	 * got nothing); its second comes after 3 s */
	struct http_request_opts o = { .idle_timeout_ms = 1000 };
	struct got g = { 0 };

	run_one(*state, "/slow/b", o, &g);
	assert_false(g.r.ok);
	assert_true(g.r.partial);
	assert_true(g.r.transport);
	assert_false(g.r.timed_out);
	assert_int_equal(g.r.attempts, 1);
	assert_string_equal(g.error, "no data received for 1 s");
	assert_true(elapsed_ms(&g) >= 1000);
	assert_true(elapsed_ms(&g) < 2900);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
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
