/*
 * model.c - call_me on the wire (see model.h).
 *
 * A call is a chain of rounds. Each round POSTs the rewritten body,
 * streams the SSE through the assembler, and on completion runs the host
 * tools: a host-only response starts the next round with the continued
 * input; anything else is handed back. Stream events are forwarded as
 * they come, except the terminal event of a round that is continued.
 */
#include "supervisor/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/http.h"
#include "supervisor/response.h"
#include "supervisor/sse.h"

struct call {
	struct model *m;
	uint64_t id;
	json_t *body;		/* the current round's request */
	int stream;
	struct host_binding b;
	struct model_call_ops ops;
	void *ctx;
	uint64_t http_id;
	struct sse *sse;
	struct response *resp;
	char *held;		/* the terminal event, until we know */
	int sse_err;		/* why sse_feed gave up, 0 if it did not */
	size_t held_len;
	unsigned rounds;
	struct call *next;
};

struct model {
	struct loop *loop;
	struct model_config cfg;
	struct http *http;
	struct hosttools *h;
	const struct redact *red;
	char *url;
	char *auth;
	struct call *calls;
	uint64_t next_id;
	long long total_tokens;
};

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
	n = strlen(c->base_url);
	while (n > 0 && c->base_url[n - 1] == '/')
		n--;
	if (asprintf(&m->url, "%.*s/responses", (int)n, c->base_url) < 0)
		m->url = NULL;
	if (c->api_key != NULL && asprintf(&m->auth, "Authorization: Bearer "
	    "%s", c->api_key) < 0)
		m->auth = NULL;
	m->http = http_new(l);
	if (m->url == NULL || m->http == NULL) {
		model_free(m);
		return NULL;
	}
	return m;
}

static void
call_free(struct call *c)
{
	json_decref(c->body);
	sse_free(c->sse);
	response_free(c->resp);
	free(c->held);
	free(c);
}

void
model_free(struct model *m)
{
	struct call *c, *next;

	if (m == NULL)
		return;
	http_free(m->http);
	for (c = m->calls; c != NULL; c = next) {
		next = c->next;
		c->ops.done(c->ctx, NULL, "ModelError", "the run is ending");
		call_free(c);
	}
	free(m->url);
	free(m->auth);
	free(m);
}

