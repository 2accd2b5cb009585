/*
 * test_reqs.c - host requests without trusting their size: a REQUEST's
 * head read from a prefix of its body and the frame skipped unread; the
 * host request table's caps and errors; the JSON span scanner (accepts
 * what json_loadb accepts); the host-tool fill and continuation on input
 * kept as text give the same input as on a jansson tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/socket.h>
#include <unistd.h>
#include <jansson.h>

#include "proto/proto.h"
#include "supervisor/cells/cells.h"
#include "supervisor/run/hostreq.h"
#include "supervisor/model/hosttools.h"
#include "tests/unit/hostbind.h"
#include "supervisor/model/jspan.h"

/* --- the head of a REQUEST and skipping its frame ------------------------- */

static void
encode_request(struct buf *b, uint64_t id, const char *method,
    const char *body, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	m.type = MSG_REQUEST;
	m.u.request.id = id;
	m.u.request.cell = 7;
	m.u.request.method = (struct bytes){ (char *)(uintptr_t)method,
	    strlen(method) };
	m.u.request.body = (struct bytes){ (char *)(uintptr_t)body, len };
	assert_int_equal(msg_encode(&m, b, (size_t)1 << 24), 0);
}

static void
test_request_head_from_a_prefix(void **state)
{
	const size_t n = 300000;
	char *body = malloc(n);
	struct buf b;
	struct msg m;
	size_t i, have;
	int rc;

	(void)state;
	memset(body, 'p', n);
	buf_init(&b);
	encode_request(&b, 70000, "input", body, n);
	have = b.len - PROTO_HEADER_SIZE;
	for (i = 0; i < 16; i++)	/* too short: more bytes needed */
		assert_int_equal(msg_request_head(b.data + PROTO_HEADER_SIZE, i,
		    &m), 0);
	rc = msg_request_head(b.data + PROTO_HEADER_SIZE, 20, &m);
	assert_int_equal(rc, 1);
	assert_int_equal(m.u.request.id, 70000);
	assert_int_equal(m.u.request.cell, 7);
	assert_string_equal(m.u.request.method.ptr, "input");
	assert_null(m.u.request.body.ptr);
	assert_int_equal(m.u.request.body.len, n);
	msg_clear(&m);
	/* not a REQUEST's array */
	assert_int_equal(msg_request_head((const uint8_t *)"\x93", 1, &m), -1);
	assert_true(have > n);
	buf_clear(&b);
	free(body);
}

/* A big frame skipped after its first bytes: its body is never buffered,
 * and the frame after it pops whole. */
static void
test_rx_skip_drops_a_frame_as_it_arrives(void **state)
{
	const size_t n = 1 << 20;
	char *body = malloc(n);
	struct frame_rx rx;
	struct buf b;
	struct msg m;
	const uint8_t *p;
	size_t len, have, off, step = 4096;
	unsigned type;
	int sv[2];

	(void)state;
	memset(body, 'q', n);
	buf_init(&b);
	encode_request(&b, 1, "input", body, n);
	encode_request(&b, 2, "cells", "{}", 2);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	frame_rx_init(&rx, (size_t)1 << 24);
	assert_int_equal(write(sv[1], b.data, 100), 100);
	assert_true(frame_rx_fill(&rx, sv[0]) == 100);
	assert_int_equal(frame_rx_peek(&rx, &type, &len, &p, &have), 1);
	assert_int_equal(type, MSG_REQUEST);
	assert_int_equal(have, 100 - PROTO_HEADER_SIZE);
	frame_rx_skip(&rx);
	for (off = 100; off < b.len; off += step) {
		size_t k = b.len - off < step ? b.len - off : step;

		assert_int_equal(write(sv[1], b.data + off, k), (ssize_t)k);
		assert_true(frame_rx_fill(&rx, sv[0]) > 0);
		assert_true(rx.in.len < 8192);	/* never the big body */
	}
	assert_int_equal(frame_rx_pop(&rx, &m), 1);
	assert_int_equal(m.u.request.id, 2);
	assert_string_equal(m.u.request.method.ptr, "cells");
	msg_clear(&m);
	assert_int_equal(frame_rx_pop(&rx, &m), 0);
	frame_rx_clear(&rx);
	(void)close(sv[0]);
	(void)close(sv[1]);
	buf_clear(&b);
	free(body);
}

