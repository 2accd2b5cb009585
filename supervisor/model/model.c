/*
 * model.c - call_me on the wire (see model.h).
 *
 * A call is a chain of rounds. Each round POSTs the rewritten body,
 * streams the SSE through the assembler, and on completion runs the host
 * tools: a host-only response starts the next round with the continued
 * input; anything else is handed back. Stream events are forwarded as
 * they come, except the terminal event of a round that is continued.
 *
 * A round that fails retryably after http.c's quick retries is posted
 * again from c->wait_timer while the outage patience lasts (see model.h);
 * the outage is a property of the call (c->out_*), so concurrent calls
 * each keep their own schedule.
 */
#include "supervisor/model/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/model/http.h"
#include "supervisor/model/response.h"
#include "supervisor/model/sse.h"
#include "supervisor/text/streamred.h"

struct call {
	struct model *m;
	uint64_t id;
	json_t *body;		/* the current round's request */
	/* a call whose input is kept as text (model_call_raw): the whole
	 * request text, its input at [in_off, in_off + in_len); body is then
	 * the rest of the request, unused after the wire is built */
	char *wire;
	size_t wire_len, in_off, in_len;
	int stream;
	struct host_binding b;
	struct model_call_ops ops;
	void *ctx;
	uint64_t http_id;
	struct sse *sse;
	struct response *resp;
	char *held;		/* the terminal event, until we know */
	struct streamred *sr;	/* per-field redaction of streamed events */
	int sse_err;		/* why sse_feed gave up, 0 if it did not */
	size_t held_len;
	unsigned rounds;
	int sealed;		/* its cell ended: no more continuations */
	/* the outage being waited out; out_tries 0 = none */
	uint64_t wait_timer;
	uint64_t out_t0_us;	/* monotonic start */
	double out_since;	/* wall clock start */
	unsigned out_tries;
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
	struct model_usage usage;	/* summed `usage` of every round */
	long patience_ms;	/* <= 0: outages are not waited out */
	model_outage_fn *outage_fn;
	void *outage_ctx;
};

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
	loop_timer_cancel(c->m->loop, c->wait_timer);
	json_decref(c->body);
	free(c->wire);
	sse_free(c->sse);
	response_free(c->resp);
	free(c->held);
	streamred_free(c->sr);
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

/* An event already redacted, to the caller. */
static void
forward_clean(void *ctx, const char *data, size_t len)
{
	struct call *c = ctx;

	c->ops.event(c->ctx, data, len);
}
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

static int
on_data(void *ctx, const char *p, size_t n)
{
	struct call *c = ctx;
	int rc = sse_feed(c->sse, p, n);

	if (rc < 0)
		c->sse_err = rc;
	return rc < 0 ? -1 : 0;
}

/* What failed, one line: the API's error or the transport's. */
static void
failure_text(const struct call *c, const struct http_result *r, char *buf,
    size_t size)
{
	char *msg = NULL, *code = NULL;

	if (r->status != 0 && r->status / 100 != 2) {
		msg = response_parse_error_body(r->status, r->body, r->body_len,
		    &code);
		(void)snprintf(buf, size, "%s%s", msg != NULL ? msg :
		    "HTTP error", r->attempts > 1 ? " (after retries)" : "");
	} else {
		(void)snprintf(buf, size, "model request to %s failed "
		    "after %u attempt%s: %s", c->m->url, r->attempts,
		    r->attempts == 1 ? "" : "s", r->error ? r->error : "?");
	}
	free(msg);
	free(code);
}

static double
outage_waited(const struct call *c)
{
	return (double)(loop_now_us() - c->out_t0_us) / 1e6;
}

/*
 * Tells the observer about c's outage. Returns 1 when the observer
 * cancelled c (c is freed then), else 0.
 */
static int
outage_report(struct call *c, double next_in, int over, const char *reason)
{
	struct model *m = c->m;
	struct model_outage o;
	uint64_t id = c->id;
	struct call *k;

	if (m->outage_fn == NULL)
		return 0;
	memset(&o, 0, sizeof o);
	o.call = id;
	o.since = c->out_since;
	o.waited = outage_waited(c);
	o.patience = (double)m->patience_ms / 1000.0;
	o.next_try_in = next_in;
	o.tries = c->out_tries;
	o.over = over;
	o.reason = reason;
	m->outage_fn(m->outage_ctx, &o);
	for (k = m->calls; k != NULL && k->id != id; k = k->next)
		;
	return k == NULL;
}

static void
outage_retry(struct loop *l, void *ctx)
{
	struct call *c = ctx;

	(void)l;
	c->wait_timer = 0;
	start_round(c);
}

/*
 * Schedules the next try of c's round when r is an outage and the
 * patience lasts. Returns 1 when c is taken care of (waiting, or
 * cancelled by the observer), 0 when the caller reports r.
 */
