/*
 * response.h - assembles one streamed OpenAI Responses API response.
 *
 * Feed it the data of each SSE event of a `stream: true` response (from
 * sse.h, or one JSON object per line from a recording). It dispatches on
 * the JSON "type" field (OpenRouter sends no event: lines), ignores unknown
 * types, the `[DONE]` sentinel and empty keep-alive data, and keeps:
 *
 *  - id, model and status of the response;
 *  - the output items: output_item.added, then the deltas of text,
 *    refusal, reasoning text, reasoning summary, function/MCP call
 *    arguments, custom tool input, code interpreter code and apply_patch
 *    diffs, each keyed by output_index (item_id as fallback); the
 *    output_item.done copy replaces everything streamed for that item;
 *  - the final response object of response.completed / .incomplete /
 *    .failed / .cancelled, whose `output` wins unless it is missing or
 *    empty, in which case the assembled items stand in;
 *  - usage, and a running count of delta bytes (live estimate: bytes / 4);
 *  - the first failure, as a status and a one-line message.
 *
 * Pure: no I/O, no logging. Server text copied into messages has control
 * characters replaced, so messages are safe to print on a terminal.
 * Uses jansson; json_t is declared here only as an incomplete struct.
 */
#ifndef AGENTZ_RESPONSE_H
#define AGENTZ_RESPONSE_H

#include <stddef.h>

struct json_t;		/* jansson's json_t */
struct response;

enum response_status {
	RESPONSE_IN_PROGRESS,	/* no terminal event yet (also queued) */
	RESPONSE_COMPLETED,
	RESPONSE_INCOMPLETE,	/* e.g. max_output_tokens; output usable */
	RESPONSE_FAILED,	/* the server said so: `error` event,
				   response.failed or response.cancelled */
	RESPONSE_ERROR,		/* we detected it: invalid JSON, a stream
				   without terminal event, a limit, memory */
};

/* What response_feed() saw; lets a caller forward or display events. */
enum response_kind {
	RESPONSE_EV_OTHER,	/* parts, *.done, unknown types, [DONE] */
	RESPONSE_EV_STATE,	/* response.created, .in_progress, .queued */
	RESPONSE_EV_ITEM,	/* response.output_item.added / .done */
	RESPONSE_EV_DELTA,	/* any event with a string "delta" */
	RESPONSE_EV_TERMINAL,	/* completed/incomplete/failed/cancelled */
	RESPONSE_EV_ERROR,	/* the top-level `error` event */
};

/* Token usage from the terminal event; cached is part of input, reasoning
 * part of output. Missing numbers are 0; a missing total is input+output. */
struct response_usage {
	long long input_tokens;
	long long cached_tokens;
	long long output_tokens;
	long long reasoning_tokens;
	long long total_tokens;
};

/* A new, empty assembler, or NULL with errno ENOMEM. */
struct response *response_new(void);

/* Free the assembler and every reference it holds; NULL is allowed. */
void response_free(struct response *r);

/*
 * Feed the data of one SSE event. event is the SSE event name (may be
 * NULL; used only in messages, dispatch is on the JSON "type"). data need
 * not be NUL-terminated. Returns the enum response_kind of the event, or
 * -1 if it could not be processed: invalid JSON, no "type", an index out
 * of range, memory. Then the status is RESPONSE_ERROR and every later
 * feed returns -1 at once. Server-reported failures are not -1: they
 * return RESPONSE_EV_ERROR / RESPONSE_EV_TERMINAL and set the status to
 * RESPONSE_FAILED, and later events are still taken (an `error` event is
 * normally followed by response.failed with the final object).
 */
int response_feed(struct response *r, const char *event, const char *data,
    size_t len);

/*
 * Take a whole non-streamed body: a response object (as if it came in the
 * terminal event its "status" names), or an {"error":{...}} body (status
 * RESPONSE_FAILED). Returns 0 if the status is now RESPONSE_COMPLETED or
 * RESPONSE_INCOMPLETE, -1 otherwise (see response_error()).
 */
