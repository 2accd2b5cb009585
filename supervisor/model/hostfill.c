/*
 * hostfill.c - building the next request's input (see hosttools.h): the
 * continuation after a host-only response, and filling the stored host
 * outputs into a caller's request, each both on a jansson tree and on an
 * input kept as JSON text (spans).
 */
#include "supervisor/model/hosttools_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

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

json_t *
hosttools_continuation(const json_t *input, const json_t *response,
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

void
hosttools_fill(struct hosttools *h, json_t *body)
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

/* --- the same on input kept as text ---------------------------------------- */

/* A plain (unescaped) string value's text into out (NUL-terminated), or
 * "" when it is escaped, too long or no string. */
static void
span_str(struct jspan v, char *out, size_t size)
{
	out[0] = '\0';
	if (v.n < 2 || v.p[0] != '"' || v.n - 2 >= size ||
	    memchr(v.p, '\\', v.n) != NULL)
		return;
	memcpy(out, v.p + 1, v.n - 2);
	out[v.n - 2] = '\0';
}

/* type and call_id of an input item (an object span). */
static void
span_item(struct jspan item, char *type, char *cid, size_t size)
{
	struct jspan_iter it;
	struct jspan k, v;

	type[0] = cid[0] = '\0';
	if (jspan_iter_init(&it, item) != '{')
		return;
	while (jspan_iter_next(&it, &k, &v)) {
		if (jspan_is(k, "type"))
			span_str(v, type, size);
		else if (jspan_is(k, "call_id"))
			span_str(v, cid, size);
	}
}

static int
put_json(struct buf *b, const json_t *j, int comma)
{
	char *s = json_dumps(j, JSON_COMPACT);
	int rc;

	if (s == NULL)
		return -1;
	rc = (comma && buf_append(b, ",", 1) < 0) ||
	    buf_append(b, s, strlen(s)) < 0 ? -1 : 0;
	free(s);
	return rc;
}

/* call_ids the host answers in this input: prev's, and those of
 * function_call items with a stored output. */
static json_t *
raw_ids(struct hosttools *h, const json_t *prev, struct jspan input)
{
	json_t *ids = prev_ids(prev);
	char type[64], cid[256];
	struct jspan_iter it;
	struct jspan v;

	if (jspan_iter_init(&it, input) != '[')
		return ids;
	while (jspan_iter_next(&it, NULL, &v)) {
		span_item(v, type, cid, sizeof cid);
		if (host_output(h, type, cid[0] != '\0' ? cid : NULL) != NULL)
			(void)json_object_set_new(ids, cid, json_true());
	}
	return ids;
}

/* The input's items, with the host's outputs placed as hosttools_fill
 * does; n counts the items out so far. */
static int
raw_items(struct hosttools *h, struct jspan input, json_t *ids,
    json_t *added, struct buf *b, size_t *n)
{
	char type[64], cid[256];
	struct jspan_iter it;
	json_t *stored;
	struct jspan v;

	if (jspan_kind(input) == '"') {
		static const char open[] = ",{\"role\":\"user\",\"content\":";

		if (buf_append(b, open + (*n == 0), sizeof open - 1 -
		    (*n == 0)) < 0 ||
		    buf_append(b, input.p, input.n) < 0 ||
		    buf_append(b, "}", 1) < 0)
			return -1;
		(*n)++;
		return 0;
	}
	if (jspan_iter_init(&it, input) != '[')
		return 0;
	while (jspan_iter_next(&it, NULL, &v)) {
		span_item(v, type, cid, sizeof cid);
		if (strcmp(type, "function_call_output") == 0 &&
		    json_object_get(ids, cid) != NULL)
			continue;	/* replaced by the host's own output */
		if ((*n > 0 && buf_append(b, ",", 1) < 0) ||
		    buf_append(b, v.p, v.n) < 0)
			return -1;
		(*n)++;
		stored = host_output(h, type, cid[0] != '\0' ? cid : NULL);
		if (stored != NULL && json_object_get(added, cid) == NULL) {
			if (put_json(b, stored, 1) < 0)
				return -1;
			(void)json_object_set_new(added, cid, json_true());
		}
	}
	return 0;
}

char *
hosttools_fill_raw(struct hosttools *h, const char *prev_id,
    struct jspan input, size_t *outlen)
{
	json_t *prev = prev_outputs(h, prev_id);
	json_t *ids = raw_ids(h, prev, input), *added = prev_ids(prev), *item;
	struct buf b;
	size_t i, n = 0;
	int rc = 0;

	buf_init(&b);
	if (json_object_size(ids) == 0 || added == NULL) {
		json_decref(ids);
		json_decref(added);
		return NULL;
	}
	rc = buf_append(&b, "[", 1);
	json_array_foreach(prev, i, item)
		rc |= put_json(&b, item, n++ > 0);
	if (rc == 0)
		rc = raw_items(h, input, ids, added, &b, &n);
	json_decref(ids);
	json_decref(added);
	if (rc != 0 || buf_append(&b, "]", 1) < 0) {
		buf_clear(&b);
		return NULL;
	}
	*outlen = b.len;
	return (char *)b.data;		/* not NUL-terminated: *outlen */
}

char *
hosttools_continuation_raw(struct jspan input, const json_t *response,
    const json_t *outputs, size_t *outlen)
{
	json_t *empty = json_array(), *tail;
	struct jspan_iter it;
	struct jspan v;
	struct buf b;
	size_t n = 0, i;
	int rc;

	tail = hosttools_continuation(empty, response, outputs);
	json_decref(empty);
	buf_init(&b);
	rc = tail == NULL || buf_append(&b, "[", 1) < 0;
	if (rc == 0 && jspan_kind(input) == '"')
		rc = raw_items(NULL, input, NULL, NULL, &b, &n);
	else if (rc == 0 && jspan_iter_init(&it, input) == '[')
		while (rc == 0 && jspan_iter_next(&it, NULL, &v))
			rc = (n++ > 0 && buf_append(&b, ",", 1) < 0) ||
			    buf_append(&b, v.p, v.n) < 0;
	for (i = 0; rc == 0 && i < json_array_size(tail); i++)
		rc = put_json(&b, json_array_get(tail, i), n++ > 0);
	json_decref(tail);
	if (rc != 0 || buf_append(&b, "]", 1) < 0) {
		buf_clear(&b);
		return NULL;
	}
	*outlen = b.len;
	return (char *)b.data;
}
