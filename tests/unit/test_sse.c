/*
 * test_sse.c - unit tests for supervisor/model/sse.c and supervisor/model/response.c.
 *
 * 1. SSE framing edge cases one by one, then a seeded property test
 *    (random events, line endings, comments, BOM, random chunking).
 * 2. The response assembler on small synthetic streams.
 * 3. Every file of the recorded fixtures ($AGENTZ_FIXTURES, default
 *    ../shared/fixtures/responses) replayed through both modules in random
 *    chunk sizes (1-byte chunks included), as recorded and rewritten
 *    (CRLF, CR, BOM; final output stripped; every *.done event dropped;
 *    cut short), checked against values taken from the recordings. A
 *    fixture file without an entry in fx_expects fails the test.
 * 4. The fast path (a scanner of jansson's grammar) against json_loadb():
 *    two assemblers fed the same tricky events, every fixture as recorded
 *    and randomly mutated, and the bodies; everything observable must be
 *    identical, and the fast path must take what it is meant to take.
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

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* --- helpers ----------------------------------------------------------- */

static uint64_t
rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void
check_str(const char *ctx, const char *what, const char *got,
    const char *want)
{
	if (got == NULL && want == NULL)
		return;
	if (got == NULL || want == NULL || strcmp(got, want) != 0)
		fail_msg("%s: %s is \"%s\", want \"%s\"", ctx, what,
		    got != NULL ? got : "(null)",
		    want != NULL ? want : "(null)");
}

static void
check_prefix(const char *ctx, const char *what, const char *got,
    const char *want)
{
	if (got == NULL || strncmp(got, want, strlen(want)) != 0)
		fail_msg("%s: %s is \"%.80s\", want it to start with \"%s\"",
		    ctx, what, got != NULL ? got : "(null)", want);
}

static void
check_num(const char *ctx, const char *what, long long got, long long want)
{
	if (got != want)
		fail_msg("%s: %s is %lld, want %lld", ctx, what, got, want);
}

static char *
read_file(const char *path, size_t *lenp)
{
	FILE *f;
	char *buf = NULL;
	long n = 0;

	*lenp = 0;
	if ((f = fopen(path, "rbe")) == NULL) {
		fail_msg("cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		fail_msg("cannot size %s", path);
	assert_non_null(buf = malloc((size_t)n + 1));
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		fail_msg("cannot read %s", path);
	buf[n] = '\0';
	assert_int_equal(fclose(f), 0);
	*lenp = (size_t)n;
	return buf;
}

/* --- 1. SSE ------------------------------------------------------------ */

struct rec {
	char *type;
	char *data;
	size_t len;
	char *id;
};

struct col {
	struct rec *ev;
	size_t n;
	size_t stop_at;		/* stop from this event on (1-based) */
};

static int
col_cb(void *ctx, const struct sse_event *ev)
{
	struct col *c = ctx;
	struct rec *r;

	assert_int_equal(ev->data[ev->data_len], '\0');
	assert_non_null(c->ev = realloc(c->ev, (c->n + 1) * sizeof(*c->ev)));
	r = &c->ev[c->n++];
	assert_non_null(r->type = strdup(ev->type));
	assert_non_null(r->id = strdup(ev->id));
	assert_non_null(r->data = malloc(ev->data_len + 1));
	memcpy(r->data, ev->data, ev->data_len + 1);
	r->len = ev->data_len;
	return c->stop_at != 0 && c->n >= c->stop_at;
}

static void
col_clear(struct col *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		free(c->ev[i].type);
		free(c->ev[i].data);
		free(c->ev[i].id);
	}
	free(c->ev);
	c->ev = NULL;
	c->n = 0;
}

static void
col_equal(const struct col *a, const struct col *b, const char *ctx)
{
	size_t i;

	check_num(ctx, "event count", (long long)a->n, (long long)b->n);
	for (i = 0; i < a->n; i++) {
		check_str(ctx, "type", a->ev[i].type, b->ev[i].type);
		check_str(ctx, "id", a->ev[i].id, b->ev[i].id);
		check_num(ctx, "data length", (long long)a->ev[i].len,
		    (long long)b->ev[i].len);
		if (memcmp(a->ev[i].data, b->ev[i].data, a->ev[i].len) != 0)
			fail_msg("%s: data of event %zu differs", ctx, i);
	}
}

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
struct gen {
	uint64_t rng;
	FILE		*out;
	const char *last_end;	/* ending of the previous line */
	struct col want;
	char id[32];
};

static void
gen_line(struct gen *g, const char *text, size_t len)
{
	static const char *const endings[] = { "\n", "\r\n", "\r" };
	const char *e = endings[rng_next(&g->rng) % 3];

	/* "\r" then an empty "\n" line would read as one CRLF. */
	if (len == 0 && strcmp(g->last_end, "\r") == 0 && strcmp(e, "\n") == 0)
		e = "\r\n";
	(void)fwrite(text, 1, len, g->out);
	(void)fputs(e, g->out);
	g->last_end = e;
}

/* A random value: ASCII, spaces, colons, NUL and multi-byte UTF-8. */
static size_t
gen_value(struct gen *g, char *buf, int allow_nul)
{
	static const char *const atoms[] = { "a", "Z", " ", ":", "{", "\"",
	    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbb\xbf",
	    "\0" };
	size_t n = 0, i, j, k = rng_next(&g->rng) % 9;
	size_t natoms = NELEM(atoms) - (allow_nul ? 0 : 1);

	for (i = 0; i < k; i++) {
		const char *a = atoms[rng_next(&g->rng) % natoms];
		size_t alen = a[0] == '\0' ? 1 : strlen(a);

		for (j = 0; j < alen; j++)
			buf[n++] = a[j];
	}
	return n;
}

static void
gen_event(struct gen *g)
{
	char line[128], val[64], type[64] = "", data[512];
	size_t vlen, plen, dlen = 0, i, lines = 1 + rng_next(&g->rng) % 3;
	struct sse_event ev;

	if (rng_next(&g->rng) % 3 == 0)
		gen_line(g, ": note", 6);
	if (rng_next(&g->rng) % 2 == 0) {
		vlen = gen_value(g, val, 0);
		memcpy(type, val, vlen);
		type[vlen] = '\0';
		gen_line(g, line, (size_t)snprintf(line, sizeof(line),
		    "event: %s", type));
	}
	for (i = 0; i < lines; i++) {
		vlen = gen_value(g, val, 1);
		/* "data:" + value only when that is unambiguous. */
		plen = (vlen > 0 && val[0] == ' ') || rng_next(&g->rng) % 2 ?
		    6 : 5;
		memcpy(line, "data: ", plen);
		memcpy(line + plen, val, vlen);
		gen_line(g, line, plen + vlen);
		memcpy(data + dlen, val, vlen);
		dlen += vlen;
		if (i + 1 < lines)
			data[dlen++] = '\n';
	}
	if (rng_next(&g->rng) % 4 == 0) {
		(void)snprintf(g->id, sizeof(g->id), "%u",
		    (unsigned)(rng_next(&g->rng) % 1000));
		gen_line(g, line, (size_t)snprintf(line, sizeof(line),
		    "id: %s", g->id));
	}
	if (rng_next(&g->rng) % 5 == 0)
		gen_line(g, "x-extra: 1", 10);
	gen_line(g, "", 0);
	data[dlen] = '\0';
	ev.type = type[0] != '\0' ? type : "message";
	ev.data = data;
	ev.data_len = dlen;
	ev.id = g->id;
	(void)col_cb(&g->want, &ev);
}

static void
test_sse_random(void **state)
{
	struct gen g;
	struct col got = { 0 };
	struct sse *sse;
	char *buf, ctx[32];
	size_t len, off, k, i, nev;
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= 300; seed++) {
		memset(&g, 0, sizeof(g));
		g.rng = seed;
		g.last_end = "\n";
		assert_non_null(g.out = open_memstream(&buf, &len));
		if (rng_next(&g.rng) % 4 == 0)
			(void)fputs("\xef\xbb\xbf", g.out);
		nev = rng_next(&g.rng) % 8;
		for (i = 0; i < nev; i++)
			gen_event(&g);
		assert_int_equal(fclose(g.out), 0);

		assert_non_null(sse = sse_new(col_cb, &got, 0));
		for (off = 0; off < len; off += k) {
			k = 1 + rng_next(&g.rng) % (seed % 2 ? 3 : 40);
			k = k < len - off ? k : len - off;
			assert_int_equal(sse_feed(sse, buf + off, k), SSE_OK);
		}
		assert_int_equal(sse_finish(sse), SSE_OK);
		sse_free(sse);
		(void)snprintf(ctx, sizeof(ctx), "seed %llu",
		    (unsigned long long)seed);
		col_equal(&got, &g.want, ctx);
		col_clear(&got);
		col_clear(&g.want);
		free(buf);
	}
}

/* --- 2. response assembler, synthetic ---------------------------------- */

static int
feed(struct response *r, const char *event, const char *json)
{
	return response_feed(r, event, json, strlen(json));
}

static json_t *
path_get(json_t *v, const char *path);
static const char *
path_str(json_t *v, const char *path);

static void
test_response_invalid_json(void **state)
{
	struct response *r;

	(void)state;
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, "response.created", "{\"type\":"
	    "\"response.created\",\"response\":{\"id\":\"resp_1\","
	    "\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}"),
	    RESPONSE_EV_STATE);
	assert_int_equal(feed(r, "response.output_text.delta", "{\"type\":"),
	    -1);
	assert_int_equal(response_status(r), RESPONSE_ERROR);
	check_prefix("", "error", response_error(r), "invalid JSON in event "
	    "response.output_text.delta: ");
	assert_null(response_error_code(r));
	assert_null(response_last_event(r));
	/* Broken: later events are refused, the first message stays. */
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.completed\"}"),
	    -1);
	assert_int_equal(response_finish(r, 0), -1);
	check_prefix("", "error", response_error(r), "invalid JSON in event "
	    "response.output_text.delta: ");
	assert_string_equal(response_id(r), "resp_1");
	response_free(r);

	assert_non_null(r = response_new());
	assert_int_equal(feed(r, "message", "nope"), -1);
	check_prefix("", "error", response_error(r), "invalid JSON in event "
	    "#1: ");
	response_free(r);

	/* jansson quotes the bad bytes; the message stays valid UTF-8, so
	 * the result can carry it (found by tests/fuzz/fuzz_jspan.c). */
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, "message", "{\"a\":\"\\u0\xd4\x9a" "9\"}"),
	    -1);
	assert_non_null(strchr(response_error(r), '?'));
	assert_non_null(response_result(r));
	response_free(r);

	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "[1]"), -1);
	assert_string_equal(response_error(r), "event #1 has no \"type\"");
	response_free(r);
	response_free(NULL);
}

static void
test_response_filler_unknown(void **state)
{
	struct response *r;

	(void)state;
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, "message", "[DONE]"), RESPONSE_EV_OTHER);
	assert_null(response_last_event(r));
	assert_int_equal(feed(r, "message", " \r\n"), RESPONSE_EV_OTHER);
	assert_int_equal(feed(r, "message", ""), RESPONSE_EV_OTHER);
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.web_search_call."
	    "searching\",\"item_id\":\"ws_1\",\"output_index\":0}"),
	    RESPONSE_EV_OTHER);
	assert_string_equal(json_string_value(json_object_get(
	    response_last_event(r), "type")),
	    "response.web_search_call.searching");
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.audio.delta\","
	    "\"delta\":\"abcd\"}"), RESPONSE_EV_DELTA);
	assert_int_equal(response_delta_bytes(r), 4);
	assert_int_equal(response_status(r), RESPONSE_IN_PROGRESS);
	assert_null(response_error(r));
	assert_null(response_usage(r));
	assert_null(response_id(r));
	response_free(r);
}