long long
model_total_tokens(const struct model *m)
{
	return m->total_tokens;
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
static void
finish(struct call *c, const json_t *resp, const char *type, const char *msg)
{
	struct model *m = c->m;

	unlink_call(m, c);
	c->ops.done(c->ctx, resp, type, msg);
	call_free(c);
}

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
static void start_round(struct call *c);

/* SSE event -> assembler; forward what the caller may see. */
static int
on_sse(void *ctx, const struct sse_event *ev)
{
	struct call *c = ctx;
	int kind = response_feed(c->resp, ev->type, ev->data, ev->data_len);

	if (kind == RESPONSE_EV_DELTA && c->ops.progress != NULL)
		c->ops.progress(c->ctx, response_delta_bytes(c->resp));
	if (!c->stream || kind < 0 || ev->data_len == 0 ||
	    strcmp(ev->data, "[DONE]") == 0)
		return 0;
	if (kind == RESPONSE_EV_TERMINAL) {	/* held until we know */
		free(c->held);
		c->held = redacted(c->m, ev->data, ev->data_len, &c->held_len);
		return 0;
	}
	forward(c, ev->data, ev->data_len);
	return 0;
}

static void
forward(struct call *c, const char *data, size_t len)
{
	size_t n;
	char *clean;

	if (c->m->red == NULL || redact_count(c->m->red) == 0) {
		c->ops.event(c->ctx, data, len);	/* nothing to clean */
		return;
	}
	clean = redact_string(c->m->red, data, len, &n);
	if (clean != NULL)
		c->ops.event(c->ctx, clean, n);
	free(clean);
}

static int
on_data(void *ctx, const char *p, size_t n)
{
	struct call *c = ctx;
	int rc = sse_feed(c->sse, p, n);

	if (rc < 0)
		c->sse_err = rc;
	return rc < 0 ? -1 : 0;
}

static void
http_failed(struct call *c, const struct http_result *r)
{
	char *msg = NULL, *code = NULL, buf[512];

	if (r->status != 0 && r->status / 100 != 2) {
		msg = response_parse_error_body(r->status, r->body, r->body_len,
		    &code);
		(void)snprintf(buf, sizeof buf, "%s%s", msg != NULL ? msg :
		    "HTTP error", r->attempts > 1 ? " (after retries)" : "");
	} else {
		(void)snprintf(buf, sizeof buf, "model request to %s failed "
		    "after %u attempt%s: %s", c->m->url, r->attempts,
		    r->attempts == 1 ? "" : "s", r->error ? r->error : "?");
	}
	free(msg);
	free(code);
	finish(c, NULL, "ModelError", buf);
}

/* The round's response is complete: host tools, then continue or return. */
static void
round_done(struct call *c)
{
	json_t *resp = response_result(c->resp), *outputs = NULL, *next;
	const struct response_usage *u = response_usage(c->resp);
	enum host_verdict v;
	char *err = NULL, buf[96];

	if (u != NULL)
		c->m->total_tokens += u->total_tokens;
	v = hosttools_handle(c->m->h, resp, &c->b, c->m->red, &outputs, &err);
	if (v == HOST_ABORT) {
		json_decref(outputs);
		finish(c, NULL, "NextCellAlreadyScheduled", err ? err : "");
		free(err);
		return;
	}
	if (v == HOST_ONLY && ++c->rounds >= c->m->cfg.max_rounds) {
		json_decref(outputs);
		(void)snprintf(buf, sizeof buf, "the model made only host tool "
		    "calls for %u rounds in a row", c->rounds);
		finish(c, NULL, "ModelError", buf);
		return;
	}
	if (v == HOST_ONLY) {
		next = hosttools_continuation(json_object_get(c->body, "input"),
		    resp, outputs);
		(void)json_object_set_new(c->body, "input", next);
		json_decref(outputs);
		start_round(c);
		return;
	}
	json_decref(outputs);
	if (c->held != NULL)
		c->ops.event(c->ctx, c->held, c->held_len);
	finish(c, resp, NULL, NULL);
}

static void
on_done(void *ctx, const struct http_result *r)
{
	struct call *c = ctx;
	int partial;

	c->http_id = 0;
	if (!r->ok && !r->partial && !(r->aborted && r->status / 100 == 2)) {
		http_failed(c, r);
		return;
	}
	if (c->sse_err != 0) {
		char buf[256];

		(void)snprintf(buf, sizeof buf, "the model stream was abandoned: "
		    "%s", sse_strerror(c->sse_err));
		finish(c, NULL, "ModelError", buf);
		return;
	}
	partial = sse_finish(c->sse) == SSE_PARTIAL;
	if (response_finish(c->resp, partial) < 0) {
		char buf[768];

		(void)snprintf(buf, sizeof buf, "%s%s%s",
		    response_error(c->resp) ? response_error(c->resp) :
		    "the model stream failed", r->error ? ": " : "",
		    r->error ? r->error : "");
		finish(c, NULL, "ModelError", buf);
		return;
	}
	round_done(c);
}

static void
start_round(struct call *c)
{
	static const struct http_callbacks cb = { NULL, on_data, on_done };
	const char *headers[4];
	struct http_request_opts o;
	char *body;
	size_t n = 0;

	sse_free(c->sse);
	response_free(c->resp);
	free(c->held);
	c->held = NULL;
	c->sse_err = 0;
	c->sse = sse_new(on_sse, c, SSE_MAX_EVENT_DEFAULT);
	c->resp = response_new();
	body = json_dumps(c->body, JSON_COMPACT);
	if (c->sse == NULL || c->resp == NULL || body == NULL) {
		free(body);
		finish(c, NULL, "ModelError", "out of memory");
		return;
	}
	headers[n++] = "Content-Type: application/json";
	headers[n++] = "Accept: text/event-stream";
	if (c->m->auth != NULL)
		headers[n++] = c->m->auth;
	headers[n] = NULL;
	memset(&o, 0, sizeof o);
	o.url = c->m->url;
	o.body = body;
	o.body_len = strlen(body);
	o.headers = headers;
	o.timeout_ms = c->m->cfg.timeout_ms;
	o.max_retries = c->m->cfg.max_retries;
	c->http_id = http_post(c->m->http, &o, &cb, c);
	free(body);
	if (c->http_id == 0)
		finish(c, NULL, "ModelError", strerror(errno));
}

uint64_t
model_call(struct model *m, json_t *params, int stream,
    const struct host_binding *b, const struct model_call_ops *ops,
    void *ctx)
{
	struct call *c = calloc(1, sizeof *c);
	char *err = NULL;
	uint64_t id;

	if (c == NULL) {
		ops->done(ctx, NULL, "ModelError", "out of memory");
		return 0;
	}
	c->m = m;
	c->stream = stream;
	c->b = *b;
	c->ops = *ops;
	c->ctx = ctx;
	c->body = rewrite_request(params, &m->cfg.settings,
	    hosttools_definitions(m->h), &err);
	if (c->body == NULL) {
		ops->done(ctx, NULL, "TypeError", err ? err : "bad parameters");
		free(err);
		free(c);
		return 0;
	}
	hosttools_fill(m->h, c->body);
	c->id = id = m->next_id++;
	c->next = m->calls;
	m->calls = c;
	start_round(c);
	return id;	/* the call may already have finished */
}

void
model_cancel(struct model *m, uint64_t id)
{
	struct call *c;

	for (c = m->calls; c != NULL; c = c->next)
		if (c->id == id)
			break;
	if (c == NULL)
		return;
	if (c->http_id != 0)
		http_cancel(m->http, c->http_id);
	unlink_call(m, c);
	call_free(c);
}
