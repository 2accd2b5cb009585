/*
 * test_response_fast_fx.c - the response assembler's fast path against
 * json_loadb() on every recorded fixture, as recorded and randomly
 * mutated, and on the bodies; everything observable must be identical.
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
#include "tests/unit/model/fx_expects.h"
#include "tests/unit/model/twin.h"

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
		cmocka_unit_test(test_response_fast_fixtures),
		cmocka_unit_test(test_response_fast_bodies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
