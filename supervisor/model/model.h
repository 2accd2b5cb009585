/*
 * model.h - the model client: one call_me is one model_call, which may
 * span several HTTP requests (host-only responses are continued at once,
 * invisibly). Requests are rewritten (rewrite.c), streamed over http.h,
 * parsed by sse.h + response.h; host tools run through hosttools.h.
 * Several calls may be in flight at once. A call's request is a struct
 * model_req: its input kept as JSON text, never parsed into a tree (an
 * input of many small items is ~21x its text as a tree), its other
 * parameters parsed; its answer a struct model_answer. No jansson type
 * shows here: JSON is the model client's business.
 *
 * Outages are waited out, not failed on: when a request fails in a way
 * http.h would retry (unreachable, 429 other than insufficient_quota, 5xx)
 * and its quick retries are spent, the call tries again from a loop timer
 * with backoff (http_outage_delay_ms(): 1 s doubling to 60 s, or the
 * server's longer retry-after), one attempt per try, until it succeeds or
 * outage_patience_ms has passed since the outage began; only then does
 * the caller see the error. Each wait is logged (log_warnx) and reported
 * to the outage observer. The wait is only a timer: model_end() and
 * model_free() end it at once. A stream that already delivered events,
 * a 400/401/quota error and a request timeout are never waited on.
 * Before anything answered, the first wait after a connection failure
 * also says "no answer yet from BASE" (model_outage.hint), and an answer
 * that says the set-up is wrong is a set-up error (below).
 */
#ifndef AGENTZ_MODEL_H
#define AGENTZ_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/model/hosttools.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/redact.h"

/* What the engine sets on every request (rewrite.c). */
struct model_settings {
	const char *model;
	const char *instructions;
	const char *service_tier;	/* NULL: not sent */
	long max_output_tokens;		/* <= 0: not sent */
};

struct model_config {
	const char *base_url;		/* e.g. https://api.openai.com/v1 */
	const char *api_key;		/* NULL: no Authorization header */
	struct model_settings settings;
	long timeout_ms;		/* per HTTP request */
	unsigned max_retries;
	unsigned max_rounds;		/* host-only continuations per call */
	/* How long a call waits out an outage after the quick retries:
	 * 0 = MODEL_OUTAGE_PATIENCE_DEFAULT_MS, < 0 = not at all. */
	long outage_patience_ms;
};

#define MODEL_OUTAGE_PATIENCE_DEFAULT_MS	(15L * 60 * 1000)

/* What the outage observer is told; valid during the callback only. */
struct model_outage {
	uint64_t call;		/* the model_call id */
	double since;		/* wall clock (loop_wall) the outage began */
	double waited;		/* seconds since then */
	double patience;	/* seconds the call waits in all */
	/* Seconds until the next try; 0 when over. */
	double next_try_in;
	unsigned tries;		/* failed tries of this outage, >= 1 */
	/* 0 waiting; 1 the model answered again; -1 the patience ran out
	 * (the call ends with the error next). */
	int over;
	const char *reason;	/* the last failure, one line, never NULL */
	/* On the first wait of m's while nothing ever answered it (the
	 * failure a connection's, no HTTP status): "no answer yet from
	 * BASE -- is OPENAI_BASE_URL right?" (BASE without credentials),
	 * once per model; else NULL. The model logs it (log_warnx). */
	const char *hint;
};

typedef void model_outage_fn(void *ctx, const struct model_outage *o);

/* The same usage by kind, what prices apply to (price.h). */
struct model_usage {
	long long input;	/* all input tokens, cached ones included */
	long long cached;	/* the cached part of input */
	long long output;	/* reasoning tokens included */
	long long total;	/* as model_total_tokens() */
};

/* What one call took, told just before its done (model_call_ops.stats). */
struct model_call_stats {
	struct model_usage usage;	/* summed over its rounds */
	unsigned requests;	/* HTTP requests: rounds and outage tries */
	unsigned attempts;	/* of those, with the quick retries */
	unsigned outage_tries;	/* of those, made while waiting out an outage */
};

/*
 * One call_me request (model_req.c): the parameters other than input
 * parsed, input kept as JSON text. From a call_me body {"params": {...},
 * "stream": bool} (borrowed: the request must not outlive it), with
 * *stream set; NULL with why in err (a TypeError for the cell: not a
 * JSON object, parameters other than keyword arguments or too big).
 */
struct model_req;
struct model_req *model_req_parse(const char *body, size_t len, int *stream,
    char *err, size_t size);
