/*
 * test_sse_parse.c - unit tests for supervisor/model/sse.c: SSE framing
 * edge cases one by one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/model/response.h"
#include "supervisor/model/sse.h"
#include "tests/unit/model/sse_helpers.h"
#include "tests/unit/model/sse_col.h"

static void
assert_event(const struct col *c, size_t i, const char *type,
    const char *data, const char *id)
{
	assert_true(i < c->n);
	assert_string_equal(c->ev[i].type, type);
	assert_int_equal(c->ev[i].len, strlen(data));
	assert_memory_equal(c->ev[i].data, data, strlen(data));
	assert_string_equal(c->ev[i].id, id);
}

/*
 * Parse s[0..n) in chunks of `chunk` bytes (0: all at once) into c.
 * Returns the result of the last sse_feed(); *finish gets sse_finish().
 */
static int
parse_chunked(const char *s, size_t n, size_t max_event, size_t chunk,
    struct col *c, int *finish)
{
	struct sse *sse;
	size_t off = 0, k;
	int rc = SSE_OK;

	assert_non_null(sse = sse_new(col_cb, c, max_event));
	if (chunk == 0)
		chunk = n > 0 ? n : 1;
	while (off < n) {
		k = n - off < chunk ? n - off : chunk;
		rc = sse_feed(sse, s + off, k);
		off += k;
	}
	*finish = sse_finish(sse);
	sse_free(sse);
	return rc;
}

/* Parse with the cuts given (increasing offsets), then finish. */
static int
parse_cuts(const char *s, size_t n, const size_t *cuts, size_t ncuts,
    struct col *c)
{
	struct sse *sse;
	size_t i, off = 0;
	int rc = SSE_OK;

	assert_non_null(sse = sse_new(col_cb, c, 0));
	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		rc = sse_feed(sse, s + off, end - off);
		assert_int_equal(rc, SSE_OK);
		off = end;
	}
	rc = sse_finish(sse);
	sse_free(sse);
	return rc;
}

static void
parse_str(const char *s, struct col *c, int want_finish)
{
	int fin;

	assert_int_equal(parse_chunked(s, strlen(s), 0, 0, c, &fin), SSE_OK);
	assert_int_equal(fin, want_finish);
}

