/*
 * hosttools.c - host tools, their stored outputs and continuation (see
 * hosttools.h).
 */
#include "supervisor/model/hosttools.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "supervisor/cells/history.h"
#include "supervisor/model/rewrite.h"

static const char host_tools_json[] =
"[{\"type\": \"function\", \"name\": \"set_next_cell_code\","
" \"description\": \"Register the complete Python code of the next cell."
" It runs after the current cell ends, in the same persistent namespace."
" This only registers the code; it never executes it. Exactly once per"
" cell: a second call raises NextCellAlreadyScheduled in the cell.\","
" \"strict\": true,"
" \"parameters\": {\"type\": \"object\", \"properties\": {"
"  \"code\": {\"type\": \"string\", \"description\": \"The whole Python"
" source of the next cell.\"},"
"  \"summary\": {\"type\": \"string\", \"description\": \"What the cell"
" does, at most 256 characters.\"}},"
" \"required\": [\"code\", \"summary\"], \"additionalProperties\": false}},"
" {\"type\": \"function\", \"name\": \"get_history_cells\","
" \"description\": \"Return history[start:end] of the cell records (Python"
" slice semantics: negative indices count from the end, out-of-range"
" bounds are truncated), the running cell included with its output so"
" far. With both null, only {total} is returned.\","
" \"strict\": false,"
" \"parameters\": {\"type\": \"object\", \"properties\": {"
"  \"start\": {\"type\": [\"integer\", \"null\"]},"
"  \"end\": {\"type\": [\"integer\", \"null\"]}}}}]";

/* Tool calls that the caller, not the server or the host, must answer. */
static const char *const external_types[] = {
	"function_call", "custom_tool_call", "computer_call",
	"local_shell_call", "shell_call", "apply_patch_call",
	"mcp_approval_request", NULL
};

/* Outputs of a cell that is over are kept up to this size (a
 * set_next_cell_code result is a line); larger ones become a note. */
#define KEPT_AFTER_CELL	1024
/* ... and only for the last few cells that are over: memory stays flat
 * however long the run. */
#define KEPT_CELLS	4

/* What one stored output is counted as beyond its strings (jansson). */
#define STORED_OVERHEAD	256

/* One stored output, in the order stored (the oldest is evicted first). */
struct stored {
	struct stored *next;
	char *resp_id, *call_id;
	uint32_t cell;
	size_t bytes;
};

struct hosttools {
	json_t *defs;
	json_t *by_response;	/* response id -> [function_call_output] */
	json_t *by_call;	/* call_id -> function_call_output item */
	struct stored *head, **tail;
	size_t bytes, budget;
	uint32_t live_from;	/* cells below are over */
};

struct hosttools *
hosttools_new(void)
{
	struct hosttools *h = calloc(1, sizeof *h);

	if (h == NULL)
		return NULL;
	h->tail = &h->head;
	h->budget = HOSTTOOLS_STORE_BUDGET;
	h->defs = json_loads(host_tools_json, 0, NULL);
	h->by_response = json_object();
	h->by_call = json_object();
	if (h->defs == NULL || h->by_response == NULL || h->by_call == NULL) {
		hosttools_free(h);
		return NULL;
	}
	return h;
}

static void
stored_free(struct stored *e)
{
	free(e->resp_id);
	free(e->call_id);
	free(e);
}

void
hosttools_free(struct hosttools *h)
{
	struct stored *e;

	if (h == NULL)
		return;
	while ((e = h->head) != NULL) {
		h->head = e->next;
		stored_free(e);
	}
	json_decref(h->defs);
	json_decref(h->by_response);
	json_decref(h->by_call);
	free(h);
}

const json_t *
hosttools_definitions(const struct hosttools *h)
{
	return h->defs;
}

static int
is_host_call(const struct hosttools *h, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));

	return type != NULL && strcmp(type, "function_call") == 0 &&
	    rewrite_is_host_tool(h->defs, json_string_value(json_object_get(
	    item, "name")));
}

static int
is_external_call(const struct hosttools *h, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	size_t i;

	for (i = 0; type != NULL && external_types[i] != NULL; i++)
		if (strcmp(type, external_types[i]) == 0)
			return !is_host_call(h, item);
	return 0;
}

