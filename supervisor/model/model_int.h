/*
 * model_int.h - private to the model client's files: model.c (the model,
 * calls and their rounds), model_stream.c (a round's stream: SSE into the
 * assembler, events forwarded with redaction), model_outage.c (failures
 * and outage waits), model_setup.c (set-up errors), model_wire.c (a call's request text, its input
 * kept as text, and continuations), model_req.c (the request and the
 * answer as the caller sees them), rewrite.c (the request body as the
 * engine sends it) and said.c (a response as one line). Nothing else
 * includes it (but unit tests); the public face is model.h. jansson comes
 * with hosttools_int.h: these files' JSON is the host tools' and the
 * Responses API's (the stream assembler's is response_int.h's).
 */
#ifndef AGENTZ_MODEL_INT_H
#define AGENTZ_MODEL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/model/http.h"
#include "supervisor/model/hosttools_int.h"
#include "supervisor/model/jspan.h"
#include "supervisor/model/model.h"
#include "supervisor/model/sse.h"
#include "supervisor/text/redact.h"

/* A call_me request (model.h): input kept as text, the rest parsed. */
struct model_req {
	json_t *params;		/* the parameters but input: an object */
	struct jspan input;	/* JSON text; n 0: no input */
	char *owned;		/* the input's text when the request made it */
};

/* A completed response, as done sees it. */
struct model_answer {
	const json_t *resp;
};

struct call {
	struct model *m;
	uint64_t id;
	/* the current round's request text, its input (when it has one) at
	 * [in_off, in_off + in_len); head: the request without input and
	 * without its closing brace, for the next round's */
	char *wire;
	size_t wire_len, in_off, in_len;
	char *head;
	size_t head_len;
	int stream;
	uint32_t cell;		/* the cell that made the call */
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
	struct model_call_stats st;	/* told at the end (ops.stats) */
	struct call *next;
};

struct model {
	struct loop *loop;
	struct model_config cfg;
	struct http *http;
	struct hosttools *h;
	const struct redact *red;
	char *url;
	char *shown;		/* url without credentials: what is said */
	char *auth;
	struct call *calls;
	uint64_t next_id;
	struct model_usage usage;	/* summed `usage` of every round */
	long patience_ms;	/* <= 0: outages are not waited out */
	model_outage_fn *outage_fn;
	void *outage_ctx;
	model_setup_fn *setup_fn;
	void *setup_ctx;
	int answered;		/* a request got an HTTP 2xx: the set-up works */
	int hinted;		/* "no answer yet" was said */
	int ending;		/* model_free runs: no call starts */
};


/* model.c */
/* Ends a call: its done callback, then it is gone. */
void call_finish(struct call *c, const json_t *resp, const char *type,
    const char *msg);
/* Posts c's current request (a new round or another try); on failure
 * c is finished. */
void call_round(struct call *c);

/* model_stream.c: the sse and http callbacks of a round. */
int call_sse(void *ctx, const struct sse_event *ev);
int call_data(void *ctx, const char *p, size_t n);

/* model_outage.c */
/* A round failed (r): wait out the outage, or finish c with why. */
void call_failed(struct call *c, const struct http_result *r);
/* The model answered: c's outage, if any, is over. 1 if the observer
 * cancelled c (c is freed then). */
int call_outage_over(struct call *c);
/* Tells the observer about c's outage (hint: model_outage.hint). 1 when
 * it cancelled c. */
int call_outage_report(struct call *c, double next_in, int over,
    const char *reason, const char *hint);

/* model_setup.c */
/* Before anything answered: r (failed) says the set-up is wrong (line:
 * what failed, one line): the set-up observer is told. */
void call_setup_error(struct call *c, const struct http_result *r,
    const char *line);
/* "no answer yet from BASE -- ..." in buf when r is a connection failure
 * before anything answered and it was not said yet (said now); else
 * NULL. */
const char *model_no_answer_hint(struct model *m,
    const struct http_result *r, char *buf, size_t size);

/* model_wire.c */
/* The request text of c from its rewritten body (borrowed) and input:
 * extra_body's input, if any, wins (as it did on a tree); the stored
 * host outputs are filled in. 0, or -1 / ENOMEM. */
int call_wire_build(struct call *c, json_t *body, struct jspan input);
/* A host-only round: the next input, and it is posted. */
void call_continue(struct call *c, const json_t *resp,
    const json_t *outputs);

/* rewrite.c: the supervisor's rewriting of every call_me request body
 * (SPEC section 4): engine-set fields, reasoning effort only upward, host tools
 * that cannot be replaced, extra_body stripped of protected keys and
 * merged last, always streamed. */
/*
 * Builds the wire body from the caller's call_me parameters (not
 * modified). host_tools is an array of tool definitions (borrowed).
 * Returns a new object, or NULL with *err (malloc'ed) naming the problem
 * when params is not an object.
 */
json_t *rewrite_request(json_t *params, const struct model_settings *s,
    const json_t *host_tools, char **err);

/* said.c: what a model response said, as one short line for a log
 * message ("the model did not submit a repair cell; it said: ..."). */
/*
 * The text of response's output (borrowed; its message text and refusals,
 * and "[called NAME]" for each tool call), secrets hidden by red (may be
 * NULL), control characters and line breaks made spaces, runs of spaces
 * made one, and cut to at most max bytes on a UTF-8 boundary with "..."
 * when longer. "" when it said nothing. Malloc'ed; NULL / ENOMEM.
 */
char *said_text(const json_t *response, const struct redact *red,
    size_t max);

#endif /* AGENTZ_MODEL_INT_H */
