/*
 * model_stream.c - a round's stream: each SSE event goes to the response
 * assembler and, for a streaming call, on to the caller. Events are
 * redacted on the way, per streamed field so that a secret split across
 * deltas is caught (streamred.h); the terminal event is held until the
 * round is known to be the last (round_done in model.c).
 */
#include "supervisor/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "supervisor/model/model_int.h"
#include "supervisor/model/response.h"
#include "supervisor/model/streamred.h"

static char *
redacted(const struct model *m, const char *s, size_t n, size_t *outlen)
{
	char *r;

	if (m->red != NULL && redact_count(m->red) > 0) {
		r = redact_string(m->red, s, n, outlen);
		if (r != NULL)
			return r;
	}
	r = malloc(n + 1);
	if (r != NULL) {
		memcpy(r, s, n);
		r[n] = '\0';
		*outlen = n;
	}
	return r;
}


static void forward(struct call *c, const char *data, size_t len);

/* An event already redacted, to the caller. */
static void
forward_clean(void *ctx, const char *data, size_t len)
{
	struct call *c = ctx;

	c->ops.event(c->ctx, data, len);
}

/* SSE event -> assembler; forward what the caller may see. */
int
call_sse(void *ctx, const struct sse_event *ev)
{
	struct call *c = ctx;
	int kind = response_feed(c->resp, ev->type, ev->data, ev->data_len);

	if (kind == RESPONSE_EV_DELTA && c->ops.progress != NULL)
		c->ops.progress(c->ctx, response_delta_bytes(c->resp));
	if (!c->stream || kind < 0 || ev->data_len == 0 ||
	    strcmp(ev->data, "[DONE]") == 0)
		return 0;
	if (kind == RESPONSE_EV_TERMINAL) {	/* held until we know */
		streamred_flush(c->sr, c->m->red, forward_clean, c);
		free(c->held);
		c->held = redacted(c->m, ev->data, ev->data_len, &c->held_len);
		return 0;
	}
	forward(c, ev->data, ev->data_len);
	return 0;
}

/* A secret split across delta events is caught: one redactor per
 * streamed field (streamred.h). */
static void
forward(struct call *c, const char *data, size_t len)
{
	if (c->m->red == NULL || redact_count(c->m->red) == 0) {
		c->ops.event(c->ctx, data, len);	/* nothing to clean */
		return;
	}
	if (c->sr == NULL)
		c->sr = streamred_new();	/* NULL: whole events */
	streamred_event(c->sr, c->m->red, data, len, forward_clean, c);
}

int
call_data(void *ctx, const char *p, size_t n)
{
	struct call *c = ctx;
	int rc;

	c->m->answered = 1;	/* a 2xx: the key, the URL and the model work */
	rc = sse_feed(c->sse, p, n);

	if (rc < 0)
		c->sse_err = rc;
	return rc < 0 ? -1 : 0;
}

