/*
 * response.c - Responses API stream assembler (see response.h): feeding
 * events, their dispatch and handlers, and the delta fast path. The
 * output items and accumulators are in response_item.c, the status,
 * messages, usage and getters in response_msg.c (shared state in
 * response_int.h).
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

#include "supervisor/model/delta.h"
#include "supervisor/model/response_int.h"

#include <stdlib.h>
#include <string.h>

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
	json_decref(r->shared);
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
	if ((r->last = response_load_shared(r, data, len)) == NULL)
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

