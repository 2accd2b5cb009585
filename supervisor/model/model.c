/*
 * model.c - call_me on the wire (see model.h).
 *
 * A call is a chain of rounds. Each round POSTs the rewritten body,
 * streams the SSE through the assembler, and on completion runs the host
 * tools: a host-only response starts the next round with the continued
 * input; anything else is handed back. Stream events are forwarded as
 * they come, except the terminal event of a round that is continued.
 *
 * This file owns the model object, the calls and their rounds. A
 * round's stream is read in model_stream.c, failures and outage waits are
 * model_outage.c's, the request text (its input kept as text) is
 * model_wire.c's, the request and the answer as the caller sees them
 * model_req.c's; their shared state is model_int.h.
 */
#include "supervisor/model/model.h"

#include "supervisor/model/model_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/model/http.h"
#include "supervisor/model/response.h"
#include "supervisor/model/sse.h"
#include "supervisor/model/streamred.h"

int
model_busy(const struct model *m)
{
	return m != NULL && m->calls != NULL;
}

struct model *
model_new(struct loop *l, const struct model_config *c, struct hosttools *h,
    const struct redact *red)
{
	struct model *m = calloc(1, sizeof *m);
	size_t n;

	if (m == NULL)
		return NULL;
	m->loop = l;
	m->cfg = *c;
	m->h = h;
	m->red = red;
	m->next_id = 1;
	m->patience_ms = c->outage_patience_ms == 0 ?
	    MODEL_OUTAGE_PATIENCE_DEFAULT_MS : c->outage_patience_ms;
	n = strlen(c->base_url);
	while (n > 0 && c->base_url[n - 1] == '/')
		n--;
	if (asprintf(&m->url, "%.*s/responses", (int)n, c->base_url) < 0)
		m->url = NULL;
	/* user:password@ may be a secret: never said */
	m->shown = m->url != NULL ? http_url_shown(m->url) : NULL;
	if (m->shown == NULL)
		m->shown = strdup("the model's URL");
	if (c->api_key != NULL && asprintf(&m->auth, "Authorization: Bearer "
	    "%s", c->api_key) < 0)
		m->auth = NULL;
	m->http = http_new(l);
	if (m->url == NULL || m->shown == NULL || m->http == NULL) {
		model_free(m);
		return NULL;
	}
	return m;
}

/* What the call took, to its caller (before done). */
static void
call_stats(struct call *c)
{
	if (c->ops.stats != NULL)
		c->ops.stats(c->ctx, &c->st);
}

static void
call_free(struct call *c)
{
	loop_timer_cancel(c->m->loop, c->wait_timer);
	free(c->head);
	free(c->wire);
	sse_free(c->sse);
	response_free(c->resp);
	free(c->held);
	streamred_free(c->sr);
	free(c);
}

/*
 * The open calls end first, each with its done callback while everything
 * it may use (the model, its HTTP client) still exists; a call started
 * from a callback now is refused (m->ending). Only then is it all freed.
 */
void
model_free(struct model *m)
{
	struct call *c;

	if (m == NULL)
		return;
	m->ending = 1;
	while ((c = m->calls) != NULL) {
		m->calls = c->next;
		if (c->http_id != 0)
			http_cancel(m->http, c->http_id);
		c->http_id = 0;
		call_stats(c);
		c->ops.done(c->ctx, NULL, "ModelError", "the run is ending");
		call_free(c);
	}
	http_free(m->http);
	free(m->url);
	free(m->shown);
	free(m->auth);
	free(m);
}

long long
model_total_tokens(const struct model *m)
{
	return m->usage.total;
}

void
model_usage(const struct model *m, struct model_usage *u)
{
	*u = m->usage;
}

void
model_set_outage_observer(struct model *m, model_outage_fn *fn, void *ctx)
{
	m->outage_fn = fn;
	m->outage_ctx = ctx;
}

