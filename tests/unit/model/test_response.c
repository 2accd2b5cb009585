/*
 * test_response.c - unit tests for supervisor/model/response.c: the
 * response assembler on small synthetic streams.
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

/* --- 2. response assembler, synthetic ---------------------------------- */

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
