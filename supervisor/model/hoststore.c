/*
 * hoststore.c - the host tool outputs kept for continuations (see
 * hosttools.h): indexed by response id and by call id, bounded by a byte
 * budget (the oldest evicted first), shrunk to a note once their cell is
 * over and dropped a few cells later.
 */
#include "supervisor/model/hosttools_int.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Outputs of a cell that is over are kept up to this size (a
 * set_next_cell_code result is a line); larger ones become a note. */
#define KEPT_AFTER_CELL	1024
/* ... and only for the last few cells that are over: memory stays flat
 * however long the run. */
#define KEPT_CELLS	4

/* What one stored output is counted as beyond its strings (jansson). */
#define STORED_OVERHEAD	256

static void
stored_free(struct stored *e)
{
	free(e->resp_id);
	free(e->call_id);
	free(e);
}

void
hoststore_clear(struct hosttools *h)
{
	struct stored *e;

	while ((e = h->head) != NULL) {
		h->head = e->next;
		stored_free(e);
	}
	h->tail = &h->head;
	h->bytes = 0;
}

/* What an output of text is counted as. */
static size_t
stored_size(const char *resp_id, const char *call_id, const char *text)
{
	return strlen(resp_id) + strlen(call_id) + STORED_OVERHEAD +
	    (text != NULL ? strlen(text) : 0);
}

/* Where e's output is in its response's list (the list's size if not). */
static size_t
list_index(const json_t *list, const struct stored *e)
{
	const char *cid;
	json_t *item;
	size_t i;

	json_array_foreach(list, i, item) {
		cid = json_string_value(json_object_get(item, "call_id"));
		if (strcmp(cid != NULL ? cid : "", e->call_id) == 0)
			return i;
	}
	return json_array_size(list);
}

/* Takes e's output out of both indexes and frees e. */
static void
forget(struct hosttools *h, struct stored *e)
{
	json_t *list = json_object_get(h->by_response, e->resp_id);

	(void)json_object_del(h->by_call, e->call_id);
	(void)json_array_remove(list, list_index(list, e));
	if (list != NULL && json_array_size(list) == 0)
		(void)json_object_del(h->by_response, e->resp_id);
	h->bytes -= e->bytes;
	stored_free(e);
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
		forget(h, e);
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
		forget(h, e);
	}
}

void
hoststore_put(struct hosttools *h, const char *resp_id, const char *call_id,
    uint32_t cell, json_t *item)
{
	const char *text = json_string_value(json_object_get(item, "output"));
	size_t bytes = stored_size(resp_id, call_id, text);
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
		item = small = hosttools_output_item(call_id, note);
		bytes = stored_size(resp_id, call_id, note);
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
	json_t *item, *list;

	(void)snprintf(note, sizeof note, "Error: this host tool output was "
	    "not kept after cell %u ended; call the tool again if it is "
	    "still needed", e->cell);
	item = hosttools_output_item(e->call_id, note);
	if (item == NULL)
		return;
	(void)json_object_set(h->by_call, e->call_id, item);
	list = json_object_get(h->by_response, e->resp_id);
	(void)json_array_set(list, list_index(list, e), item);
	json_decref(item);
	h->bytes -= e->bytes;
	e->bytes = stored_size(e->resp_id, e->call_id, note);
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

json_t *
hosttools_output_item(const char *call_id, const char *text)
{
	return json_pack("{s:s, s:s, s:s}", "type", "function_call_output",
	    "call_id", call_id, "output", text);
}