static int
outage_wait(struct call *c, const struct http_result *r, const char *why)
{
	struct model *m = c->m;
	uint64_t delay, waited_ms, left;

	if (!r->retryable || r->partial || r->timed_out || r->aborted ||
	    m->patience_ms <= 0)
		return 0;
	if (c->out_tries == 0) {
		c->out_t0_us = loop_now_us();
		c->out_since = loop_wall();
	}
	waited_ms = (loop_now_us() - c->out_t0_us) / 1000;
	left = waited_ms < (uint64_t)m->patience_ms ?
	    (uint64_t)m->patience_ms - waited_ms : 0;
	delay = http_outage_delay_ms(c->out_tries, r->retry_after_ms);
	/* The server's "not before" outlasts the patience: give up now. */
	if (left == 0 || r->retry_after_ms > left)
		return 0;
	if (delay > left)
		delay = left;
	if ((c->wait_timer = loop_timer(m->loop, delay, outage_retry, c)) == 0)
		return 0;
	c->out_tries++;
	log_warnx("waiting for the model: %s; next try in %.1f s (down for "
	    "%.0f s, patience %.0f s)", why, (double)delay / 1000.0,
	    outage_waited(c), (double)m->patience_ms / 1000.0);
	(void)outage_report(c, (double)delay / 1000.0, 0, why);
	return 1;
}

static int outage_over(struct call *c);

static void
http_failed(struct call *c, const struct http_result *r)
{
	char buf[512], out[640];
	double waited;

	failure_text(c, r, buf, sizeof buf);
	if (outage_wait(c, r, buf))
		return;
	/* answered, with an error no wait fixes: the outage is over */
	if (!r->retryable && outage_over(c))
		return;
	if (c->out_tries == 0) {
		finish(c, NULL, "ModelError", buf);
		return;
	}
	waited = outage_waited(c);
	log_warnx("stopped waiting for the model after %.0f s: %s", waited,
	    buf);
	if (outage_report(c, 0, -1, buf))
		return;
	(void)snprintf(out, sizeof out, "%s (the model was unavailable for "
	    "%.0f s)", buf, waited);
	finish(c, NULL, "ModelError", out);
}

/* The model answered: the outage of c, if any, is over. 1 if the observer
 * cancelled c. */
static int
outage_over(struct call *c)
{
	if (c->out_tries == 0)
		return 0;
	log_warnx("the model answers again after %.0f s", outage_waited(c));
	if (outage_report(c, 0, 1, "the model answers again"))
		return 1;
	c->out_tries = 0;
	return 0;
}

/*
 * Puts in (len bytes of JSON) as the wire's input: the text before the
 * old input, in, the text after it. 0, or -1 / ENOMEM (wire unchanged).
 */
static int
wire_splice(struct call *c, const char *in, size_t len)
{
	size_t after = c->wire_len - c->in_off - c->in_len;
	char *w = malloc(c->in_off + len + after + 1);

	if (w == NULL)
		return -1;
	memcpy(w, c->wire, c->in_off);
	memcpy(w + c->in_off, in, len);
	memcpy(w + c->in_off + len, c->wire + c->in_off + c->in_len, after);
	w[c->in_off + len + after] = '\0';
	free(c->wire);
	c->wire = w;
	c->wire_len = c->in_off + len + after;
	c->in_len = len;
	return 0;
}

/* A host-only round of a call whose input is text: the next input is
 * spliced, never parsed. */
static void
continue_raw(struct call *c, const json_t *resp, const json_t *outputs)
{
	struct jspan in = { c->wire + c->in_off, c->in_len };
	size_t n = 0;
	char *next = hosttools_continuation_raw(in, resp, outputs, &n);

	if (next == NULL || wire_splice(c, next, n) < 0) {
		free(next);
		finish(c, NULL, "ModelError", "out of memory");
		return;
	}
	free(next);
	start_round(c);
}