static void
test_sse_basic(void **state)
{
	struct col c = { 0 };

	(void)state;
	parse_str("event: a\ndata: hello\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 1);
	assert_event(&c, 0, "a", "hello", "");
	col_clear(&c);

	/* Without an event field the type is "message". */
	parse_str("data: {\"x\":1}\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 1);
	assert_event(&c, 0, "message", "{\"x\":1}", "");
	col_clear(&c);
}

static void
test_sse_line_endings(void **state)
{
	static const char *const endings[] = { "\n", "\r\n", "\r" };
	struct col c = { 0 };
	char buf[256];
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(endings); i++) {
		const char *e = endings[i];

		(void)snprintf(buf, sizeof(buf),
		    "event: a%sdata: x%sdata: y%s%sdata: z%s%s",
		    e, e, e, e, e, e);
		parse_str(buf, &c, SSE_OK);
		assert_int_equal(c.n, 2);
		assert_event(&c, 0, "a", "x\ny", "");
		assert_event(&c, 1, "message", "z", "");
		col_clear(&c);
	}
	/* Mixed in one stream; "\n\r\n" is LF then a CRLF blank line. */
	parse_str("event: a\rdata: x\r\ndata: y\n\r\ndata: z\r\r", &c, SSE_OK);
	assert_int_equal(c.n, 2);
	assert_event(&c, 0, "a", "x\ny", "");
	assert_event(&c, 1, "message", "z", "");
	col_clear(&c);
}

static void
test_sse_crlf_split(void **state)
{
	static const char s[] = "data: a\r\ndata: b\r\n\r\n";
	size_t cut;
	struct col c = { 0 };

	(void)state;
	/* Cutting between CR and LF must not make the LF a blank line. */
	for (cut = 0; cut <= sizeof(s) - 1; cut++) {
		assert_int_equal(parse_cuts(s, sizeof(s) - 1, &cut, 1, &c),
		    SSE_OK);
		assert_int_equal(c.n, 1);
		assert_event(&c, 0, "message", "a\nb", "");
		col_clear(&c);
	}
}

/* Every 1-, 2- and 3-chunk split of a stream rich in hazards. */
static void
test_sse_every_split(void **state)
{
	static const char s[] =
	    "\xef\xbb\xbf: comment \xe2\x82\xac\r\n"
	    "event: t\xc3\xa9st\r\n"
	    "data: \xe2\x82\xac" "1\r\n"
	    "data:\xf0\x9f\x98\x80\r\r"
	    "id: 42\n"
	    "data: third\r\n\r\n"
	    ": tail";
	size_t n = sizeof(s) - 1, cuts[2];
	struct col want = { 0 }, got = { 0 };
	char ctx[64];
	int fin;

	(void)state;
	parse_str(s, &want, SSE_OK);
	assert_int_equal(want.n, 2);
	assert_event(&want, 0, "t\xc3\xa9st", "\xe2\x82\xac" "1\n"
	    "\xf0\x9f\x98\x80", "");
	assert_event(&want, 1, "message", "third", "42");

	assert_int_equal(parse_chunked(s, n, 0, 1, &got, &fin), SSE_OK);
	assert_int_equal(fin, SSE_OK);
	col_equal(&got, &want, "1-byte chunks");
	col_clear(&got);
	for (cuts[0] = 0; cuts[0] <= n; cuts[0]++) {
		for (cuts[1] = cuts[0]; cuts[1] <= n; cuts[1]++) {
			(void)snprintf(ctx, sizeof(ctx), "cuts %zu,%zu",
			    cuts[0], cuts[1]);
			assert_int_equal(parse_cuts(s, n, cuts, 2, &got),
			    SSE_OK);
			col_equal(&got, &want, ctx);
			col_clear(&got);
		}
	}
	col_clear(&want);
}

static void
test_sse_comments(void **state)
{
	struct col c = { 0 };
	char *big;
	int fin;

	(void)state;
	parse_str(": hi\n:\ndata: x\n: between\ndata: y\n\n:data: no\n\n", &c,
	    SSE_OK);
	assert_int_equal(c.n, 1);
	assert_event(&c, 0, "message", "x\ny", "");
	col_clear(&c);

	parse_str(": OPENROUTER PROCESSING\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 0);

	/* Comments are not buffered, so not limited either. */
	assert_non_null(big = malloc(100003));
	big[0] = ':';
	memset(big + 1, 'c', 100000);
	big[100001] = '\n';
	big[100002] = '\n';
	assert_int_equal(parse_chunked(big, 100003, 8, 4096, &c, &fin),
	    SSE_OK);
	assert_int_equal(fin, SSE_OK);
	assert_int_equal(c.n, 0);
	free(big);
}

static void
test_sse_fields(void **state)
{
	struct col c = { 0 };

	(void)state;
	/* A field with no colon has an empty value. */
	parse_str("data\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 1);
	assert_event(&c, 0, "message", "", "");
	col_clear(&c);
	parse_str("data\ndata\n\n", &c, SSE_OK);
	assert_event(&c, 0, "message", "\n", "");
	col_clear(&c);
	parse_str("data:\n\n", &c, SSE_OK);
	assert_event(&c, 0, "message", "", "");
	col_clear(&c);

	/* Exactly one space after the colon is dropped. */
	parse_str("data:x\n\ndata:  x\n\ndata: x \n\ndata: a:b\n\n", &c,
	    SSE_OK);
	assert_int_equal(c.n, 4);
	assert_event(&c, 0, "message", "x", "");
	assert_event(&c, 1, "message", " x", "");
	assert_event(&c, 2, "message", "x ", "");
	assert_event(&c, 3, "message", "a:b", "");
	col_clear(&c);

	/* Empty event name, unknown and wrongly cased fields. */
	parse_str("event\ndata: a\n\nfoo: bar\nDATA: y\nEvent: q\ndata: z\n\n",
	    &c, SSE_OK);
	assert_int_equal(c.n, 2);
	assert_event(&c, 0, "message", "a", "");
	assert_event(&c, 1, "message", "z", "");
	col_clear(&c);

	/* The type resets after a dispatch and after a data-less block. */
	parse_str("event: x\n\ndata: y\n\nevent: t\ndata: 1\n\ndata: 2\n\n",
	    &c, SSE_OK);
	assert_int_equal(c.n, 3);
	assert_event(&c, 0, "message", "y", "");
	assert_event(&c, 1, "t", "1", "");
	assert_event(&c, 2, "message", "2", "");
	col_clear(&c);
}

static void
feed_str(struct sse *sse, const char *s)
{
	assert_int_equal(sse_feed(sse, s, strlen(s)), SSE_OK);
}

static void
test_sse_id_retry(void **state)
{
	static const char s[] =
	    "id: 7\ndata: a\n\ndata: b\n\n"
	    "id\ndata: c\n\n"
	    "id: 5\nid: x\0y\ndata: d\n\n"
	    "retry: 1500\n";
	struct col c = { 0 };
	struct sse *sse;

	(void)state;
	assert_non_null(sse = sse_new(col_cb, &c, 0));
	assert_int_equal(sse_retry_ms(sse), -1);
	assert_string_equal(sse_last_id(sse), "");
	assert_int_equal(sse_feed(sse, s, sizeof(s) - 1), SSE_OK);
	assert_int_equal(c.n, 4);
	assert_event(&c, 0, "message", "a", "7");
	assert_event(&c, 1, "message", "b", "7");
	assert_event(&c, 2, "message", "c", "");
	/* An id containing NUL is ignored. */
	assert_event(&c, 3, "message", "d", "5");
	assert_int_equal(sse_retry_ms(sse), 1500);
	assert_string_equal(sse_last_id(sse), "5");

	/* Invalid retry values are ignored. */
	feed_str(sse, "retry: 15x\nretry:\nretry: -1\n"
	    "retry: 99999999999999999999999\n");
	assert_int_equal(sse_retry_ms(sse), 1500);
	feed_str(sse, "retry: 0\n");
	assert_int_equal(sse_retry_ms(sse), 0);

	/* id and retry are not pending event data, and survive finish. */
	assert_int_equal(sse_finish(sse), SSE_OK);
	assert_string_equal(sse_last_id(sse), "5");
	assert_int_equal(sse_retry_ms(sse), 0);
	assert_int_equal(sse_feed(sse, "data: e\n\n", 9), SSE_OK);
	assert_event(&c, 4, "message", "e", "5");
	sse_free(sse);
	col_clear(&c);
}

static void
test_sse_bom(void **state)
{
	static const char s[] = "\xef\xbb\xbf" "data: x\n\n";
	struct col c = { 0 };
	size_t cut;
	struct sse *sse;

	(void)state;
	for (cut = 0; cut <= 4; cut++) {
		assert_int_equal(parse_cuts(s, sizeof(s) - 1, &cut, 1, &c),
		    SSE_OK);
		assert_int_equal(c.n, 1);
		assert_event(&c, 0, "message", "x", "");
		col_clear(&c);
	}
	/* Only one BOM, only at the start: the rest is ordinary bytes. */
	parse_str("\xef\xbb\xbf\xef\xbb\xbf" "data: x\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 0);
	parse_str("\xef\xbb" "data: x\n\n", &c, SSE_OK);
	assert_int_equal(c.n, 0);
	parse_str("data: \xef\xbb\xbfx\n\n", &c, SSE_OK);
	assert_event(&c, 0, "message", "\xef\xbb\xbfx", "");
	col_clear(&c);
	parse_str("\xef\xbb\xbf", &c, SSE_OK);
	parse_str("\xef\xbb", &c, SSE_PARTIAL);
	assert_int_equal(c.n, 0);

	/* After sse_finish a new stream may start with a BOM again. */
	assert_non_null(sse = sse_new(col_cb, &c, 0));
	assert_int_equal(sse_feed(sse, s, sizeof(s) - 1), SSE_OK);
	assert_int_equal(sse_finish(sse), SSE_OK);
	assert_int_equal(sse_feed(sse, s, sizeof(s) - 1), SSE_OK);
	assert_int_equal(c.n, 2);
	sse_free(sse);
	col_clear(&c);
}

static void
test_sse_finish(void **state)
{
	static const struct {
		const char *in;
		size_t events;
		int finish;
	} cases[] = {
		{ "", 0, SSE_OK },
		{ "\n\n\n", 0, SSE_OK },
		{ "data: x\n", 0, SSE_PARTIAL },
		{ "data: x", 0, SSE_PARTIAL },
		{ "data: x\n\n", 1, SSE_OK },
		{ "data: x\r", 0, SSE_PARTIAL },
		{ "data: x\r\r", 1, SSE_OK },
		{ "data: x\r\n\r", 1, SSE_OK },
		{ "event: a\n", 0, SSE_PARTIAL },
		{ "id", 0, SSE_PARTIAL },
		{ "id: 1\n", 0, SSE_OK },
		{ ": c", 0, SSE_OK },
		{ ": c\n", 0, SSE_OK },
		{ "data: x\n\n: bye", 1, SSE_OK },
		{ "data: x\n\ndata", 1, SSE_PARTIAL },
		{ "data: [DONE]\n\n", 1, SSE_OK },
	};
	struct col c = { 0 };
	struct sse *sse;
	size_t i;
	int fin;

	(void)state;
	for (i = 0; i < NELEM(cases); i++) {
		assert_int_equal(parse_chunked(cases[i].in, strlen(cases[i].in),
		    0, 1, &c, &fin), SSE_OK);
		check_num(cases[i].in, "events", (long long)c.n,
		    (long long)cases[i].events);
		check_num(cases[i].in, "finish", fin, cases[i].finish);
		col_clear(&c);
	}
	/* The pending event is discarded, not carried into the next. */
	assert_non_null(sse = sse_new(col_cb, &c, 0));
	assert_int_equal(sse_feed(sse, "data: x\n", 8), SSE_OK);
	assert_int_equal(sse_finish(sse), SSE_PARTIAL);
	assert_int_equal(sse_feed(sse, "data: y\n\n", 9), SSE_OK);
	assert_int_equal(c.n, 1);
	assert_event(&c, 0, "message", "y", "");
	sse_free(sse);
	col_clear(&c);
}

static void
test_sse_limit(void **state)
{
	static const struct {
		const char *in;
		int rc;
	} cases[] = {
		{ "data: 12345678\n\n", SSE_OK },
		{ "data: 123456789\n\n", SSE_ETOOBIG },
		{ "data: 1234\ndata: 123\n\n", SSE_OK },	/* 8 bytes */
		{ "data: 1234\ndata: 1234\n\n", SSE_ETOOBIG },
		{ "data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\n",
		    SSE_OK },				/* 8 newlines */
		{ "data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n"
		    "data\n\n", SSE_ETOOBIG },
		{ "event: 123456789012345678901234567890\n", SSE_ETOOBIG },
		{ "x-unknown-field-name-that-is-long: 1\n", SSE_ETOOBIG },
	};
	struct col c = { 0 };
	struct sse *sse;
	size_t i, chunk;
	int fin, rc;

	(void)state;
	for (i = 0; i < NELEM(cases); i++) {
		for (chunk = 0; chunk <= 1; chunk++) {
			rc = parse_chunked(cases[i].in, strlen(cases[i].in), 8,
			    chunk, &c, &fin);
			check_num(cases[i].in, "feed", rc, cases[i].rc);
			check_num(cases[i].in, "finish", fin,
			    cases[i].rc == SSE_OK ? SSE_OK : cases[i].rc);
			check_num(cases[i].in, "events", (long long)c.n,
			    cases[i].rc == SSE_OK && cases[i].in[0] == 'd');
			col_clear(&c);
		}
	}
	/* The error is sticky. */
	assert_non_null(sse = sse_new(col_cb, &c, 8));
	assert_int_equal(sse_feed(sse, "data: 123456789\n", 16), SSE_ETOOBIG);
	assert_int_equal(sse_feed(sse, "\n", 1), SSE_ETOOBIG);
	assert_int_equal(sse_feed(sse, "data: 1\n\n", 9), SSE_ETOOBIG);
	assert_int_equal(sse_finish(sse), SSE_ETOOBIG);
	assert_int_equal(c.n, 0);
	sse_free(sse);
}

static void
test_sse_stop(void **state)
{
	struct col c = { 0 };
	struct sse *sse;

	(void)state;
	c.stop_at = 1;
	assert_non_null(sse = sse_new(col_cb, &c, 0));
	assert_int_equal(sse_feed(sse, "data: a\n\ndata: b\n\n", 18),
	    SSE_ESTOPPED);
	assert_int_equal(c.n, 1);
	assert_int_equal(sse_feed(sse, "data: c\n\n", 9), SSE_ESTOPPED);
	assert_int_equal(sse_finish(sse), SSE_ESTOPPED);
	assert_int_equal(c.n, 1);
	sse_free(sse);
	col_clear(&c);
}

static void
test_sse_nul_and_api(void **state)
{
	struct col c = { 0 };
	struct sse *sse;
	int fin;

	(void)state;
	assert_int_equal(parse_chunked("data: a\0b\n\n", 11, 0, 0, &c, &fin),
	    SSE_OK);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.ev[0].len, 3);
	assert_memory_equal(c.ev[0].data, "a\0b", 3);
	col_clear(&c);

	errno = 0;
	assert_null(sse_new(NULL, NULL, 0));
	assert_int_equal(errno, EINVAL);
	sse_free(NULL);
	assert_non_null(sse = sse_new(col_cb, &c, 0));
	assert_int_equal(sse_feed(sse, NULL, 0), SSE_OK);
	sse_free(sse);
	assert_string_equal(sse_strerror(SSE_PARTIAL),
	    "stream ended mid-event");
	assert_string_equal(sse_strerror(SSE_ETOOBIG),
	    "event exceeds the size limit");
	assert_non_null(sse_strerror(SSE_ENOMEM));
	assert_non_null(sse_strerror(SSE_ESTOPPED));
	assert_non_null(sse_strerror(12345));
}

/* Random stream generator for the property test. */

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sse_basic),
		cmocka_unit_test(test_sse_line_endings),
		cmocka_unit_test(test_sse_crlf_split),
		cmocka_unit_test(test_sse_every_split),
		cmocka_unit_test(test_sse_comments),
		cmocka_unit_test(test_sse_fields),
		cmocka_unit_test(test_sse_id_retry),
		cmocka_unit_test(test_sse_bom),
		cmocka_unit_test(test_sse_finish),
		cmocka_unit_test(test_sse_limit),
		cmocka_unit_test(test_sse_stop),
		cmocka_unit_test(test_sse_nul_and_api),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