/* --- the table -------------------------------------------------------------- */

struct seen {
	int served;
	char type[32], message[160];
};

static void
serve(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct seen *s = ctx;

	(void)c;
	(void)q;
	s->served++;
}

static void
error(void *ctx, uint64_t id, const char *type, const char *message)
{
	struct seen *s = ctx;

	(void)id;
	(void)snprintf(s->type, sizeof s->type, "%s", type);
	(void)snprintf(s->message, sizeof s->message, "%s", message);
}

static void
dispatch(struct seen *s, struct cell *active, const char *method,
    const char *body, size_t len, uint32_t cell)
{
	struct hostreq_handlers h;
	struct msg_request q;
	int i;

	memset(s, 0, sizeof *s);
	memset(&h, 0, sizeof h);
	for (i = 0; i < HOSTREQ_NSLOTS; i++) {
		h.fn[i] = i == HOSTREQ_RUNTIME_INFO ? NULL : serve;
		h.ctx[i] = s;
	}
	h.error = error;
	h.error_ctx = s;
	h.max_frame = (size_t)64 << 20;
	memset(&q, 0, sizeof q);
	q.id = 1;
	q.cell = cell;
	q.method = (struct bytes){ (char *)(uintptr_t)method, strlen(method) };
	q.body = (struct bytes){ (char *)(uintptr_t)body, len };
	hostreq_dispatch(&h, active, &q);
}

static void
test_table_caps_and_errors(void **state)
{
	struct cell c;
	struct seen s;

	(void)state;
	memset(&c, 0, sizeof c);
	c.n = 3;
	assert_int_equal(hostreq_cap("input", 1000000), 65536);
	assert_int_equal(hostreq_cap("cells", 1000000), 65536);
	assert_int_equal(hostreq_cap("call_me", 1000000), 1000000);
	assert_int_equal(hostreq_cap("nope", 1000000), 65536);
	dispatch(&s, &c, "cells", "{}", 2, 3);
	assert_int_equal(s.served, 1);
	dispatch(&s, &c, "input", "{}", 65537, 3);
	assert_int_equal(s.served, 0);
	assert_string_equal(s.type, "ValueError");
	assert_string_equal(s.message, "the input request is 65537 bytes, over "
	    "its 65536-byte cap");
	dispatch(&s, &c, "call_me", NULL, 70 << 20, 3);	/* refused unread */
	assert_string_equal(s.message, "the call_me request is 73400320 bytes, "
	    "over its 67108864-byte cap");
	dispatch(&s, &c, "frobnicate", "{}", 2, 3);
	assert_string_equal(s.type, "RuntimeError");
	assert_string_equal(s.message, "unknown host request method "
	    "'frobnicate'");
	dispatch(&s, &c, "cells", "{}", 2, 2);		/* not the active cell */
	assert_int_equal(s.served, 0);
	assert_non_null(strstr(s.message, "inactive"));
	dispatch(&s, NULL, "call_me", "{}", 2, 3);
	assert_int_equal(s.served, 0);
	dispatch(&s, &c, "runtime_info", "{}", 2, 3);	/* no handler here */
	assert_string_equal(s.message, "runtime_info is not available here");
}

/* --- spans ---------------------------------------------------------------- */

