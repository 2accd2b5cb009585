/*
 * test_response_fast.c - the response assembler's fast path (a scanner
 * of jansson's grammar) against json_loadb(): two assemblers fed the same
 * tricky events; everything observable must be identical, and the fast
 * path must take what it is meant to take.
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
#include "tests/unit/model/twin.h"

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

/* --- 4. fast path against jansson -------------------------------------- */

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_response_fast_cases),
		cmocka_unit_test(test_response_fast_values),
		cmocka_unit_test(test_response_fast_shared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
