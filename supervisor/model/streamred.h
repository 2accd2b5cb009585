/*
 * streamred.h - redaction of a streamed model response, event by event
 * (SSE data, one JSON object each), for call_me(stream=True) consumers.
 *
 * Each event redacted alone would let a secret split across two *.delta
 * events through whole. So every streamed field (the event type's base,
 * item_id, output_index, content_index, summary_index) has its own
 * redact_stream: a delta event carries what is certain so far (the tail
 * that may begin a secret is held back), and the field's *.done event, an
 * output_item.done or the end of the response first releases what is
 * held as one more *.delta event. Every other event, and the rest of a
 * delta event, is redacted as a whole.
 */
#ifndef AGENTZ_STREAMRED_H
#define AGENTZ_STREAMRED_H

#include <stddef.h>

#include "supervisor/text/redact.h"

struct streamred;

/* Receives one event's data (borrowed for the call). */
typedef void streamred_emit_fn(void *ctx, const char *data, size_t len);

/* NULL / ENOMEM. */
struct streamred *streamred_new(void);
void streamred_free(struct streamred *s);

/* One SSE event's data: emitted redacted (zero, one or two events). */
void streamred_event(struct streamred *s, const struct redact *r,
    const char *data, size_t len, streamred_emit_fn *emit, void *ctx);

/* The response ends: whatever is held comes out as *.delta events. */
void streamred_flush(struct streamred *s, const struct redact *r,
    streamred_emit_fn *emit, void *ctx);

/* A new response (round): what is held is dropped unseen. */
void streamred_reset(struct streamred *s);

#endif
