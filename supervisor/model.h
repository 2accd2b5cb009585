/*
 * model.h - the model client: one call_me is one model_call, which may
 * span several HTTP requests (host-only responses are continued at once,
 * invisibly). Requests are rewritten (rewrite.h), streamed over http.h,
 * parsed by sse.h + response.h; host tools run through hosttools.h.
 * Several calls may be in flight at once.
 */
#ifndef AGENTZ_MODEL_H
#define AGENTZ_MODEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/hosttools.h"
#include "supervisor/loop.h"
#include "supervisor/redact.h"
#include "supervisor/rewrite.h"

struct model_config {
	const char *base_url;		/* e.g. https://api.openai.com/v1 */
	const char *api_key;		/* NULL: no Authorization header */
	struct model_settings settings;
	long timeout_ms;		/* per HTTP request */
	unsigned max_retries;
	unsigned max_rounds;		/* host-only continuations per call */
};

struct model_call_ops {
	/* A stream event for call_me(stream=True) (redacted JSON text). */
	void (*event)(void *ctx, const char *json, size_t len);
	/* Live progress: bytes of deltas so far in this call. */
	void (*progress)(void *ctx, size_t delta_bytes);
	/*
	 * The call ended. On success response is the final Response object
	 * (borrowed; the caller redacts what it passes on) and err_type NULL. On failure err_type is the
	 * exception the cell should see ("ModelError",
	 * "NextCellAlreadyScheduled") and err_msg says what failed.
	 */
	void (*done)(void *ctx, const json_t *response, const char *err_type,
	    const char *err_msg);
};

struct model;

struct model *model_new(struct loop *l, const struct model_config *c,
    struct hosttools *h, const struct redact *red);
/* Ends every call in flight (done with "the run is ending"), frees m. */
void model_free(struct model *m);

/*
 * Starts a call with the caller's parameters (borrowed; copied). b is
 * copied. Returns a call id > 0, or 0 after ops->done was already called
 * with the reason (bad parameters).
 */
uint64_t model_call(struct model *m, json_t *params, int stream,
    const struct host_binding *b, const struct model_call_ops *ops,
    void *ctx);
/* Abandons a call: no callback for it runs afterwards. */
void model_cancel(struct model *m, uint64_t id);

/* Exact tokens from `usage` of completed responses, whole run. */
long long model_total_tokens(const struct model *m);

#endif