static const char *const text_prefix[] = {
	"{\"type\":\"response.created\",\"response\":{\"id\":\"resp_t\","
	    "\"model\":\"gpt-x\",\"status\":\"in_progress\",\"output\":[],"
	    "\"usage\":null}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":0,"
	    "\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":"
	    "\"assistant\",\"status\":\"in_progress\",\"content\":[]}}",
	"{\"type\":\"response.content_part.added\",\"item_id\":\"msg_1\","
	    "\"output_index\":0,\"content_index\":0,\"part\":{\"type\":"
	    "\"output_text\",\"text\":\"\",\"annotations\":[]}}",
	"{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\","
	    "\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}",
	"{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\","
	    "\"output_index\":0,\"content_index\":0,\"delta\":\"lo\"}",
};

static struct response *
text_response(void)
{
	struct response *r;
	size_t i;

	assert_non_null(r = response_new());
	for (i = 0; i < NELEM(text_prefix); i++)
		assert_true(feed(r, NULL, text_prefix[i]) >= 0);
	return r;
}

static void
test_response_truncated(void **state)
{
	struct response *r;
	json_t *res;

	(void)state;
	r = text_response();
	assert_int_equal(response_delta_bytes(r), 5);
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "status"), "in_progress");
	assert_null(json_object_get(res, "error"));
	assert_string_equal(path_str(res, "output/0/content/0/text"), "Hello");
	/* The part is the template of content_part.added, filled in. */
	assert_true(json_is_array(path_get(res,
	    "output/0/content/0/annotations")));

	assert_int_equal(response_finish(r, 0), -1);
	assert_int_equal(response_status(r), RESPONSE_ERROR);
	assert_string_equal(response_error(r), "stream ended without a "
	    "terminal event (after 5 events, last response.output_text.delta)");
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "status"), "failed");
	assert_string_equal(path_str(res, "id"), "resp_t");
	assert_string_equal(path_str(res, "error/message"), response_error(r));
	assert_true(json_is_null(json_object_get(json_object_get(res, "error"),
	    "code")));
	assert_string_equal(path_str(res, "output/0/content/0/text"), "Hello");
	response_free(r);

	r = text_response();
	assert_int_equal(response_finish(r, 1), -1);
	check_prefix("", "error", response_error(r), "stream ended mid-event "
	    "without a terminal event");
	response_free(r);

	assert_non_null(r = response_new());
	assert_int_equal(response_finish(r, 0), -1);
	assert_string_equal(response_error(r), "stream ended before any event");
	assert_non_null(res = response_result(r));
	assert_int_equal(json_array_size(json_object_get(res, "output")), 0);
	response_free(r);
}

static void
test_response_incomplete(void **state)
{
	struct response *r = text_response();
	const struct response_usage *u;
	json_t *res;

	(void)state;
	assert_int_equal(feed(r, "response.incomplete", "{\"type\":"
	    "\"response.incomplete\",\"response\":{\"id\":\"resp_t\","
	    "\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":"
	    "\"max_output_tokens\"},\"output\":[],\"usage\":{"
	    "\"input_tokens\":5,\"output_tokens\":16,"
	    "\"input_tokens_details\":null}}}"),
	    RESPONSE_EV_TERMINAL);
	assert_int_equal(response_status(r), RESPONSE_INCOMPLETE);
	assert_string_equal(response_error(r),
	    "response incomplete: max_output_tokens");
	assert_int_equal(response_finish(r, 0), 0);
	assert_non_null(u = response_usage(r));
	assert_int_equal(u->input_tokens, 5);
	assert_int_equal(u->output_tokens, 16);
	assert_int_equal(u->total_tokens, 21);	/* computed */
	assert_int_equal(u->cached_tokens, 0);
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "status"), "incomplete");
	/* Empty final output: the assembled items stand in. */
	assert_string_equal(path_str(res, "output/0/content/0/text"), "Hello");
	assert_string_equal(path_str(res, "output/0/id"), "msg_1");
	response_free(r);
}

static void
test_response_errors(void **state)
{
	struct response *r;
	json_t *res;

	(void)state;
	/* The flat SDK shape of the error event. */
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, "error", "{\"type\":\"error\",\"code\":"
	    "\"rate_limit_exceeded\",\"message\":\"Rate limit reached. Please "
	    "try again in 1.2s.\",\"param\":null,\"sequence_number\":3}"),
	    RESPONSE_EV_ERROR);
	assert_int_equal(response_status(r), RESPONSE_FAILED);
	assert_string_equal(response_error(r), "stream error: "
	    "rate_limit_exceeded: Rate limit reached. Please try again in "
	    "1.2s.");
	assert_string_equal(response_error_code(r), "rate_limit_exceeded");
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "status"), "failed");
	assert_string_equal(path_str(res, "error/code"), "rate_limit_exceeded");
	/* A later response.failed brings the final object, not a new status. */
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.failed\","
	    "\"response\":{\"id\":\"resp_f\",\"status\":\"failed\",\"error\":"
	    "{\"code\":\"server_error\",\"message\":\"x\"},\"output\":[]}}"),
	    RESPONSE_EV_TERMINAL);
	assert_string_equal(response_error_code(r), "rate_limit_exceeded");
	assert_string_equal(response_id(r), "resp_f");
	assert_int_equal(response_finish(r, 0), -1);
	assert_int_equal(response_status(r), RESPONSE_FAILED);
	assert_string_equal(path_str(response_result(r), "error/code"),
	    "server_error");
	response_free(r);

	/* Flat and without code: the event's own "type" is no code. */
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "{\"type\":\"error\",\"message\":"
	    "\"boom\"}"), RESPONSE_EV_ERROR);
	assert_string_equal(response_error(r), "stream error: boom");
	assert_null(response_error_code(r));
	response_free(r);

	/* Server text is made safe for a terminal. */
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "{\"type\":\"error\",\"error\":"
	    "{\"code\":\"x\",\"message\":\"bad\\u001b[31m\\nred\"}}"),
	    RESPONSE_EV_ERROR);
	assert_string_equal(response_error(r), "stream error: x: bad [31m red");
	response_free(r);

	/* Cancelled counts as failed; a missing error object is fine. */
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.cancelled\","
	    "\"response\":{\"id\":\"r1\",\"status\":\"cancelled\",\"error\":"
	    "null,\"output\":[]}}"), RESPONSE_EV_TERMINAL);
	assert_int_equal(response_status(r), RESPONSE_FAILED);
	assert_string_equal(response_error(r), "response cancelled");
	assert_null(response_error_code(r));
	assert_string_equal(response_status_name(response_status(r)), "failed");
	response_free(r);

}

/* Bounds are checked, not allocated; malformed items are refused. */
static void
test_response_bounds(void **state)
{
	struct response *r;

	(void)state;
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.output_item."
	    "added\",\"output_index\":1000000000,\"item\":{}}"), -1);
	assert_string_equal(response_error(r), "output_index out of range in "
	    "response.output_item.added");
	response_free(r);
	r = text_response();
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.output_text."
	    "delta\",\"output_index\":0,\"content_index\":5000,"
	    "\"delta\":\"x\"}"), -1);
	assert_string_equal(response_error(r), "content_index out of range in "
	    "response.output_text.delta");
	response_free(r);
	assert_non_null(r = response_new());
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.output_item."
	    "done\",\"output_index\":0,\"item\":\"x\"}"), -1);
	assert_string_equal(response_error(r), "response.output_item.done "
	    "without an item object");
	response_free(r);
}

/* Two calls streamed interleaved, addressed by item_id or output_index. */
static void
test_response_interleaved(void **state)
{
	static const char *const evs[] = {
		"{\"type\":\"response.output_item.added\",\"output_index\":0,"
		    "\"item\":{\"type\":\"function_call\",\"id\":\"fc_a\","
		    "\"call_id\":\"call_a\",\"name\":\"fa\","
		    "\"arguments\":\"\"}}",
		"{\"type\":\"response.output_item.added\",\"output_index\":1,"
		    "\"item\":{\"type\":\"function_call\",\"id\":\"fc_b\","
		    "\"call_id\":\"call_b\",\"name\":\"fb\","
		    "\"arguments\":\"\"}}",
		"{\"type\":\"response.function_call_arguments.delta\","
		    "\"item_id\":\"fc_a\",\"output_index\":0,"
		    "\"delta\":\"{\\\"x\"}",
		"{\"type\":\"response.function_call_arguments.delta\","
		    "\"item_id\":\"fc_b\",\"delta\":\"{\\\"y\\\":\"}",
		"{\"type\":\"response.function_call_arguments.delta\","
		    "\"output_index\":0,\"delta\":\"\\\":1}\"}",
		"{\"type\":\"response.function_call_arguments.delta\","
		    "\"item_id\":\"fc_b\",\"output_index\":0,\"delta\":\"2}\"}",
		"{\"type\":\"response.function_call_arguments.delta\","
		    "\"item_id\":\"fc_zzz\",\"delta\":\"lost\"}",
		"{\"type\":\"response.custom_tool_call_input.delta\","
		    "\"output_index\":7,\"delta\":\"??\"}",
		"{\"type\":\"response.completed\",\"response\":{"
		    "\"id\":\"resp_i\",\"status\":\"completed\",\"usage\":{"
		    "\"input_tokens\":3,\"output_tokens\":4,\"total_tokens\":7,"
		    "\"output_tokens_details\":{\"reasoning_tokens\":1}}}}",
	};
	struct response *r;
	json_t *res;
	size_t i;

	(void)state;
	assert_non_null(r = response_new());
	for (i = 0; i < NELEM(evs); i++)
		assert_true(feed(r, NULL, evs[i]) >= 0);
	assert_int_equal(response_status(r), RESPONSE_COMPLETED);
	assert_null(response_error(r));
	assert_int_equal(response_delta_bytes(r), 3 + 5 + 4 + 2 + 4 + 2);
	assert_int_equal(response_usage(r)->reasoning_tokens, 1);
	assert_int_equal(response_usage(r)->total_tokens, 7);
	/* The final object has no "output": the assembled items stand in. */
	assert_non_null(res = response_result(r));
	assert_int_equal(json_array_size(json_object_get(res, "output")), 2);
	assert_string_equal(path_str(res, "output/0/arguments"), "{\"x\":1}");
	assert_string_equal(path_str(res, "output/1/arguments"), "{\"y\":2}");
	assert_string_equal(path_str(res, "output/1/name"), "fb");
	assert_string_equal(path_str(res, "id"), "resp_i");
	assert_int_equal(response_finish(r, 0), 0);
	response_free(r);
}

