/*
 * test_core.c - unit tests for the supervisor's pure modules: output
 * capture, UTF-8 cleaning, size parsing, request rewriting, host tools
 * and continuation, history slicing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/size.h"
#include "supervisor/cells/capture.h"
#include "supervisor/cells/cells.h"
#include "supervisor/front/config.h"
#include "supervisor/cells/history.h"
#include "supervisor/model/hosttools.h"
#include "tests/unit/hostbind.h"
#include "supervisor/model/rewrite.h"
#include "supervisor/text/utf8.h"

/* --- capture ------------------------------------------------------------ */

static void
test_capture_small_is_kept_whole(void **state)
{
	struct capture c;
	size_t n;
	char *s;

	(void)state;
	capture_init(&c, 64);
	assert_int_equal(capture_append(&c, "hello ", 6), 0);
	assert_int_equal(capture_append(&c, "world", 5), 0);
	s = capture_text(&c, &n);
	assert_int_equal(n, 11);
	assert_string_equal(s, "hello world");
	assert_int_equal(capture_dropped(&c), 0);
	free(s);
	capture_clear(&c);
}

static void
test_capture_keeps_head_and_tail(void **state)
{
	struct capture c;
	char buf[1000], *s;
	size_t n, i;

	(void)state;
	for (i = 0; i < sizeof buf; i++)
		buf[i] = (char)('a' + i % 26);
	capture_init(&c, 100);
	for (i = 0; i < sizeof buf; i += 7)	/* odd chunks wrap the ring */
		assert_int_equal(capture_append(&c, buf + i,
		    i + 7 <= sizeof buf ? 7 : sizeof buf - i), 0);
	assert_int_equal(c.total, 1000);
	assert_int_equal(capture_dropped(&c), 900);
	s = capture_text(&c, &n);
	assert_memory_equal(s, buf, 50);
	assert_non_null(strstr(s, "[... 900 bytes dropped ...]"));
	assert_memory_equal(s + n - 50, buf + 950, 50);
	free(s);
	capture_clear(&c);
}

static void
test_capture_freeze_keeps_the_text_exactly_sized(void **state)
{
	struct capture c;
	char buf[1000], *before, *after;
	size_t n, m;

	(void)state;
	memset(buf, 'a', sizeof buf);
	capture_init(&c, 100);
	assert_int_equal(capture_append(&c, buf, sizeof buf), 0);
	before = capture_text(&c, &n);
	assert_int_equal(capture_bytes(&c), 100);
	assert_int_equal(capture_freeze(&c), 0);
	assert_int_equal(capture_bytes(&c), n + 1);
	assert_int_equal(capture_dropped(&c), 900);
	assert_int_equal(capture_append(&c, "late", 4), 0);
	assert_int_equal(capture_dropped(&c), 904);
	after = capture_text(&c, &m);
	assert_int_equal(m, n);
	assert_memory_equal(before, after, n);
	free(before);
	free(after);
	assert_int_equal(capture_restore(&c, "abc", 3, 10, 7), 0);
	after = capture_text(&c, &m);
	assert_string_equal(after, "abc");
	assert_int_equal(c.total, 10);
	assert_int_equal(capture_dropped(&c), 7);
	free(after);
	capture_clear(&c);
}

static void
test_capture_one_huge_chunk(void **state)
{
	struct capture c;
	char *big = malloc(1 << 20), *s;
	size_t n;

	(void)state;
	memset(big, 'x', 1 << 20);
	memcpy(big, "HEAD", 4);
	memcpy(big + (1 << 20) - 4, "TAIL", 4);
	capture_init(&c, 4096);
	assert_int_equal(capture_append(&c, big, 1 << 20), 0);
	s = capture_text(&c, &n);
	assert_memory_equal(s, "HEAD", 4);
	assert_memory_equal(s + n - 4, "TAIL", 4);
	assert_int_equal(capture_dropped(&c), (1 << 20) - 4096);
	free(s);
	free(big);
	capture_clear(&c);
}

/* --- utf8 --------------------------------------------------------------- */

static void
test_utf8_sanitize(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "plain", 5, "plain" },
		{ "caf\xc3\xa9", 5, "caf\xc3\xa9" },
		{ "a\xff" "b", 3, "a\xef\xbf\xbd" "b" },
		{ "\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd" },		/* overlong */
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80", 4,				/* > U+10FFFF */
		    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd" },		/* truncated */
		{ "\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80" },
	};
	size_t i, n;
	char *s;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		s = utf8_sanitize(cases[i].in, cases[i].len, &n);
		assert_int_equal(n, strlen(cases[i].out));
		assert_memory_equal(s, cases[i].out, n);
		free(s);
	}
	s = utf8_sanitize("a\0b", 3, &n);	/* NUL is valid UTF-8 */
	assert_int_equal(n, 3);
	assert_memory_equal(s, "a\0b", 3);
	free(s);
}

