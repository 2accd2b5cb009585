/*
 * hosttools_int.h - private to the model client: the host tools' shared
 * state (hosttools.c: running the host calls of a response; hoststore.c:
 * their outputs kept; hostfill.c: the next request's input) and what
 * model.c calls. Nothing outside model/ includes it (but unit tests);
 * the public face is hosttools.h. It brings jansson to model_int.h's
 * files too.
 */
#ifndef AGENTZ_HOSTTOOLS_INT_H
#define AGENTZ_HOSTTOOLS_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "supervisor/model/hosttools.h"
#include "supervisor/model/jspan.h"
#include "supervisor/text/redact.h"

enum host_verdict {
	HOST_NO_CALLS,		/* hand the response back */
	HOST_ONLY,		/* continue immediately, invisibly */
	HOST_EXTERNAL,		/* other tool calls: hand back */
	HOST_ABORT		/* NextCellAlreadyScheduled: raise in the cell */
};

/* One stored output, in the order stored (the oldest is evicted first). */
struct stored {
	struct stored *next;
	char *resp_id, *call_id;
	uint32_t cell;
	size_t bytes;
};

struct hosttools {
	struct host_tools tools;
	json_t *defs;
	json_t *by_response;	/* response id -> [function_call_output] */
	json_t *by_call;	/* call_id -> function_call_output item */
	struct stored *head, **tail;
	size_t bytes, budget;
	uint32_t live_from;	/* cells below are over */
};

/* The host tool definitions appended to every request (borrowed). */
const json_t *hosttools_definitions(const struct hosttools *h);

/* Is name one of the host tools in defs (an array of definitions)? */
int hosttools_is_host_tool(const json_t *defs, const char *name);

/*
 * Runs the host calls of a completed response (borrowed) made by cell
 * and stores their outputs. *outputs gets a new array of
 * function_call_output items. On HOST_ABORT *err gets a malloc'ed message
 * for the cell. Every tool output is cleaned of secrets by red (may be
 * NULL).
 */
enum host_verdict hosttools_handle(struct hosttools *h,
    const json_t *response, uint32_t cell, const struct redact *red,
    json_t **outputs, char **err);

/*
 * The input of a request is JSON text (a string, an array of items, or
 * empty: none); the items are inspected one at a time as spans and
 * copied as text, never parsed into a tree.
 *
 * hosttools_continuation: the next round's input after a host-only
 * response: input (a string is one user message) + the response's
 * output items (function_call items without "status") + the host
 * outputs. Malloc'ed (*outlen bytes, not NUL-terminated), NULL / ENOMEM.
 *
 * hosttools_fill: the input of a caller's request with the stored host
 * outputs added: those of prev_id (the request's previous_response_id,
 * or NULL) first, and after every function_call item of its input whose
 * call_id has a stored output; caller-written outputs with those
 * call_ids dropped. Malloc'ed (*outlen), or NULL when nothing changes (or
 * out of memory: the input goes as it was).
 */
char *hosttools_continuation(struct jspan input, const json_t *response,
    const json_t *outputs, size_t *outlen);
char *hosttools_fill(struct hosttools *h, const char *prev_id,
    struct jspan input, size_t *outlen);

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
