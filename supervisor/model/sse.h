/*
 * sse.h - incremental Server-Sent Events parser.
 *
 * Implements the event-stream interpretation of the WHATWG HTML standard
 * (section 9.2.6) as a pure byte machine: no I/O, no allocation beyond the
 * parser's own buffers. Feed the response body in chunks of any size, split
 * anywhere (inside a CRLF pair, a field name, a multi-byte UTF-8 sequence);
 * each complete event is handed to a callback.
 *
 * Handled: LF, CRLF and lone CR line endings; a UTF-8 BOM at stream start;
 * comment lines (':'); the fields event, data (several lines joined with
 * "\n"), id and retry; a field line without a colon (empty value); one
 * optional space after the colon. Unknown fields are ignored. Bytes are
 * passed through unchanged (no UTF-8 validation: the JSON layer does that).
 *
 * One event's data is capped: a stream that exceeds the cap gets
 * SSE_ETOOBIG instead of an ever-growing buffer. All errors are sticky:
 * once sse_feed() failed, every later sse_feed()/sse_finish() returns the
 * same error until sse_free().
 */
#ifndef AGENTZ_SSE_H
#define AGENTZ_SSE_H

#include <stddef.h>

/* Default cap on one event's data (bytes, after joining data lines). */
#define SSE_MAX_EVENT_DEFAULT ((size_t)16 << 20)

/* Results of sse_feed() / sse_finish(); sse_strerror() names them. */
enum sse_result {
	SSE_OK = 0,
	SSE_PARTIAL = 1,	/* sse_finish: stream ended mid-event */
	SSE_ETOOBIG = -1,	/* an event or line exceeded max_event */
	SSE_ENOMEM = -2,	/* out of memory */
	SSE_ESTOPPED = -3,	/* the callback returned non-zero */
};

/*
 * One dispatched event. Every pointer is borrowed and valid only during
 * the callback. data is NUL-terminated for convenience, but data_len is
 * authoritative (data may contain NUL bytes).
 */
struct sse_event {
	const char *type;	/* event field, "message" if none */
	const char *data;	/* data lines joined with "\n" */
	size_t data_len;
	const char *id;		/* last event id so far, "" if none */
};

/* Return 0 to continue parsing, non-zero to stop (SSE_ESTOPPED). It must
 * not call sse_feed(), sse_finish() or sse_free() on its own parser. */
typedef int sse_event_fn(void *ctx, const struct sse_event *ev);

struct sse;

/*
 * Create a parser calling fn(ctx, ev) for every dispatched event.
 * max_event caps one event's data in bytes; 0 means SSE_MAX_EVENT_DEFAULT.
 * Returns NULL with errno EINVAL (fn is NULL) or ENOMEM.
 */
struct sse *sse_new(sse_event_fn *fn, void *ctx, size_t max_event);

/* Free the parser; NULL is allowed. */
void sse_free(struct sse *sse);

/*
 * Parse n bytes (p may be NULL when n is 0). Events complete within them
 * are dispatched before this returns. Returns SSE_OK or a negative
 * enum sse_result; errors are sticky.
 */
int sse_feed(struct sse *sse, const char *p, size_t n);

/*
 * Signal end of stream. A pending event without its terminating blank
 * line is discarded, as the SSE standard requires, and reported as
 * SSE_PARTIAL so the caller can say "stream ended mid-event"; comment
 * lines do not count as pending. Returns SSE_OK, SSE_PARTIAL or the
 * sticky error. On SSE_OK and SSE_PARTIAL the parser is reset to a fresh
 * stream (a new BOM is accepted) but keeps the last event id and retry,
 * which a reconnect needs.
 */
int sse_finish(struct sse *sse);

/* The last event id seen ("" if none). Borrowed; valid until the next
 * sse_feed(), sse_finish() or sse_free(). */
const char *sse_last_id(const struct sse *sse);

/* The last valid retry field in milliseconds, or -1 if none was seen. */
long long sse_retry_ms(const struct sse *sse);

/* A static description of an enum sse_result value, never NULL. */
const char *sse_strerror(int result);

#endif