/* --- sizes ---------------------------------------------------------------- */

static void
test_size_parse(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(size_parse("1024", &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(size_parse("64K", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(size_parse("1.5M", &v), 0);
	assert_int_equal(v, 1572864);
	assert_int_equal(size_parse("4GiB", &v), 0);
	assert_int_equal(v, (uint64_t)4 << 30);
	assert_int_equal(size_parse("lots", &v), -1);
	assert_int_equal(size_parse("-1", &v), -1);
	assert_int_equal(size_parse("5X", &v), -1);
	assert_int_equal(size_parse("", &v), -1);
}

/* Only OpenAI's own host needs a key; local servers and proxies do not. */
static void
test_config_needs_key(void **state)
{
	(void)state;
	assert_true(config_needs_key("https://api.openai.com/v1"));
	assert_true(config_needs_key("HTTPS://API.OpenAI.com/v1"));
	assert_true(config_needs_key("https://api.openai.com:443/v1"));
	assert_true(config_needs_key("https://api.openai.com./v1"));
	assert_true(config_needs_key("https://u:p@api.openai.com/v1"));
	assert_true(config_needs_key("api.openai.com/v1"));
	assert_false(config_needs_key("http://127.0.0.1:8080/v1"));
	assert_false(config_needs_key("http://localhost/proxy/api.openai.com/v1"));
	assert_false(config_needs_key("http://api.openai.com.localhost:9/v1"));
	assert_false(config_needs_key("http://api.openai.com@127.0.0.1/v1"));
	assert_false(config_needs_key("https://openrouter.ai/api/v1"));
	assert_false(config_needs_key("http://x/v1?u=api.openai.com"));
}

/* --- rewrite ------------------------------------------------------------- */

static const struct model_settings settings = {
	"gpt-test", "INSTR", "auto", 1000
};

static json_t *
rewritten(const char *params_json, const json_t *host)
{
	json_t *p = json_loads(params_json, 0, NULL), *b;
	char *err = NULL;

	assert_non_null(p);
	b = rewrite_request(p, &settings, host, &err);
	assert_null(err);
	json_decref(p);
	return b;
}

static void
test_rewrite_effort_only_goes_up(void **state)
{
	static const struct {
		const char *given, *expect;
	} cases[] = {
		{ "{}", "medium" },
		{ "{\"reasoning\": {\"effort\": \"none\"}}", "medium" },
		{ "{\"reasoning\": {\"effort\": \"minimal\"}}", "medium" },
		{ "{\"reasoning\": {\"effort\": \"low\"}}", "medium" },
		{ "{\"reasoning\": {\"effort\": \"medium\"}}", "medium" },
		{ "{\"reasoning\": {\"effort\": \"high\"}}", "high" },
		{ "{\"reasoning\": {\"effort\": \"xhigh\"}}", "xhigh" },
		{ "{\"reasoning\": {\"summary\": \"auto\"}}", "medium" },
		{ "{\"reasoning\": \"high\"}", "medium" },
	};
	struct hosttools *h = host_new();
	size_t i;
	json_t *b;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		b = rewritten(cases[i].given, hosttools_definitions(h));
		assert_string_equal(json_string_value(json_object_get(
		    json_object_get(b, "reasoning"), "effort")), cases[i].expect);
		json_decref(b);
	}
	b = rewritten("{\"reasoning\": {\"effort\": \"low\", \"summary\": "
	    "\"auto\"}}", hosttools_definitions(h));
	assert_string_equal(json_string_value(json_object_get(
	    json_object_get(b, "reasoning"), "summary")), "auto");
	json_decref(b);
	hosttools_free(h);
}

static void
test_rewrite_engine_fields_tools_and_extra_body(void **state)
{
	struct hosttools *h = host_new();
	json_t *b, *tools;
	const char *names[4];
	size_t i;

	(void)state;
	b = rewritten("{\"input\": \"hi\", \"model\": \"cheap\", \"stream\": false,"
	    " \"instructions\": \"mine\", \"background\": true,"
	    " \"temperature\": 0.5, \"timeout\": 3,"
	    " \"tools\": [{\"type\": \"function\", \"name\": \"set_next_cell_code\"},"
	    "  {\"type\": \"function\", \"name\": \"mine\"}],"
	    " \"extra_body\": {\"model\": \"x\", \"tools\": [], \"stream\": false,"
	    "  \"reasoning\": {}, \"timeout\": 1, \"instructions\": \"y\","
	    "  \"top_p\": 0.9, \"temperature\": 0.1}}", hosttools_definitions(h));
	assert_string_equal(json_string_value(json_object_get(b, "model")),
	    "gpt-test");
	assert_string_equal(json_string_value(json_object_get(b,
	    "instructions")), "INSTR");
	assert_true(json_is_true(json_object_get(b, "stream")));
	assert_true(json_is_false(json_object_get(b, "background")));
	assert_int_equal(json_integer_value(json_object_get(b,
	    "max_output_tokens")), 1000);
	assert_string_equal(json_string_value(json_object_get(b,
	    "service_tier")), "auto");
	assert_null(json_object_get(b, "timeout"));
	assert_null(json_object_get(b, "extra_body"));
	/* extra_body merged last, minus the protected keys */
	assert_true(json_real_value(json_object_get(b, "top_p")) == 0.9);
	assert_true(json_real_value(json_object_get(b, "temperature")) == 0.1);
	tools = json_object_get(b, "tools");
	assert_int_equal(json_array_size(tools), 3);
	for (i = 0; i < 3; i++)
		names[i] = json_string_value(json_object_get(json_array_get(
		    tools, i), "name"));
	assert_string_equal(names[0], "mine");
	assert_string_equal(names[1], "set_next_cell_code");
	assert_string_equal(names[2], "get_history_cells");
	assert_true(json_is_true(json_object_get(json_array_get(tools, 1),
	    "strict")));
	json_decref(b);
	hosttools_free(h);
}

static void
test_rewrite_rejects_non_object(void **state)
{
	struct hosttools *h = host_new();
	json_t *p = json_string("x");
	char *err = NULL;

	(void)state;
	assert_null(rewrite_request(p, &settings, hosttools_definitions(h),
	    &err));
	assert_non_null(err);
	free(err);
	json_decref(p);
	hosttools_free(h);
}

/* --- host tools ------------------------------------------------------------ */

struct fake_owner {
	int submits;
	enum submit_result answer;
	char code[64];
};

static enum submit_result
fake_submit(void *ctx, uint32_t cell, const char *code, size_t len,
    const char *summary)
{
	struct fake_owner *o = ctx;

	(void)cell;
	(void)summary;
	o->submits++;
	(void)snprintf(o->code, sizeof o->code, "%.*s", (int)len, code);
	return o->answer;
}

static json_t *
response_with(const char *output_json)
{
	json_t *r = json_pack("{s:s, s:o}", "id", "resp_1", "output",
	    json_loads(output_json, 0, NULL));

	assert_non_null(r);
	return r;
}

#define SUBMIT_CALL(id, code, summary) \
	"{\"type\": \"function_call\", \"name\": \"set_next_cell_code\"," \
	" \"call_id\": \"" id "\", \"status\": \"completed\", \"arguments\":" \
	" \"{\\\"code\\\": \\\"" code "\\\", \\\"summary\\\": \\\"" summary \
	"\\\"}\"}"

static void
test_host_only_response_is_continued(void **state)
{
	struct hosttools *h = host_new();
	struct fake_owner o = { 0, SUBMIT_OK, "" };
	struct cells hist;
	struct host_binding b = { 7, &hist, fake_submit, &o };
	json_t *resp, *outs, *next, *task = json_string("task");
	char *err;

	(void)state;
	cells_init(&hist, 1024);
	resp = response_with("[{\"type\": \"reasoning\", \"id\": \"rs_1\"},"
	    SUBMIT_CALL("call_a", "print(1)", "one") "]");
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_ONLY);
	assert_int_equal(o.submits, 1);
	assert_string_equal(o.code, "print(1)");
	assert_int_equal(json_array_size(outs), 1);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(outs, 0), "call_id")), "call_a");
	next = host_continuation(task, resp, outs);
	json_decref(task);
	/* user message, reasoning, call (no status), output */
	assert_int_equal(json_array_size(next), 4);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(next, 0), "content")), "task");
	assert_null(json_object_get(json_array_get(next, 2), "status"));
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(next, 3), "type")), "function_call_output");
	json_decref(next);
	json_decref(outs);
	json_decref(resp);
	cells_clear(&hist);
	hosttools_free(h);
}

