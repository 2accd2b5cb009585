/*
 * hostfill.c - building the next request's input (see hosttools_int.h):
 * the continuation after a host-only response, and filling the stored
 * host outputs into a caller's request, on an input kept as JSON text
 * (spans), never parsed into a tree.
 */
#include "supervisor/model/hosttools_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

static const char *
item_str(const json_t *item, const char *key)
{
	return json_string_value(json_object_get(item, key));
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
 * call_id with (a function_call), or NULL (also without a store: a
 * continuation's text input has no items). */
static json_t *
host_output(const struct hosttools *h, const char *type, const char *cid)
{
	if (h == NULL || type == NULL || strcmp(type, "function_call") != 0 ||
	    cid == NULL)
		return NULL;
	return json_object_get(h->by_call, cid);
}

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

/* The input's items, with the host's outputs placed (h NULL: none);
 * n counts the items out so far. */
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
hosttools_fill(struct hosttools *h, const char *prev_id,
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

/* The response's output items as the next input has them: function_call
 * items without "status" (output-only). */
static int
put_output_items(struct buf *b, const json_t *response, size_t *n)
{
	const char *type;
	json_t *item, *copy;
	size_t i;
	int rc = 0;

	json_array_foreach(json_object_get(response, "output"), i, item) {
		type = item_str(item, "type");
		if (type == NULL || strcmp(type, "function_call") != 0) {
			rc = put_json(b, item, (*n)++ > 0);
		} else if ((copy = json_copy((json_t *)(uintptr_t)item)) ==
		    NULL) {
			rc = -1;
		} else {
			(void)json_object_del(copy, "status");
			rc = put_json(b, copy, (*n)++ > 0);
			json_decref(copy);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

char *
hosttools_continuation(struct jspan input, const json_t *response,
    const json_t *outputs, size_t *outlen)
{
	struct jspan_iter it;
	struct jspan v;
	struct buf b;
	size_t n = 0, i;
	int rc;

	buf_init(&b);
	rc = buf_append(&b, "[", 1) < 0;
	if (rc == 0 && jspan_kind(input) == '"')
		rc = raw_items(NULL, input, NULL, NULL, &b, &n);
	else if (rc == 0 && jspan_kind(input) == '[' &&
	    jspan_iter_init(&it, input) == '[')
		while (rc == 0 && jspan_iter_next(&it, NULL, &v))
			rc = (n++ > 0 && buf_append(&b, ",", 1) < 0) ||
			    buf_append(&b, v.p, v.n) < 0;
	if (rc == 0)
		rc = put_output_items(&b, response, &n);
	for (i = 0; rc == 0 && i < json_array_size(outputs); i++)
		rc = put_json(&b, json_array_get(outputs, i), n++ > 0);
	if (rc != 0 || buf_append(&b, "]", 1) < 0) {
		buf_clear(&b);
		return NULL;
	}
	*outlen = b.len;
	return (char *)b.data;		/* not NUL-terminated: *outlen */
}
