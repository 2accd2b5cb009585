/*
 * test_redact_stream.c - secret redaction of a stream: secrets split
 * across chunks at every point and fed a byte at a time, what a stream
 * holds back, errors, and a seeded property test. Expected outputs are
 * either written out by hand or computed by a brute-force reference that
 * shares no code with the automaton: mark every byte inside any occurrence
 * of any secret, join bytes that share an occurrence, one marker per
 * joined group.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/text/redact.h"
#include "tests/unit/text/redact_helpers.h"

/* The analyzers know abort() does not return; cmocka's fail() not. */
static void *
xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n)) == NULL)
		abort();
	return p;
}

static int
out_put(void *ctx, const char *p, size_t n)
{
	struct out *o = ctx;

	assert_true(n > 0);		/* the contract: never empty */
	if (o->len + n + 1 > o->cap) {
		o->cap = (o->len + n + 1) * 2;
		o->p = xrealloc(o->p, o->cap);
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
	o->p[o->len] = '\0';
	o->calls++;
	return 0;
}

static void
out_free(struct out *o)
{
	free(o->p);
	memset(o, 0, sizeof *o);
}

/* Streams text[0..n) in chunks of sizes[] (cycled; 0 = all the rest). */
static void
stream_chunks(const struct redact *r, const char *text, size_t n,
    const size_t *sizes, size_t nsizes, struct out *o)
{
	struct redact_stream st;
	size_t off = 0, k = 0;

	redact_stream_init(&st);
	while (off < n) {
		size_t c = sizes[k++ % nsizes];

		if (c == 0 || c > n - off)
			c = n - off;
		assert_int_equal(redact_stream_feed(r, &st, text + off, c,
		    out_put, o), 0);
		off += c;
	}
	assert_int_equal(redact_stream_flush(&st, out_put, o), 0);
	redact_stream_clear(&st);
}

/* The brute-force reference (see the top comment). Caller frees. */
static char *
reference(const struct sec *s, size_t ns, const char *t, size_t n,
    size_t *outlen)
{
	char *cov = xrealloc(NULL, n + 1), *join = xrealloc(NULL, n + 1);
	char *out = xrealloc(NULL, n * REDACT_MARKER_LEN + 1);
	size_t i, j, k, len = 0;

	memset(cov, 0, n + 1);
	memset(join, 0, n + 1);
	for (i = 0; i < n; i++)
		for (k = 0; k < ns; k++) {
			if (s[k].len > n - i ||
			    memcmp(t + i, s[k].p, s[k].len) != 0)
				continue;
			for (j = i; j < i + s[k].len; j++) {
				cov[j] = 1;
				if (j > i)
					join[j] = 1;
			}
		}
	for (i = 0; i < n; i++) {
		if (!cov[i])
			out[len++] = t[i];
		else if (!join[i]) {
			memcpy(out + len, M, REDACT_MARKER_LEN);
			len += REDACT_MARKER_LEN;
		}
	}
	out[len] = '\0';
	free(cov);
	free(join);
	*outlen = len;
	return out;
}

/* Does any secret survive in clear in p[0..n)? */
static int
any_secret_in(const struct sec *s, size_t ns, const char *p, size_t n)
{
	size_t k;

	for (k = 0; k < ns; k++)
		if (memmem(p, n, s[k].p, s[k].len) != NULL)
			return 1;
	return 0;
}

static uint64_t rng_state;

static uint64_t
rng(void)
{
	uint64_t x = rng_state;	/* xorshift64* */

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 2685821657736338717ULL;
}

static size_t
rng_below(size_t n)
{
	return (size_t)(rng() % n);
}

static int
emit_fail(void *ctx, const char *p, size_t n)
{
	(void)ctx;
	(void)p;
	(void)n;
	errno = EPIPE;
	return -1;
}

/* A secret split in two chunks at every point, inside a text. */
static void
test_split_two_chunks(void **state)
{
	static const char *const s[] = { "sk-live-0123456789abcdef",
	    "sk-live-01" };
	static const char text[] = "before sk-live-0123456789abcdef mid "
	    "sk-live-01 after";
	static const char want[] = "before " M " mid " M " after";
	struct redact *r = set_of(s, NITEMS(s));
	struct out o = { 0 };
	size_t k, sizes[2];

	(void)state;
	expect_one(r, text, want);
	for (k = 0; k <= sizeof text - 1; k++) {
		sizes[0] = k;
		sizes[1] = sizeof text;
		stream_chunks(r, text, sizeof text - 1, sizes, k ? 2 : 1, &o);
		assert_string_equal(o.p, want);
		out_free(&o);
	}
	redact_free(r);
}

/* Only the longest suffix that is a proper prefix of a secret waits. */
static void
test_hold_back(void **state)
{
	static const char *const s[] = { "sk-abcdef", "cdXYZ" };
	struct redact *r = set_of(s, NITEMS(s));
	struct redact_stream st;
	struct out o = { 0 };

	(void)state;
	redact_stream_init(&st);
	assert_int_equal(redact_stream_feed(r, &st, "abc sk-ab", 9, out_put,
	    &o), 0);
	assert_string_equal(o.p, "abc ");
	assert_int_equal(redact_stream_feed(r, &st, "c", 1, out_put, &o), 0);
	assert_string_equal(o.p, "abc ");
	assert_int_equal(redact_stream_feed(r, &st, "def!", 4, out_put, &o),
	    0);
	/* Complete and nothing pending: out before any flush. */
	assert_string_equal(o.p, "abc " M "!");
	assert_int_equal(redact_stream_feed(r, &st, " sk-abcd", 8, out_put,
	    &o), 0);
	assert_string_equal(o.p, "abc " M "! ");
	/* The held "sk-abcd" was not a secret after all. */
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_string_equal(o.p, "abc " M "! sk-abcd");
	/* A secret at the very end of a chunk is emitted at once. */
	assert_int_equal(redact_stream_feed(r, &st, "x sk-abcdef", 11,
	    out_put, &o), 0);
	assert_string_equal(o.p, "abc " M "! sk-abcdx " M);
	assert_int_equal(redact_stream_feed(r, &st, " cd", 3, out_put, &o), 0);
	assert_string_equal(o.p, "abc " M "! sk-abcdx " M " ");
	/* The flush starts a new stream: "cd" + "XYZ" is no secret. */
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_int_equal(redact_stream_feed(r, &st, "XY", 2, out_put, &o), 0);
	assert_string_equal(o.p, "abc " M "! sk-abcdx " M " cdXY");
	assert_int_equal(redact_stream_feed(r, &st, "Z", 1, out_put, &o), 0);
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_string_equal(o.p, "abc " M "! sk-abcdx " M " cdXYZ");
	redact_stream_clear(&st);
	out_free(&o);
	redact_free(r);
}

static char *
random_text(const struct sec *s, size_t ns, size_t n, const char *alpha,
    size_t nalpha)
{
	char *t = xrealloc(NULL, n + 1);
	size_t i = 0;

	while (i < n) {
		size_t k = rng_below(ns + 8), c;

		if (k < ns && s[k].len <= n - i) {
			memcpy(t + i, s[k].p, s[k].len);
			i += s[k].len;
			continue;
		}
		c = rng_below(8) + 1;
		for (; c > 0 && i < n; c--)
			t[i++] = alpha[rng_below(nalpha)];
	}
	t[n] = '\0';
	return t;
}

/* Long text fed one byte at a time equals the one-shot result. */
static void
test_one_byte_chunks(void **state)
{
	static const char *const s[] = { "sk-proj-AbCdEfGh0123456789",
	    "ghp_ZZZZyyyyXXXXwwww", "hunter2hunter2", "sk-proj-AbCd" };
	static const char alpha[] = "sk-proj-AbCdghp_ZXhunter2 \n";
	struct redact *r = set_of(s, NITEMS(s));
	struct sec sec[NITEMS(s)];
	struct out o = { 0 };
	size_t i, n = 200000, len, rlen, one = 1;
	char *text, *got, *want;

	(void)state;
	for (i = 0; i < NITEMS(s); i++)
		sec[i] = (struct sec){ s[i], strlen(s[i]) };
	rng_state = 0x9e3779b97f4a7c15ULL;
	text = random_text(sec, NITEMS(sec), n, alpha, sizeof alpha - 1);
	got = redact_string(r, text, n, &len);
	want = reference(sec, NITEMS(sec), text, n, &rlen);
	assert_non_null(got);
	assert_int_equal(len, rlen);
	assert_memory_equal(got, want, len);
	assert_true(len < n);		/* secrets were found */
	stream_chunks(r, text, n, &one, 1, &o);
	assert_int_equal(o.len, len);
	assert_memory_equal(o.p, got, len);
	assert_false(any_secret_in(sec, NITEMS(sec), o.p, o.len));
	out_free(&o);
	free(text);
	free(got);
	free(want);
	redact_free(r);
}

/* Typical sizes: 20 secrets of 20-200 bytes, MBs in 64 KiB chunks. */
static void
test_big_chunks(void **state)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrs"
	    "tuvwxyz0123456789+/";
	char secrets[20][201];
	struct sec sec[20];
	struct redact *r = redact_new();
	struct out o = { 0 };
	size_t i, j, n = 2 << 20, len, rlen, chunk = 64 << 10;
	char *text, *got, *want;

	(void)state;
	assert_non_null(r);
	rng_state = 42;
	for (i = 0; i < 20; i++) {
		sec[i].len = 20 + rng_below(181);
		for (j = 0; j < sec[i].len; j++)
			secrets[i][j] = b64[rng_below(sizeof b64 - 1)];
		sec[i].p = secrets[i];
		assert_int_equal(redact_add(r, sec[i].p, sec[i].len), 0);
	}
	text = random_text(sec, 20, n, b64, sizeof b64 - 1);
	got = redact_string(r, text, n, &len);
	assert_non_null(got);
	want = reference(sec, 20, text, n, &rlen);
	assert_int_equal(len, rlen);
	assert_memory_equal(got, want, len);
	stream_chunks(r, text, n, &chunk, 1, &o);
	assert_int_equal(o.len, len);
	assert_memory_equal(o.p, got, len);
	assert_false(any_secret_in(sec, 20, o.p, o.len));
	out_free(&o);
	free(text);
	free(got);
	free(want);
	redact_free(r);
}