static void
test_jspan_accepts_what_jansson_accepts(void **state)
{
	static const char *const texts[] = {
		"{}", "[]", " [1, -2.5e3, true, false, null, \"x\"] ",
		"{\"a\": {\"b\": [[], {}]}, \"c\": \"\\u00e9\\n\\ud83d\\ude00\"}",
		"\"caf\xc3\xa9\"", "0", "-0.0E+1",
		/* invalid */
		"", "[", "[1,]", "{\"a\" 1}", "{\"a\": 1,}", "01", "1.", "-",
		"\"\\x\"", "\"\x01\"", "\"\xc3\"", "\"\xed\xa0\x80\"",
		"\"\\ud800\"", "\"\\udc00\"", "[1] 2", "tru", "{1: 2}",
		"\"\xc0\xaf\"", "nul",
		/* numbers as jansson converts them, NUL only in values */
		"1e-400", "9223372036854775807", "-9223372036854775808",
		"{\"a\": \"\\u0000\"}", "1e400", "-1E+400",
		"9223372036854775808", "-9223372036854775809",
		"123456789012345678901234", "{\"\\u0000\": 1}",
	};
	json_t *j;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		j = json_loadb(texts[i], strlen(texts[i]), JSON_DECODE_ANY |
		    JSON_ALLOW_NUL, NULL);
		assert_int_equal(jspan_valid(texts[i], strlen(texts[i])),
		    j != NULL);
		json_decref(j);
	}
}

static void
test_jspan_deep_nesting_is_refused_not_a_crash(void **state)
{
	size_t n = 100000, i;
	char *s = malloc(2 * n);

	(void)state;
	for (i = 0; i < n; i++) {
		s[i] = '[';
		s[2 * n - 1 - i] = ']';
	}
	assert_int_equal(jspan_valid(s, 2 * n), 0);
	assert_int_equal(jspan_valid(s + n - 100, 200), 1);
	free(s);
}

static void
test_jspan_iterates_members_and_elements(void **state)
{
	const char *t = "{\"params\": {\"input\": [1, {\"a\": 2}], \"x\": \"y\"},"
	    " \"stream\": true}";
	struct jspan_iter it, in;
	struct jspan k, v, e;
	int n = 0;

	(void)state;
	assert_int_equal(jspan_iter_init(&it, (struct jspan){ t, strlen(t) }),
	    '{');
	assert_int_equal(jspan_iter_next(&it, &k, &v), 1);
	assert_true(jspan_is(k, "params"));
	assert_int_equal(jspan_iter_init(&in, v), '{');
	assert_int_equal(jspan_iter_next(&in, &k, &v), 1);
	assert_true(jspan_is(k, "input"));
	assert_int_equal(jspan_iter_init(&in, v), '[');
	while (jspan_iter_next(&in, NULL, &e))
		n++;
	assert_int_equal(n, 2);
	assert_int_equal(jspan_iter_next(&it, &k, &v), 1);
	assert_true(jspan_is(k, "stream") && jspan_is(v, "true"));
	assert_int_equal(jspan_iter_next(&it, &k, &v), 0);
}

/* --- host tools on text ------------------------------------------------------ */

static enum submit_result
submit_ok(void *ctx, uint32_t cell, const char *code, size_t len,
    const char *summary)
{
	(void)ctx;
	(void)cell;
	(void)code;
	(void)len;
	(void)summary;
	return SUBMIT_OK;
}

/* --- the fill and continuation on a tree, as they were: the reference the
 * text versions are held to ---------------------------------------------- */

/* input as an array: a string is one user message. New reference. */
static json_t *
input_array(const json_t *input)
{
	if (json_is_array(input))
		return json_deep_copy(input);
	if (json_is_string(input))
		return json_pack("[{s:s, s:O}]", "role", "user", "content",
		    input);
	return json_array();
}

static json_t *
ref_continuation(const json_t *input, const json_t *response,
    const json_t *outputs)
{
	json_t *next = input_array(input), *item, *copy;
	const char *type;
	size_t i;

	json_array_foreach(json_object_get(response, "output"), i, item) {
		copy = json_deep_copy(item);
		type = json_string_value(json_object_get(item, "type"));
		/* status is output-only on function_call items */
		if (type != NULL && strcmp(type, "function_call") == 0)
			(void)json_object_del(copy, "status");
		(void)json_array_append_new(next, copy);
	}
	(void)json_array_extend(next, (json_t *)(uintptr_t)outputs);
	return next;
}

