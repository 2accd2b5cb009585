/*
 * test_rewrite.c - unit tests for supervisor/model/rewrite.c: request
 * rewriting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/model/hosttools.h"
#include "tests/unit/hostbind.h"
#include "supervisor/model/model_int.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewrite_effort_only_goes_up),
		cmocka_unit_test(
		    test_rewrite_engine_fields_tools_and_extra_body),
		cmocka_unit_test(test_rewrite_rejects_non_object),
	};

	return cmocka_run_group_tests_name("rewrite", tests, NULL, NULL);
}