static void
unlink_call(struct model *m, struct call *c)
{
	struct call **p;

	for (p = &m->calls; *p != NULL; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

/* Ends a call: its done callback, then it is gone. */
void
call_finish(struct call *c, const json_t *resp, const char *type,
    const char *msg)
{
	struct model_answer ans = { resp };
	struct model *m = c->m;

	unlink_call(m, c);
	call_stats(c);
	c->ops.done(c->ctx, resp != NULL ? &ans : NULL, type, msg);
	call_free(c);
}

/* The round's response is complete: host tools, then continue or return. */
static void
round_done(struct call *c)
{
	json_t *resp = response_result(c->resp), *outputs = NULL;
	const struct response_usage *u = response_usage(c->resp);
	enum host_verdict v;
	char *err = NULL, buf[160];

	if (u != NULL) {
		c->m->usage.input += u->input_tokens;
		c->m->usage.cached += u->cached_tokens;
		c->m->usage.output += u->output_tokens;
		c->m->usage.total += u->total_tokens;
		c->st.usage.input += u->input_tokens;
		c->st.usage.cached += u->cached_tokens;
		c->st.usage.output += u->output_tokens;
		c->st.usage.total += u->total_tokens;
	}
	v = hosttools_handle(c->m->h, resp, c->cell, c->m->red, &outputs,
	    &err);
	if (v == HOST_ABORT) {
		json_decref(outputs);
		call_finish(c, NULL, "NextCellAlreadyScheduled", err ? err : "");
		free(err);
		return;
	}
	if (v == HOST_ONLY && c->sealed) {
		json_decref(outputs);
		(void)snprintf(buf, sizeof buf, "Cell %u has finished: the "
		    "model's answer called only host tools and is not "
		    "continued", c->cell);
		call_finish(c, NULL, "ModelError", buf);
		return;
	}
	if (v == HOST_ONLY && ++c->rounds >= c->m->cfg.max_rounds) {
		json_decref(outputs);
		(void)snprintf(buf, sizeof buf, "the model made only host tool "
		    "calls for %u rounds in a row", c->rounds);
		call_finish(c, NULL, "ModelError", buf);
		return;
	}
	if (v == HOST_ONLY) {
		call_continue(c, resp, outputs);
		json_decref(outputs);
		return;
	}
	json_decref(outputs);
	if (c->held != NULL)
		c->ops.event(c->ctx, c->held, c->held_len);
	call_finish(c, resp, NULL, NULL);
}

static void
on_done(void *ctx, const struct http_result *r)
{
	struct call *c = ctx;
	int partial;

	c->http_id = 0;
	c->st.requests++;
	c->st.attempts += r->attempts;
	if (r->status / 100 == 2)	/* the key, the URL and the model work */
		c->m->answered = 1;
	if (!r->ok && !r->partial && !(r->aborted && r->status / 100 == 2)) {
		call_failed(c, r);
		return;
	}
	if (call_outage_over(c))
		return;
	if (c->sse_err != 0) {
		char buf[256];

		(void)snprintf(buf, sizeof buf, "the model stream was abandoned: "
		    "%s", sse_strerror(c->sse_err));
		call_finish(c, NULL, "ModelError", buf);
		return;
	}
	partial = sse_finish(c->sse) == SSE_PARTIAL;
	if (response_finish(c->resp, partial) < 0) {
		char buf[768];

		(void)snprintf(buf, sizeof buf, "%s%s%s",
		    response_error(c->resp) ? response_error(c->resp) :
		    "the model stream failed", r->error ? ": " : "",
		    r->error ? r->error : "");
		call_finish(c, NULL, "ModelError", buf);
		return;
	}
	round_done(c);
}

void
call_round(struct call *c)
{
	static const struct http_callbacks cb = { NULL, call_data, on_done };
	const char *headers[4];
	struct http_request_opts o;
	size_t n = 0;

	sse_free(c->sse);
	response_free(c->resp);
	free(c->held);
	c->held = NULL;
	streamred_reset(c->sr);
	c->sse_err = 0;
	c->sse = sse_new(call_sse, c, SSE_MAX_EVENT_DEFAULT);
	c->resp = response_new();
	if (c->sse == NULL || c->resp == NULL) {
		call_finish(c, NULL, "ModelError", "out of memory");
		return;
	}
	headers[n++] = "Content-Type: application/json";
	headers[n++] = "Accept: text/event-stream";
	if (c->m->auth != NULL)
		headers[n++] = c->m->auth;
	headers[n] = NULL;
	memset(&o, 0, sizeof o);
	o.url = c->m->url;
	o.body = c->wire;
	o.body_len = c->wire_len;
	o.body_kept = 1;	/* the wire lives as long as the round */
	o.headers = headers;
	o.timeout_ms = c->m->cfg.timeout_ms;
	/* while waiting out an outage, each try is one attempt */
	c->st.outage_tries += c->out_tries > 0;
	o.max_retries = c->out_tries > 0 ? HTTP_RETRIES_NONE :
	    c->m->cfg.max_retries;
	c->http_id = http_post(c->m->http, &o, &cb, c);
	if (c->http_id == 0)
		call_finish(c, NULL, "ModelError", strerror(errno));
}

/*
 * A new call with its request rewritten from q (borrowed), or NULL
 * after ops->done was told why (bad parameters, no memory).
 */
static struct call *
call_new(struct model *m, const struct model_req *q, int stream,
    uint32_t cell, const struct model_call_ops *ops, void *ctx)
{
	struct call *c;
	json_t *body;
	char *err = NULL;

	if (m->ending) {
		ops->done(ctx, NULL, "ModelError", "the run is ending: no new "
		    "model call starts");
		return NULL;
	}
	if ((c = calloc(1, sizeof *c)) == NULL) {
		ops->done(ctx, NULL, "ModelError", "out of memory");
		return NULL;
	}
	c->m = m;
	c->stream = stream;
	c->cell = cell;
	c->ops = *ops;
	c->ctx = ctx;
	body = rewrite_request(q->params, &m->cfg.settings,
	    hosttools_definitions(m->h), &err);
	if (body == NULL) {
		ops->done(ctx, NULL, "TypeError", err ? err : "bad parameters");
		free(err);
		free(c);
		return NULL;
	}
	if (call_wire_build(c, body, q->input) < 0) {
		ops->done(ctx, NULL, "ModelError", "out of memory");
		json_decref(body);
		free(c->head);
		free(c->wire);
		free(c);
		return NULL;
	}
	json_decref(body);
	return c;
}

uint64_t
model_call(struct model *m, const struct model_req *q, int stream,
    uint32_t cell, const struct model_call_ops *ops, void *ctx)
{
	struct call *c = call_new(m, q, stream, cell, ops, ctx);
	uint64_t id;

	if (c == NULL)
		return 0;
	id = c->id = m->next_id++;
	c->next = m->calls;
	m->calls = c;
	call_round(c);
	return id;	/* the call may already have finished */
}

static struct call *
find_call(const struct model *m, uint64_t id)
{
	struct call *c;

	for (c = m->calls; c != NULL; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

int
model_end(struct model *m, uint64_t id, const char *why)
{
	struct call *c = find_call(m, id);

	if (c == NULL)
		return 0;
	if (c->http_id != 0)	/* closes the connection (curl: premature) */
		http_cancel(m->http, c->http_id);
	c->http_id = 0;
	if (c->out_tries > 0) {		/* an outage wait ends with it */
		log_warnx("stopped waiting for the model: %s", why);
		if (call_outage_report(c, 0, -1, why, NULL))
			return 0;	/* the observer cancelled it: no done */
	}
	call_finish(c, NULL, "ModelError", why);	/* call_free ends a wait */
	return 1;
}

int
model_seal(struct model *m, uint64_t id)
{
	struct call *c = find_call(m, id);

	if (c == NULL)
		return 0;
	c->sealed = 1;
	return 1;
}
