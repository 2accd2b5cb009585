/*
 * response.c - Responses API stream assembler (see response.h).
 *
 * Events are dispatched through two tables: response_handlers for the
 * lifecycle and item events, response_texts for the streamed string
 * fields (a *.delta event appends a piece, its *.done twin carries the
 * full value). Streamed strings are not written into the items as they
 * arrive: each lives in an accumulator keyed by (output_index, place,
 * part index) and is applied to a copy of its item only when
 * response_result() builds the output. A long answer thus costs O(n)
 * rather than O(n^2) string copies, and the items received from the
 * server, which response_last_event() still exposes, are never modified.
 *
 * Events are read by a strict scanner of jansson's own grammar where it
 * can (see "fast path" below): a *.delta event (and the *.done of a
 * streamed string) without building any json_t, the others into the tree
 * json_loadb() would build. Anything unusual falls back to json_loadb().
 * Both paths end in the same handlers with the same values; for an event
 * read without a tree, response_last_event() parses a kept copy of its
 * data when asked.
 *
 * The status leaves RESPONSE_IN_PROGRESS once and never changes again:
 * the first terminal event or failure decides it, together with the
 * message and code. A protocol error additionally marks the assembler
 * broken, so every later feed returns -1.
 */
#include "supervisor/model/response.h"

#include "proto/proto.h"
#include "supervisor/model/delta.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESPONSE_MAX_ITEMS	4096		/* output_index bound */
#define RESPONSE_MAX_PARTS	1024		/* part index bound */
#define RESPONSE_MAX_TEXT	((size_t)256 << 20) /* streamed text */
#define RESPONSE_MSG_MAX	1024
#define RESPONSE_CODE_MAX	64
#define RESPONSE_NAME_MAX	96
#define RESPONSE_EXCERPT_MAX	200

/* Where a streamed string lands in its item. */
enum response_place {
	PLACE_ITEM,		/* item[field] */
	PLACE_OPERATION,	/* item.operation[field] */
	PLACE_CONTENT,		/* item.content[content_index][field] */
	PLACE_SUMMARY,		/* item.summary[summary_index][field] */
};

/* A streamed string field: field is also the key of the full value in
 * the .done event. part_type names a part created from nothing. */
struct response_text {
	const char *delta;
	const char *done;
	enum response_place place;
	const char *part_type;
	const char *field;
};

static const struct response_text response_texts[] = {
	{ "response.output_text.delta", "response.output_text.done",
	    PLACE_CONTENT, "output_text", "text" },
	{ "response.refusal.delta", "response.refusal.done",
	    PLACE_CONTENT, "refusal", "refusal" },
	{ "response.reasoning_text.delta", "response.reasoning_text.done",
	    PLACE_CONTENT, "reasoning_text", "text" },
	{ "response.reasoning_summary_text.delta",
	    "response.reasoning_summary_text.done",
	    PLACE_SUMMARY, "summary_text", "text" },
	{ "response.function_call_arguments.delta",
	    "response.function_call_arguments.done",
	    PLACE_ITEM, NULL, "arguments" },
	{ "response.mcp_call_arguments.delta",
	    "response.mcp_call_arguments.done",
	    PLACE_ITEM, NULL, "arguments" },
	{ "response.custom_tool_call_input.delta",
	    "response.custom_tool_call_input.done",
	    PLACE_ITEM, NULL, "input" },
	{ "response.code_interpreter_call_code.delta",
	    "response.code_interpreter_call_code.done",
	    PLACE_ITEM, NULL, "code" },
	{ "response.apply_patch_call_operation_diff.delta",
	    "response.apply_patch_call_operation_diff.done",
	    PLACE_OPERATION, NULL, "diff" },
};

/* Terminal events: the status each one means, and the message prefix. */
static const struct response_terminal {
	const char *type;
	enum response_status status;
	const char *what;
} response_terminals[] = {
	{ "response.completed", RESPONSE_COMPLETED, NULL },
	{ "response.incomplete", RESPONSE_INCOMPLETE, "response incomplete" },
	{ "response.failed", RESPONSE_FAILED, "response failed" },
	{ "response.cancelled", RESPONSE_FAILED, "response cancelled" },
};

/* A streamed string, or a part template, for one place of one item. */
struct response_acc {
	size_t slot;
	enum response_place place;
	size_t index;
	const struct response_text *text;	/* NULL until text arrives */
	json_t *part;		/* from a *_part event, or NULL */
	struct buf buf;
	int have_buf;
};

/* Output item at one output_index, as last received. id is borrowed from
 * item (NULL if its "id" is absent or not a string); items are never
 * modified, so it stays valid as long as item. */
struct response_slot {
	json_t *item;
	const char *id;
	size_t idlen;
	int has_id;		/* item has an "id" key of any type */
	int done;
};

/* An index field as response_index() reads it. */
enum response_num_state {
	NUM_ABSENT,		/* no such key, or null */
	NUM_INT,		/* an integer (of any sign) in v */
	NUM_OTHER,		/* anything else */
};

struct response_num {
	enum response_num_state state;
	long long v;
};

/* What an event addresses: an item by output_index (item_id as fallback)
 * and a part index (content_index or summary_index, by place). Filled
 * from a json_t or by the fast path scanner. item_id is NULL if absent
 * or not a string; it need not be NUL-terminated. */
struct response_ref {
	const char *item_id;
	size_t item_id_len;
	struct response_num output_index;
	struct response_num part_index;
};

/* response_last_event() for an event the fast path took: its data, parsed
 * on demand. Behind a pointer so that the const getter may fill ev. */
struct response_lazy {
	struct buf data;
	int pending;		/* data holds the last event */
	json_t *ev;		/* parsed data, or NULL */
};