/* One property-test case: random secrets, text and chunking. */
static void
property_case(unsigned iter)
{
	static const char alpha[] = "abc\0";
	char secrets[6][16], *text, *got, *want;
	size_t ns = 1 + rng_below(6), n = rng_below(400), sizes[8];
	size_t i, j, len, rlen;
	struct sec sec[6];
	struct redact *r = redact_new();
	struct out o = { 0 };

	assert_non_null(r);
	for (i = 0; i < ns; i++) {
		sec[i].len = REDACT_MIN_LEN + rng_below(8);
		for (j = 0; j < sec[i].len; j++)
			secrets[i][j] = alpha[rng_below(sizeof alpha - 1)];
		sec[i].p = secrets[i];
		assert_int_equal(redact_add(r, sec[i].p, sec[i].len), 0);
	}
	text = random_text(sec, ns, n, alpha, sizeof alpha - 1);
	for (i = 0; i < NITEMS(sizes); i++)
		sizes[i] = 1 + rng_below(i % 2 ? 3 : 40);
	got = redact_string(r, text, n, &len);
	want = reference(sec, ns, text, n, &rlen);
	stream_chunks(r, text, n, sizes, NITEMS(sizes), &o);
	assert_non_null(got);
	if (len != rlen || memcmp(got, want, len) != 0 || o.len != len ||
	    (len > 0 && memcmp(o.p, got, len) != 0))
		fail_msg("property case %u differs", iter);
	if (any_secret_in(sec, ns, got, len))
		fail_msg("property case %u: a secret survived", iter);
	out_free(&o);
	free(text);
	free(got);
	free(want);
	redact_free(r);
}