static void
test_second_submission_aborts_and_long_summary_is_refused(void **state)
{
	struct hosttools *h = host_new();
	struct fake_owner o = { 0, SUBMIT_ALREADY, "" };
	struct cells hist;
	struct host_binding b = { 3, &hist, fake_submit, &o };
	char summary[300], out[600], *err = NULL;
	json_t *resp, *outs;

	(void)state;
	cells_init(&hist, 1024);
	resp = response_with("[" SUBMIT_CALL("c1", "x", "y") "]");
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_ABORT);
	assert_non_null(strstr(err, "already has a successor"));
	free(err);
	json_decref(outs);
	json_decref(resp);
	memset(summary, 's', 257);
	summary[257] = '\0';
	(void)snprintf(out, sizeof out, "[" SUBMIT_CALL("c2", "x", "%s") "]",
	    summary);
	resp = response_with(out);
	o.submits = 0;
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_ONLY);
	assert_int_equal(o.submits, 0);
	assert_non_null(strstr(json_string_value(json_object_get(
	    json_array_get(outs, 0), "output")), "at most 256"));
	json_decref(outs);
	json_decref(resp);
	cells_clear(&hist);
	hosttools_free(h);
}

static void
test_inactive_cell_gets_cell_has_finished(void **state)
{
	struct hosttools *h = host_new();
	struct fake_owner o = { 0, SUBMIT_INACTIVE, "" };
	struct cells hist;
	struct host_binding b = { 5, &hist, fake_submit, &o };
	json_t *resp, *outs;
	char *err;

	(void)state;
	cells_init(&hist, 1024);
	resp = response_with("[" SUBMIT_CALL("c1", "x", "y") "]");
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_ONLY);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(outs, 0), "output")), "Cell 5 has finished");
	json_decref(outs);
	json_decref(resp);
	cells_clear(&hist);
	hosttools_free(h);
}

