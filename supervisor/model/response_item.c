/*
 * response_item.c - the output items of a Response and its streamed
 * strings. Each output_index holds the item as last received (never
 * modified); each streamed string lives in an accumulator keyed by
 * (slot, place, part index) and is applied to a copy of its item only when
 * response_result() assembles the output, so a long answer costs O(n)
 * string copies, not O(n^2).
 */
#include "supervisor/model/response.h"

#include "supervisor/model/response_int.h"

#include <stdlib.h>
#include <string.h>

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
void
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

void
response_acc_clear(struct response_acc *a)
{
	json_decref(a->part);
	buf_clear(&a->buf);
}

/* Forget what was streamed for a slot: a new copy of its item wins. */
void
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
int
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

int
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
int
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