__attribute__((format(printf, 1, 2))) static char *
msg(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	return rc < 0 ? NULL : s;
}

/* Unicode code points in a UTF-8 string. */
static size_t
utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

/* set_next_cell_code: the tool output, or NULL + *err for HOST_ABORT. */
static char *
run_submit(const json_t *args, const struct host_binding *b, char **err)
{
	const json_t *code = json_object_get(args, "code");
	const char *summary = json_string_value(json_object_get(args,
	    "summary"));
	char buf[160];

	if (!json_is_string(code) || summary == NULL)
		return strdup("Error: set_next_cell_code needs string arguments "
		    "code and summary");
	if (utf8_chars(summary) > SUMMARY_MAX) {
		(void)snprintf(buf, sizeof buf, "Error: summary must be at most "
		    "%d characters (got %zu); nothing was registered",
		    SUMMARY_MAX, utf8_chars(summary));
		return strdup(buf);
	}
	switch (b->submit(b->ctx, b->cell, json_string_value(code),
	    json_string_length(code), summary)) {
	case SUBMIT_OK:
		(void)snprintf(buf, sizeof buf, "Registered as the next cell "
		    "(cell %u); it runs after cell %u ends.", b->cell + 1,
		    b->cell);
		return strdup(buf);
	case SUBMIT_REPAIR:
		(void)snprintf(buf, sizeof buf, "Registered as the repair cell; "
		    "it runs next, as cell %u.", b->cell);
		return strdup(buf);
	case SUBMIT_ALREADY:
		(void)snprintf(buf, sizeof buf, "cell %u already has a successor;"
		    " the first one is kept", b->cell);
		*err = strdup(buf);
		return NULL;
	case SUBMIT_INACTIVE:
	default:
		(void)snprintf(buf, sizeof buf, "Cell %u has finished", b->cell);
		return strdup(buf);
	}
}

static char *
run_history(const json_t *args, const struct host_binding *b)
{
	char *err = NULL, *s;
	char *a = args != NULL ? json_dumps(args, JSON_COMPACT |
	    JSON_ENCODE_ANY) : NULL;
	char *res = history_slice(b->history, a, &err);

	free(a);
	if (res == NULL) {
		s = msg("Error: %s", err != NULL ? err : "bad arguments");
		free(err);
		return s;
	}
	return res;
}

/* Runs one host call; returns its output text, or NULL + *err to abort. */
static char *
run_call(const json_t *item, const struct host_binding *b, char **err)
{
	const char *name = json_string_value(json_object_get(item, "name"));
	const char *argstr = json_string_value(json_object_get(item,
	    "arguments"));
	json_error_t je;
	json_t *args = argstr != NULL && *argstr != '\0' ?
	    json_loads(argstr, 0, &je) : json_object();
	char *out;

	if (!json_is_object(args)) {
		json_decref(args);
		return msg("Error: the arguments of %s are not a JSON object",
		    name);
	}
	if (strcmp(name, "set_next_cell_code") == 0)
		out = run_submit(args, b, err);
	else
		out = run_history(args, b);
	json_decref(args);
	return out;
}

static const char *
item_call_id(const json_t *item)
{
	const char *s = json_string_value(json_object_get(item, "call_id"));

	return s != NULL ? s : "";
}

/* Takes e's output out of both indexes. */
static void
unindex(struct hosttools *h, const struct stored *e)
{
	json_t *list = json_object_get(h->by_response, e->resp_id), *item;
	size_t i;

	(void)json_object_del(h->by_call, e->call_id);
	json_array_foreach(list, i, item)
		if (strcmp(item_call_id(item), e->call_id) == 0) {
			(void)json_array_remove(list, i);
			break;
		}
	if (list != NULL && json_array_size(list) == 0)
		(void)json_object_del(h->by_response, e->resp_id);
}