static void
test_external_call_and_both_continuations(void **state)
{
	struct hosttools *h = host_new();
	struct fake_owner o = { 0, SUBMIT_OK, "" };
	struct cells hist;
	struct host_binding b = { 1, &hist, fake_submit, &o };
	json_t *resp, *outs, *body, *in;
	char *err;

	(void)state;
	cells_init(&hist, 1024);
	resp = response_with("[" SUBMIT_CALL("host_1", "x", "y") ","
	    "{\"type\": \"function_call\", \"name\": \"weather\","
	    " \"call_id\": \"ext_1\", \"arguments\": \"{}\"}]");
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_EXTERNAL);
	json_decref(outs);
	json_decref(resp);
	/* via previous_response_id: the host output is added, the caller's
	 * own output for the host call_id is replaced */
	body = json_loads("{\"previous_response_id\": \"resp_1\", \"input\": ["
	    "{\"type\": \"function_call_output\", \"call_id\": \"ext_1\","
	    " \"output\": \"sunny\"},"
	    "{\"type\": \"function_call_output\", \"call_id\": \"host_1\","
	    " \"output\": \"forged\"}]}", 0, NULL);
	host_fill(h, body);
	in = json_object_get(body, "input");
	assert_int_equal(json_array_size(in), 2);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(in, 0), "call_id")), "host_1");
	assert_null(strstr(json_string_value(json_object_get(
	    json_array_get(in, 0), "output")), "forged"));
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(in, 1), "output")), "sunny");
	json_decref(body);
	/* via the function_call items passed back in input */
	body = json_loads("{\"input\": [{\"role\": \"user\", \"content\": \"q\"},"
	    "{\"type\": \"function_call\", \"call_id\": \"host_1\","
	    " \"name\": \"set_next_cell_code\", \"arguments\": \"{}\"},"
	    "{\"type\": \"function_call\", \"call_id\": \"ext_1\","
	    " \"name\": \"weather\", \"arguments\": \"{}\"},"
	    "{\"type\": \"function_call_output\", \"call_id\": \"ext_1\","
	    " \"output\": \"sunny\"}]}", 0, NULL);
	host_fill(h, body);
	in = json_object_get(body, "input");
	assert_int_equal(json_array_size(in), 5);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(in, 2), "type")), "function_call_output");
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(in, 2), "call_id")), "host_1");
	json_decref(body);
	cells_clear(&hist);
	hosttools_free(h);
}

/* --- history ----------------------------------------------------------------- */

