/*
 * hostreq.c - the table of host requests (see hostreq.h).
 *
 * Checks run in a fixed order, cheapest and least trusting first: is the
 * method known, is the body within its cap (by length: nothing has parsed
 * it), is its cell the active one, is there a handler. Only then does a
 * handler see the body.
 */
#include "supervisor/run/hostreq.h"

#include <stdio.h>
#include <string.h>

#include "supervisor/cells/cells.h"

/* When a method is allowed. */
#define WHEN_CELL_ACTIVE	0x1	/* its cell is the running cell */

struct hostreq {
	const char *method;
	unsigned when;
	size_t cap;		/* 0: the frame limit */
	enum hostreq_slot slot;
};

static const struct hostreq table[] = {
	{ "input", WHEN_CELL_ACTIVE, HOSTREQ_SMALL_CAP, HOSTREQ_INPUT },
	{ "cells", WHEN_CELL_ACTIVE, HOSTREQ_SMALL_CAP, HOSTREQ_CELLS },
	{ "runtime_info", WHEN_CELL_ACTIVE, HOSTREQ_SMALL_CAP,
	    HOSTREQ_RUNTIME_INFO },
	/* image inputs make call_me bodies big: up to the frame limit */
	{ "call_me", WHEN_CELL_ACTIVE, 0, HOSTREQ_CALL_ME },
};

static const struct hostreq *
find(const char *method)
{
	size_t i;

	for (i = 0; i < sizeof table / sizeof table[0]; i++)
		if (strcmp(table[i].method, method) == 0)
			return &table[i];
	return NULL;
}

static size_t
cap_of(const struct hostreq *e, size_t max_frame)
{
	if (e == NULL)
		return HOSTREQ_SMALL_CAP;
	return e->cap != 0 ? e->cap : max_frame;
}

size_t
hostreq_cap(const char *method, size_t max_frame)
{
	return cap_of(find(method), max_frame);
}

void
hostreq_dispatch(const struct hostreq_handlers *h, struct cell *active,
    const struct msg_request *q)
{
	const struct hostreq *e = find(q->method.ptr);
	char msg[256];

	if (e == NULL) {
		(void)snprintf(msg, sizeof msg, "unknown host request method "
		    "'%.64s'", q->method.ptr);
		h->error(h->error_ctx, q->id, "RuntimeError", msg);
	} else if (q->body.ptr == NULL || q->body.len > cap_of(e,
	    h->max_frame)) {
		(void)snprintf(msg, sizeof msg, "the %s request is %zu bytes, "
		    "over its %zu-byte cap", e->method, q->body.len,
		    cap_of(e, h->max_frame));
		h->error(h->error_ctx, q->id, "ValueError", msg);
	} else if ((e->when & WHEN_CELL_ACTIVE) && (active == NULL ||
	    q->cell != active->n)) {
		h->error(h->error_ctx, q->id, "RuntimeError",
		    "host requests are refused once their cell is inactive");
	} else if (h->fn[e->slot] == NULL) {
		(void)snprintf(msg, sizeof msg, "%s is not available here",
		    e->method);
		h->error(h->error_ctx, q->id, "RuntimeError", msg);
	} else {
		h->fn[e->slot](h->ctx[e->slot], active, q);
	}
}