struct response {
	enum response_status status;
	int broken;		/* protocol error: refuse input */
	int terminal;		/* a terminal event arrived */
	struct response_slot *slots;
	size_t nslots;
	struct response_acc *accs;
	size_t naccs, acccap;
	json_t *id;		/* string */
	json_t *model;		/* string */
	json_t *snapshot;	/* from created / in_progress */
	json_t *final;		/* from the terminal event */
	json_t *last;		/* last event parsed */
	json_t *result;		/* response_result() cache */
	struct response_lazy *lazy;
	struct buf scratch;	/* the fast path's decoded delta */
	int fast_off;		/* response_set_fast(r, 0) */
	size_t nfast;		/* events the fast path took */
	struct response_usage usage;
	int have_usage;
	size_t delta_bytes;
	size_t text_bytes;
	size_t nevents;
	char last_type[RESPONSE_NAME_MAX];
	char code[RESPONSE_CODE_MAX];
	char msg[RESPONSE_MSG_MAX];
};

typedef int response_handler_fn(struct response *, json_t *);

static int response_on_state(struct response *, json_t *);
static int response_on_item(struct response *, json_t *);
static int response_on_content_part(struct response *, json_t *);
static int response_on_summary_part(struct response *, json_t *);
static int response_on_terminal(struct response *, json_t *);
static int response_on_error(struct response *, json_t *);

static const struct response_handler {
	const char *type;
	response_handler_fn *fn;
	enum response_kind kind;
} response_handlers[] = {
	{ "response.created", response_on_state, RESPONSE_EV_STATE },
	{ "response.in_progress", response_on_state, RESPONSE_EV_STATE },
	{ "response.queued", response_on_state, RESPONSE_EV_STATE },
	{ "response.output_item.added", response_on_item, RESPONSE_EV_ITEM },
	{ "response.output_item.done", response_on_item, RESPONSE_EV_ITEM },
	{ "response.content_part.added", response_on_content_part,
	    RESPONSE_EV_OTHER },
	{ "response.content_part.done", response_on_content_part,
	    RESPONSE_EV_OTHER },
	{ "response.reasoning_summary_part.added", response_on_summary_part,
	    RESPONSE_EV_OTHER },
	{ "response.reasoning_summary_part.done", response_on_summary_part,
	    RESPONSE_EV_OTHER },
	{ "response.completed", response_on_terminal, RESPONSE_EV_TERMINAL },
	{ "response.incomplete", response_on_terminal, RESPONSE_EV_TERMINAL },
	{ "response.failed", response_on_terminal, RESPONSE_EV_TERMINAL },
	{ "response.cancelled", response_on_terminal, RESPONSE_EV_TERMINAL },
	{ "error", response_on_error, RESPONSE_EV_ERROR },
};

#define RESPONSE_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* --- messages ---------------------------------------------------------- */

/* Cut an incomplete UTF-8 sequence left at the end of s by truncation. */
static void
response_utf8_trim(char *s, size_t len)
{
	size_t i = len, need;
	unsigned char c;

	while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	c = (unsigned char)s[i - 1];
	need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	if (len - (i - 1) < need)
		s[i - 1] = '\0';
}

/*
 * Make what vsnprintf() (returning n) put in buf safe to print: control
 * characters become spaces (server text ends up on a terminal), a
 * multi-byte character cut by truncation is dropped, and a byte that is
 * not valid UTF-8 becomes '?' (the message must fit a JSON string). The va_list stays
 * in the function that started it.
 */
static void
response_clean(char *buf, size_t size, int n)
{
	size_t k;
	char *s;

	if (n < 0) {
		buf[0] = '\0';
		return;
	}
	if ((size_t)n >= size)
		response_utf8_trim(buf, strlen(buf));
	for (s = buf; *s != '\0'; s += k) {
		k = 1;
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
		else if ((unsigned char)*s >= 0x80 &&
		    (k = jspan_utf8_len(s, strlen(s))) == 0) {
			*s = '?';	/* jansson quotes bad bytes in errors */
			k = 1;
		}
	}
}

static void __attribute__((format(printf, 3, 4)))
response_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	response_clean(buf, size, n);
}

/* Leave RESPONSE_IN_PROGRESS for status, with code (may be NULL) and a
 * message (fmt may be NULL). Later calls change nothing. */
static void __attribute__((format(printf, 4, 5)))
response_set(struct response *r, enum response_status status,
    const char *code, const char *fmt, ...)
{
	if (r->status != RESPONSE_IN_PROGRESS)
		return;
	r->status = status;
	if (code != NULL)
		response_format(r->code, sizeof(r->code), "%s", code);
	if (fmt != NULL) {
		va_list ap;
		int n;

		va_start(ap, fmt);
		n = vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
		va_end(ap);
		response_clean(r->msg, sizeof(r->msg), n);
	}
}

/* A protocol error: record it (if first) and refuse further input. The
 * caller returns -1. */