static const char *
item_str(const json_t *item, const char *key)
{
	return json_string_value(json_object_get(item, key));
}

static int
is_type(const json_t *item, const char *type)
{
	const char *t = item_str(item, "type");

	return t != NULL && strcmp(t, type) == 0;
}

/* The stored outputs of the response prev_id (may be NULL), or NULL. */
static json_t *
prev_outputs(const struct hosttools *h, const char *prev_id)
{
	return prev_id != NULL ? json_object_get(h->by_response, prev_id) :
	    NULL;
}

/* A new set of the call_ids of prev's outputs. */
static json_t *
prev_ids(const json_t *prev)
{
	json_t *ids = json_object(), *item;
	size_t i;

	json_array_foreach(prev, i, item)
		(void)json_object_set_new(ids, item_str(item, "call_id"),
		    json_true());
	return ids;
}

/* The stored output the host answers an input item of this type and
 * call_id with (a function_call), or NULL. */
static json_t *
host_output(const struct hosttools *h, const char *type, const char *cid)
{
	if (type == NULL || strcmp(type, "function_call") != 0 || cid == NULL)
		return NULL;
	return json_object_get(h->by_call, cid);
}

/* call_ids whose outputs the host provides for this input. */
static json_t *
host_ids(struct hosttools *h, const json_t *prev, const json_t *input)
{
	json_t *ids = prev_ids(prev), *item;
	const char *cid;
	size_t i;

	json_array_foreach(input, i, item) {
		cid = item_str(item, "call_id");
		if (host_output(h, item_str(item, "type"), cid) != NULL)
			(void)json_object_set_new(ids, cid, json_true());
	}
	return ids;
}

static void
ref_fill(struct hosttools *h, json_t *body)
{
	json_t *prev = prev_outputs(h, item_str(body,
	    "previous_response_id"));
	json_t *input, *ids, *added, *next, *item, *stored;
	const char *cid;
	size_t i;

	input = input_array(json_object_get(body, "input"));
	ids = host_ids(h, prev, input);
	if (json_object_size(ids) == 0) {
		json_decref(input);
		json_decref(ids);
		return;
	}
	next = json_array();
	added = prev_ids(prev);
	(void)json_array_extend(next, prev);
	json_array_foreach(input, i, item) {
		cid = item_str(item, "call_id");
		if (is_type(item, "function_call_output") && cid != NULL &&
		    json_object_get(ids, cid) != NULL)
			continue;	/* replaced by the host's own output */
		(void)json_array_append(next, item);
		stored = host_output(h, item_str(item, "type"), cid);
		if (stored != NULL && json_object_get(added, cid) == NULL) {
			(void)json_array_append(next, stored);
			(void)json_object_set_new(added, cid, json_true());
		}
	}
	(void)json_object_set_new(body, "input", next);
	json_decref(input);
	json_decref(ids);
	json_decref(added);
}

static const char response_json[] =
"{\"id\": \"resp_1\", \"output\": ["
"{\"type\": \"function_call\", \"name\": \"set_next_cell_code\","
" \"call_id\": \"host_1\", \"status\": \"completed\", \"arguments\":"
" \"{\\\"code\\\": \\\"x = 1\\\", \\\"summary\\\": \\\"s\\\"}\"},"
"{\"type\": \"function_call\", \"name\": \"weather\","
" \"call_id\": \"ext_1\", \"arguments\": \"{}\"}]}";