/* The round's response is complete: host tools, then continue or return. */
static void
round_done(struct call *c)
{
	json_t *resp = response_result(c->resp), *outputs = NULL, *next;
	const struct response_usage *u = response_usage(c->resp);
	enum host_verdict v;
	char *err = NULL, buf[160];

	if (u != NULL) {
		c->m->usage.input += u->input_tokens;
		c->m->usage.cached += u->cached_tokens;
		c->m->usage.output += u->output_tokens;
		c->m->usage.total += u->total_tokens;
	}
	v = hosttools_handle(c->m->h, resp, &c->b, c->m->red, &outputs, &err);
	if (v == HOST_ABORT) {
		json_decref(outputs);
		finish(c, NULL, "NextCellAlreadyScheduled", err ? err : "");
		free(err);
		return;
	}
	if (v == HOST_ONLY && c->sealed) {
		json_decref(outputs);
		(void)snprintf(buf, sizeof buf, "Cell %u has finished: the "
		    "model's answer called only host tools and is not "
		    "continued", c->b.cell);
		finish(c, NULL, "ModelError", buf);
		return;
	}
	if (v == HOST_ONLY && ++c->rounds >= c->m->cfg.max_rounds) {
		json_decref(outputs);
		(void)snprintf(buf, sizeof buf, "the model made only host tool "
		    "calls for %u rounds in a row", c->rounds);
		finish(c, NULL, "ModelError", buf);
		return;
	}
	if (v == HOST_ONLY && c->wire != NULL) {
		continue_raw(c, resp, outputs);
		json_decref(outputs);
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
	if (outage_over(c))
		return;
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
	streamred_reset(c->sr);
	c->sse_err = 0;
	c->sse = sse_new(on_sse, c, SSE_MAX_EVENT_DEFAULT);
	c->resp = response_new();
	body = c->wire != NULL ? NULL : json_dumps(c->body, JSON_COMPACT);
	if (c->sse == NULL || c->resp == NULL || (body == NULL &&
	    c->wire == NULL)) {
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
	o.body = body != NULL ? body : c->wire;
	o.body_len = body != NULL ? strlen(body) : c->wire_len;
	o.body_kept = body == NULL;	/* the wire lives as long as the call */
	o.headers = headers;
	o.timeout_ms = c->m->cfg.timeout_ms;
	/* while waiting out an outage, each try is one attempt */
	o.max_retries = c->out_tries > 0 ? HTTP_RETRIES_NONE :
	    c->m->cfg.max_retries;
	c->http_id = http_post(c->m->http, &o, &cb, c);
	free(body);
	if (c->http_id == 0)
		finish(c, NULL, "ModelError", strerror(errno));
}

/*
 * A new call with its request rewritten from params (borrowed), or NULL
 * after ops->done was told why (bad parameters, no memory).
 */
static struct call *
call_new(struct model *m, json_t *params, int stream,
    const struct host_binding *b, const struct model_call_ops *ops,
    void *ctx)
{
	struct call *c = calloc(1, sizeof *c);
	char *err = NULL;

	if (c == NULL) {
		ops->done(ctx, NULL, "ModelError", "out of memory");
		return NULL;
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
		return NULL;
	}
	return c;
}

/* Registers c and sends its first request; its id. */
static uint64_t
call_go(struct call *c)
{
	uint64_t id = c->id = c->m->next_id++;

	c->next = c->m->calls;
	c->m->calls = c;
	start_round(c);
	return id;	/* the call may already have finished */
}

uint64_t
model_call(struct model *m, json_t *params, int stream,
    const struct host_binding *b, const struct model_call_ops *ops,
    void *ctx)
{
	struct call *c = call_new(m, params, stream, b, ops, ctx);

	if (c == NULL)
		return 0;
	hosttools_fill(m->h, c->body);
	return call_go(c);
}

/*
 * The wire text of a raw call: the rewritten body without input, then
 * "input": the (filled) input text. 0, or -1 / ENOMEM.
 */
static int
wire_build(struct call *c, struct jspan input)
{
	const char *prev = json_string_value(json_object_get(c->body,
	    "previous_response_id"));
	size_t flen = 0, hlen;
	char *filled, *head;
	int rc = -1;

	/* the raw input is the input (extra_body cannot replace it) */
	(void)json_object_del(c->body, "input");
	filled = hosttools_fill_raw(c->m->h, prev, input, &flen);
	head = json_dumps(c->body, JSON_COMPACT);
	if (head == NULL || (hlen = strlen(head)) < 2)
		goto out;
	c->in_off = hlen - 1 + (hlen > 2) + strlen("\"input\":");
	c->in_len = filled != NULL ? flen : input.n;
	c->wire_len = c->in_off + c->in_len + 1;
	if ((c->wire = malloc(c->wire_len + 1)) == NULL)
		goto out;
	(void)snprintf(c->wire, c->in_off + 1, "%.*s%s\"input\":",
	    (int)(hlen - 1), head, hlen > 2 ? "," : "");
	memcpy(c->wire + c->in_off, filled != NULL ? filled : input.p,
	    c->in_len);
	memcpy(c->wire + c->in_off + c->in_len, "}", 2);
	rc = 0;
out:
	free(filled);
	free(head);
	return rc;
}

uint64_t
model_call_raw(struct model *m, json_t *params, struct jspan input,
    int stream, const struct host_binding *b,
    const struct model_call_ops *ops, void *ctx)
{
	struct call *c = call_new(m, params, stream, b, ops, ctx);

	if (c == NULL)
		return 0;
	if (wire_build(c, input) < 0) {
		ops->done(ctx, NULL, "ModelError", "out of memory");
		json_decref(c->body);
		free(c->wire);
		free(c);
		return 0;
	}
	json_decref(c->body);	/* all of it is in the wire now */
	c->body = NULL;
	return call_go(c);
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

void
model_cancel(struct model *m, uint64_t id)
{
	struct call *c = find_call(m, id);

	if (c == NULL)
		return;
	if (c->http_id != 0)
		http_cancel(m->http, c->http_id);
	unlink_call(m, c);	/* call_free ends a wait */
	call_free(c);
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
		if (outage_report(c, 0, -1, why))
			return 0;	/* the observer cancelled it: no done */
	}
	finish(c, NULL, "ModelError", why);	/* call_free ends a wait */
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