static void
test_property(void **state)
{
	unsigned i;

	(void)state;
	rng_state = 0x243f6a8885a308d3ULL;
	for (i = 0; i < 3000; i++)
		property_case(i);
}

static void
test_emit_error_sticky(void **state)
{
	static const char *const s[] = { "secret-value" };
	struct redact *r = set_of(s, NITEMS(s));
	struct redact_stream st;
	struct out o = { 0 };

	(void)state;
	redact_stream_init(&st);
	errno = 0;
	assert_int_equal(redact_stream_feed(r, &st, "hello", 5, emit_fail,
	    NULL), -1);
	assert_int_equal(errno, EPIPE);
	errno = 0;
	assert_int_equal(redact_stream_feed(r, &st, "more", 4, out_put, &o),
	    -1);
	assert_int_equal(errno, EPIPE);
	errno = 0;
	assert_int_equal(redact_stream_flush(&st, out_put, &o), -1);
	assert_int_equal(errno, EPIPE);
	assert_int_equal(o.calls, 0);
	/* Clear makes it usable again. */
	redact_stream_clear(&st);
	assert_int_equal(redact_stream_feed(r, &st, "a secret-value", 14,
	    out_put, &o), 0);
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_string_equal(o.p, "a " M);
	redact_stream_clear(&st);
	out_free(&o);
	redact_free(r);
}