static void __attribute__((format(printf, 2, 3)))
response_protocol(struct response *r, const char *fmt, ...)
{
	char msg[RESPONSE_MSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	response_clean(msg, sizeof(msg), n);
	r->broken = 1;
	response_set(r, RESPONSE_ERROR, NULL, "%s", msg);
}

/* "event <name>" for messages, or "event #<n>" when it has no name. */
static void
response_event_name(const char *event, size_t n, char *buf, size_t size)
{
	if (event != NULL && *event != '\0' && strcmp(event, "message") != 0)
		response_format(buf, size, "event %s", event);
	else
		response_format(buf, size, "event #%zu", n);
}

/* The code of an error object as text: "code" (string or number), else
 * "type" when use_type is set. "" if neither. */
static void
response_code_str(json_t *obj, int use_type, char *buf, size_t size)
{
	json_t *code = json_object_get(obj, "code");

	buf[0] = '\0';
	if (json_is_string(code))
		response_format(buf, size, "%s", json_string_value(code));
	else if (json_is_integer(code))
		response_format(buf, size, "%lld",
		    (long long)json_integer_value(code));
	else if (use_type && json_is_string(json_object_get(obj, "type")))
		response_format(buf, size, "%s",
		    json_string_value(json_object_get(obj, "type")));
}

/* Fail with "<what>[: <code>][: <message>]" from an error object. */
static void
response_fail_from(struct response *r, const char *what, json_t *err,
    int use_type)
{
	char code[RESPONSE_CODE_MAX];
	const char *msg;

	response_code_str(err, use_type, code, sizeof(code));
	msg = json_string_value(json_object_get(err, "message"));
	if (code[0] != '\0' && msg != NULL)
		response_set(r, RESPONSE_FAILED, code, "%s: %s: %s", what, code,
		    msg);
	else if (msg != NULL)
		response_set(r, RESPONSE_FAILED, NULL, "%s: %s", what, msg);
	else if (code[0] != '\0')
		response_set(r, RESPONSE_FAILED, code, "%s: %s", what, code);
	else
		response_set(r, RESPONSE_FAILED, NULL, "%s", what);
}

/* --- small JSON helpers ------------------------------------------------ */

static void
response_num_from(json_t *v, struct response_num *n)
{
	n->v = 0;
	if (v == NULL || json_is_null(v)) {
		n->state = NUM_ABSENT;
	} else if (json_is_integer(v)) {
		n->state = NUM_INT;
		n->v = json_integer_value(v);
	} else {
		n->state = NUM_OTHER;
	}
}

/* n as an index below max. 1 if valid, 0 if absent or null, -1 if
 * present but not a non-negative integer below max. */
static int
response_num_index(const struct response_num *n, size_t max, size_t *out)
{
	if (n->state == NUM_ABSENT)
		return 0;
	if (n->state != NUM_INT || n->v < 0 ||
	    (unsigned long long)n->v >= max)
		return -1;
	*out = (size_t)n->v;
	return 1;
}

/* Read ev[key] as an index below max, as response_num_index(). */
static int
response_index(json_t *ev, const char *key, size_t max, size_t *out)
{
	struct response_num n;

	response_num_from(json_object_get(ev, key), &n);
	return response_num_index(&n, max, out);
}

/* The addressing fields of ev for a string streamed to place. */
static void
response_ref_from(json_t *ev, enum response_place place,
    struct response_ref *ref)
{
	const char *key = place == PLACE_CONTENT ? "content_index" :
	    place == PLACE_SUMMARY ? "summary_index" : NULL;

	ref->item_id = json_string_value(json_object_get(ev, "item_id"));
	ref->item_id_len = ref->item_id != NULL ? strlen(ref->item_id) : 0;
	response_num_from(json_object_get(ev, "output_index"),
	    &ref->output_index);
	response_num_from(key != NULL ? json_object_get(ev, key) : NULL,
	    &ref->part_index);
}

static long long
response_count(json_t *v)
{
	double d;

	if (json_is_integer(v))
		return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
	if (!json_is_real(v))
		return 0;
	d = json_real_value(v);
	return d > 0 && d < 1e18 ? (long long)d : 0;
}

/* Replace *slot with a new reference to v if v is a string. */
static void
response_keep_string(json_t **slot, json_t *v)
{
	if (!json_is_string(v))
		return;
	json_decref(*slot);
	*slot = json_incref(v);
}

/* obj[key] if it has the given type, else a fresh one put there.
 * Borrowed; NULL when out of memory. */
static json_t *
response_child(json_t *obj, const char *key, json_type type)
{
	json_t *v = json_object_get(obj, key);

	if (v != NULL && json_typeof(v) == type)
		return v;
	v = type == JSON_ARRAY ? json_array() : json_object();
	if (json_object_set_new(obj, key, v) == -1)
		return NULL;
	return v;
}

static void
response_note_meta(struct response *r, json_t *resp)
{
	response_keep_string(&r->id, json_object_get(resp, "id"));
	response_keep_string(&r->model, json_object_get(resp, "model"));
}

static void
response_read_usage(struct response *r, json_t *u)
{
	struct response_usage *us = &r->usage;

	if (!json_is_object(u))
		return;
	us->input_tokens = response_count(json_object_get(u, "input_tokens"));
	us->output_tokens = response_count(json_object_get(u,
	    "output_tokens"));
	us->cached_tokens = response_count(json_object_get(
	    json_object_get(u, "input_tokens_details"), "cached_tokens"));
	us->reasoning_tokens = response_count(json_object_get(
	    json_object_get(u, "output_tokens_details"), "reasoning_tokens"));
	if (json_is_number(json_object_get(u, "total_tokens")))
		us->total_tokens = response_count(json_object_get(u,
		    "total_tokens"));
	else
		us->total_tokens = us->input_tokens + us->output_tokens;
	r->have_usage = 1;
}

/* --- output items and accumulators ------------------------------------- */

/* The slot holds an item whose string "id" is id[0..n) (C string
 * semantics: the ids compare up to their first NUL). */
static int
response_slot_has_id(const struct response_slot *s, const char *id,
    size_t n)
{
	return s->item != NULL && s->id != NULL && s->idlen == n &&
	    memcmp(s->id, id, n) == 0;
}

/* The slot an event's item_id / output_index names; 0 if none. */
static int
response_find(struct response *r, const struct response_ref *ref,
    size_t *slotp)
{
	const char *id = ref->item_id;
	size_t i, n = ref->item_id_len;

	if (response_num_index(&ref->output_index, r->nslots, &i) == 1 &&
	    r->slots[i].item != NULL && (id == NULL || !r->slots[i].has_id ||
	    response_slot_has_id(&r->slots[i], id, n))) {
		*slotp = i;
		return 1;
	}
	for (i = 0; id != NULL && i < r->nslots; i++) {
		if (response_slot_has_id(&r->slots[i], id, n)) {
			*slotp = i;
			return 1;
		}
	}
	return 0;
}

static void
response_acc_clear(struct response_acc *a)
{
	json_decref(a->part);
	buf_clear(&a->buf);
}

/* Forget what was streamed for a slot: a new copy of its item wins. */
static void
response_acc_drop(struct response *r, size_t slot)
{
	size_t i, j = 0;

	for (i = 0; i < r->naccs; i++) {
		if (r->accs[i].slot == slot)
			response_acc_clear(&r->accs[i]);
		else
			r->accs[j++] = r->accs[i];
	}
	r->naccs = j;
}

static struct response_acc *
response_acc_new(struct response *r, size_t slot, enum response_place place,
    size_t index)
{
	struct response_acc *a;

	if (r->naccs == r->acccap) {
		size_t cap = r->acccap ? r->acccap * 2 : 8;

		if ((a = realloc(r->accs, cap * sizeof(*a))) == NULL)
			return NULL;
		r->accs = a;
		r->acccap = cap;
	}
	a = &r->accs[r->naccs++];
	memset(a, 0, sizeof(*a));
	a->slot = slot;
	a->place = place;
	a->index = index;
	return a;
}

/*
 * The accumulator an event addresses, created if needed. 1 with *ap set;
 * 0 when its item is unknown or already done (the event is ignored); -1
 * on a protocol error or out of memory.
 */
static int
response_acc_for(struct response *r, const struct response_ref *ref,
    enum response_place place, struct response_acc **ap)
{
	const char *key = place == PLACE_CONTENT ? "content_index" :
	    place == PLACE_SUMMARY ? "summary_index" : NULL;
	size_t i, slot, index = 0;

	if (!response_find(r, ref, &slot) || r->slots[slot].done)
		return 0;
	if (key != NULL && response_num_index(&ref->part_index,
	    RESPONSE_MAX_PARTS, &index) == -1) {
		response_protocol(r, "%s out of range in %s", key,
		    r->last_type);
		return -1;
	}
	for (i = r->naccs; i-- > 0;) {
		if (r->accs[i].slot == slot && r->accs[i].place == place &&
		    r->accs[i].index == index) {
			*ap = &r->accs[i];
			return 1;
		}
	}
	if ((*ap = response_acc_new(r, slot, place, index)) == NULL) {
		response_protocol(r, "out of memory");
		return -1;
	}
	return 1;
}

static int
response_acc_append(struct response *r, struct response_acc *a,
    const char *p, size_t n)
{
	r->text_bytes += n;
	if (r->text_bytes > RESPONSE_MAX_TEXT) {
		response_protocol(r, "streamed output exceeds %zu bytes",
		    RESPONSE_MAX_TEXT);
		return -1;
	}
	if (buf_append(&a->buf, p, n) == -1) {
		response_protocol(r, "out of memory");
		return -1;
	}
	a->have_buf = 1;
	return 0;
}

/* Set the accumulated string as obj[field]. */
static int
response_acc_set(const struct response_acc *a, json_t *obj)
{
	if (!a->have_buf || a->text == NULL)
		return 0;
	return json_object_set_new(obj, a->text->field,
	    json_stringn(a->buf.data != NULL ? (const char *)a->buf.data :
	    "", a->buf.len));
}

/* The part to fill: the template, else the item's own, else a new one. */
static json_t *
response_acc_base(const struct response_acc *a, json_t *existing)
{
	json_t *part;

	if (a->part != NULL)
		return json_deep_copy(a->part);
	if (json_is_object(existing))
		return json_deep_copy(existing);
	if ((part = json_object()) == NULL)
		return NULL;
	if (a->text != NULL && a->text->part_type != NULL &&
	    json_object_set_new(part, "type",
	    json_string(a->text->part_type)) == -1) {
		json_decref(part);
		return NULL;
	}
	return part;
}

static int
response_acc_part(const struct response_acc *a, json_t *item,
    const char *key)
{
	json_t *arr, *part;

	if ((arr = response_child(item, key, JSON_ARRAY)) == NULL)
		return -1;
	part = response_acc_base(a, json_array_get(arr, a->index));
	if (part == NULL || response_acc_set(a, part) == -1) {
		json_decref(part);
		return -1;
	}
	while (json_array_size(arr) < a->index) {
		if (json_array_append_new(arr, json_null()) == -1) {
			json_decref(part);
			return -1;
		}
	}
	if (json_array_size(arr) == a->index)
		return json_array_append_new(arr, part);
	return json_array_set_new(arr, a->index, part);
}

static int
response_acc_apply(const struct response_acc *a, json_t *item)
{
	json_t *op;

	switch (a->place) {
	case PLACE_ITEM:
		return response_acc_set(a, item);
	case PLACE_OPERATION:
		op = response_child(item, "operation", JSON_OBJECT);
		if (op == NULL)
			return -1;
		return response_acc_set(a, op);
	case PLACE_CONTENT:
		return response_acc_part(a, item, "content");
	case PLACE_SUMMARY:
		return response_acc_part(a, item, "summary");
	}
	return -1;
}

/* A new reference to the item at slot with its streamed strings applied. */
static json_t *
response_build_item(const struct response *r, size_t slot)
{
	json_t *item;
	size_t i;

	if ((item = json_deep_copy(r->slots[slot].item)) == NULL)
		return NULL;
	for (i = 0; i < r->naccs; i++) {
		if (r->accs[i].slot == slot &&
		    response_acc_apply(&r->accs[i], item) == -1) {
			json_decref(item);
			return NULL;
		}
	}
	return item;
}

/* The assembled output array (new reference), NULL if out of memory. */
static json_t *
response_assemble(const struct response *r)
{
	json_t *out, *item;
	size_t i;

	if ((out = json_array()) == NULL)
		return NULL;
	for (i = 0; i < r->nslots; i++) {
		if (r->slots[i].item == NULL)
			continue;
		if ((item = response_build_item(r, i)) == NULL ||
		    json_array_append_new(out, item) == -1) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* The slot output_item.added/.done writes: output_index, else the slot
 * holding the same item id, else a new one at the end. */
static int
response_slot_for(struct response *r, json_t *ev, json_t *item,
    size_t *slotp)
{
	const char *id = json_string_value(json_object_get(item, "id"));
	struct response_slot *s;
	size_t i, n;
	int rc;

	rc = response_index(ev, "output_index", RESPONSE_MAX_ITEMS, slotp);
	if (rc == -1) {
		response_protocol(r, "output_index out of range in %s",
		    r->last_type);
		return -1;
	}
	for (i = 0; rc == 0 && id != NULL && i < r->nslots; i++) {
		if (response_slot_has_id(&r->slots[i], id, strlen(id))) {
			*slotp = i;
			rc = 1;
		}
	}
	if (rc == 0 && (*slotp = r->nslots) >= RESPONSE_MAX_ITEMS) {
		response_protocol(r, "more than %d output items",
		    RESPONSE_MAX_ITEMS);
		return -1;
	}
	if (*slotp < r->nslots)
		return 0;
	n = *slotp + 1;
	if ((s = realloc(r->slots, n * sizeof(*s))) == NULL) {
		response_protocol(r, "out of memory");
		return -1;
	}
	memset(s + r->nslots, 0, (n - r->nslots) * sizeof(*s));
	r->slots = s;
	r->nslots = n;
	return 0;
}

/* --- event handlers ---------------------------------------------------- */

static int
response_on_state(struct response *r, json_t *ev)
{
	json_t *resp = json_object_get(ev, "response");

	if (!json_is_object(resp))
		return 0;
	json_decref(r->snapshot);
	r->snapshot = json_incref(resp);
	response_note_meta(r, resp);
	return 0;
}

static int
response_on_item(struct response *r, json_t *ev)
{
	json_t *item = json_object_get(ev, "item");
	struct response_slot *s;
	size_t slot = 0;

	if (!json_is_object(item)) {
		response_protocol(r, "%s without an item object",
		    r->last_type);
		return -1;
	}
	if (response_slot_for(r, ev, item, &slot) == -1)
		return -1;
	response_acc_drop(r, slot);
	s = &r->slots[slot];
	json_decref(s->item);
	s->item = json_incref(item);
	s->has_id = json_object_get(item, "id") != NULL;
	s->id = json_string_value(json_object_get(item, "id"));
	s->idlen = s->id != NULL ? strlen(s->id) : 0;
	s->done = strcmp(r->last_type, "response.output_item.done") == 0;
	return 0;
}

static int
response_on_part(struct response *r, json_t *ev, enum response_place place)
{
	json_t *part = json_object_get(ev, "part");
	struct response_acc *a;
	struct response_ref ref;
	size_t n = strlen(r->last_type);
	int rc;

	if (!json_is_object(part))
		return 0;
	response_ref_from(ev, place, &ref);
	if ((rc = response_acc_for(r, &ref, place, &a)) != 1)
		return rc;
	json_decref(a->part);
	a->part = json_incref(part);
	/* The part in *_part.done is complete: it beats streamed text. */
	if (n >= 5 && strcmp(r->last_type + n - 5, ".done") == 0)
		a->have_buf = 0;
	return 0;
}

static int
response_on_content_part(struct response *r, json_t *ev)
{
	return response_on_part(r, ev, PLACE_CONTENT);
}

static int
response_on_summary_part(struct response *r, json_t *ev)
{
	return response_on_part(r, ev, PLACE_SUMMARY);
}

/* A piece (delta) or the full value (done) of a streamed string; both
 * the jansson path and the fast path end here. */
static int
response_text_add(struct response *r, const struct response_text *t,
    int done, const struct response_ref *ref, const char *s, size_t n)
{
	struct response_acc *a;
	int rc;

	if (!done)
		r->delta_bytes += n;
	if ((rc = response_acc_for(r, ref, t->place, &a)) != 1)
		return rc;
	a->text = t;
	if (done)
		a->buf.len = 0;
	return response_acc_append(r, a, s, n);
}

static int
response_on_text(struct response *r, json_t *ev,
    const struct response_text *t, int done)
{
	json_t *v = json_object_get(ev, done ? t->field : "delta");
	struct response_ref ref;

	if (!json_is_string(v))
		return 0;
	response_ref_from(ev, t->place, &ref);
	return response_text_add(r, t, done, &ref, json_string_value(v),
	    json_string_length(v));
}

static int
response_on_terminal(struct response *r, json_t *ev)
{
	json_t *resp = json_object_get(ev, "response");
	const struct response_terminal *t = NULL;
	const char *reason;
	size_t i;

	for (i = 0; i < RESPONSE_NELEM(response_terminals); i++) {
		if (strcmp(r->last_type, response_terminals[i].type) == 0)
			t = &response_terminals[i];
	}
	if (t == NULL || r->terminal)
		return 0;
	r->terminal = 1;
	if (json_is_object(resp)) {
		r->final = json_incref(resp);
		response_note_meta(r, resp);
		response_read_usage(r, json_object_get(resp, "usage"));
	}
	if (t->status == RESPONSE_FAILED) {
		response_fail_from(r, t->what, json_object_get(resp, "error"),
		    1);
	} else if (t->status == RESPONSE_INCOMPLETE) {
		reason = json_string_value(json_object_get(json_object_get(
		    resp, "incomplete_details"), "reason"));
		response_set(r, t->status, NULL, "%s: %s", t->what,
		    reason != NULL ? reason : "no reason given");
	} else {
		response_set(r, t->status, NULL, NULL);
	}
	return 0;
}

/* `error`: OpenAI nests {"error":{type,code,message,param}}; the SDK
 * schema has code and message at the top level. */
static int
response_on_error(struct response *r, json_t *ev)
{
	json_t *err = json_object_get(ev, "error");

	if (json_is_object(err))
		response_fail_from(r, "stream error", err, 1);
	else
		response_fail_from(r, "stream error", ev, 0);
	return 0;
}

/* --- dispatch ---------------------------------------------------------- */

static int
response_dispatch(struct response *r, json_t *ev, const char *event)
{
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *delta;
	size_t i;

	if (type == NULL) {
		char name[RESPONSE_NAME_MAX];

		response_event_name(event, r->nevents, name, sizeof(name));
		response_protocol(r, "%s has no \"type\"", name);
		return -1;
	}
	response_format(r->last_type, sizeof(r->last_type), "%s", type);
	for (i = 0; i < RESPONSE_NELEM(response_handlers); i++) {
		if (strcmp(type, response_handlers[i].type) == 0)
			return response_handlers[i].fn(r, ev) == -1 ? -1 :
			    (int)response_handlers[i].kind;
	}
	for (i = 0; i < RESPONSE_NELEM(response_texts); i++) {
		if (strcmp(type, response_texts[i].delta) == 0)
			return response_on_text(r, ev, &response_texts[i], 0)
			    == -1 ? -1 : RESPONSE_EV_DELTA;
		if (strcmp(type, response_texts[i].done) == 0)
			return response_on_text(r, ev, &response_texts[i], 1)
			    == -1 ? -1 : RESPONSE_EV_OTHER;
	}
	/* Unknown types are allowed; their deltas still count. */
	if (!json_is_string(delta = json_object_get(ev, "delta")))
		return RESPONSE_EV_OTHER;
	r->delta_bytes += json_string_length(delta);
	return RESPONSE_EV_DELTA;
}

/* Drop the borrowed views handed out since the last call. */
static void
response_reset_views(struct response *r)
{
	json_decref(r->last);
	r->last = NULL;
	json_decref(r->result);
	r->result = NULL;
	if (r->lazy->pending) {
		r->lazy->pending = 0;
		json_decref(r->lazy->ev);
		r->lazy->ev = NULL;
	}
}

static int
response_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Empty or blank data (a keep-alive) or the [DONE] sentinel. */
static int
response_is_filler(const char *data, size_t len)
{
	while (len > 0 && response_is_space(data[len - 1]))
		len--;
	while (len > 0 && response_is_space(*data)) {
		data++;
		len--;
	}
	return len == 0 || (len == 6 && memcmp(data, "[DONE]", 6) == 0);
}

/* --- fast path: streamed-string events without a tree ------------------ */

/*
 * Most of a long stream is *.delta events of a few bytes each; delta.h
 * reads them (and the *.done events of response_texts) in place, the
 * string decoded only if it has escapes. Whenever it gives up the event
 * goes through json_loadb() as if there were no fast path, which also
 * produces the error message for invalid JSON. The few other events go
 * to jansson directly.
 */

/* The table entry whose delta or done name is type[0..n), or NULL. */
static const struct response_text *
response_text_named(const char *type, size_t n, int *done)
{
	size_t i;

	/* strncmp() stops at the first difference, mostly right after
	 * the common "response." */
	for (i = 0; i < RESPONSE_NELEM(response_texts); i++) {
		const struct response_text *t = &response_texts[i];

		*done = strncmp(t->done, type, n) == 0 && t->done[n] == '\0';
		if (*done || (strncmp(t->delta, type, n) == 0 &&
		    t->delta[n] == '\0'))
			return t;
	}
	return NULL;
}

/* The streamed string a "type" names, as delta_scan() asks for it. */
struct response_pick {
	const struct response_text *text;
	int done;			/* type is text->done, not ->delta */
};

static int
response_want(const char *type, size_t n, void *arg)
{
	struct response_pick *pk = arg;

	pk->text = response_text_named(type, n, &pk->done);
	return pk->text != NULL;
}

/* Index field k as read, or absent. */
static void
response_fast_num(const struct delta_event *ev, enum delta_field k,
    struct response_num *n)
{
	if (k < DELTA_NFIELDS && (ev->seen & ~ev->null & 1u << k)) {
		n->state = NUM_INT;
		n->v = ev->num[k];
	} else {
		n->state = NUM_ABSENT;
		n->v = 0;
	}
}

static void
response_fast_ref(const struct delta_event *ev,
    const struct response_text *t, struct response_ref *ref)
{
	int have_id = (ev->seen & 1u << DELTA_ITEM_ID) != 0;

	ref->item_id = have_id ? ev->str[DELTA_ITEM_ID].p : NULL;
	ref->item_id_len = have_id ? ev->str[DELTA_ITEM_ID].n : 0;
	response_fast_num(ev, DELTA_OUTPUT_INDEX, &ref->output_index);
	response_fast_num(ev, t->place == PLACE_CONTENT ?
	    DELTA_CONTENT_INDEX : t->place == PLACE_SUMMARY ?
	    DELTA_SUMMARY_INDEX : DELTA_NFIELDS, &ref->part_index);
}

/*
 * Take a streamed-string event without jansson: 1 with its enum
 * response_kind in *kind, 0 to use jansson instead (nothing has changed
 * then), or -1 on a protocol error.
 */
static int
response_feed_fast(struct response *r, const char *data, size_t len,
    int *kind)
{
	enum delta_field k = DELTA_DELTA;
	struct response_lazy *z = r->lazy;
	struct response_pick pk = { NULL, 0 };
	struct delta_event ev;
	struct response_ref ref;
	struct jspan str;

	if (delta_scan(data, len, response_want, &pk, &ev) == -1)
		return 0;
	if (pk.done)
		k = delta_field_named(pk.text->field, strlen(pk.text->field));
	if (k == DELTA_NFIELDS || !(ev.seen & 1u << k))
		return 0;
	str = ev.str[k];
	if (ev.esc[k]) {
		r->scratch.len = 0;
		if (jspan_unescape(str, &r->scratch) == -1)
			return 0;
		str.p = r->scratch.data != NULL ? (char *)r->scratch.data : "";
		str.n = r->scratch.len;
	}
	z->data.len = 0;
	if (buf_append(&z->data, data, len) == -1)
		return 0;
	z->pending = 1;
	r->nfast++;
	/* A name from the table: it fits and is clean, no need to format. */
	memcpy(r->last_type, ev.str[DELTA_TYPE].p, ev.str[DELTA_TYPE].n);
	r->last_type[ev.str[DELTA_TYPE].n] = '\0';
	response_fast_ref(&ev, pk.text, &ref);
	*kind = pk.done ? RESPONSE_EV_OTHER : RESPONSE_EV_DELTA;
	return response_text_add(r, pk.text, pk.done, &ref, str.p, str.n) ==
	    -1 ? -1 : 1;
}

/* --- API --------------------------------------------------------------- */

struct response *
response_new(void)
{
	struct response *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	if ((r->lazy = calloc(1, sizeof(*r->lazy))) == NULL) {
		free(r);
		return NULL;
	}
	r->status = RESPONSE_IN_PROGRESS;
	return r;
}

void
response_free(struct response *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nslots; i++)
		json_decref(r->slots[i].item);
	free(r->slots);
	for (i = 0; i < r->naccs; i++)
		response_acc_clear(&r->accs[i]);
	free(r->accs);
	json_decref(r->id);
	json_decref(r->model);
	json_decref(r->snapshot);
	json_decref(r->final);
	json_decref(r->last);
	json_decref(r->result);
	json_decref(r->lazy->ev);
	buf_clear(&r->lazy->data);
	free(r->lazy);
	buf_clear(&r->scratch);
	free(r);
}

int
response_feed(struct response *r, const char *event, const char *data,
    size_t len)
{
	json_error_t jerr;
	int rc, kind = RESPONSE_EV_OTHER;

	response_reset_views(r);
	if (r->broken)
		return -1;
	r->nevents++;
	if (response_is_filler(data, len))
		return RESPONSE_EV_OTHER;
	if (!r->fast_off &&
	    (rc = response_feed_fast(r, data, len, &kind)) != 0)
		return rc == -1 ? -1 : kind;
	r->last = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
	if (r->last == NULL) {
		char name[RESPONSE_NAME_MAX];

		response_event_name(event, r->nevents, name, sizeof(name));
		response_protocol(r, "invalid JSON in %s: %s at line %d "
		    "column %d", name, jerr.text, jerr.line, jerr.column);
		return -1;
	}
	return response_dispatch(r, r->last, event);
}

/* The event type a non-streamed body's status stands for, or NULL. */
static const char *
response_body_event(const char *status)
{
	static const char *const map[][2] = {
		{ "completed", "response.completed" },
		{ "incomplete", "response.incomplete" },
		{ "failed", "response.failed" },
		{ "cancelled", "response.cancelled" },
		{ "in_progress", "response.in_progress" },
		{ "queued", "response.queued" },
	};
	size_t i;

	for (i = 0; status != NULL && i < RESPONSE_NELEM(map); i++) {
		if (strcmp(status, map[i][0]) == 0)
			return map[i][1];
	}
	return NULL;
}

static int
response_done_ok(const struct response *r)
{
	return (r->status == RESPONSE_COMPLETED ||
	    r->status == RESPONSE_INCOMPLETE) ? 0 : -1;
}

int
response_feed_body(struct response *r, const char *body, size_t len)
{
	json_error_t jerr;
	json_t *doc;
	const char *status, *type;

	response_reset_views(r);
	if (r->broken)
		return -1;
	if ((doc = json_loadb(body, len, JSON_ALLOW_NUL, &jerr)) == NULL) {
		response_protocol(r, "invalid JSON in response body: "
		    "%s at line %d column %d", jerr.text, jerr.line,
		    jerr.column);
		return -1;
	}
	status = json_string_value(json_object_get(doc, "status"));
	if (status == NULL && json_is_object(json_object_get(doc, "error"))) {
		response_fail_from(r, "response failed",
		    json_object_get(doc, "error"), 1);
	} else if ((type = response_body_event(status)) == NULL) {
		response_protocol(r, "response body has no known status");
	} else if ((r->last = json_pack("{s:s, s:O}", "type", type,
	    "response", doc)) == NULL) {
		response_protocol(r, "out of memory");
	} else {
		r->nevents++;
		(void)response_dispatch(r, r->last, NULL);
	}
	json_decref(doc);
	return response_done_ok(r);
}

int
response_finish(struct response *r, int mid_event)
{
	json_decref(r->result);
	r->result = NULL;
	if (r->nevents == 0)
		response_set(r, RESPONSE_ERROR, NULL, "stream ended %sbefore "
		    "any event", mid_event ? "mid-event " : "");
	else
		response_set(r, RESPONSE_ERROR, NULL, "stream ended %swithout "
		    "a terminal event (after %zu events, last %s)",
		    mid_event ? "mid-event " : "", r->nevents,
		    r->last_type[0] != '\0' ? r->last_type : "unnamed");
	return response_done_ok(r);
}

enum response_status
response_status(const struct response *r)
{
	return r->status;
}

const char *
response_status_name(enum response_status status)
{
	switch (status) {
	case RESPONSE_IN_PROGRESS:
		return "in_progress";
	case RESPONSE_COMPLETED:
		return "completed";
	case RESPONSE_INCOMPLETE:
		return "incomplete";
	case RESPONSE_FAILED:
		return "failed";
	case RESPONSE_ERROR:
		return "error";
	}
	return "unknown";
}

const char *
response_id(const struct response *r)
{
	return json_string_value(r->id);
}

const char *
response_model(const struct response *r)
{
	return json_string_value(r->model);
}

const char *
response_error(const struct response *r)
{
	return r->msg[0] != '\0' ? r->msg : NULL;
}

const char *
response_error_code(const struct response *r)
{
	return r->code[0] != '\0' ? r->code : NULL;
}

const struct response_usage *
response_usage(const struct response *r)
{
	return r->have_usage ? &r->usage : NULL;
}

size_t
response_delta_bytes(const struct response *r)
{
	return r->delta_bytes;
}

json_t *
response_last_event(const struct response *r)
{
	struct response_lazy *z = r->lazy;

	/* The fast path only takes what json_loadb() accepts: NULL here
	 * means out of memory. */
	if (r->last == NULL && z->pending && z->ev == NULL)
		z->ev = json_loadb((const char *)z->data.data, z->data.len, JSON_ALLOW_NUL,
		    NULL);
	return r->last != NULL ? r->last : z->ev;
}

void
response_set_fast(struct response *r, int on)
{
	r->fast_off = !on;
}

size_t
response_fast_count(const struct response *r)
{
	return r->nfast;
}

/* Without a terminal object: say where things stand, in API terms. */
static int
response_fill_pending(const struct response *r, json_t *res)
{
	json_t *err;

	if (r->id != NULL && json_object_get(res, "id") == NULL &&
	    json_object_set(res, "id", r->id) == -1)
		return -1;
	if (r->model != NULL && json_object_get(res, "model") == NULL &&
	    json_object_set(res, "model", r->model) == -1)
		return -1;
	if (json_object_set_new(res, "status", json_string(r->status ==
	    RESPONSE_IN_PROGRESS ? "in_progress" : "failed")) == -1)
		return -1;
	if (r->status == RESPONSE_IN_PROGRESS ||
	    json_is_object(json_object_get(res, "error")))
		return 0;
	err = json_pack("{s:s?, s:s}", "code", response_error_code(r),
	    "message", r->msg);
	return json_object_set_new(res, "error", err);
}

json_t *
response_result(struct response *r)
{
	json_t *base, *res, *out;

	if (r->result != NULL)
		return r->result;
	base = r->final != NULL ? r->final : r->snapshot;
	if ((res = base != NULL ? json_copy(base) : json_object()) == NULL)
		return NULL;
	out = json_object_get(res, "output");
	if ((!json_is_array(out) || json_array_size(out) == 0) &&
	    json_object_set_new(res, "output", response_assemble(r)) == -1)
		goto fail;
	if (r->final == NULL && response_fill_pending(r, res) == -1)
		goto fail;
	r->result = res;
	return res;
fail:
	json_decref(res);
	return NULL;
}

/* The start of a body that is not an error object, cleaned for a log. */
static void
response_excerpt(const char *body, size_t len, char *buf, size_t size)
{
	size_t i, n = len < RESPONSE_EXCERPT_MAX ? len : RESPONSE_EXCERPT_MAX;

	while (n > 0 && (unsigned char)body[0] <= ' ') {
		body++;
		n--;
	}
	while (n > 0 && (unsigned char)body[n - 1] <= ' ')
		n--;
	if (n >= size)
		n = size - 1;
	for (i = 0; i < n; i++) {
		if ((unsigned char)body[i] < 0x20 || body[i] == 0x7f)
			buf[i] = ' ';
		else
			buf[i] = body[i];
	}
	buf[n] = '\0';
	if (len > n)
		response_utf8_trim(buf, n);
}

char *
response_parse_error_body(long status, const char *body, size_t len,
    char **codep)
{
	char line[RESPONSE_MSG_MAX], code[RESPONSE_CODE_MAX], text[256];
	char *out;
	json_t *doc, *err, *obj;
	const char *msg;

	doc = len > 0 ? json_loadb(body, len, JSON_ALLOW_NUL, NULL) : NULL;
	err = json_object_get(doc, "error");
	obj = json_is_object(err) ? err : doc;
	response_code_str(obj, 1, code, sizeof(code));
	if ((msg = json_string_value(json_object_get(obj, "message"))) == NULL)
		msg = json_string_value(err);
	if (msg == NULL)
		msg = json_string_value(json_object_get(doc, "detail"));
	if (msg != NULL && code[0] != '\0')
		response_format(line, sizeof(line), "HTTP %ld: %s: %s", status,
		    code, msg);
	else if (msg != NULL)
		response_format(line, sizeof(line), "HTTP %ld: %s", status,
		    msg);
	else {
		response_excerpt(body != NULL ? body : "", len, text,
		    sizeof(text));
		response_format(line, sizeof(line), "HTTP %ld: %s", status,
		    text[0] != '\0' ? text : "empty body");
	}
	json_decref(doc);
	if (codep != NULL)
		*codep = NULL;
	if ((out = strdup(line)) == NULL)
		return NULL;
	if (codep != NULL && code[0] != '\0' &&
	    (*codep = strdup(code)) == NULL) {
		free(out);
		return NULL;
	}
	return out;
}
