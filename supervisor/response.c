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
#include "supervisor/response.h"

#include <errno.h>
#include <jansson.h>
#include <locale.h>
#include <math.h>
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
#define RESPONSE_SCAN_DEPTH	32		/* fast path nesting */

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

struct response_buf {
	char *p;
	size_t len;
	size_t cap;
};

/* A streamed string, or a part template, for one place of one item. */
struct response_acc {
	size_t slot;
	enum response_place place;
	size_t index;
	const struct response_text *text;	/* NULL until text arrives */
	json_t *part;		/* from a *_part event, or NULL */
	struct response_buf buf;
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
	struct response_buf data;
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
	struct response_buf scratch;	/* the fast path's decoded delta */
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
 * characters become spaces (server text ends up on a terminal), and a
 * multi-byte character cut by truncation is dropped. The va_list stays
 * in the function that started it.
 */
static void
response_clean(char *buf, size_t size, int n)
{
	char *s;

	if (n < 0) {
		buf[0] = '\0';
		return;
	}
	for (s = buf; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
	}
	if ((size_t)n >= size)
		response_utf8_trim(buf, strlen(buf));
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

/* --- buffers ----------------------------------------------------------- */

/* Room for len + n bytes; capacity doubles, so appends are amortised
 * O(1) and a long stream of small deltas allocates O(log n) times. */
static int
response_buf_reserve(struct response_buf *b, size_t n)
{
	size_t cap;
	char *p;

	if (n < b->cap - b->len)
		return 0;
	if (n > SIZE_MAX / 2 - b->len)
		return -1;
	cap = b->cap ? b->cap : 64;
	while (cap <= b->len + n)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Append n bytes (p may be NULL when n is 0). -1 if out of memory. */
static int
response_buf_add(struct response_buf *b, const void *p, size_t n)
{
	if (response_buf_reserve(b, n) == -1)
		return -1;
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
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
	free(a->buf.p);
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
	if (response_buf_add(&a->buf, p, n) == -1) {
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
	    json_stringn(a->buf.p != NULL ? a->buf.p : "", a->buf.len));
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

/* --- fast path: a scanner for jansson's grammar ----------------------- */

/*
 * Most of a long stream is *.delta events of a few bytes each, and the
 * few other events of a long answer repeat its whole text. jansson's
 * parser reads a byte at a time through a callback and allocates per
 * value, so both cost far more than the bytes warrant. The scanner below
 * reads exactly the grammar json_loadb(JSON_ALLOW_NUL) accepts (RFC 8259,
 * strictly valid UTF-8, "\u0000" allowed in values, no NUL in keys),
 * restricted further wherever a case is rare: it gives up ("falls back",
 * returns -1) on escapes in keys, integers of more than 18 digits, reals
 * when the locale's decimal point is not '.', nesting deeper than
 * RESPONSE_SCAN_DEPTH, and, for the fields the fast path reads, on a
 * repeated field or an unexpected type. Whenever it succeeds, json_loadb()
 * would have succeeded with the same values; whenever it gives up, the
 * event goes through json_loadb() as if there were no fast path, which
 * also produces the error message for invalid JSON.
 *
 * Two uses: a streamed-string event (*.delta, and the *.done events of
 * response_texts) is read without building anything, the string decoded
 * only if it has escapes; any other event is built into the same json_t
 * tree json_loadb() would build, with the same jansson calls.
 */

/* The top-level fields the fast path reads. FK_DELTA and after are the
 * candidates for the streamed string: "delta", or a response_text field
 * carrying the full value in a *.done event. */
enum response_fast_key {
	FK_TYPE,
	FK_ITEM_ID,
	FK_OUTPUT_INDEX,
	FK_CONTENT_INDEX,
	FK_SUMMARY_INDEX,
	FK_DELTA,
	FK_TEXT,
	FK_REFUSAL,
	FK_ARGUMENTS,
	FK_INPUT,
	FK_CODE,
	FK_DIFF,
	FK_COUNT,
};

static const struct response_fast_name {
	const char *name;
	size_t len;
} response_fast_keys[FK_COUNT] = {
	{ "type", 4 },
	{ "item_id", 7 },
	{ "output_index", 12 },
	{ "content_index", 13 },
	{ "summary_index", 13 },
	{ "delta", 5 },
	{ "text", 4 },
	{ "refusal", 7 },
	{ "arguments", 9 },
	{ "input", 5 },
	{ "code", 4 },
	{ "diff", 4 },
};

/* What the scanner found in a streamed-string event: the body of each
 * string field (between its quotes, still escaped if esc is set), the
 * value of each index, and the table entry "type" names. Only seen,
 * text and done are set up front: a field is valid once seen. */
struct response_fast {
	unsigned seen;			/* bit per enum response_fast_key */
	const char *str[FK_COUNT];
	size_t len[FK_COUNT];
	int esc[FK_COUNT];
	struct response_num num[FK_COUNT];
	const struct response_text *text;
	int done;			/* type is text->done, not ->delta */
};

struct response_scan {
	const char *p;			/* next byte */
	const char *end;		/* one past the data */
	struct response_buf *tmp;	/* for decoding escaped strings */
};

static inline void
response_scan_ws(struct response_scan *s)
{
	while (s->p < s->end && response_is_space(*s->p))
		s->p++;
}

/* Consume byte c (after white space). 0, or -1 if it is not there. */
static inline int
response_scan_byte(struct response_scan *s, char c)
{
	response_scan_ws(s);
	if (s->p == s->end || *s->p != c)
		return -1;
	s->p++;
	return 0;
}

/* The length of the UTF-8 sequence at p if it is valid as jansson checks
 * it (shortest form, no surrogates, at most U+10FFFF), else 0. */
static size_t
response_utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned long v;
	size_t i, n;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;		/* ASCII, continuation, 0xc0/c1, >f4 */
	if ((size_t)(end - p) < n)
		return 0;
	v = p[0] & (0x7fu >> n);
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) ||
	    (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
		return 0;
	return n;
}

/* Four hex digits at p (which has them) as a value, or -1. */
static long
response_hex4(const unsigned char *p)
{
	long v = 0;
	int i, d;

	for (i = 0; i < 4; i++) {
		if (p[i] >= '0' && p[i] <= '9')
			d = p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			d = p[i] - 'a' + 10;
		else if (p[i] >= 'A' && p[i] <= 'F')
			d = p[i] - 'A' + 10;
		else
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* Code point v (valid, not a surrogate) as UTF-8 in u; its length. */
static size_t
response_utf8_put(unsigned long v, unsigned char *u)
{
	if (v < 0x80) {
		u[0] = (unsigned char)v;
		return 1;
	}
	if (v < 0x800) {
		u[0] = (unsigned char)(0xc0 | v >> 6);
		u[1] = (unsigned char)(0x80 | (v & 0x3f));
		return 2;
	}
	if (v < 0x10000) {
		u[0] = (unsigned char)(0xe0 | v >> 12);
		u[1] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
		u[2] = (unsigned char)(0x80 | (v & 0x3f));
		return 3;
	}
	u[0] = (unsigned char)(0xf0 | v >> 18);
	u[1] = (unsigned char)(0x80 | (v >> 12 & 0x3f));
	u[2] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
	u[3] = (unsigned char)(0x80 | (v & 0x3f));
	return 4;
}

/*
 * The \uXXXX escape at p, with its low surrogate if it is a high one, as
 * jansson decodes it: a lone or reversed surrogate is an error, "\u0000"
 * is allowed (JSON_ALLOW_NUL). Returns the bytes consumed and the code
 * point in *v, or 0.
 */
static size_t
response_scan_unicode(const unsigned char *p, const unsigned char *end,
    unsigned long *v)
{
	long hi, lo;

	if (end - p < 6 || (hi = response_hex4(p + 2)) == -1 ||
	    (hi >= 0xdc00 && hi <= 0xdfff))
		return 0;
	*v = (unsigned long)hi;
	if (hi < 0xd800 || hi > 0xdbff)
		return 6;
	if (end - p < 12 || p[6] != '\\' || p[7] != 'u' ||
	    (lo = response_hex4(p + 8)) == -1 || lo < 0xdc00 || lo > 0xdfff)
		return 0;
	*v = 0x10000 + ((unsigned long)(hi - 0xd800) << 10) +
	    (unsigned long)(lo - 0xdc00);
	return 12;
}

/* The escape at p (a backslash): bytes consumed, or 0 if invalid. Its
 * value is appended to out unless out is NULL (0 if out of memory). */
static size_t
response_scan_escape(const unsigned char *p, const unsigned char *end,
    struct response_buf *out)
{
	unsigned char u[4];
	unsigned long v;
	size_t n = 2, ulen = 1;

	if (end - p < 2)
		return 0;
	switch (p[1]) {
	case '"': case '\\': case '/':
		u[0] = p[1];
		break;
	case 'b': u[0] = '\b'; break;
	case 'f': u[0] = '\f'; break;
	case 'n': u[0] = '\n'; break;
	case 'r': u[0] = '\r'; break;
	case 't': u[0] = '\t'; break;
	case 'u':
		if ((n = response_scan_unicode(p, end, &v)) == 0)
			return 0;
		ulen = response_utf8_put(v, u);
		break;
	default:
		return 0;
	}
	if (out != NULL && response_buf_add(out, u, ulen) == -1)
		return 0;
	return n;
}

/*
 * Which of the 8 bytes at p may end a plain run: a control byte, a
 * non-ASCII byte, a quote or a backslash. The usual word-at-a-time tests
 * ("has a byte less than n", "has a zero byte" on v XOR c; Hacker's
 * Delight 6-1): the result is 0 if none does, else its lowest set bit is
 * bit 7 of the first such byte in memory order on a little-endian CPU
 * (a borrow only ever runs upwards, past a byte that already matched).
 */
static uint64_t
response_stop8(const unsigned char *p)
{
	const uint64_t ones = 0x0101010101010101u, high = ones << 7;
	uint64_t v, q, b;

	memcpy(&v, p, sizeof(v));
	q = v ^ (ones * '"');
	b = v ^ (ones * '\\');
	return (((v - ones * 0x20) & ~v) | ((q - ones) & ~q) |
	    ((b - ones) & ~b) | v) & high;
}

/* The end of the run of plain bytes (printable ASCII but '"' and '\\')
 * starting at p. */
static const unsigned char *
response_plain_run(const unsigned char *p, const unsigned char *end)
{
	while (end - p >= 8) {
		uint64_t m = response_stop8(p);

		if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return p + (__builtin_ctzll(m) >> 3);
#else
			break;	/* find it byte by byte */
#endif
		}
		p += 8;
	}
	while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
}

/*
 * Validate the string at s->p (its opening quote) and step over it. *esc
 * is set if it has escapes. 0, or -1 to fall back.
 */
static int
response_scan_string(struct response_scan *s, int *esc)
{
	const unsigned char *p = (const unsigned char *)s->p + 1;
	const unsigned char *end = (const unsigned char *)s->end;
	size_t n;

	*esc = 0;
	for (;;) {
		p = response_plain_run(p, end);
		if (p == end || *p < 0x20)
			return -1;	/* unterminated, or a raw control */
		if (*p == '"')
			break;
		if (*p == '\\') {
			*esc = 1;
			n = response_scan_escape(p, end, NULL);
		} else {
			n = response_utf8_len(p, end);
		}
		if (n == 0)
			return -1;
		p += n;
	}
	s->p = (const char *)p + 1;
	return 0;
}

/* Append the value of a validated string body p[0..n) to out. -1 if out
 * of memory. */
static int
response_unescape(const char *str, size_t n, struct response_buf *out)
{
	const unsigned char *p = (const unsigned char *)str, *run;
	const unsigned char *end = p + n;

	while (p < end) {
		for (run = p; p < end && *p != '\\'; p++)
			;
		if (response_buf_add(out, run, (size_t)(p - run)) == -1)
			return -1;
		if (p < end && (n = response_scan_escape(p, end, out)) == 0)
			return -1;
		if (p < end)
			p += n;
	}
	return 0;
}

/* A string at s->p (after white space): *str and *len give its body,
 * still escaped if *esc. 0, or -1 if it is not a valid string. */
static int
response_scan_body(struct response_scan *s, const char **str, size_t *len,
    int *esc)
{
	response_scan_ws(s);
	if (s->p == s->end || *s->p != '"')
		return -1;
	*str = s->p + 1;
	if (response_scan_string(s, esc) == -1)
		return -1;
	*len = (size_t)(s->p - 1 - *str);
	return 0;
}

/* A string without escapes (a key, or a field read in place). */
static int
response_scan_raw(struct response_scan *s, const char **str, size_t *len)
{
	int esc;

	return response_scan_body(s, str, len, &esc) == -1 || esc ? -1 : 0;
}

/* A string value at s->p, as a new json_t if out is not NULL. */
static int
response_scan_strval(struct response_scan *s, json_t **out)
{
	const char *str;
	size_t n;
	int esc;

	if (response_scan_body(s, &str, &n, &esc) == -1)
		return -1;
	if (out == NULL)
		return 0;
	if (esc) {
		s->tmp->len = 0;
		if (response_unescape(str, n, s->tmp) == -1)
			return -1;
		str = s->tmp->p != NULL ? s->tmp->p : "";
		n = s->tmp->len;
	}
	return (*out = json_stringn_nocheck(str, n)) != NULL ? 0 : -1;
}

/* A run of at least one digit at p: its end, or NULL. */
static const char *
response_digits(const char *p, const char *end)
{
	const char *start = p;

	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p > start ? p : NULL;
}

/*
 * A real: the integer part (already read up to p) and then a fraction,
 * an exponent or both, converted by strtod() as jansson does (overflow
 * is an error there). 0 with *v set and s->p past it, or -1.
 */
static int
response_scan_real(struct response_scan *s, const char *p, double *v)
{
	const struct lconv *lc = localeconv();
	char buf[64], *end;
	size_t n;

	if (p < s->end && *p == '.' &&
	    (p = response_digits(p + 1, s->end)) == NULL)
		return -1;
	if (p < s->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < s->end && (*p == '+' || *p == '-'))
			p++;
		if ((p = response_digits(p, s->end)) == NULL)
			return -1;
	}
	n = (size_t)(p - s->p);
	if (n >= sizeof(buf) || strcmp(lc->decimal_point, ".") != 0)
		return -1;
	memcpy(buf, s->p, n);
	buf[n] = '\0';
	errno = 0;
	*v = strtod(buf, &end);
	if (end != buf + n || ((*v == HUGE_VAL || *v == -HUGE_VAL) &&
	    errno == ERANGE))
		return -1;
	s->p = p;
	return 0;
}

/*
 * A number: -?(0|[1-9][0-9]*) is an integer (at most 18 digits so that
 * it fits; "-0" is 0, as strtoll() reads it), with a fraction or an
 * exponent a real. *num is set for an integer; a real sets NUM_OTHER.
 * Built into *out unless out is NULL.
 */
static int
response_scan_number(struct response_scan *s, struct response_num *num,
    json_t **out)
{
	const char *p = s->p, *digits;
	double real;
	long long v = 0;

	if (p < s->end && *p == '-')
		p++;
	if (p == s->end || *p < '0' || *p > '9')
		return -1;
	digits = p;
	p = *p == '0' ? p + 1 : response_digits(p, s->end);
	if (p < s->end && *p >= '0' && *p <= '9')
		return -1;		/* a leading zero */
	if (p < s->end && (*p == '.' || *p == 'e' || *p == 'E')) {
		if (response_scan_real(s, p, &real) == -1)
			return -1;
		num->state = NUM_OTHER;
		return out == NULL || (*out = json_real(real)) != NULL ? 0 : -1;
	}
	if (p - digits > 18)
		return -1;
	for (; digits < p; digits++)
		v = v * 10 + (*digits - '0');
	num->state = NUM_INT;
	num->v = *s->p == '-' ? -v : v;
	s->p = p;
	return out == NULL || (*out = json_integer(num->v)) != NULL ? 0 : -1;
}

/* true, false or null, built into *out unless out is NULL. */
static int
response_scan_word(struct response_scan *s, json_t **out)
{
	static const char *const words[] = { "true", "false", "null" };
	size_t i;

	for (i = 0; i < RESPONSE_NELEM(words); i++) {
		const char *w = words[i];
		size_t n = strlen(w);

		if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
			continue;
		s->p += n;
		if (out != NULL)
			*out = i == 0 ? json_true() : i == 1 ? json_false() :
			    json_null();
		return 0;
	}
	return -1;
}

static int response_scan_value(struct response_scan *, int, json_t **);

/* One member of an object (key, colon, value), added to obj if it is
 * not NULL. */
static int
response_scan_member(struct response_scan *s, int depth, json_t *obj)
{
	const char *key;
	json_t *v = NULL;
	size_t n;

	if (response_scan_raw(s, &key, &n) == -1 ||
	    response_scan_byte(s, ':') == -1)
		return -1;
	response_scan_ws(s);
	if (response_scan_value(s, depth, obj != NULL ? &v : NULL) == -1)
		return -1;
	return obj == NULL ? 0 : json_object_setn_new_nocheck(obj, key, n, v);
}

/* One element of an array, appended to arr if it is not NULL. */
static int
response_scan_element(struct response_scan *s, int depth, json_t *arr)
{
	json_t *v = NULL;

	if (response_scan_value(s, depth, arr != NULL ? &v : NULL) == -1)
		return -1;
	return arr == NULL ? 0 : json_array_append_new(arr, v);
}

/* The object or array at s->p; depth counts the enclosing ones. */
static int
response_scan_container(struct response_scan *s, int depth, json_t **out)
{
	char close = *s->p == '{' ? '}' : ']';
	json_t *c = NULL;

	if (depth >= RESPONSE_SCAN_DEPTH)
		return -1;
	if (out != NULL && (c = close == '}' ? json_object() :
	    json_array()) == NULL)
		return -1;
	s->p++;
	response_scan_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		goto done;
	}
	for (;;) {
		if ((close == '}' ? response_scan_member(s, depth + 1, c) :
		    response_scan_element(s, depth + 1, c)) == -1)
			goto fail;
		if (response_scan_byte(s, ',') == 0) {
			response_scan_ws(s);
			continue;
		}
		if (response_scan_byte(s, close) == -1)
			goto fail;
		break;
	}
done:
	if (out != NULL)
		*out = c;
	return 0;
fail:
	json_decref(c);
	return -1;
}

/* Any value at s->p (after white space), built into *out unless out is
 * NULL. On -1 nothing is left allocated. */
static int
response_scan_value(struct response_scan *s, int depth, json_t **out)
{
	struct response_num num;

	if (s->p == s->end)
		return -1;
	switch (*s->p) {
	case '"':
		return response_scan_strval(s, out);
	case '{':
	case '[':
		return response_scan_container(s, depth, out);
	case 't':
	case 'f':
	case 'n':
		return response_scan_word(s, out);
	default:
		return response_scan_number(s, &num, out);
	}
}

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

/* The value of top-level field k at s->p (after white space). A "type"
 * that names no streamed string ends the scan early. */
static int
response_scan_field(struct response_scan *s, struct response_fast *f,
    enum response_fast_key k)
{
	if (f->seen & 1u << k)
		return -1;		/* jansson keeps the last one */
	f->seen |= 1u << k;
	switch (k) {
	case FK_TYPE:
		if (response_scan_raw(s, &f->str[k], &f->len[k]) == -1)
			return -1;
		f->text = response_text_named(f->str[k], f->len[k], &f->done);
		return f->text != NULL ? 0 : -1;
	case FK_ITEM_ID:
		return response_scan_raw(s, &f->str[k], &f->len[k]);
	case FK_OUTPUT_INDEX:
	case FK_CONTENT_INDEX:
	case FK_SUMMARY_INDEX:
		f->num[k].state = NUM_ABSENT;
		f->num[k].v = 0;
		if (s->p < s->end && *s->p == 'n')
			return response_scan_word(s, NULL);
		return response_scan_number(s, &f->num[k], NULL) == -1 ||
		    f->num[k].state != NUM_INT ? -1 : 0;
	case FK_DELTA:
	case FK_TEXT:
	case FK_REFUSAL:
	case FK_ARGUMENTS:
	case FK_INPUT:
	case FK_CODE:
	case FK_DIFF:
		return response_scan_body(s, &f->str[k], &f->len[k],
		    &f->esc[k]);
	case FK_COUNT:
		break;
	}
	return -1;
}

/* Which of response_fast_keys key[0..n) names, or FK_COUNT. */
static enum response_fast_key
response_fast_key(const char *key, size_t n)
{
	int k;

	for (k = 0; k < FK_COUNT; k++) {
		if (response_fast_keys[k].len == n &&
		    memcmp(response_fast_keys[k].name, key, n) == 0)
			return (enum response_fast_key)k;
	}
	return FK_COUNT;
}

/* The event data as one object: 0 with f filled, or -1. */
static int
response_scan_event(const char *data, size_t len, struct response_fast *f)
{
	struct response_scan s = { data, data + len, NULL };
	const char *key;
	size_t n;

	f->seen = 0;
	f->text = NULL;
	f->done = 0;
	if (response_scan_byte(&s, '{') == -1)
		return -1;
	for (;;) {
		enum response_fast_key k;

		if (response_scan_raw(&s, &key, &n) == -1 ||
		    response_scan_byte(&s, ':') == -1)
			return -1;
		k = response_fast_key(key, n);
		response_scan_ws(&s);
		if ((k == FK_COUNT ? response_scan_value(&s, 1, NULL) :
		    response_scan_field(&s, f, k)) == -1)
			return -1;
		if (response_scan_byte(&s, ',') == 0)
			continue;
		if (response_scan_byte(&s, '}') == -1)
			return -1;
		response_scan_ws(&s);
		return s.p == s.end ? 0 : -1;
	}
}

/* Field k as read, or absent. */
static void
response_fast_num(const struct response_fast *f, enum response_fast_key k,
    struct response_num *n)
{
	if (f->seen & 1u << k) {
		*n = f->num[k];
	} else {
		n->state = NUM_ABSENT;
		n->v = 0;
	}
}

static void
response_fast_ref(const struct response_fast *f, struct response_ref *ref)
{
	int have_id = (f->seen & 1u << FK_ITEM_ID) != 0;

	ref->item_id = have_id ? f->str[FK_ITEM_ID] : NULL;
	ref->item_id_len = have_id ? f->len[FK_ITEM_ID] : 0;
	response_fast_num(f, FK_OUTPUT_INDEX, &ref->output_index);
	response_fast_num(f, f->text->place == PLACE_CONTENT ?
	    FK_CONTENT_INDEX : f->text->place == PLACE_SUMMARY ?
	    FK_SUMMARY_INDEX : FK_COUNT, &ref->part_index);
}

/*
 * Take a streamed-string event without jansson: 1 with its enum
 * response_kind in *kind, 0 to use the other paths instead (nothing has
 * changed then), or -1 on a protocol error.
 */
static int
response_feed_fast(struct response *r, const char *data, size_t len,
    int *kind)
{
	enum response_fast_key k = FK_DELTA;
	struct response_lazy *z = r->lazy;
	struct response_fast f;
	struct response_ref ref;
	const char *str;
	size_t n;

	if (response_scan_event(data, len, &f) == -1 || f.text == NULL)
		return 0;
	if (f.done)
		k = response_fast_key(f.text->field, strlen(f.text->field));
	if (k == FK_COUNT || !(f.seen & 1u << k))
		return 0;
	str = f.str[k];
	n = f.len[k];
	if (f.esc[k]) {
		r->scratch.len = 0;
		if (response_unescape(str, n, &r->scratch) == -1)
			return 0;
		str = r->scratch.p != NULL ? r->scratch.p : "";
		n = r->scratch.len;
	}
	z->data.len = 0;
	if (response_buf_add(&z->data, data, len) == -1)
		return 0;
	z->pending = 1;
	r->nfast++;
	/* A name from the table: it fits and is clean, no need to format. */
	memcpy(r->last_type, f.str[FK_TYPE], f.len[FK_TYPE]);
	r->last_type[f.len[FK_TYPE]] = '\0';
	response_fast_ref(&f, &ref);
	*kind = f.done ? RESPONSE_EV_OTHER : RESPONSE_EV_DELTA;
	return response_text_add(r, f.text, f.done, &ref, str, n) == -1 ?
	    -1 : 1;
}

/* The event or body as json_loadb() would build it, or NULL to let
 * json_loadb() do it (and explain what is wrong). */
static json_t *
response_build(struct response *r, const char *data, size_t len)
{
	struct response_scan s = { data, data + len, &r->scratch };
	json_t *v = NULL;

	response_scan_ws(&s);
	if (s.p == s.end || (*s.p != '{' && *s.p != '['))
		return NULL;
	if (response_scan_value(&s, 0, &v) == -1)
		return NULL;
	response_scan_ws(&s);
	if (s.p != s.end) {
		json_decref(v);
		return NULL;
	}
	r->nfast++;
	return v;
}

/* Parse an event or body: the scanner if it can, else json_loadb(). */
static json_t *
response_load(struct response *r, const char *data, size_t len,
    json_error_t *jerr)
{
	json_t *v;

	if (!r->fast_off && (v = response_build(r, data, len)) != NULL)
		return v;
	return json_loadb(data, len, JSON_ALLOW_NUL, jerr);
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
	free(r->lazy->data.p);
	free(r->lazy);
	free(r->scratch.p);
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
	r->last = response_load(r, data, len, &jerr);
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
	if ((doc = response_load(r, body, len, &jerr)) == NULL) {
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
		z->ev = json_loadb(z->data.p, z->data.len, JSON_ALLOW_NUL,
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