/* A secret added mid-stream: the old ones stay redacted, across the add. */
static void
test_add_mid_stream(void **state)
{
	static const char *const s[] = { "old-secret" };
	struct redact *r = set_of(s, NITEMS(s));
	struct redact_stream st;
	struct out o = { 0 };

	(void)state;
	redact_stream_init(&st);
	assert_int_equal(redact_stream_feed(r, &st, "x old-sec", 9, out_put,
	    &o), 0);
	assert_int_equal(redact_add(r, "new-secret", 10), 0);
	assert_int_equal(redact_add(r, "ret-more", 8), 0);
	assert_int_equal(redact_stream_feed(r, &st, "ret y new-secret z", 18,
	    out_put, &o), 0);
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_string_equal(o.p, "x " M " y " M " z");
	redact_stream_clear(&st);
	out_free(&o);
	redact_free(r);
}

static void
test_empty_set_and_null(void **state)
{
	struct redact *r = redact_new();
	struct redact_stream st;
	struct out o = { 0 };
	size_t len = 99;
	char *got;

	(void)state;
	assert_non_null(r);
	redact_free(NULL);
	got = redact_string(r, NULL, 0, &len);
	assert_non_null(got);
	assert_int_equal(len, 0);
	assert_int_equal(got[0], '\0');
	free(got);
	expect_one(r, "anything at all", "anything at all");
	redact_stream_init(&st);
	assert_int_equal(redact_stream_feed(r, &st, NULL, 0, out_put, &o), 0);
	assert_int_equal(redact_stream_feed(r, &st, "abc", 3, out_put, &o), 0);
	assert_string_equal(o.p, "abc");	/* nothing held back */
	assert_int_equal(redact_stream_flush(&st, out_put, &o), 0);
	assert_int_equal(o.len, 3);
	redact_stream_clear(&st);
	redact_stream_clear(&st);
	out_free(&o);
	redact_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_two_chunks),
		cmocka_unit_test(test_hold_back),
		cmocka_unit_test(test_one_byte_chunks),
		cmocka_unit_test(test_big_chunks),
		cmocka_unit_test(test_property),
		cmocka_unit_test(test_emit_error_sticky),
		cmocka_unit_test(test_add_mid_stream),
		cmocka_unit_test(test_empty_set_and_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