/* The .done copy beats both the .added copy and the streamed text. */
static void
test_response_done_wins(void **state)
{
	static const char *const evs[] = {
		"{\"type\":\"response.output_item.added\",\"output_index\":0,"
		    "\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\","
		    "\"summary\":[],\"encrypted_content\":\"short\"}}",
		"{\"type\":\"response.output_item.done\",\"output_index\":0,"
		    "\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\","
		    "\"summary\":[],\"encrypted_content\":\"long-and-whole\"}}",
		"{\"type\":\"response.output_item.added\",\"output_index\":1,"
		    "\"item\":{\"type\":\"message\",\"id\":\"m\","
		    "\"content\":[]}}",
		"{\"type\":\"response.content_part.added\",\"output_index\":1,"
		    "\"content_index\":0,\"part\":{\"type\":\"refusal\","
		    "\"refusal\":\"\"}}",
		"{\"type\":\"response.refusal.delta\",\"output_index\":1,"
		    "\"content_index\":0,\"delta\":\"No\"}",
		"{\"type\":\"response.refusal.delta\",\"output_index\":1,"
		    "\"content_index\":0,\"delta\":\" way\"}",
		"{\"type\":\"response.output_text.delta\",\"output_index\":1,"
		    "\"content_index\":2,\"delta\":\"gap\"}",
	};
	static const char done1[] =
		"{\"type\":\"response.output_item.done\",\"output_index\":1,"
		    "\"item\":{\"type\":\"message\",\"id\":\"m\",\"content\":"
		    "[{\"type\":\"output_text\",\"text\":\"final\"}]}}";
	struct response *r;
	json_t *res;
	size_t i;

	(void)state;
	assert_non_null(r = response_new());
	for (i = 0; i < NELEM(evs); i++)
		assert_true(feed(r, NULL, evs[i]) >= 0);
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "output/0/encrypted_content"),
	    "long-and-whole");
	assert_string_equal(path_str(res, "output/1/content/0/type"),
	    "refusal");
	assert_string_equal(path_str(res, "output/1/content/0/refusal"),
	    "No way");
	assert_true(json_is_null(json_array_get(json_object_get(
	    json_array_get(json_object_get(res, "output"), 1), "content"), 1)));
	assert_string_equal(path_str(res, "output/1/content/2/text"), "gap");
	assert_string_equal(path_str(res, "output/1/content/2/type"),
	    "output_text");
	assert_int_equal(feed(r, NULL, done1), RESPONSE_EV_ITEM);
	/* A delta after .done is ignored. */
	assert_int_equal(feed(r, NULL, "{\"type\":\"response.output_text."
	    "delta\",\"output_index\":1,\"content_index\":0,\"delta\":\"!\"}"),
	    RESPONSE_EV_DELTA);
	assert_non_null(res = response_result(r));
	assert_int_equal(json_array_size(json_object_get(json_array_get(
	    json_object_get(res, "output"), 1), "content")), 1);
	assert_string_equal(path_str(res, "output/1/content/0/text"), "final");
	response_free(r);
}

/* *.done text and *_part.done parts replace what the deltas said; only
 * the first terminal event counts. */
static void
test_response_text_done(void **state)
{
	static const char *const evs[] = {
		"{\"type\":\"response.output_text.done\",\"output_index\":0,"
		    "\"content_index\":0,\"text\":\"Hello!\"}",
		"{\"type\":\"response.output_item.added\",\"output_index\":1,"
		    "\"item\":{\"type\":\"reasoning\",\"id\":\"rs\","
		    "\"summary\":[]}}",
		"{\"type\":\"response.reasoning_summary_text.delta\","
		    "\"output_index\":1,\"summary_index\":0,\"delta\":\"Thi\"}",
		"{\"type\":\"response.reasoning_summary_part.done\","
		    "\"output_index\":1,\"summary_index\":0,\"part\":{\"type\":"
		    "\"summary_text\",\"text\":\"Thinking\"}}",
		"{\"type\":\"response.completed\",\"response\":{\"id\":\"one\","
		    "\"status\":\"completed\",\"output\":[],\"usage\":"
		    "{\"input_tokens\":1,\"output_tokens\":2}}}",
		"{\"type\":\"response.completed\",\"response\":{\"id\":\"two\","
		    "\"status\":\"completed\",\"output\":[],\"usage\":"
		    "{\"input_tokens\":10,\"output_tokens\":20}}}",
	};
	struct response *r = text_response();
	json_t *res;
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(evs); i++)
		assert_true(feed(r, NULL, evs[i]) >= 0);
	assert_non_null(res = response_result(r));
	assert_string_equal(path_str(res, "output/0/content/0/text"),
	    "Hello!");
	assert_string_equal(path_str(res, "output/1/summary/0/text"),
	    "Thinking");
	assert_int_equal(json_array_size(path_get(res, "output/1/summary")),
	    1);
	assert_string_equal(response_id(r), "one");
	assert_string_equal(path_str(res, "id"), "one");
	assert_int_equal(response_usage(r)->total_tokens, 3);
	assert_int_equal(response_delta_bytes(r), 8);
	response_free(r);
}

static void
test_response_bodies(void **state)
{
	static const char body[] =
	    "{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}";
	struct response *r;

	(void)state;
	assert_non_null(r = response_new());
	assert_int_equal(response_feed_body(r, "{\"id\":", 6), -1);
	assert_int_equal(response_status(r), RESPONSE_ERROR);
	check_prefix("", "error", response_error(r),
	    "invalid JSON in response body: ");
	response_free(r);

	assert_non_null(r = response_new());
	assert_int_equal(response_feed_body(r, "{\"status\":\"weird\"}",
	    strlen("{\"status\":\"weird\"}")), -1);
	assert_string_equal(response_error(r),
	    "response body has no known status");
	response_free(r);

	assert_non_null(r = response_new());
	assert_int_equal(response_feed_body(r, body, strlen(body)), -1);
	assert_int_equal(response_status(r), RESPONSE_IN_PROGRESS);
	assert_string_equal(response_id(r), "r");
	response_free(r);
}

static void
test_response_error_body(void **state)
{
	static const struct {
		long status;
		const char *body;
		const char *line;
		const char *code;
	} cases[] = {
		{ 402, "{\"error\":{\"code\":402,\"message\":\"Insufficient "
		    "credits\"},\"metadata\":null}",
		    "HTTP 402: 402: Insufficient credits", "402" },
		{ 400, "{\"object\":\"error\",\"message\":\"bad model\","
		    "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
		    "HTTP 400: 400: bad model", "400" },
		{ 404, "{\"detail\":\"Not Found\"}", "HTTP 404: Not Found",
		    NULL },
		{ 500, "{\"error\":\"boom\"}", "HTTP 500: boom", NULL },
		{ 502, "<html>\r\n<h1>502 Bad Gateway</h1>\n</html>\n",
		    "HTTP 502: <html>  <h1>502 Bad Gateway</h1> </html>",
		    NULL },
		{ 503, "", "HTTP 503: empty body", NULL },
		{ 504, " \n ", "HTTP 504: empty body", NULL },
		{ 401, "{\"error\":{\"message\":\"Incorrect API key provided\","
		    "\"type\":\"invalid_request_error\",\"param\":null,"
		    "\"code\":\"invalid_api_key\"}}",
		    "HTTP 401: invalid_api_key: Incorrect API key provided",
		    "invalid_api_key" },
	};
	char big[600], *line, *code;
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(cases); i++) {
		assert_non_null(line = response_parse_error_body(
		    cases[i].status, cases[i].body, strlen(cases[i].body),
		    &code));
		check_str(cases[i].body, "line", line, cases[i].line);
		check_str(cases[i].body, "code", code, cases[i].code);
		free(line);
		free(code);
	}
	/* A long non-JSON body is cut to its start. */
	memset(big, 'x', sizeof(big));
	assert_non_null(line = response_parse_error_body(500, big, sizeof(big),
	    NULL));
	assert_int_equal(strlen(line), strlen("HTTP 500: ") + 200);
	free(line);
	assert_non_null(line = response_parse_error_body(500, NULL, 0, NULL));
	assert_string_equal(line, "HTTP 500: empty body");
	free(line);
}

/* --- 3. recorded fixtures ---------------------------------------------- */

enum fx_kind {
	FX_STREAM,	/* .sse / .jsonl */
	FX_BODY,	/* non-streamed response object */
	FX_ERROR_BODY,	/* non-2xx body */
	FX_REQUEST,	/* request body: checked against a stream's items */
};

/* What each recording must come out as; values copied from the files. */
struct fx_expect {
	const char *file;
	enum fx_kind kind;
	enum response_status status;
	int has_usage;
	int path_streamed;	/* path_value also from deltas alone */
	int found;
	const char *id;
	const char *model;
	const char *types;	/* output item types */
	const char *fn_name;	/* of the first function_call */
	const char *fn_args;
	const char *call_id;
	const char *text;	/* the message text starts with */
	size_t text_len;	/* bytes of all message text */
	long long usage[5];	/* in, cached, out, reasoning, total */
	size_t delta_bytes;
	const char *error;
	const char *code;
	long http_status;	/* FX_ERROR_BODY */
	const char *path;	/* one more output value... */
	const char *path_value;	/* ...starts with this */
	const char *pair;	/* FX_REQUEST: its stream */
};

