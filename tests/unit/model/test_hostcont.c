/*
 * test_hostcont.c - unit tests for supervisor/model/hosttools.c: host
 * tools and the continuation of a host-only response.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/cells/cells.h"
#include "supervisor/model/hosttools.h"
#include "tests/unit/hostbind.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_only_response_is_continued),
		cmocka_unit_test(
		    test_second_submission_aborts_and_long_summary_is_refused),
		cmocka_unit_test(test_inactive_cell_gets_cell_has_finished),
		cmocka_unit_test(test_external_call_and_both_continuations),
	};

	return cmocka_run_group_tests_name("hostcont", tests, NULL, NULL);
}
