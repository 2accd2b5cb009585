/*
 * hosttools.h - the two host tools and the continuation rules (SPEC §3-4).
 *
 * After a response completes, hosttools_handle() executes its host-tool
 * calls and keeps their outputs by response id and call id. A response
 * holding only host calls is continued at once (hosttools_continuation
 * builds the next input); one holding any other tool call goes back to the
 * caller, and when the caller continues (previous_response_id, or the
 * function_call items passed back in input) hosttools_fill() adds the
 * stored host outputs, replacing caller-written outputs with the same
 * call_id.
 *
 * The stored outputs are bounded: they belong to the cell that made the
 * call; once that cell is over an output larger than a line becomes a
 * short note saying it was not kept (a later cell may still continue the
 * response by previous_response_id, and the API wants an output for
 * every call), those of cells more than a few cells ago go, and all of
 * them stay within a byte budget, the oldest evicted first. They are not dropped on first use: a caller running a
 * stateless loop resends the same function_call items with every
 * request of its cell.
 */
#ifndef AGENTZ_HOSTTOOLS_H
#define AGENTZ_HOSTTOOLS_H

#include <jansson.h>
#include <stdint.h>

#include "supervisor/cells/cells.h"
#include "supervisor/model/jspan.h"
#include "supervisor/text/redact.h"

#define SUMMARY_MAX 256

/* What set_next_cell_code reports back to the host's owner. */
enum submit_result {
	SUBMIT_OK,
	SUBMIT_REPAIR,		/* registered as the repair cell, cell b->cell */
	SUBMIT_ALREADY,		/* the cell already has a successor */
	SUBMIT_INACTIVE		/* the cell has finished */
};

struct host_binding {
	uint32_t cell;		/* the cell whose call_me made the request */
	struct cells *history;
	enum submit_result (*submit)(void *ctx, uint32_t cell,
	    const char *code, size_t len, const char *summary);
	void *ctx;
};

enum host_verdict {
	HOST_NO_CALLS,		/* hand the response back */
	HOST_ONLY,		/* continue immediately, invisibly */
	HOST_EXTERNAL,		/* other tool calls: hand back */
	HOST_ABORT		/* NextCellAlreadyScheduled: raise in the cell */
};

struct hosttools;

/* The default budget of the stored outputs. */
#define HOSTTOOLS_STORE_BUDGET	(8u << 20)

struct hosttools *hosttools_new(void);
void hosttools_free(struct hosttools *h);

/* Sets the byte budget of the stored outputs (evicting now if over). */
void hosttools_set_budget(struct hosttools *h, size_t bytes);
/* Bytes the stored outputs are counted as now (<= the budget). */
size_t hosttools_stored_bytes(const struct hosttools *h);
/*
 * Cells up to and including cell are over (cells run one at a time):
 * their large stored outputs become notes, and outputs of their calls
 * still in flight are no longer stored.
 */
void hosttools_cell_over(struct hosttools *h, uint32_t cell);

/* The host tool definitions appended to every request (borrowed). */
const json_t *hosttools_definitions(const struct hosttools *h);

/*
 * Executes the host calls of a completed response (borrowed) and stores
 * their outputs. *outputs gets a new array of function_call_output items.
 * On HOST_ABORT *err gets a malloc'ed message for the cell.
 * Every tool output is cleaned of secrets by red (may be NULL).
 */
enum host_verdict hosttools_handle(struct hosttools *h,
    const json_t *response, const struct host_binding *b,
    const struct redact *red, json_t **outputs, char **err);

/*
 * The next request's input: input (string or array, borrowed) + the
 * response's output items (function_call items without "status") + the
 * host outputs. New reference.
 */
json_t *hosttools_continuation(const json_t *input, const json_t *response,
    const json_t *outputs);

/*
 * Adds stored host outputs to a caller's request body (modified in
 * place): for its previous_response_id, and after every function_call
 * item of its input whose call_id has a stored output. Caller-written
 * outputs with those call_ids are dropped.
 */
void hosttools_fill(struct hosttools *h, json_t *body);

/*
 * The same two for an input kept as JSON text (a valid string or array,
 * too big for a jansson tree; model.c splices it into the request):
 * the items are inspected one at a time as spans and copied as text.
 * hosttools_fill_raw returns the new input (malloc'ed, *outlen), or NULL
 * when nothing changes (or out of memory: the input goes as it was);
 * prev_id is the request's previous_response_id or NULL.
 * hosttools_continuation_raw returns the next round's input, or NULL /
 * ENOMEM.
 */
char *hosttools_fill_raw(struct hosttools *h, const char *prev_id,
    struct jspan input, size_t *outlen);
char *hosttools_continuation_raw(struct jspan input, const json_t *response,
    const json_t *outputs, size_t *outlen);

#endif