static struct fx_expect fx_expects[] = {
	{
		.file = "text_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_01000000000000000000000000000000000000000000000000",
		.model = "gpt-4.1-2025-04-14",
		.types = "message",
		.text = "streamed", .text_len = 8,
		.has_usage = 1, .usage = { 21, 0, 3, 0, 24 },
		.delta_bytes = 8,
		.path = "0/content/0/text", .path_value = "streamed",
		.path_streamed = 1,
	},
	{
		.file = "function_call_stream_legacy_no_seq.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
		.model = "gpt-4o-2024-08-06",
		.types = "function_call",
		.fn_name = "get_capital", .fn_args = "{\"country\":\"France\"}",
		.call_id = "call_kL0PCQV7M2WMoVX8V8OtYSAL",
		.has_usage = 1, .usage = { 255, 0, 16, 0, 271 },
		.delta_bytes = 20,
		.path = "0/status", .path_value = "completed",
	},
	{
		.file = "reasoning_encrypted_function_call_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
		.model = "gpt-5-2025-08-07",
		.types = "reasoning,function_call",
		.fn_name = "final_result", .fn_args = "{\"result\":6666}",
		.call_id = "call_CWXgs68YprAjp6t0371hiPOI",
		.has_usage = 1, .usage = { 53, 0, 469, 448, 522 },
		.delta_bytes = 15,
		.path = "0/id",
		.path_value =
		    "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405",
		.path_streamed = 1,
	},
	{
		.file = "reasoning_summary_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff",
		.model = "o3-mini-2025-01-31",
		.types = "reasoning,message",
		.text = "I'm not a road safety professional, but here are some "
		    "generally accepted guidelines",
		.text_len = 1275,
		.has_usage = 1, .usage = { 13, 0, 1680, 1408, 1693 },
		.delta_bytes = 3317,
		.path = "0/summary/3/text",
		.path_value = "**Providing safe crossing advice**\n\nI’m",
		.path_streamed = 1,
	},
	{
		.file = "agent_turn_reasoning_commentary_function_call.sse",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0fabc13af1ee0049006a691dfdab8881a1a75f2db7ff78cb83",
		.model = "gpt-5.5-2026-04-23",
		.types = "reasoning,message,function_call",
		.fn_name = "get_capital",
		.fn_args = "{\"country\":\"PotatoLand\"}",
		.call_id = "call_LabG58Uhrq9kZvR52BYKjToD",
		.text = "I’ll check the capital lookup tool for “PotatoLand",
		.text_len = 58,
		.has_usage = 1, .usage = { 63, 0, 69, 26, 132 },
		.delta_bytes = 82,
		.path = "1/phase", .path_value = "commentary",
		.path_streamed = 1,
	},
	{
		.file = "request_followup_after_function_call.json",
		.kind = FX_REQUEST,
		.pair = "agent_turn_reasoning_commentary_function_call.sse",
	},
	{
		.file = "completed_response_parallel_function_calls.json",
		.kind = FX_BODY,
		.status = RESPONSE_COMPLETED,
		.id = "resp_67e547c48c9481918c5c4394464ce0c60ae6111e84dd5c08",
		.model = "gpt-4o-2024-08-06",
		.types = "function_call,function_call",
		.fn_name = "get_location",
		.fn_args = "{\"loc_name\":\"Londos\"}",
		.call_id = "call_LWVp74L5HaH2KNvgVz9PJsrj",
		.has_usage = 1, .usage = { 0, 0, 0, 0, 0 },
		.path = "1/arguments",
		.path_value = "{\"loc_name\":\"London\"}",
	},
	{
		.file = "openrouter_reasoning_text_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "gen-1764265411-Fu1iEX7h5MRWiL79lb94",
		.model = "openai/gpt-oss-20b",
		.types = "reasoning,message",
		.text = "4", .text_len = 1,
		.has_usage = 1, .usage = { 78, 0, 37, 22, 115 },
		.delta_bytes = 86,
		.path = "0/content/0/text",
		.path_value = "The user asks: \"What is 2+2?\" They expect a "
		    "straightforward answer: 4. Just answer 4.",
		.path_streamed = 1,
	},
	{
		.file = "deepseek_reasoning_function_call_stream.sse",
		.status = RESPONSE_COMPLETED,
		.id = "1235b7ba-fdc9-4a1c-bfe4-6137c207baf3",
		.model = "deepseek-v4-flash",
		.types = "reasoning,function_call",
		.fn_name = "get_temperature",
		.fn_args = "{\"city\": \"Tokyo\"}",
		.call_id = "call_00_xjY8Z2BvSlzgEmmw0DtH0464",
		.has_usage = 1, .usage = { 366, 256, 59, 14, 425 },
		.delta_bytes = 78,
		.path = "0/content/0/text",
		.path_value = "The user asks about temperature in Tokyo. "
		    "I'll call the tool.",
		.path_streamed = 1,
	},
	{
		.file = "apply_patch_call_stream.jsonl",
		.status = RESPONSE_COMPLETED,
		.id = "resp_0372d86dfc1762fe00692741f339a08190bce9b78ee2079295",
		.model = "gpt-5.1-2025-11-13",
		.types = "apply_patch_call",
		.has_usage = 1, .usage = { 642, 0, 67, 0, 709 },
		.delta_bytes = 95,
		.path = "0/operation/diff",
		.path_value = "+## Shopping Checklist\n+\n+- [ ] Milk\n"
		    "+- [ ] Bread\n+- [ ] Eggs\n+- [ ] Fresh fruit\n"
		    "+- [ ] Coffee\n",
		.path_streamed = 1,
	},
	{
		.file = "local_shell_call_stream.jsonl",
		.status = RESPONSE_COMPLETED,
		.id = "resp_68da7fd5d24481949fc2cf1cc60377050faf5df54b42d9a6",
		.model = "gpt-5-codex",
		.types = "reasoning,local_shell_call",
		.has_usage = 1, .usage = { 407, 0, 151, 128, 558 },
		.path = "1/action/command/2", .path_value = "~",
	},
	{
		.file = "error_event_then_failed.jsonl",
		.status = RESPONSE_FAILED,
		.id = "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
		.model = "gpt-5-nano-2025-08-07",
		.types = "",
		.error = "stream error: insufficient_quota: You exceeded your "
		    "current quota, please check your plan and billing "
		    "details. For more information on this error, read the "
		    "docs: https://platform.openai.com/docs/guides/error-codes/"
		    "api-errors.",
		.code = "insufficient_quota",
	},
	{
		.file = "error_event_server_error_null_code.jsonl",
		.status = RESPONSE_FAILED,
		.types = "",
		.error = "stream error: server_error: Sorry, something went "
		    "wrong.",
		.code = "server_error",
	},
	{
		.file = "error_insufficient_quota.json",
		.kind = FX_ERROR_BODY,
		.http_status = 429,
		.error = "HTTP 429: insufficient_quota: You exceeded your "
		    "current quota, please check your plan and billing "
		    "details. For more information on this error, read the "
		    "docs: https://platform.openai.com/docs/guides/error-codes/"
		    "api-errors.",
		.code = "insufficient_quota",
	},
	{
		.file = "error_400_no_tool_call_found.json",
		.kind = FX_ERROR_BODY,
		.http_status = 400,
		.error = "HTTP 400: invalid_request_error: No tool call found "
		    "for function call output with call_id "
		    "call_SjdIRQnfceiXp0D5eZCcjlxW.",
		.code = "invalid_request_error",
	},
	{
		.file = "error_400_reasoning_without_following_item.json",
		.kind = FX_ERROR_BODY,
		.http_status = 400,
		.error = "HTTP 400: invalid_request_error: Item "
		    "'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of "
		    "type 'reasoning' was provided without its required "
		    "following item.",
		.code = "invalid_request_error",
	},
};

static const char *
fx_dir(void)
{
	const char *d = getenv("AGENTZ_FIXTURES");

	return d != NULL && *d != '\0' ? d : "../shared/fixtures/responses";
}

static char *
fx_read(const char *name, size_t *lenp)
{
	char path[4096];

	(void)snprintf(path, sizeof(path), "%s/%s", fx_dir(), name);
	return read_file(path, lenp);
}

/* Walk "a/0/b" through objects and arrays; a string value or NULL. */
static json_t *
path_get(json_t *v, const char *path)
{
	char seg[128];
	const char *p = path;
	size_t n;

	while (v != NULL && *p != '\0') {
		n = strcspn(p, "/");
		assert_true(n < sizeof(seg));
		memcpy(seg, p, n);
		seg[n] = '\0';
		p += n + (p[n] == '/');
		if (json_is_array(v))
			v = json_array_get(v, strtoul(seg, NULL, 10));
		else
			v = json_object_get(v, seg);
	}
	return v;
}

static const char *
path_str(json_t *v, const char *path)
{
	return json_string_value(path_get(v, path));
}

/* One line of a recorded block into b; the fixtures use one data line. */
static void
fx_block_line(json_t *b, const char *line)
{
	if (strncmp(line, "event: ", 7) == 0)
		assert_int_equal(json_object_set_new(b, "event",
		    json_string(line + 7)), 0);
	else if (strncmp(line, "data: ", 6) == 0 &&
	    json_object_get(b, "data") == NULL)
		assert_int_equal(json_object_set_new(b, "data",
		    json_string(line + 6)), 0);
	else if (line[0] == ':')
		assert_int_equal(json_object_set_new(b, "comment",
		    json_string(line + 1)), 0);
	else
		fail_msg("unexpected fixture line: %.60s", line);
}

/* The blocks of a recording: {event?, data} or {comment}. */
static json_t *
fx_blocks_sse(const char *raw)
{
	json_t *blocks = json_array(), *b;
	char *copy = strdup(raw), *blk, *end, *line, *next;

	assert_non_null(copy);
	for (blk = copy; *blk != '\0'; blk = end) {
		end = strstr(blk, "\n\n");
		assert_non_null(end);
		*end = '\0';
		end += 2;
		assert_non_null(b = json_object());
		for (line = blk; line != NULL; line = next) {
			if ((next = strchr(line, '\n')) != NULL)
				*next++ = '\0';
			fx_block_line(b, line);
		}
		assert_int_equal(json_array_append_new(blocks, b), 0);
	}
	free(copy);
	return blocks;
}

/* README: each .jsonl line is one data payload, event = its type. */
static json_t *
fx_blocks_jsonl(const char *raw)
{
	json_t *blocks = json_array(), *ev;
	const char *line = raw, *nl;
	size_t n;

	for (; *line != '\0'; line = *nl != '\0' ? nl + 1 : nl) {
		nl = strchr(line, '\n');
		nl = nl != NULL ? nl : line + strlen(line);
		n = (size_t)(nl - line);
		if (n == 0)
			continue;
		assert_non_null(ev = json_loadb(line, n, 0, NULL));
		json_array_append_new(blocks, json_pack("{s:O, s:s%}", "event",
		    json_object_get(ev, "type"), "data", line, n));
		json_decref(ev);
	}
	return blocks;
}

enum fx_transform {
	T_NONE,
	T_STRIP,	/* the terminal event's output becomes [] */
	T_PARTS,	/* T_STRIP, and output_item.done is dropped */
	T_DELTAS,	/* T_STRIP, and every *.done event is dropped */
};

static int
is_terminal_type(const char *t)
{
	return t != NULL && (strcmp(t, "response.completed") == 0 ||
	    strcmp(t, "response.incomplete") == 0 ||
	    strcmp(t, "response.failed") == 0);
}

/* The data of block b after transform t; NULL to drop the block. */
static char *
fx_data(json_t *b, enum fx_transform t)
{
	const char *data = json_string_value(json_object_get(b, "data"));
	json_t *ev;
	const char *type;
	char *out;
	size_t n;

	if (t == T_NONE || strcmp(data, "[DONE]") == 0)
		return strdup(data);
	assert_non_null(ev = json_loads(data, 0, NULL));
	type = json_string_value(json_object_get(ev, "type"));
	n = strlen(type);
	if ((t == T_DELTAS && n > 5 && strcmp(type + n - 5, ".done") == 0) ||
	    (t == T_PARTS && strcmp(type, "response.output_item.done") == 0)) {
		json_decref(ev);
		return NULL;
	}
	if (is_terminal_type(type))
		json_object_set_new(json_object_get(ev, "response"), "output",
		    json_array());
	out = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return out;
}

/* A wire built from blocks; kinds: 0 comment, 1 event, 2 terminal event,
 * 3 error event. */
struct wire {
	char *p;
	size_t len;
	size_t ends[1024];	/* offset after each block */
	int kinds[1024];
	size_t nblocks;
};

