/*
 * hosttools_int.h - private to the host tools' files (hosttools.c,
 * hoststore.c, hostfill.c): their shared state and the functions they
 * share. Nothing else includes it; the public face is hosttools.h.
 */
#ifndef AGENTZ_HOSTTOOLS_INT_H
#define AGENTZ_HOSTTOOLS_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "supervisor/model/hosttools.h"

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

/* A function_call_output item for call_id. New reference. */
json_t *hosttools_output_item(const char *call_id, const char *text);

/* Keeps item, the output of call_id in response resp_id made by cell
 * (not if the cell is over or it does not fit: a later request lacks
 * it then). */
void hoststore_put(struct hosttools *h, const char *resp_id,
    const char *call_id, uint32_t cell, json_t *item);
/* Frees every stored output. */
void hoststore_clear(struct hosttools *h);

#endif