/* Drops the stored outputs for which drop(e, arg) says so. */
static void
drop_where(struct hosttools *h, int (*drop)(const struct stored *,
    const void *), const void *arg)
{
	struct stored **pp = &h->head, *e;

	while ((e = *pp) != NULL) {
		if (!drop(e, arg)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		unindex(h, e);
		h->bytes -= e->bytes;
		stored_free(e);
	}
	h->tail = pp;
}

static int
is_call(const struct stored *e, const void *call_id)
{
	return strcmp(e->call_id, call_id) == 0;
}

/* Evicts the oldest outputs until need more bytes fit the budget. */
static void
evict(struct hosttools *h, size_t need)
{
	struct stored *e;

	while ((e = h->head) != NULL && h->bytes + need > h->budget) {
		h->head = e->next;
		if (h->head == NULL)
			h->tail = &h->head;
		unindex(h, e);
		h->bytes -= e->bytes;
		stored_free(e);
	}
}


static json_t *output_item(const char *call_id, const char *text);

static void
store(struct hosttools *h, const char *resp_id, const char *call_id,
    uint32_t cell, json_t *item)
{
	const char *text = json_string_value(json_object_get(item, "output"));
	size_t bytes = strlen(resp_id) + strlen(call_id) + STORED_OVERHEAD +
	    (text != NULL ? strlen(text) : 0);
	json_t *list, *small = NULL;
	struct stored *e;
	char note[200];

	if (cell < h->live_from)
		return;		/* a late answer of a cell that is over */
	drop_where(h, is_call, call_id);
	if (bytes > h->budget / 4) {	/* too big to keep: say so instead */
		(void)snprintf(note, sizeof note, "Error: this host tool output "
		    "(%zu bytes) was too large for the host to keep for a "
		    "later request; call the tool again for a smaller part",
		    text != NULL ? strlen(text) : 0);
		item = small = output_item(call_id, note);
		bytes = strlen(resp_id) + strlen(call_id) + STORED_OVERHEAD +
		    strlen(note);
	}
	e = bytes <= h->budget ? calloc(1, sizeof *e) : NULL;
	if (e == NULL || item == NULL || (e->resp_id = strdup(resp_id)) ==
	    NULL || (e->call_id = strdup(call_id)) == NULL) {
		if (e != NULL)
			stored_free(e);
		json_decref(small);
		return;		/* not kept: a later request lacks it */
	}
	evict(h, bytes);
	e->cell = cell;
	e->bytes = bytes;
	*h->tail = e;
	h->tail = &e->next;
	h->bytes += bytes;
	list = json_object_get(h->by_response, resp_id);
	if (list == NULL) {
		list = json_array();
		(void)json_object_set_new(h->by_response, resp_id, list);
	}
	(void)json_array_append(list, item);
	(void)json_object_set(h->by_call, call_id, item);
	json_decref(small);
}

void
hosttools_set_budget(struct hosttools *h, size_t bytes)
{
	h->budget = bytes;
	evict(h, 0);
}

size_t
hosttools_stored_bytes(const struct hosttools *h)
{
	return h->bytes;
}

/*
 * Replaces e's output by a short note once its cell is over: a later
 * cell may still continue the response (previous_response_id), and the
 * API wants an output for every call, but megabytes of history need not
 * stay for it.
 */
static void
shrink(struct hosttools *h, struct stored *e)
{
	char note[200];
	json_t *item, *list, *it;
	size_t i;

	(void)snprintf(note, sizeof note, "Error: this host tool output was "
	    "not kept after cell %u ended; call the tool again if it is "
	    "still needed", e->cell);
	item = output_item(e->call_id, note);
	if (item == NULL)
		return;
	(void)json_object_set(h->by_call, e->call_id, item);
	list = json_object_get(h->by_response, e->resp_id);
	json_array_foreach(list, i, it)
		if (strcmp(item_call_id(it), e->call_id) == 0) {
			(void)json_array_set(list, i, item);
			break;
		}
	json_decref(item);
	h->bytes -= e->bytes;
	e->bytes = strlen(e->resp_id) + strlen(e->call_id) + STORED_OVERHEAD +
	    strlen(note);
	h->bytes += e->bytes;
}

static int
is_old(const struct stored *e, const void *live_from)
{
	return e->cell + KEPT_CELLS < *(const uint32_t *)live_from;
}

void
hosttools_cell_over(struct hosttools *h, uint32_t cell)
{
	struct stored *e;

	if (cell + 1 > h->live_from)
		h->live_from = cell + 1;
	drop_where(h, is_old, &h->live_from);
	for (e = h->head; e != NULL; e = e->next)
		if (e->cell < h->live_from && e->bytes > STORED_OVERHEAD +
		    KEPT_AFTER_CELL)
			shrink(h, e);
}

static json_t *
output_item(const char *call_id, const char *text)
{
	return json_pack("{s:s, s:s, s:s}", "type", "function_call_output",
	    "call_id", call_id, "output", text);
}

enum host_verdict
hosttools_handle(struct hosttools *h, const json_t *response,
    const struct host_binding *b, const struct redact *red,
    json_t **outputs, char **err)
{
	const char *rid = json_string_value(json_object_get(response, "id"));
	const char *cid;
	int hosts = 0, external = 0;
	json_t *item, *out;
	char *text, *clean;
	size_t i, clen;

	*outputs = json_array();
	*err = NULL;
	json_array_foreach(json_object_get(response, "output"), i, item) {
		external += is_external_call(h, item);
		if (!is_host_call(h, item))
			continue;
		hosts++;
		cid = json_string_value(json_object_get(item, "call_id"));
		text = run_call(item, b, err);
		if (text == NULL)
			return HOST_ABORT;
		clean = red != NULL ? redact_string(red, text, strlen(text),
		    &clen) : NULL;
		out = output_item(cid != NULL ? cid : "", clean ? clean : text);
		free(text);
		free(clean);
		(void)json_array_append(*outputs, out);
		if (rid != NULL && cid != NULL)
			store(h, rid, cid, b->cell, out);
		json_decref(out);
	}
	if (external > 0)
		return HOST_EXTERNAL;
	return hosts > 0 ? HOST_ONLY : HOST_NO_CALLS;
}

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

/* call_ids whose outputs the host provides for this input. */
static json_t *
host_ids(struct hosttools *h, const json_t *prev, const json_t *input)
{
	json_t *ids = json_object(), *item;
	const char *cid;
	size_t i;

	json_array_foreach(prev, i, item)
		(void)json_object_set_new(ids, item_str(item, "call_id"),
		    json_true());
	json_array_foreach(input, i, item) {
		cid = item_str(item, "call_id");
		if (is_type(item, "function_call") && cid != NULL &&
		    json_object_get(h->by_call, cid) != NULL)
			(void)json_object_set_new(ids, cid, json_true());
	}
	return ids;
}

void
hosttools_fill(struct hosttools *h, json_t *body)
{
	const char *prev_id = item_str(body, "previous_response_id");
	json_t *prev = prev_id != NULL ? json_object_get(h->by_response,
	    prev_id) : NULL;
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
	added = json_object();
	json_array_foreach(prev, i, item) {
		(void)json_array_append(next, item);
		(void)json_object_set_new(added, item_str(item, "call_id"),
		    json_true());
	}
	json_array_foreach(input, i, item) {
		cid = item_str(item, "call_id");
		if (is_type(item, "function_call_output") && cid != NULL &&
		    json_object_get(ids, cid) != NULL)
			continue;	/* replaced by the host's own output */
		(void)json_array_append(next, item);
		stored = cid != NULL ? json_object_get(h->by_call, cid) : NULL;
		if (is_type(item, "function_call") && stored != NULL &&
		    json_object_get(added, cid) == NULL) {
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
	json_t *ids = json_object(), *item;
	char type[64], cid[256];
	struct jspan_iter it;
	struct jspan v;
	size_t i;

	json_array_foreach(prev, i, item)
		(void)json_object_set_new(ids, item_str(item, "call_id"),
		    json_true());
	if (jspan_iter_init(&it, input) != '[')
		return ids;
	while (jspan_iter_next(&it, NULL, &v)) {
		span_item(v, type, cid, sizeof cid);
		if (strcmp(type, "function_call") == 0 && cid[0] != '\0' &&
		    json_object_get(h->by_call, cid) != NULL)
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
		stored = cid[0] != '\0' ? json_object_get(h->by_call, cid) : NULL;
		if (strcmp(type, "function_call") == 0 && stored != NULL &&
		    json_object_get(added, cid) == NULL) {
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
	json_t *prev = prev_id != NULL ? json_object_get(h->by_response,
	    prev_id) : NULL;
	json_t *ids = raw_ids(h, prev, input), *added = json_object(), *item;
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
	json_array_foreach(prev, i, item) {
		rc |= put_json(&b, item, n++ > 0);
		(void)json_object_set_new(added, item_str(item, "call_id"),
		    json_true());
	}
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