int response_feed_body(struct response *r, const char *body, size_t len);

/*
 * End of stream. mid_event is non-zero when the transport ended inside an
 * event (sse_finish() returned SSE_PARTIAL). Without a terminal event
 * before it, the status becomes RESPONSE_ERROR ("stream ended without a
 * terminal event ..."); an earlier failure is kept. Returns 0 if the
 * status is RESPONSE_COMPLETED or RESPONSE_INCOMPLETE, -1 otherwise.
 */
int response_finish(struct response *r, int mid_event);

enum response_status response_status(const struct response *r);

/* "in_progress", "completed", "incomplete", "failed" or "error". */
const char *response_status_name(enum response_status status);

/* Response id and model as the server reported them, or NULL if not yet
 * known. Borrowed; valid until the next feed or response_free(). */
const char *response_id(const struct response *r);
const char *response_model(const struct response *r);

/*
 * A one-line reason for any status other than completed and in progress,
 * e.g. "stream error: server_error: Sorry, something went wrong.",
 * "response failed: insufficient_quota: You exceeded ...",
 * "response incomplete: max_output_tokens",
 * "invalid JSON in event response.output_text.delta: ...". The first
 * failure wins. NULL if none. Borrowed; valid until response_free().
 */
const char *response_error(const struct response *r);

/*
 * The server's error code for RESPONSE_FAILED ("insufficient_quota",
 * "rate_limit_exceeded", ...; the error "type" when code is null, as in
 * "server_error"), for deciding whether to retry. NULL if none, and
 * always NULL for RESPONSE_ERROR. Borrowed; valid until response_free().
 */
const char *response_error_code(const struct response *r);

/* Usage from the terminal event, or NULL if none arrived (usage is null
 * until then, and on response.failed). Borrowed. */
const struct response_usage *response_usage(const struct response *r);

/* Total bytes of all "delta" strings fed so far. */
size_t response_delta_bytes(const struct response *r);

/* The parsed JSON of the last event fed, or NULL ([DONE], keep-alive,
 * invalid). Borrowed, read-only; valid until the next feed or free.
 * A delta event taken by the fast path (see response_set_fast()) is
 * parsed only here, on demand, from a copy of its data; NULL then also
 * means out of memory. */
struct json_t *response_last_event(const struct response *r);

/*
 * Events normally take a fast path: a strict scanner of jansson's own
 * grammar reads delta events without building a json_t, and builds the
 * same json_t as json_loadb() for the others, falling back to jansson
 * for anything unusual; the results are the same either way. on = 0
 * sends every event and body through json_loadb(), for tests that
 * compare the two and for measurements. Takes effect from the next feed.
 */
void response_set_fast(struct response *r, int on);

/* How many events and bodies the fast path took so far, read without a
 * tree or built (tests, benchmarks). */
size_t response_fast_count(const struct response *r);

/*
 * The response object as it stands: the terminal event's object (or the
 * latest response.created/.in_progress one, or a bare object with id and
 * model) with "output" replaced by the assembled items when it is missing
 * or empty. Without a terminal object, "status" says "in_progress" or
 * "failed", and a failure adds "error":{"code","message"}. Borrowed:
 * valid until the next feed, finish or free; json_incref() to keep it.
 * NULL only when out of memory.
 */
struct json_t *response_result(struct response *r);

/*
 * One line describing a non-2xx HTTP response from its body:
 * "HTTP <status>: <code or type>: <message>" for the OpenAI shape
 * {"error":{"message","type","param","code"}} (code may also be a number,
 * as on OpenRouter), else "HTTP <status>: <start of the body>" or
 * "HTTP <status>: empty body". If codep is not NULL, *codep is set to a
 * malloc'd copy of the code (or type), or NULL if there is none. Returns
 * a malloc'd string the caller frees, or NULL with errno ENOMEM (then
 * *codep is NULL too).
 */
char *response_parse_error_body(long status, const char *body, size_t len,
    char **codep);

#endif
