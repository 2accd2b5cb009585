/*
 * test_hosttools.c - the store of host-tool outputs kept for a caller's
 * continuation stays bounded: within its byte budget (oldest evicted),
 * cut to a note when its cell is over, an oversized output kept as a short
 * note (issue 10).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/cells/cells.h"
#include "supervisor/model/hosttools.h"
#include "tests/unit/hostbind.h"

static enum submit_result
ok_submit(void *ctx, uint32_t cell, const char *code, size_t len,
    const char *summary)
{
	(void)ctx;
	(void)cell;
	(void)code;
	(void)len;
	(void)summary;
	return SUBMIT_OK;
}

/* Runs a response resp_<i> holding one host call c_<i>. */
static void
handle(struct hosttools *h, struct host_binding *b, int i, const char *name,
    const char *args)
{
	char rid[32], cid[32], *err = NULL;
	json_t *resp, *outs;

	(void)snprintf(rid, sizeof rid, "resp_%d", i);
	(void)snprintf(cid, sizeof cid, "c_%d", i);
	resp = json_pack("{s:s, s:[{s:s, s:s, s:s, s:s}]}", "id", rid,
	    "output", "type", "function_call", "name", name, "call_id", cid,
	    "arguments", args);
	assert_non_null(resp);
	assert_int_equal(host_handle(h, resp, b, NULL, &outs, &err),
	    HOST_ONLY);
	json_decref(outs);
	json_decref(resp);
}

static void
submit_call(struct hosttools *h, struct host_binding *b, int i)
{
	handle(h, b, i, "set_next_cell_code",
	    "{\"code\": \"print(1)\", \"summary\": \"s\"}");
}

/* The stored output a continuation of resp_<i> gets, or NULL. */
static char *
filled(struct hosttools *h, int i)
{
	char rid[32], *out = NULL;
	json_t *body, *in;

	(void)snprintf(rid, sizeof rid, "resp_%d", i);
	body = json_pack("{s:s, s:[]}", "previous_response_id", rid, "input");
	host_fill(h, body);
	in = json_object_get(body, "input");
	if (json_array_size(in) > 0)
		out = strdup(json_string_value(json_object_get(
		    json_array_get(in, 0), "output")));
	json_decref(body);
	return out;
}

static void
test_store_stays_within_budget_oldest_evicted(void **state)
{
	struct hosttools *h = host_new();
	struct cells hist;
	struct host_binding b = { 1, &hist, ok_submit, NULL };
	char *s;
	int i;

	(void)state;
	cells_init(&hist, 1024);
	hosttools_set_budget(h, 4096);
	for (i = 0; i < 200; i++) {
		submit_call(h, &b, i);
		assert_true(hosttools_stored_bytes(h) <= 4096);
	}
	assert_true(hosttools_stored_bytes(h) > 2048);
	assert_null(filled(h, 0));		/* evicted */
	assert_null(filled(h, 150));
	s = filled(h, 199);			/* the newest is kept */
	assert_non_null(s);
	assert_non_null(strstr(s, "Registered as the next cell"));
	free(s);
	/* kept after use: a stateless caller resends the same items */
	s = filled(h, 199);
	assert_non_null(s);
	free(s);
	hosttools_set_budget(h, 0);
	assert_int_equal(hosttools_stored_bytes(h), 0);
	assert_null(filled(h, 199));
	submit_call(h, &b, 200);		/* nothing fits: not kept */
	assert_int_equal(hosttools_stored_bytes(h), 0);
	cells_clear(&hist);
	hosttools_free(h);
}

/* A history cell whose output is size bytes of 'x'. */
static void
add_big_cell(struct cells *hist, size_t size)
{
	char *code = malloc(size + 1);

	assert_non_null(code);
	memset(code, 'x', size);
	code[size] = '\0';
	assert_non_null(cells_begin(hist, code, size, "big", NULL, -1));
	free(code);
}

static void
test_store_cut_when_the_cell_is_over(void **state)
{
	struct hosttools *h = host_new();
	struct cells hist;
	struct host_binding b3 = { 3, &hist, ok_submit, NULL };
	struct host_binding b4 = { 4, &hist, ok_submit, NULL };
	size_t before;
	char *s;

	(void)state;
	cells_init(&hist, 1024);
	add_big_cell(&hist, 4000);
	submit_call(h, &b3, 1);
	handle(h, &b3, 2, "get_history_cells", "{\"start\": 0, \"end\": 1}");
	submit_call(h, &b4, 3);		/* a repair call, bound ahead */
	s = filled(h, 2);
	assert_non_null(s);
	assert_non_null(strstr(s, "xxxxxxxxxxxxxxxx"));
	free(s);
	before = hosttools_stored_bytes(h);
	hosttools_cell_over(h, 3);
	assert_true(hosttools_stored_bytes(h) < before - 3000);
	/* the line-sized registration stays as it was, the history becomes
	 * a note: a later cell continuing resp_2 still answers every call */
	s = filled(h, 1);
	assert_non_null(s);
	assert_null(strstr(s, "not kept"));
	free(s);
	s = filled(h, 2);
	assert_non_null(s);
	assert_non_null(strstr(s, "not kept after cell 3 ended"));
	free(s);
	s = filled(h, 3);
	assert_non_null(s);
	free(s);
	/* a late answer of cell 3's call is not kept */
	submit_call(h, &b3, 5);
	assert_null(filled(h, 5));
	/* a few cells later even the lines go: flat in the run's length */
	hosttools_cell_over(h, 100);
	assert_null(filled(h, 1));
	assert_int_equal(hosttools_stored_bytes(h), 0);
	cells_clear(&hist);
	hosttools_free(h);
}

static void
test_oversized_output_is_kept_as_a_note(void **state)
{
	struct hosttools *h = host_new();
	struct cells hist;
	struct host_binding b = { 1, &hist, ok_submit, NULL };
	char *code = malloc(20000), *s;

	(void)state;
	assert_non_null(code);
	memset(code, 'x', 19999);
	code[19999] = '\0';
	cells_init(&hist, 1024);
	assert_non_null(cells_begin(&hist, code, strlen(code), "big", NULL,
	    -1));
	hosttools_set_budget(h, 16384);
	handle(h, &b, 1, "get_history_cells", "{\"start\": 0, \"end\": 1}");
	assert_true(hosttools_stored_bytes(h) < 1024);
	s = filled(h, 1);
	assert_non_null(s);
	assert_non_null(strstr(s, "too large for the host to keep"));
	free(s);
	free(code);
	cells_clear(&hist);
	hosttools_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_stays_within_budget_oldest_evicted),
		cmocka_unit_test(test_store_cut_when_the_cell_is_over),
		cmocka_unit_test(test_oversized_output_is_kept_as_a_note),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