/* fill on a tree and on text give the same input. */
static void
fill_both(struct hosttools *h, const char *prev, const char *input)
{
	json_t *body = json_pack("{s:o}", "input", json_loads(input,
	    JSON_DECODE_ANY, NULL)), *raw;
	char *text;
	size_t n = 0;

	if (prev != NULL)
		(void)json_object_set_new(body, "previous_response_id",
		    json_string(prev));
	ref_fill(h, body);
	text = hosttools_fill(h, prev, (struct jspan){ input,
	    strlen(input) }, &n);
	assert_non_null(text);
	raw = json_loadb(text, n, 0, NULL);
	assert_non_null(raw);
	assert_true(json_equal(raw, json_object_get(body, "input")));
	json_decref(raw);
	json_decref(body);
	free(text);
}

static void
test_fill_and_continuation_on_text_match_the_tree(void **state)
{
	struct hosttools *h = host_new();
	struct cells hist;
	struct host_binding b = { 1, &hist, submit_ok, NULL };
	json_t *resp = json_loads(response_json, 0, NULL), *outs, *tree, *raw;
	const char *in_arr = "[{\"role\": \"user\", \"content\": \"q\"}]";
	const char *in_str = "\"the question \\u00e9\"";
	char *err, *text;
	size_t n = 0;

	(void)state;
	cells_init(&hist, 1024);
	assert_int_equal(host_handle(h, resp, &b, NULL, &outs, &err),
	    HOST_EXTERNAL);
	/* continuation, from an array and from a string */
	raw = json_loads(in_arr, 0, NULL);
	tree = ref_continuation(raw, resp, outs);
	json_decref(raw);
	text = hosttools_continuation((struct jspan){ in_arr,
	    strlen(in_arr) }, resp, outs, &n);
	raw = json_loadb(text, n, 0, NULL);
	assert_true(json_equal(raw, tree));
	json_decref(raw);
	free(text);
	json_decref(tree);
	tree = json_loads(in_str, JSON_DECODE_ANY, NULL);
	raw = ref_continuation(tree, resp, outs);
	json_decref(tree);
	tree = raw;
	text = hosttools_continuation((struct jspan){ in_str,
	    strlen(in_str) }, resp, outs, &n);
	raw = json_loadb(text, n, 0, NULL);
	assert_true(json_equal(raw, tree));
	json_decref(raw);
	json_decref(tree);
	free(text);
	/* fill: by previous_response_id (array and string input), and by
	 * the function_call items passed back */
	fill_both(h, "resp_1", "[{\"type\": \"function_call_output\", "
	    "\"call_id\": \"host_1\", \"output\": \"forged\"},"
	    "{\"type\": \"function_call_output\", \"call_id\": \"ext_1\","
	    " \"output\": \"sunny\"}]");
	fill_both(h, "resp_1", in_str);
	fill_both(h, NULL, "[{\"role\": \"user\", \"content\": \"q\"},"
	    "{\"type\": \"function_call\", \"call_id\": \"host_1\","
	    " \"name\": \"set_next_cell_code\", \"arguments\": \"{}\"},"
	    "{\"type\": \"function_call\", \"call_id\": \"ext_1\","
	    " \"name\": \"weather\", \"arguments\": \"{}\"},"
	    "{\"type\": \"function_call_output\", \"call_id\": \"ext_1\","
	    " \"output\": \"sunny\"}]");
	/* nothing to fill: no copy */
	assert_null(hosttools_fill(h, NULL, (struct jspan){ in_arr,
	    strlen(in_arr) }, &n));
	json_decref(outs);
	json_decref(resp);
	cells_clear(&hist);
	hosttools_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_head_from_a_prefix),
		cmocka_unit_test(test_rx_skip_drops_a_frame_as_it_arrives),
		cmocka_unit_test(test_table_caps_and_errors),
		cmocka_unit_test(test_jspan_accepts_what_jansson_accepts),
		cmocka_unit_test(test_jspan_deep_nesting_is_refused_not_a_crash),
		cmocka_unit_test(test_jspan_iterates_members_and_elements),
		cmocka_unit_test(test_fill_and_continuation_on_text_match_the_tree),
	};

	return cmocka_run_group_tests_name("reqs", tests, NULL, NULL);
}