static int
block_kind(const char *data)
{
	json_t *ev = json_loads(data, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	int k = is_terminal_type(type) ? 2 :
	    type != NULL && strcmp(type, "error") == 0 ? 3 : 1;

	json_decref(ev);
	return k;
}

static void
wire_build(json_t *blocks, const char *eol, int bom, enum fx_transform t,
    struct wire *w)
{
	FILE *f;
	json_t *b;
	size_t i;
	char *data;

	assert_non_null(f = open_memstream(&w->p, &w->len));
	w->nblocks = 0;
	if (bom)
		(void)fputs("\xef\xbb\xbf", f);
	for (i = 0; (b = json_array_get(blocks, i)) != NULL; i++) {
		if (json_object_get(b, "comment") != NULL) {
			(void)fprintf(f, ":%s%s%s", path_str(b, "comment"), eol,
			    eol);
			w->kinds[w->nblocks] = 0;
		} else {
			if ((data = fx_data(b, t)) == NULL)
				continue;
			if (json_object_get(b, "event") != NULL)
				(void)fprintf(f, "event: %s%s",
				    path_str(b, "event"), eol);
			(void)fprintf(f, "data: %s%s%s", data, eol, eol);
			w->kinds[w->nblocks] = block_kind(data);
			free(data);
		}
		assert_int_equal(fflush(f), 0);
		assert_true(w->nblocks < NELEM(w->ends));
		w->ends[w->nblocks++] = (size_t)ftell(f);
	}
	assert_int_equal(fclose(f), 0);
}

struct sink {
	struct response *r;
	int kinds[6];
	int failed;	/* response_feed() returned -1 */
	int mismatch;	/* SSE event name != data type */
};

static int
sink_cb(void *ctx, const struct sse_event *ev)
{
	struct sink *s = ctx;
	const char *type;
	int k;

	k = response_feed(s->r, ev->type, ev->data, ev->data_len);
	if (k < 0 || k >= 6) {
		s->failed++;
		return 0;
	}
	s->kinds[k]++;
	type = json_string_value(json_object_get(response_last_event(s->r),
	    "type"));
	if (strcmp(ev->type, "message") != 0 &&
	    (type == NULL || strcmp(type, ev->type) != 0))
		s->mismatch++;
	return 0;
}

/* Replay len bytes of wire in chunks drawn from seed (0: 1-byte). */
static struct response *
replay(const char *p, size_t len, uint64_t seed, size_t max_event,
    struct sink *s, int *sse_rc)
{
	static const size_t maxchunks[] = { 1, 7, 300, 70000 };
	struct sse *sse;
	size_t off = 0, k, maxchunk;
	uint64_t rng = seed;
	int rc = SSE_OK;

	memset(s, 0, sizeof(*s));
	assert_non_null(s->r = response_new());
	assert_non_null(sse = sse_new(sink_cb, s, max_event));
	maxchunk = seed == 0 ? 1 : maxchunks[seed % NELEM(maxchunks)];
	while (off < len && rc == SSE_OK) {
		k = 1 + rng_next(&rng) % maxchunk;
		k = k < len - off ? k : len - off;
		rc = sse_feed(sse, p + off, k);
		off += k;
	}
	if (rc == SSE_OK)
		rc = sse_finish(sse);
	sse_free(sse);
	*sse_rc = rc;
	(void)response_finish(s->r, rc == SSE_PARTIAL);
	return s->r;
}

/* obj[key][i], or NULL. */
static json_t *
nth(json_t *obj, const char *key, size_t i)
{
	return json_array_get(json_object_get(obj, key), i);
}

/* All text of the message items, as much as fits; returns its length. */
static size_t
output_text(json_t *out, char *text, size_t size)
{
	size_t i, j, n, len = 0;
	json_t *item, *part;
	const char *s;

	text[0] = '\0';
	for (i = 0; (item = json_array_get(out, i)) != NULL; i++) {
		if (strcmp(path_str(item, "type"), "message") != 0)
			continue;
		for (j = 0; (part = nth(item, "content", j)) != NULL; j++) {
			if ((s = path_str(part, "text")) == NULL)
				continue;
			n = strlen(s);
			if (len + n < size) {
				memcpy(text + len, s, n);
				text[len + n] = '\0';
			}
			len += n;
		}
	}
	return len;
}

/* Type list, first function call and message text of an output array. */
static void
check_output(const char *ctx, const struct fx_expect *e, json_t *out,
    int have_done)
{
	char types[256] = "", text[4096];
	size_t i, tlen;
	json_t *item, *fn = NULL;

	for (i = 0; (item = json_array_get(out, i)) != NULL; i++) {
		const char *t = path_str(item, "type");

		assert_non_null(t);
		(void)snprintf(types + strlen(types), sizeof(types) -
		    strlen(types), "%s%s", i > 0 ? "," : "", t);
		if (fn == NULL && strcmp(t, "function_call") == 0)
			fn = item;
	}
	tlen = output_text(out, text, sizeof(text));
	check_str(ctx, "output types", types, e->types);
	check_str(ctx, "function name", path_str(fn, "name"), e->fn_name);
	check_str(ctx, "call_id", path_str(fn, "call_id"), e->call_id);
	check_str(ctx, "arguments", path_str(fn, "arguments"), e->fn_args);
	check_num(ctx, "text bytes", (long long)tlen, (long long)e->text_len);
	if (e->text != NULL)
		check_prefix(ctx, "text", text, e->text);
	if (e->path != NULL && (have_done || e->path_streamed))
		check_prefix(ctx, e->path, path_str(out, e->path),
		    e->path_value);
}

static const char *
or_dash(const char *s)
{
	return s != NULL ? s : "-";
}

/* The fields of an item that streaming must reproduce, as one string. */
static void
item_digest(FILE *f, json_t *item)
{
	static const char *const keys[] = { "type", "call_id", "name",
	    "arguments", "input", "operation/type", "operation/path",
	    "operation/diff" };
	json_t *part;
	size_t i;

	for (i = 0; i < NELEM(keys); i++)
		(void)fprintf(f, "%s=%s|", keys[i], or_dash(path_str(item,
		    keys[i])));
	for (i = 0; (part = nth(item, "content", i)) != NULL; i++)
		(void)fprintf(f, "C%s:%s%s|", or_dash(path_str(part, "type")),
		    or_dash(path_str(part, "text")),
		    or_dash(path_str(part, "refusal")));
	for (i = 0; (part = nth(item, "summary", i)) != NULL; i++)
		(void)fprintf(f, "S%s:%s|", or_dash(path_str(part, "type")),
		    or_dash(path_str(part, "text")));
	(void)fputc('\n', f);
}

static void
check_digest(const char *ctx, json_t *got, json_t *want)
{
	char *a, *b;
	size_t alen, blen, i;
	FILE *fa, *fb;
	json_t *item;

	assert_non_null(fa = open_memstream(&a, &alen));
	assert_non_null(fb = open_memstream(&b, &blen));
	for (i = 0; (item = json_array_get(got, i)) != NULL; i++)
		item_digest(fa, item);
	for (i = 0; (item = json_array_get(want, i)) != NULL; i++)
		item_digest(fb, item);
	assert_int_equal(fclose(fa), 0);
	assert_int_equal(fclose(fb), 0);
	if (strcmp(a, b) != 0)
		fail_msg("%s: assembled items differ\n got: %s\nwant: %s", ctx,
		    a, b);
	free(a);
	free(b);
}

static void
check_response(const char *ctx, const struct fx_expect *e,
    struct response *r)
{
	const struct response_usage *u = response_usage(r);

	check_str(ctx, "status", response_status_name(response_status(r)),
	    response_status_name(e->status));
	check_str(ctx, "id", response_id(r), e->id);
	check_str(ctx, "model", response_model(r), e->model);
	check_str(ctx, "error", response_error(r), e->error);
	check_str(ctx, "error code", response_error_code(r), e->code);
	check_num(ctx, "has usage", u != NULL, e->has_usage);
	if (u != NULL) {
		check_num(ctx, "input_tokens", u->input_tokens, e->usage[0]);
		check_num(ctx, "cached_tokens", u->cached_tokens, e->usage[1]);
		check_num(ctx, "output_tokens", u->output_tokens, e->usage[2]);
		check_num(ctx, "reasoning_tokens", u->reasoning_tokens,
		    e->usage[3]);
		check_num(ctx, "total_tokens", u->total_tokens, e->usage[4]);
	}
}

/* The terminal event's output array in the recording (new ref) or []. */
static json_t *
fx_final_output(json_t *blocks)
{
	json_t *b, *ev, *out = NULL;
	size_t i;

	for (i = 0; (b = json_array_get(blocks, i)) != NULL; i++) {
		const char *d = json_string_value(json_object_get(b, "data"));

		if (d == NULL || (ev = json_loads(d, 0, NULL)) == NULL)
			continue;
		if (is_terminal_type(json_string_value(json_object_get(ev,
		    "type")))) {
			json_decref(out);
			out = json_incref(path_get(ev, "response/output"));
		}
		json_decref(ev);
	}
	return out != NULL ? out : json_array();
}

static json_t *
fx_blocks(const char *name, const char *raw)
{
	size_t n = strlen(name);

	if (n > 6 && strcmp(name + n - 6, ".jsonl") == 0)
		return fx_blocks_jsonl(raw);
	return fx_blocks_sse(raw);
}

/* One replay of a fixture, checked. */
static void
fx_run(const struct fx_expect *e, struct wire *w, uint64_t seed,
    enum fx_transform t, json_t *want, const char *ctx)
{
	struct sink s;
	struct response *r;
	json_t *res;
	int rc;

	r = replay(w->p, w->len, seed, 0, &s, &rc);
	check_num(ctx, "sse result", rc, SSE_OK);
	check_num(ctx, "feed failures", s.failed, 0);
	check_num(ctx, "event name mismatches", s.mismatch, 0);
	check_num(ctx, "terminal events", s.kinds[RESPONSE_EV_TERMINAL],
	    strcmp(e->file, "error_event_server_error_null_code.jsonl") != 0);
	check_num(ctx, "error events", s.kinds[RESPONSE_EV_ERROR],
	    e->error != NULL);
	check_response(ctx, e, r);
	check_num(ctx, "delta bytes", (long long)response_delta_bytes(r),
	    (long long)e->delta_bytes);
	assert_non_null(res = response_result(r));
	check_output(ctx, e, json_object_get(res, "output"),
	    t == T_NONE || t == T_STRIP);
	check_digest(ctx, json_object_get(res, "output"), want);
	if (t == T_NONE && !json_equal(json_object_get(res, "output"), want))
		fail_msg("%s: output differs from the recorded final output",
		    ctx);
	check_num(ctx, "finish", response_finish(r, 0),
	    e->status == RESPONSE_COMPLETED ? 0 : -1);
	response_free(r);
}

/*
 * The recording cut after `cut` bytes: the outcome must follow from the
 * blocks complete before the cut.
 */
static void
fx_cut(const struct fx_expect *e, const struct wire *w, size_t cut,
    uint64_t seed, const char *name)
{
	struct sink s;
	struct response *r;
	char ctx[256], msg[128];
	size_t i;
	int rc, term = 0, err = 0, any = 0, at_end = cut == 0, in_comment = 0;

	for (i = 0; i < w->nblocks; i++) {
		if (w->ends[i] <= cut) {
			term |= w->kinds[i] == 2;
			err |= w->kinds[i] == 3;
			any |= w->kinds[i] != 0;
			at_end |= w->ends[i] == cut;
		} else if (i == 0 || w->ends[i - 1] <= cut) {
			in_comment = w->kinds[i] == 0;
		}
	}
	(void)snprintf(ctx, sizeof(ctx), "%s cut at %zu", name, cut);
	r = replay(w->p, cut, seed, 0, &s, &rc);
	check_num(ctx, "sse result", rc, at_end || in_comment ? SSE_OK :
	    SSE_PARTIAL);
	if (term || err) {
		check_str(ctx, "status", response_status_name(
		    response_status(r)), response_status_name(e->status));
		check_str(ctx, "error", response_error(r), e->error);
	} else {
		check_str(ctx, "status", response_status_name(
		    response_status(r)), "error");
		(void)snprintf(msg, sizeof(msg), "stream ended %s%s",
		    rc == SSE_PARTIAL ? "mid-event " : "",
		    any ? "without a terminal event" : "before any event");
		check_prefix(ctx, "error", response_error(r), msg);
	}
	response_free(r);
}

static const char *const fx_eols[] = { "\n", "\r\n", "\r" };

/* As recorded (and with other line ends, a BOM), then transformed. */
static void
fx_replays(const struct fx_expect *e, json_t *blocks, json_t *want,
    const char *raw, size_t rawlen)
{
	static const enum fx_transform ts[] = { T_STRIP, T_PARTS, T_DELTAS };
	static const char *const tnames[] = { "stripped",
	    "no output_item.done", "deltas only" };
	const char *const *eols = fx_eols;
	struct wire w;
	char ctx[256];
	uint64_t seed;

	for (seed = 0; seed < 24; seed++) {
		wire_build(blocks, eols[seed % 3], seed % 4 == 3, T_NONE, &w);
		(void)snprintf(ctx, sizeof(ctx), "%s seed %llu", e->file,
		    (unsigned long long)seed);
		if (seed == 1 && strstr(e->file, ".sse") != NULL) {
			free(w.p);		/* the file itself */
			assert_non_null(w.p = malloc(rawlen));
			memcpy(w.p, raw, rawlen);
			w.len = rawlen;
		}
		fx_run(e, &w, seed, T_NONE, want, ctx);
		free(w.p);
	}
	for (seed = 0; seed < 9; seed++) {
		wire_build(blocks, eols[seed / 3], 0, ts[seed % 3], &w);
		(void)snprintf(ctx, sizeof(ctx), "%s seed %llu %s", e->file,
		    (unsigned long long)seed, tnames[seed % 3]);
		fx_run(e, &w, seed + 100, ts[seed % 3], want, ctx);
		free(w.p);
	}
}

/* Cut short: at block boundaries near both ends, and anywhere. */
static void
fx_cuts(const struct fx_expect *e, json_t *blocks)
{
	struct wire w;
	struct sink s;
	struct response *r;
	uint64_t seed, rng;
	size_t i;
	int rc;

	wire_build(blocks, "\n", 0, T_NONE, &w);
	for (i = 0; i < w.nblocks; i++) {
		if (i < 12 || i + 12 > w.nblocks) {
			fx_cut(e, &w, w.ends[i], i, e->file);
			fx_cut(e, &w, w.ends[i] - 1, i + 1, e->file);
		}
	}
	for (seed = 1; seed <= 24; seed++) {
		rng = seed * 7919;
		fx_cut(e, &w, (size_t)(rng_next(&rng) % w.len), seed, e->file);
	}
	fx_cut(e, &w, 0, 0, e->file);

	/* A cap below the size of response.created is an SSE error. */
	r = replay(w.p, w.len, 5, 512, &s, &rc);
	if (w.len > (size_t)2048) {
		check_num(e->file, "capped sse", rc, SSE_ETOOBIG);
		check_str(e->file, "capped status", response_status_name(
		    response_status(r)), e->status == RESPONSE_FAILED &&
		    s.kinds[RESPONSE_EV_ERROR] ? "failed" : "error");
	}
	response_free(r);
	free(w.p);
}

static void
fx_stream(struct fx_expect *e, const char *raw, size_t rawlen)
{
	json_t *blocks = fx_blocks(e->file, raw), *want;
	struct wire w;

	want = fx_final_output(blocks);
	/* The harness reads .sse files right: rebuilt byte for byte. */
	wire_build(blocks, "\n", 0, T_NONE, &w);
	if (strstr(e->file, ".sse") != NULL && (w.len != rawlen ||
	    memcmp(w.p, raw, rawlen) != 0))
		fail_msg("%s: rebuilt wire differs from the file", e->file);
	free(w.p);
	fx_replays(e, blocks, want, raw, rawlen);
	fx_cuts(e, blocks);
	json_decref(want);
	json_decref(blocks);
}

static void
fx_body(struct fx_expect *e, const char *raw, size_t rawlen)
{
	struct response *r;
	json_t *res, *doc;

	assert_non_null(r = response_new());
	check_num(e->file, "feed_body", response_feed_body(r, raw, rawlen), 0);
	check_response(e->file, e, r);
	assert_non_null(res = response_result(r));
	check_output(e->file, e, json_object_get(res, "output"), 1);
	assert_non_null(doc = json_loadb(raw, rawlen, 0, NULL));
	if (!json_equal(res, doc))
		fail_msg("%s: result differs from the body", e->file);
	json_decref(doc);
	response_free(r);
}

static void
fx_error_body(struct fx_expect *e, const char *raw, size_t rawlen)
{
	struct response *r;
	char *line, *code;

	assert_non_null(line = response_parse_error_body(e->http_status, raw,
	    rawlen, &code));
	check_str(e->file, "error line", line, e->error);
	check_str(e->file, "error code", code, e->code);
	free(line);
	free(code);

	/* Given as a body, it is a failed response with the same code. */
	assert_non_null(r = response_new());
	check_num(e->file, "feed_body", response_feed_body(r, raw, rawlen), -1);
	check_str(e->file, "status", response_status_name(response_status(r)),
	    "failed");
	check_str(e->file, "code", response_error_code(r), e->code);
	check_prefix(e->file, "error", response_error(r), "response failed: ");
	response_free(r);
}

/* Items assembled from a stream, transformed (new reference). */
static json_t *
fx_assembled(const char *file, enum fx_transform t)
{
	char *raw;
	size_t len;
	json_t *blocks, *out;
	struct wire w;
	struct sink s;
	struct response *r;
	int rc;

	raw = fx_read(file, &len);
	blocks = fx_blocks(file, raw);
	wire_build(blocks, "\n", 0, t, &w);
	r = replay(w.p, w.len, 3, 0, &s, &rc);
	assert_int_equal(response_status(r), RESPONSE_COMPLETED);
	out = json_incref(json_object_get(response_result(r), "output"));
	response_free(r);
	free(w.p);
	json_decref(blocks);
	free(raw);
	return out;
}

/*
 * The follow-up request replays the items of the agent turn: they must be
 * exactly what the assembler kept from output_item.done, in particular
 * the reasoning item's encrypted_content (the .added copy is shorter).
 * Not the message text: the recorded request has ASCII quotes where the
 * recorded stream has typographic ones.
 */
static void
fx_request(struct fx_expect *e, const char *raw, size_t rawlen)
{
	static const char *const keys[][2] = {
		{ "0/id", "1/id" },
		{ "0/encrypted_content", "1/encrypted_content" },
		{ "1/id", "2/id" },
		{ "1/phase", "2/phase" },
		{ "1/content/0/type", "2/content/0/type" },
		{ "2/id", "3/id" },
		{ "2/call_id", "3/call_id" },
		{ "2/name", "3/name" },
		{ "2/arguments", "3/arguments" },
		{ "2/call_id", "4/call_id" },
	};
	json_t *req, *input, *done, *added;
	size_t i;

	assert_non_null(req = json_loadb(raw, rawlen, 0, NULL));
	input = json_object_get(req, "input");
	check_num(e->file, "input items", (long long)json_array_size(input), 5);
	done = fx_assembled(e->pair, T_STRIP);
	added = fx_assembled(e->pair, T_DELTAS);
	for (i = 0; i < NELEM(keys); i++) {
		check_str(e->file, keys[i][1], path_str(input, keys[i][1]),
		    path_str(done, keys[i][0]));
	}
	check_num(e->file, "encrypted_content length",
	    (long long)strlen(path_str(done, "0/encrypted_content")), 1080);
	check_num(e->file, ".added encrypted_content length",
	    (long long)strlen(path_str(added, "0/encrypted_content")), 932);
	json_decref(added);
	json_decref(done);
	json_decref(req);
}

static struct fx_expect *
fx_find(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(fx_expects); i++) {
		if (strcmp(fx_expects[i].file, name) == 0)
			return &fx_expects[i];
	}
	return NULL;
}

