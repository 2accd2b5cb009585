/*
 * test_head.c - unit tests for supervisor/egress/head.c: CONNECT and
 * absolute-form heads parsed, incomplete ones waited for, malformed ones
 * answered with their status; the origin server's head (origin-form,
 * Host from the URL, no proxy or hop-by-hop headers, Connection: close);
 * a real ClientHello's server name, and truncated or forged hellos.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/egress/head.h"
#include "tests/unit/egress/hello.h"

static int
parse(const char *s, struct head *h, int *status)
{
	const char *why = NULL;
	int rc = head_parse(s, strlen(s), h, status, &why);

	if (rc < 0)
		assert_non_null(why);
	return rc;
}

static void
test_connect(void **state)
{
	struct head h;
	int st;

	(void)state;
	assert_int_equal(parse("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi."
	    "org:443\r\n\r\nrest", &h, &st), 0);
	assert_true(h.connect);
	assert_string_equal(h.host, "pypi.org");
	assert_int_equal(h.port, 443);
	assert_int_equal(h.len, strlen("CONNECT PyPI.org:443 HTTP/1.1\r\n"
	    "Host: pypi.org:443\r\n\r\n"));
	assert_int_equal(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &h,
	    &st), 0);
	assert_string_equal(h.host, "::1");
	assert_int_equal(h.port, 8443);
	assert_int_equal(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: x\r\n",
	    &h, &st), 1);
	assert_int_equal(parse("CONNECT pypi.org HTTP/1.1\r\n\r\n", &h, &st),
	    -1);
	assert_int_equal(st, 400);
	assert_int_equal(parse("CONNECT a:0 HTTP/1.1\r\n\r\n", &h, &st), -1);
	assert_int_equal(parse("CONNECT a:65536 HTTP/1.1\r\n\r\n", &h, &st),
	    -1);
	assert_int_equal(parse("CONNECT u@a:443 HTTP/1.1\r\n\r\n", &h, &st),
	    -1);
	assert_int_equal(parse("CONNECT a:b:443 HTTP/1.1\r\n\r\n", &h, &st),
	    -1);
}

static void
test_malformed(void **state)
{
	static const struct { const char *in; int status; } t[] = {
		{ "GET /x HTTP/1.1\r\n\r\n", 400 },
		{ "GET https://a/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET http://a/ HTTP/2.0\r\n\r\n", 400 },
		{ "GET http://a/ HTTP/1.1\nHost: a\n\n", 400 },
		{ "GET http://a/ HTTP/1.1\r\n folded\r\n\r\n", 400 },
		{ "GET http://a/ HTTP/1.1\r\nnocolon\r\n\r\n", 400 },
		{ "GET http://a/ HTTP/1.1\r\nX: a\x01\r\n\r\n", 400 },
		{ "GET  http://a/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET http:///x HTTP/1.1\r\n\r\n", 400 },
		{ "\r\n\r\n", 400 },
	};
	char big[HEAD_MAX + 10];
	struct head h;
	const char *why;
	size_t i;
	int st;

	(void)state;
	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		st = 0;
		assert_int_equal(parse(t[i].in, &h, &st), -1);
		assert_int_equal(st, t[i].status);
	}
	memset(big, 'a', sizeof big);
	memcpy(big, "GET http://a/ HTTP/1.1\r\nX: ", 27);
	assert_int_equal(head_parse(big, sizeof big, &h, &st, &why), -1);
	assert_int_equal(st, 431);
	assert_int_equal(head_parse(big, 100, &h, &st, &why), 1);
}

static void
test_rewrite(void **state)
{
	const char *in = "POST http://Example.com:8080/a/b?c=d HTTP/1.1\r\n"
	    "Host: evil.example\r\nProxy-Connection: keep-alive\r\n"
	    "Proxy-Authorization: Basic eA==\r\nContent-Length: 2\r\n"
	    "Connection: keep-alive\r\nX-Y: z\r\n\r\nhi";
	char out[1024];
	struct head h;
	size_t n;
	int st;

	(void)state;
	assert_int_equal(parse(in, &h, &st), 0);
	assert_false(h.connect);
	assert_string_equal(h.method, "POST");
	assert_string_equal(h.host, "example.com");
	assert_int_equal(h.port, 8080);
	n = head_rewrite(in, &h, out, sizeof out);
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, "POST /a/b?c=d HTTP/1.1\r\nHost: "
	    "example.com:8080\r\nContent-Length: 2\r\nX-Y: z\r\n"
	    "Connection: close\r\n\r\n");
	assert_int_equal(parse("GET http://a?x HTTP/1.0\r\n\r\n", &h, &st), 0);
	assert_int_equal(h.port, 80);
	n = head_rewrite("GET http://a?x HTTP/1.0\r\n\r\n", &h, out,
	    sizeof out);
	out[n] = '\0';
	assert_string_equal(out, "GET /?x HTTP/1.0\r\nHost: a\r\n"
	    "Connection: close\r\n\r\n");
	assert_int_equal(head_rewrite(in, &h, out, 10), 0);
}

static void
test_sni(void **state)
{
	unsigned char buf[sizeof hello];
	char name[256];
	size_t i;

	(void)state;
	assert_int_equal(head_sni(hello, sizeof hello, name, sizeof name), 0);
	assert_string_equal(name, "files.pypi.org");
	for (i = 0; i < sizeof hello; i++)	/* every prefix: wait */
		assert_int_equal(head_sni(hello, i, name, sizeof name), 1);
	assert_int_equal(head_sni((const unsigned char *)"GET / HTTP/1.1", 14,
	    name, sizeof name), 2);
	/* a hello longer than its record: refused, not skipped */
	memcpy(buf, hello, sizeof buf);
	buf[7]++;
	assert_int_equal(head_sni(buf, sizeof buf, name, sizeof name), -1);
	/* no room for the name */
	assert_int_equal(head_sni(hello, sizeof hello, name, 5), -1);
	/* every single-byte corruption parses or fails, never reads out */
	for (i = 0; i < sizeof hello; i++) {
		memcpy(buf, hello, sizeof buf);
		buf[i] ^= 0xa5;
		(void)head_sni(buf, sizeof buf, name, sizeof name);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_sni),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