/* A request whose input is text, one user message. NULL / ENOMEM. */
struct model_req *model_req_text(const char *input);
/*
 * Puts note ahead of q's input: a string input becomes note, sep, the
 * string; a list gets a developer message with note first. 1 when done,
 * 0 when the input is neither (q unchanged), -1 / ENOMEM.
 */
int model_req_note(struct model_req *q, const char *note, const char *sep);
void model_req_free(struct model_req *q);

/* A completed response, valid during the done callback only. */
struct model_answer;
/* Its Response object as compact JSON text (malloc'ed, *len bytes and a
 * NUL), NULL / ENOMEM. */
char *model_answer_json(const struct model_answer *ans, size_t *len);
/* What it said, as one short line (said.c). Malloc'ed, NULL / ENOMEM. */
char *model_answer_said(const struct model_answer *ans,
    const struct redact *red, size_t max);

struct model_call_ops {
	/* A stream event for call_me(stream=True) (redacted JSON text). */
	void (*event)(void *ctx, const char *json, size_t len);
	/* Live progress: bytes of deltas so far in this call. */
	void (*progress)(void *ctx, size_t delta_bytes);
	/*
	 * The call ended. On success ans is the final Response (borrowed;
	 * the caller redacts what it passes on) and err_type NULL. On
	 * failure ans is NULL, err_type the exception the cell should see
	 * ("ModelError", "NextCellAlreadyScheduled", "TypeError") and
	 * err_msg says what failed.
	 */
	void (*done)(void *ctx, const struct model_answer *ans,
	    const char *err_type, const char *err_msg);
	/* Just before done: what the call took (NULL: not wanted). */
	void (*stats)(void *ctx, const struct model_call_stats *s);
};

struct model;

struct model *model_new(struct loop *l, const struct model_config *c,
    struct hosttools *h, const struct redact *red);
/*
 * Ends every call in flight (done with "the run is ending", run while m
 * is whole; a model_call from such a callback is refused the same way),
 * then frees m.
 */
void model_free(struct model *m);

/*
 * Starts a call made by cell with request q (borrowed; its text is
 * copied). Returns a call id > 0, or 0 after ops->done was already called
 * with the reason (bad parameters).
 */
uint64_t model_call(struct model *m, const struct model_req *q, int stream,
    uint32_t cell, const struct model_call_ops *ops, void *ctx);

/*
 * Ends a call at once, whatever it is doing (a request or its retry
 * pending, an outage wait, a continuation round): its HTTP connection is
 * closed, so the server stops streaming, and ops->done runs before this
 * returns with "ModelError" and why. An outage wait is reported over (-1)
 * first. Returns 1, or 0 when no call id is open or the outage observer
 * cancelled it (ops->done did not run then).
 */
int model_end(struct model *m, uint64_t id, const char *why);
/*
 * The cell that made call id has ended: the round in flight (its retries
 * and outage wait included) may still finish, but a host-only response is
 * no longer continued; the call ends with "ModelError" saying so instead.
 * Returns 1, or 0 when no call id is open.
 */
int model_seal(struct model *m, uint64_t id);

/*
 * Sets the observer told about outage waits of every call of m: once per
 * wait (over 0), and once when the outage ends (over 1 or -1). NULL fn
 * for none. It may end the call, never model_free().
 */
void model_set_outage_observer(struct model *m, model_outage_fn *fn,
    void *ctx);

/*
 * Set-up errors (model_setup.c). Until a request of m got an HTTP 2xx
 * (m's set-up is then known to work), an answer no waiting can fix that
 * says the set-up is wrong stops being a call's error only: HTTP 401 or
 * 403 (the key), 404 (the URL or the model), 400 naming the model (its
 * code, param or message). The observer is told first, with one line
 * saying what failed, at which URL (without credentials) and what to
 * check; the call then ends with its ModelError as any. After the first
 * 2xx these are ordinary errors. It must not free m.
 */
typedef void model_setup_fn(void *ctx, const char *why);
void model_set_setup_observer(struct model *m, model_setup_fn *fn,
    void *ctx);
/* m's set-up is known to work (a resumed run's model answered before):
 * no set-up errors, no "no answer yet" hint. */
void model_set_answered(struct model *m);

/* url as it may be shown: without user name and password (a secret, may
 * be). Malloc'ed; NULL when url does not parse, or ENOMEM. */
char *model_url_shown(const char *url);

/* Exact tokens from `usage` of completed responses, whole run. */
long long model_total_tokens(const struct model *m);
/* 1 while a call (a request, its retries or an outage wait) is open. */
int model_busy(const struct model *m);

void model_usage(const struct model *m, struct model_usage *u);

#endif