static void
test_fixtures(void **state)
{
	DIR *d;
	struct dirent *de;
	struct fx_expect *e;
	char *raw;
	size_t len, i, n = 0;

	(void)state;
	if ((d = opendir(fx_dir())) == NULL) {
		fail_msg("fixtures directory %s: %s (set AGENTZ_FIXTURES)",
		    fx_dir(), strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    strcmp(de->d_name, "README.md") == 0)
			continue;
		if ((e = fx_find(de->d_name)) == NULL) {
			fail_msg("fixture %s has no expectations here",
			    de->d_name);
			break;
		}
		raw = fx_read(e->file, &len);
		print_message("fixture %s\n", e->file);
		switch (e->kind) {
		case FX_STREAM:
			fx_stream(e, raw, len);
			break;
		case FX_BODY:
			fx_body(e, raw, len);
			break;
		case FX_ERROR_BODY:
			fx_error_body(e, raw, len);
			break;
		case FX_REQUEST:
			fx_request(e, raw, len);
			break;
		}
		free(raw);
		e->found = 1;
		n++;
	}
	assert_int_equal(closedir(d), 0);
	for (i = 0; i < NELEM(fx_expects); i++) {
		if (!fx_expects[i].found)
			fail_msg("fixture %s is missing", fx_expects[i].file);
	}
	assert_int_equal(n, NELEM(fx_expects));
}

/* --- 4. fast path against jansson -------------------------------------- */

/*
 * Two assemblers in lockstep, one with the fast path (the default), one
 * with every event going through json_loadb(). Whatever they are fed,
 * every observable must be identical: return values, status, messages,
 * counts, the last event and the assembled result, byte for byte.
 */
struct twin {
	struct response *r[2];	/* fast, jansson */
	size_t fed;
};

static void
twin_init(struct twin *t)
{
	assert_non_null(t->r[0] = response_new());
	assert_non_null(t->r[1] = response_new());
	response_set_fast(t->r[1], 0);
	t->fed = 0;
}

static void
twin_clear(struct twin *t)
{
	response_free(t->r[0]);
	response_free(t->r[1]);
}

static char *
dump_or_null(json_t *v)
{
	return v != NULL ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) :
	    strdup("(null)");
}

static void
twin_same_json(const char *ctx, const char *what, json_t *a, json_t *b)
{
	char *da = dump_or_null(a), *db = dump_or_null(b);

	assert_non_null(da);
	assert_non_null(db);
	if ((a == NULL) != (b == NULL) || (a != NULL && !json_equal(a, b)) ||
	    strcmp(da, db) != 0)
		fail_msg("%s: %s differs\nfast:    %.400s\njansson: %.400s", ctx,
		    what, da, db);
	free(da);
	free(db);
}

static void
twin_same_state(const char *ctx, struct twin *t)
{
	const struct response_usage *u0 = response_usage(t->r[0]);
	const struct response_usage *u1 = response_usage(t->r[1]);

	check_str(ctx, "status", response_status_name(response_status(
	    t->r[0])), response_status_name(response_status(t->r[1])));
	check_str(ctx, "error", response_error(t->r[0]),
	    response_error(t->r[1]));
	check_str(ctx, "code", response_error_code(t->r[0]),
	    response_error_code(t->r[1]));
	check_str(ctx, "id", response_id(t->r[0]), response_id(t->r[1]));
	check_str(ctx, "model", response_model(t->r[0]),
	    response_model(t->r[1]));
	check_num(ctx, "delta bytes", (long long)response_delta_bytes(t->r[0]),
	    (long long)response_delta_bytes(t->r[1]));
	check_num(ctx, "usage", u0 != NULL, u1 != NULL);
	if (u0 != NULL && u1 != NULL && memcmp(u0, u1, sizeof(*u0)) != 0)
		fail_msg("%s: usage differs", ctx);
}

/* Feed both; returns what they returned (the same, or the test fails). */
static int
twin_feed(struct twin *t, const char *ctx, const char *event,
    const char *data, size_t len)
{
	int k0, k1;

	k0 = response_feed(t->r[0], event, data, len);
	k1 = response_feed(t->r[1], event, data, len);
	t->fed++;
	if (k0 != k1)
		fail_msg("%s: feed returned %d (fast) and %d (jansson) for "
		    "%.*s", ctx, k0, k1, (int)(len < 300 ? len : 300), data);
	twin_same_state(ctx, t);
	twin_same_json(ctx, "last event", response_last_event(t->r[0]),
	    response_last_event(t->r[1]));
	return k0;
}

static void
twin_same_result(const char *ctx, struct twin *t)
{
	twin_same_json(ctx, "result", response_result(t->r[0]),
	    response_result(t->r[1]));
}

/* Items for every kind of streamed string: message, reasoning, function
 * call, apply_patch call, custom tool call. */
static const char *const twin_prefix[] = {
	"{\"type\":\"response.created\",\"response\":{\"id\":\"resp_f\","
	    "\"model\":\"m\",\"status\":\"in_progress\",\"output\":[],"
	    "\"temperature\":1.0,\"top_p\":0.25,\"usage\":null}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":0,"
	    "\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":"
	    "\"assistant\",\"content\":[]}}",
	"{\"type\":\"response.content_part.added\",\"item_id\":\"msg_1\","
	    "\"output_index\":0,\"content_index\":0,\"part\":{\"type\":"
	    "\"output_text\",\"text\":\"\",\"annotations\":[]}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":1,"
	    "\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":2,"
	    "\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"name\":"
	    "\"f\",\"call_id\":\"c1\",\"arguments\":\"\"}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":3,"
	    "\"item\":{\"id\":\"ap_1\",\"type\":\"apply_patch_call\","
	    "\"operation\":{\"type\":\"update_file\",\"path\":\"a\"}}}",
	"{\"type\":\"response.output_item.added\",\"output_index\":4,"
	    "\"item\":{\"id\":\"ct_1\",\"type\":\"custom_tool_call\","
	    "\"input\":\"\"}}",
};

#define TD "{\"type\":\"response.output_text.delta\","
#define TI "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,"

/* fast: 1 if the fast path must take it (read without a tree), 0 if it
 * must leave it to jansson (not a streamed string, invalid, or beyond the
 * scanner's limits). */