static json_t *
slice(struct cells *hist, const char *args)
{
	char *err = NULL, *s = history_slice(hist, args, &err);
	json_t *r = s != NULL ? json_loads(s, 0, NULL) : NULL;

	if (s == NULL) {
		assert_non_null(err);
		free(err);
	}
	free(s);
	return r;
}

static size_t
sliced(struct cells *hist, const char *args, int *first)
{
	json_t *r = slice(hist, args), *cells;
	size_t n;

	assert_non_null(r);
	cells = json_object_get(r, "cells");
	n = json_array_size(cells);
	*first = n > 0 ? (int)json_integer_value(json_object_get(
	    json_array_get(cells, 0), "cell")) : -1;
	json_decref(r);
	return n;
}

static void
test_history_slices_like_python(void **state)
{
	struct cells hist;
	json_t *r;
	int first, i;

	(void)state;
	cells_init(&hist, 1024);
	for (i = 0; i < 5; i++)
		assert_non_null(cells_begin(&hist, "x", 1, NULL, NULL, -1));
	r = slice(&hist, "{}");
	assert_int_equal(json_integer_value(json_object_get(r, "total")), 5);
	assert_null(json_object_get(r, "cells"));
	json_decref(r);
	assert_int_equal(sliced(&hist, "{\"start\": null, \"end\": null}",
	    &first), 0);
	assert_int_equal(sliced(&hist, "{\"start\": -2}", &first), 2);
	assert_int_equal(first, 3);
	assert_int_equal(sliced(&hist, "{\"start\": 1, \"end\": -1}", &first), 3);
	assert_int_equal(first, 1);
	assert_int_equal(sliced(&hist, "{\"start\": -100, \"end\": 2}", &first),
	    2);
	assert_int_equal(first, 0);
	assert_int_equal(sliced(&hist, "{\"start\": 10}", &first), 0);
	assert_int_equal(sliced(&hist, "{\"start\": 3, \"end\": 1}", &first), 0);
	assert_int_equal(sliced(&hist, "{\"end\": 1}", &first), 1);
	assert_null(slice(&hist, "{\"start\": \"1\"}"));
	assert_null(slice(&hist, "{\"start\": 1.5}"));
	assert_null(slice(&hist, "{\"end\": true}"));
	cells_clear(&hist);
}

static void
test_history_slice_is_cut_at_the_reply_bound(void **state)
{
	struct cells hist;
	char code[1000];
	json_t *r, *t;
	int i;

	(void)state;
	memset(code, 'c', sizeof code);
	cells_init(&hist, 1024);
	cells_set_limits(&hist, 0, 3500);
	for (i = 0; i < 5; i++)
		assert_non_null(cells_begin(&hist, code, sizeof code, NULL, NULL,
		    -1));
	r = slice(&hist, "{\"start\": 1}");
	assert_int_equal(json_array_size(json_object_get(r, "cells")), 2);
	t = json_object_get(r, "truncated");
	assert_int_equal(json_integer_value(json_object_get(t, "next_start")),
	    3);
	assert_non_null(strstr(json_string_value(json_object_get(t, "note")),
	    "start=3"));
	json_decref(r);
	cells_set_limits(&hist, 0, 1000);	/* one record is over it */
	r = slice(&hist, "{\"start\": 4}");
	t = json_array_get(json_object_get(r, "cells"), 0);
	assert_int_equal(json_integer_value(json_object_get(t, "cell")), 4);
	assert_non_null(json_object_get(t, "omitted"));
	json_decref(r);
	cells_clear(&hist);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_small_is_kept_whole),
		cmocka_unit_test(test_capture_keeps_head_and_tail),
		cmocka_unit_test(test_capture_one_huge_chunk),
		cmocka_unit_test(test_capture_freeze_keeps_the_text_exactly_sized),
		cmocka_unit_test(test_utf8_sanitize),
		cmocka_unit_test(test_size_parse),
		cmocka_unit_test(test_config_needs_key),
		cmocka_unit_test(test_rewrite_effort_only_goes_up),
		cmocka_unit_test(test_rewrite_engine_fields_tools_and_extra_body),
		cmocka_unit_test(test_rewrite_rejects_non_object),
		cmocka_unit_test(test_host_only_response_is_continued),
		cmocka_unit_test(
		    test_second_submission_aborts_and_long_summary_is_refused),
		cmocka_unit_test(test_inactive_cell_gets_cell_has_finished),
		cmocka_unit_test(test_external_call_and_both_continuations),
		cmocka_unit_test(test_history_slices_like_python),
		cmocka_unit_test(test_history_slice_is_cut_at_the_reply_bound),
	};

	return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
