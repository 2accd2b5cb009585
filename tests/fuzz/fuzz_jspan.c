/*
 * fuzz_jspan.c - libFuzzer target: the supervisor's one JSON scanner
 * (jspan.c, and the delta fast path built on it, delta.c) against
 * jansson, which it must agree with byte for byte.
 *
 * Each input is used three ways:
 *  - as a whole text: jspan_valid() must say yes exactly when
 *    json_loadb(JSON_DECODE_ANY | JSON_ALLOW_NUL) parses it (a raw NUL
 *    byte aside: never valid, though jansson skips one in some places); for a valid
 *    container every member or element jspan_iter_next() hands out must
 *    be valid on its own, and there must be as many as jansson has
 *    (duplicate keys aside);
 *  - as one event for delta_scan(): when it succeeds, jansson must parse
 *    the text to an object whose fields have the values delta_scan() read
 *    (strings decoded by jspan_unescape());
 *  - as a stream of events, one per line, fed to two response assemblers,
 *    one with the fast path and one without: every feed must return the
 *    same and the results must be equal.
 * Any disagreement aborts, which libFuzzer reports as a crash.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "supervisor/model/delta.h"
#include "supervisor/model/jspan.h"
#include "supervisor/model/response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_fields[DELTA_NFIELDS] = {
	"type", "item_id", "output_index", "content_index", "summary_index",
	"delta", "text", "refusal", "arguments", "input", "code", "diff",
};

/* Abort, which libFuzzer reports, naming the check that failed. */
static void
fuzz_fail(int line, const char *what)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, line, what);
	abort();
}

#define check(ok) ((ok) ? (void)0 : fuzz_fail(__LINE__, #ok))

static int
fuzz_want(const char *type, size_t n, void *arg)
{
	(void)type;
	(void)n;
	(void)arg;
	return 1;
}

/* Members or elements of a valid container, as jspan_iter hands them. */
static void
fuzz_iter(const char *s, size_t len, json_t *j)
{
	struct jspan_iter it;
	struct jspan k, v;
	size_t n = 0;
	int kind = jspan_iter_init(&it, (struct jspan){ s, len });

	check(kind == (json_is_object(j) ? '{' : json_is_array(j) ? '[' : 0));
	if (kind == 0)
		return;
	while (jspan_iter_next(&it, &k, &v)) {
		check(jspan_valid(v.p, v.n));
		n++;
	}
	if (json_is_array(j))
		check(n == json_array_size(j));
	else
		check(n >= json_object_size(j));
}

static void
fuzz_whole(const char *s, size_t len)
{
	json_t *j = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

	/* jansson's lexer loses a raw NUL byte right after a number or a
	 * literal ("1\0", "[true\0]" load); jspan refuses every raw NUL. */
	if (memchr(s, '\0', len) != NULL)
		check(!jspan_valid(s, len));
	else
		check(jspan_valid(s, len) == (j != NULL));
	if (j != NULL && jspan_valid(s, len))
		fuzz_iter(s, len, j);
	json_decref(j);
}

/* A string field as delta_scan() read it: the same as jansson's. */
static void
fuzz_same_string(const struct delta_event *ev, int k, json_t *v)
{
	struct buf b;

	buf_init(&b);
	check(json_is_string(v));
	check(jspan_unescape(ev->str[k], &b) == 0);
	check(b.len == json_string_length(v));
	check(b.len == 0 || memcmp(b.data, json_string_value(v), b.len) == 0);
	buf_clear(&b);
}

static void
fuzz_delta(const char *s, size_t len)
{
	struct delta_event ev;
	json_t *j, *v;
	int k;

	if (delta_scan(s, len, fuzz_want, NULL, &ev) == -1)
		return;
	j = json_loadb(s, len, JSON_ALLOW_NUL, NULL);
	check(json_is_object(j));
	for (k = 0; k < DELTA_NFIELDS; k++) {
		if (!(ev.seen & 1u << k))
			continue;
		v = json_object_get(j, fuzz_fields[k]);
		if (ev.null & 1u << k)
			check(json_is_null(v));
		else if (k >= DELTA_OUTPUT_INDEX && k <= DELTA_SUMMARY_INDEX)
			check(json_is_integer(v) &&
			    json_integer_value(v) == ev.num[k]);
		else
			fuzz_same_string(&ev, k, v);
	}
	check(ev.seen & 1u << DELTA_TYPE);
	json_decref(j);
}

/* One line per event, through both assemblers in lockstep. */
static void
fuzz_twin(const char *s, size_t len)
{
	struct response *r[2];
	const char *nl;
	json_t *a, *b;
	size_t n;

	check((r[0] = response_new()) != NULL);
	check((r[1] = response_new()) != NULL);
	response_set_fast(r[1], 0);
	while (len > 0) {
		nl = memchr(s, '\n', len);
		n = nl != NULL ? (size_t)(nl - s) : len;
		check(response_feed(r[0], NULL, s, n) ==
		    response_feed(r[1], NULL, s, n));
		check(response_delta_bytes(r[0]) == response_delta_bytes(r[1]));
		a = response_last_event(r[0]);
		b = response_last_event(r[1]);
		check(a == b || (a != NULL && b != NULL && json_equal(a, b)));
		n += nl != NULL;
		s += n;
		len -= n;
	}
	check(response_finish(r[0], 0) == response_finish(r[1], 0));
	check(response_status(r[0]) == response_status(r[1]));
	a = response_result(r[0]);
	b = response_result(r[1]);
	check(a != NULL && b != NULL && json_equal(a, b));
	response_free(r[0]);
	response_free(r[1]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;

	fuzz_whole(s, size);
	fuzz_delta(s, size);
	fuzz_twin(s, size);
	return 0;
}