static const struct fast_case {
	const char *data;
	size_t len;		/* 0: strlen(data) */
	int fast;
} fast_cases[] = {
	{ TD TI "\"delta\":\"plain\"}", 0, 1 },
	{ TD TI "\"delta\":\"\"}", 0, 1 },
	{ TD TI "\"delta\":\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\"}", 0, 1 },
	{ TD TI "\"delta\":\"\\u00e9\\u4E2D\\u0041\\u007f\"}", 0, 1 },
	{ TD TI "\"delta\":\"raw \xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"}",
	    0, 1 },
	{ TD TI "\"delta\":\"\\ud83d\\ude00 \\uD83D\\uDE00\"}", 0, 1 },
	{ TD TI "\"delta\":\"a\\u0000b\"}", 0, 1 },
	{ TD TI "\"delta\":\"\\ud83d\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\ude00\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\ud83d\\u0041\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\ude00\\ud83d\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\ud83dx\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\x\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\u12\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\u12G4\"}", 0, 0 },
	{ TD TI "\"delta\":\"\\\"}", 0, 0 },
	{ TD TI "\"delta\":\"tab\there\"}", 0, 0 },
	{ TD TI "\"delta\":\"ctl\x01\"}", 0, 0 },
	{ TD TI "\"delta\":\"del\x7f\"}", 0, 1 },
	{ TD TI "\"delta\":\"a\0b\"}", sizeof(TD TI "\"delta\":\"a\0b\"}") - 1,
	    0 },
	{ TD TI "\"delta\":\"\xc0\x80\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xc1\xbf\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xe0\x80\xaf\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xed\xa0\x80\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xf4\x90\x80\x80\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xf5\x80\x80\x80\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xe2\x82\"}", 0, 0 },
	{ TD TI "\"delta\":\"\x80\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xf0\x9f\x98\"}", 0, 0 },
	{ TD TI "\"delta\":\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}", 0, 1 },
	/* indexes: -0 is 0; reals, -1 and huge numbers are not indexes */
	{ TD "\"item_id\":\"msg_1\",\"output_index\":-0,\"content_index\":-0,"
	    "\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":1e2,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0.0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":-1,"
	    "\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":1E0,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":null,\"content_index\":"
	    "null,\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":\"0\",\"content_index\":"
	    "true,\"delta\":\"z\"}", 0, 0 },
	{ TD "\"output_index\":null,\"content_index\":0,\"delta\":\"z\"}", 0,
	    1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":"
	    "null,\"content_index\":1,\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":"
	    "1025,\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":"
	    "999999999999999999,\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":"
	    "9223372036854775807,\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":"
	    "99999999999999999999,\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":00,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":01,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":-,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":1.,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":.5,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":1e,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\",\"output_index\":+1,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	/* item_id: wrong, unknown, absent, not a string, escaped */
	{ TD "\"item_id\":\"fc_1\",\"output_index\":0,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":\"msg_9\",\"content_index\":0,\"delta\":\"z\"}", 0,
	    1 },
	{ TD "\"item_id\":\"msg_1\",\"content_index\":0,\"delta\":\"z\"}", 0,
	    1 },
	{ TD "\"output_index\":0,\"content_index\":0,\"delta\":\"z\"}", 0, 1 },
	{ TD "\"item_id\":7,\"output_index\":0,\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg\\u005f1\",\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	{ TD "\"item_id\":\"msg_1\\u0000x\",\"content_index\":0,"
	    "\"delta\":\"z\"}", 0, 0 },
	/* duplicates: jansson keeps the last */
	{ TD TI "\"delta\":\"first\",\"delta\":\"second\"}", 0, 0 },
	{ TD TI "\"output_index\":2,\"delta\":\"z\"}", 0, 0 },
	{ "{\"type\":\"response.refusal.delta\"," TI
	    "\"type\":\"response.output_text.delta\",\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":1,\"x\":[2],\"delta\":\"z\"}", 0, 1 },
	/* other values, skipped */
	{ TD TI "\"logprobs\":[{\"a\":[1,-2.5e-3,{\"b\":null}],\"c\":true},"
	    "false,[],{}],\"sequence_number\":12,\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"obfuscation\":\"x\\u00e9\\\"\",\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"big\":1e400,\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"big\":-1e400,\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"tiny\":1e-400,\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"n\":-0.0,\"m\":0.1,\"k\":123456789.123456789e-3,"
	    "\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"seq\":123456789012345678901234,\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":{\"a\\u0000\":1},\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":{\"a\\u0041\":1},\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"x\":nul,\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":truex,\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":[1,],\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":{\"a\":1,},\"delta\":\"z\"}", 0, 0 },
	{ TD TI "\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"
	    "]]]]]]]]]]]]]]]]]]]]]]]],\"delta\":\"z\"}", 0, 1 },
	{ TD TI "\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]"
	    "]]]]],\"delta\":\"z\"}", 0, 1 },
	/* shape: white space, garbage, missing and mistyped fields */
	{ " \t\r\n{ \"type\" : \"response.output_text.delta\" , \"item_id\" :"
	    " \"msg_1\" , \"output_index\" : 0 , \"content_index\" : 0 , "
	    "\"delta\" : \"ws\" } \n", 0, 1 },
	{ TD TI "\"delta\":\"z\"}x", 0, 0 },
	{ TD TI "\"delta\":\"z\"}{}", 0, 0 },
	{ TD TI "\"delta\":\"z\",}", 0, 0 },
	{ TD TI "\"delta\":\"z\"", 0, 0 },
	{ TD TI "\"delta\":\"z}", 0, 0 },
	{ TD TI "\"delta\" \"z\"}", 0, 0 },
	{ TD TI "\"delta\":\"z\"]", 0, 0 },
	{ TD TI "\"delta\":null}", 0, 0 },
	{ TD TI "\"delta\":5}", 0, 0 },
	{ TD TI "\"delta\":[\"z\"]}", 0, 0 },
	{ TD TI "\"delt\\u0061\":\"z\"}", 0, 0 },
	{ TD TI "\"text\":\"z\"}", 0, 0 },
	{ "{\"type\":\"response.output_text.delt\\u0061\"," TI
	    "\"delta\":\"z\"}", 0, 0 },
	{ "{\"type\":7," TI "\"delta\":\"z\"}", 0, 0 },
	{ "{" TI "\"delta\":\"z\"}", 0, 0 },
	{ "{}", 0, 0 },
	{ "[]", 0, 0 },
	{ "[\"response.output_text.delta\"]", 0, 0 },
	{ "\"response.output_text.delta\"", 0, 0 },
	{ "5", 0, 0 },
	{ "{\"type\":\"response.audio.delta\",\"delta\":\"abc\"}", 0, 0 },
	/* the other streamed strings, and their .done events */
	{ "{\"type\":\"response.refusal.delta\"," TI "\"delta\":\"no\"}", 0,
	    1 },
	{ "{\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":"
	    "\"rs_1\",\"output_index\":1,\"summary_index\":0,\"delta\":"
	    "\"\\u2203x\"}", 0, 1 },
	{ "{\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":"
	    "\"rs_1\",\"output_index\":1,\"summary_index\":-0,"
	    "\"content_index\":\"x\",\"delta\":\"s\"}", 0, 0 },
	{ "{\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":"
	    "\"rs_1\",\"output_index\":1,\"summary_index\":2.0,"
	    "\"delta\":\"s\"}", 0, 0 },
	{ "{\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_1\","
	    "\"output_index\":1,\"content_index\":0,\"delta\":\"r\"}", 0, 1 },
	{ "{\"type\":\"response.function_call_arguments.delta\",\"item_id\":"
	    "\"fc_1\",\"output_index\":2,\"content_index\":\"ignored\","
	    "\"delta\":\"{\\\"a\\\":\"}", 0, 0 },
	{ "{\"type\":\"response.function_call_arguments.done\",\"item_id\":"
	    "\"fc_1\",\"output_index\":2,\"arguments\":\"{\\\"a\\\":1}\"}", 0,
	    1 },
	{ "{\"type\":\"response.apply_patch_call_operation_diff.delta\","
	    "\"item_id\":\"ap_1\",\"output_index\":3,\"delta\":\"@@ -1 +1 @@"
	    "\\n\"}", 0, 1 },
	{ "{\"type\":\"response.custom_tool_call_input.delta\",\"item_id\":"
	    "\"ct_1\",\"output_index\":4,\"delta\":\"in\"}", 0, 1 },
	{ "{\"type\":\"response.custom_tool_call_input.done\",\"item_id\":"
	    "\"ct_1\",\"output_index\":4,\"input\":null}", 0, 0 },
	{ "{\"type\":\"response.output_text.done\"," TI "\"text\":\"all "
	    "\\u00e9\",\"logprobs\":[]}", 0, 1 },
	{ "{\"type\":\"response.output_text.done\"," TI "\"delta\":\"x\"}", 0,
	    0 },
	{ "{\"type\":\"response.output_text.done\"," TI "\"text\":\"a\","
	    "\"text\":\"b\"}", 0, 0 },
	{ "{\"type\":\"error\",\"code\":\"c\\u00e9\",\"message\":\"m\\n\","
	    "\"param\":null}", 0, 0 },
};

static void
fast_case_ctx(char *ctx, size_t size, size_t i)
{
	(void)snprintf(ctx, size, "fast case %zu: %.200s", i,
	    fast_cases[i].data);
}

static void
test_response_fast_cases(void **state)
{
	static const char tail[] = TD TI "\"delta\":\" end\"}";
	static const char completed[] = "{\"type\":\"response.completed\","
	    "\"response\":{\"id\":\"resp_f\",\"status\":\"completed\","
	    "\"output\":[],\"usage\":{\"input_tokens\":3.0,"
	    "\"output_tokens\":2,\"total_tokens\":5}}}";
	char ctx[300];
	struct twin t;
	size_t i, j, len, before;
	int k;

	(void)state;
	for (i = 0; i < NELEM(fast_cases); i++) {
		fast_case_ctx(ctx, sizeof(ctx), i);
		twin_init(&t);
		for (j = 0; j < NELEM(twin_prefix); j++)
			assert_true(twin_feed(&t, ctx, NULL, twin_prefix[j],
			    strlen(twin_prefix[j])) >= 0);
		len = fast_cases[i].len ? fast_cases[i].len :
		    strlen(fast_cases[i].data);
		before = response_fast_count(t.r[0]);
		k = twin_feed(&t, ctx, "message", fast_cases[i].data, len);
		check_num(ctx, "taken by the fast path",
		    (long long)(response_fast_count(t.r[0]) - before),
		    fast_cases[i].fast);
		check_num(ctx, "jansson twin's fast count",
		    (long long)response_fast_count(t.r[1]), 0);
		if (k >= 0) {
			(void)twin_feed(&t, ctx, NULL, tail, strlen(tail));
			twin_same_result(ctx, &t);
			(void)twin_feed(&t, ctx, NULL, completed,
			    strlen(completed));
		}
		check_num(ctx, "finish", response_finish(t.r[0], 0),
		    response_finish(t.r[1], 0));
		twin_same_state(ctx, &t);
		twin_same_result(ctx, &t);
		twin_clear(&t);
	}
}

/*
 * Done events that repeat a long streamed text (response_share.c): the
 * text shared rather than parsed must leave the same trees as jansson,
 * whether it is repeated, under a duplicate key, a key itself, escaped,
 * one byte off, beside a "\u0000", or in an event that fails.
 */
static char *
share_event(const char *tmpl, const char *text)
{
	size_t n = strlen(text), len = 0;
	const char *p;
	char *out;

	for (p = tmpl; *p != '\0'; p++)
		len += *p == '@' ? n : 1;
	assert_non_null(out = malloc(len + 1));
	for (len = 0, p = tmpl; *p != '\0'; p++) {
		if (*p == '@') {
			memcpy(out + len, text, n);
			len += n;
		} else {
			out[len++] = *p;
		}
	}
	out[len] = '\0';
	return out;
}

static void
test_response_fast_shared(void **state)
{
#define SH_PART "{\"type\":\"response.content_part.done\"," TI "\"part\":"
#define SH_ITEM "{\"type\":\"response.output_item.done\",\"output_index\":0," \
	"\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
	static const char *const events[] = {
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\","
		    "\"text\":\"short\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"short\","
		    "\"text\" : \"@\",\"x\":[\"@\",[\"@\"],{\"@\":\"@\"}]}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@!\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"\\u0061@\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\","
		    "\"z\":\"\\u0000\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\","
		    "\"z\":\"\\\\u0000 and \\u00001\"}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\","
		    "\"z\":[\"@\",\"@\",\"@\",\"@\",\"@\",\"@\",\"@\",\"@\","
		    "\"@\",\"@\",\"@\",\"@\",\"@\",\"@\",\"@\",\"@\",\"@\"]}}",
		SH_ITEM "\"content\":[{\"type\":\"output_text\",\"text\":\"@\","
		    "\"annotations\":[]}],\"status\":\"completed\"}}",
		"{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_f\","
		    "\"status\":\"completed\",\"output\":[{\"id\":\"msg_1\","
		    "\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
		    "\"text\":\"@\"}]}],\"usage\":null}}",
	};
	static const char *const bad[] = {	/* each in its own stream */
		"\"@\"",
		"[\"@\"]",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\",}}",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\"}} x",
		SH_PART "{\"type\":\"output_text\",\"text\":\"@\",\"t\":\"\x01\"}}",
	};
	char text[5001], delta[256], ctx[64];
	struct twin t;
	size_t i, j, k;
	char *ev;

	(void)state;
	for (i = 0; i < 1000; i++)
		memcpy(text + 5 * i, "ab\xc3\xa9 ", 5);
	text[5000] = '\0';
	for (k = 0; k <= NELEM(bad); k++) {
		(void)snprintf(ctx, sizeof(ctx), "shared text, stream %zu", k);
		twin_init(&t);
		for (j = 0; j < NELEM(twin_prefix); j++)
			assert_true(twin_feed(&t, ctx, NULL, twin_prefix[j],
			    strlen(twin_prefix[j])) >= 0);
		for (i = 0; i < 100; i++) {
			(void)snprintf(delta, sizeof(delta), TD TI
			    "\"delta\":\"%.50s\"}", text + 50 * i);
			assert_true(twin_feed(&t, ctx, NULL, delta,
			    strlen(delta)) >= 0);
		}
		for (i = 0; i < (k == 0 ? NELEM(events) : 1); i++) {
			ev = share_event(k == 0 ? events[i] : bad[k - 1], text);
			(void)twin_feed(&t, ctx, NULL, ev, strlen(ev));
			twin_same_result(ctx, &t);
			free(ev);
			if (k == 0 && i == 0)	/* shared, not parsed */
				assert_true(json_object_get(json_object_get(
				    response_last_event(t.r[0]), "part"),
				    "text")->refcount > 1);
		}
		check_num(ctx, "finish", response_finish(t.r[0], 0),
		    response_finish(t.r[1], 0));
		twin_same_state(ctx, &t);
		twin_same_result(ctx, &t);
		twin_clear(&t);
	}
#undef SH_PART
#undef SH_ITEM
}

/* What the fast path must make of some deltas, spelled out. */
static void
test_response_fast_values(void **state)
{
	static const struct {
		const char *delta;	/* JSON string body */
		const char *want;
		size_t len;
	} v[] = {
		{ "a\\u0000b", "a\0b", 3 },
		{ "\\ud83d\\ude00", "\xf0\x9f\x98\x80", 4 },
		{ "\\u00e9\\u4e2d", "\xc3\xa9\xe4\xb8\xad", 5 },
		{ "\\\"\\\\\\/\\b\\f\\n\\r\\t", "\"\\/\b\f\n\r\t", 8 },
		{ "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", 4 },
	};
	char data[256];
	struct response *r;
	json_t *text;
	size_t i, j;

	(void)state;
	for (i = 0; i < NELEM(v); i++) {
		assert_non_null(r = response_new());
		for (j = 0; j < 3; j++)
			assert_true(feed(r, NULL, twin_prefix[j]) >= 0);
		(void)snprintf(data, sizeof(data), TD TI "\"delta\":\"%s\"}",
		    v[i].delta);
		assert_int_equal(feed(r, NULL, data), RESPONSE_EV_DELTA);
		assert_int_equal(response_fast_count(r), 1);
		assert_int_equal(response_delta_bytes(r), v[i].len);
		text = path_get(response_result(r), "output/0/content/0/text");
		assert_int_equal(json_string_length(text), v[i].len);
		assert_memory_equal(json_string_value(text), v[i].want,
		    v[i].len);
		/* The event itself, parsed on demand. */
		assert_int_equal(json_string_length(path_get(
		    response_last_event(r), "delta")), v[i].len);
		response_free(r);
	}
}

/* Mutate data in place (it has room for 16 more bytes): one of a few
 * edits that tend to hit the scanner's corners. */
static size_t
mutate(char *data, size_t len, uint64_t *rng)
{
	static const char *const snippets[] = { "\\u0000", "\\ud83d",
	    "\\ude00", "\\ud83d\\ude00", "\\\\", "\\\"", "\xc3\xa9",
	    "\xed\xa0\x80", "\xc0\x80", "1e2", "-0", ".5", "null", ",", " ",
	    "{}", "[]", "\"", "\x01", "\\", "0", "e", "-", "\x80", "}", "]" };
	size_t pos = (size_t)(rng_next(rng) % (len + 1)), n;
	const char *s;

	switch (rng_next(rng) % 4) {
	case 0:		/* delete a byte */
		if (pos < len) {
			memmove(data + pos, data + pos + 1, len - pos - 1);
			len--;
		}
		break;
	case 1:		/* replace a byte */
		if (pos < len) {
			s = snippets[rng_next(rng) % NELEM(snippets)];
			data[pos] = s[0];
		}
		break;
	default:	/* insert a snippet */
		s = snippets[rng_next(rng) % NELEM(snippets)];
		n = strlen(s);
		memmove(data + pos + n, data + pos, len - pos);
		memcpy(data + pos, s, n);
		len += n;
		break;
	}
	return len;
}

/* Is data a streamed-string event (a *.delta, or the *.done carrying
 * the full value), which the fast path reads without a tree? */
static int
is_streamed_string(const char *data)
{
	static const char *const s[][2] = {
		{ "output_text", "text" }, { "refusal", "refusal" },
		{ "reasoning_text", "text" },
		{ "reasoning_summary_text", "text" },
		{ "function_call_arguments", "arguments" },
		{ "mcp_call_arguments", "arguments" },
		{ "custom_tool_call_input", "input" },
		{ "code_interpreter_call_code", "code" },
		{ "apply_patch_call_operation_diff", "diff" },
	};
	json_t *ev = json_loads(data, JSON_ALLOW_NUL, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	char name[96];
	size_t i;
	int yes = 0;

	for (i = 0; type != NULL && i < NELEM(s) && !yes; i++) {
		(void)snprintf(name, sizeof(name), "response.%s.delta", s[i][0]);
		if (strcmp(type, name) == 0)
			yes = json_is_string(json_object_get(ev, "delta"));
		(void)snprintf(name, sizeof(name), "response.%s.done", s[i][0]);
		if (strcmp(type, name) == 0)
			yes = json_is_string(json_object_get(ev, s[i][1]));
	}
	json_decref(ev);
	return yes;
}

/* Every fixture stream through both, as recorded and with random
 * mutations; then the result must be the same too. */
static void
twin_fixture(const char *name, json_t *blocks, uint64_t seed)
{
	char ctx[256], *buf;
	struct twin t;
	json_t *b;
	const char *data, *event;
	size_t i, len, nstreamed = 0;
	uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + 1;

	twin_init(&t);
	for (i = 0; (b = json_array_get(blocks, i)) != NULL; i++) {
		if ((data = path_str(b, "data")) == NULL)
			continue;
		event = path_str(b, "event");
		len = strlen(data);
		assert_non_null(buf = malloc(len + 64));
		memcpy(buf, data, len);
		if (seed > 0 && rng_next(&rng) % 8 == 0)
			len = mutate(buf, len, &rng);
		(void)snprintf(ctx, sizeof(ctx), "%s seed %llu block %zu", name,
		    (unsigned long long)seed, i);
		nstreamed += is_streamed_string(data);
		(void)twin_feed(&t, ctx, event, buf, len);
		free(buf);
	}
	(void)snprintf(ctx, sizeof(ctx), "%s seed %llu", name,
	    (unsigned long long)seed);
	if (seed == 0)	/* as recorded, every streamed string is fast */
		check_num(ctx, "fast events",
		    (long long)response_fast_count(t.r[0]), (long long)nstreamed);
	twin_same_result(ctx, &t);
	check_num(ctx, "finish", response_finish(t.r[0], 0),
	    response_finish(t.r[1], 0));
	twin_same_state(ctx, &t);
	twin_same_result(ctx, &t);
	twin_clear(&t);
}

static void
test_response_fast_fixtures(void **state)
{
	DIR *d;
	struct dirent *de;
	struct fx_expect *e;
	json_t *blocks;
	char *raw;
	size_t len, n = 0;
	uint64_t seed;

	(void)state;
	if ((d = opendir(fx_dir())) == NULL) {
		fail_msg("fixtures directory %s: %s (set AGENTZ_FIXTURES)",
		    fx_dir(), strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if ((e = fx_find(de->d_name)) == NULL || e->kind != FX_STREAM)
			continue;
		raw = fx_read(e->file, &len);
		blocks = fx_blocks(e->file, raw);
		for (seed = 0; seed < 40; seed++)
			twin_fixture(e->file, blocks, seed);
		json_decref(blocks);
		free(raw);
		n++;
	}
	assert_int_equal(closedir(d), 0);
	assert_true(n > 0);
}

/* Bodies (non-streamed responses and error bodies) through both. */
static void
test_response_fast_bodies(void **state)
{
	struct twin t;
	struct fx_expect *e;
	char *raw;
	size_t i, len;

	(void)state;
	for (i = 0; i < NELEM(fx_expects); i++) {
		e = &fx_expects[i];
		if (e->kind != FX_BODY && e->kind != FX_ERROR_BODY)
			continue;
		raw = fx_read(e->file, &len);
		twin_init(&t);
		check_num(e->file, "feed_body", response_feed_body(t.r[0], raw,
		    len), response_feed_body(t.r[1], raw, len));
		check_num(e->file, "fast", (long long)response_fast_count(
		    t.r[0]), 0);
		twin_same_state(e->file, &t);
		twin_same_result(e->file, &t);
		twin_clear(&t);
		free(raw);
	}
}

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
		cmocka_unit_test(test_sse_random),
		cmocka_unit_test(test_response_invalid_json),
		cmocka_unit_test(test_response_filler_unknown),
		cmocka_unit_test(test_response_truncated),
		cmocka_unit_test(test_response_incomplete),
		cmocka_unit_test(test_response_errors),
		cmocka_unit_test(test_response_bounds),
		cmocka_unit_test(test_response_interleaved),
		cmocka_unit_test(test_response_done_wins),
		cmocka_unit_test(test_response_text_done),
		cmocka_unit_test(test_response_bodies),
		cmocka_unit_test(test_response_error_body),
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_response_fast_cases),
		cmocka_unit_test(test_response_fast_values),
		cmocka_unit_test(test_response_fast_shared),
		cmocka_unit_test(test_response_fast_fixtures),
		cmocka_unit_test(test_response_fast_bodies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
