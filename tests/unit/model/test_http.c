/*
 * test_http.c - the HTTP client against a real server on 127.0.0.1:
 * streaming, request bodies and headers, and retries (Retry-After in its
 * forms, x-should-retry, drops before the body, refused connections).
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

/* The body (with NUL bytes, and 2 MiB sent without "Expect:
 * 100-continue", which would stall it a second) and the caller's
 * headers arrive as given. */
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
	    "ct=application/json;len=3;sum=%u;expect=", sum);
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
	    "ct=application/json;len=%zu;sum=%u;expect=", big_len, sum);
	assert_string_equal(g2.data, want);
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
	};

	return cmocka_run_group_tests(tests, server_start, server_stop);
}
