/*
 * hostbind.h - for the unit tests of the host tools: a host tool store
 * running the run's own tools (agent/tools.c) for a binding (a cell, its
 * history, a stand-in for the run's registration), and the fill and
 * continuation of the model client (text in, text out) seen as trees.
 */
#ifndef AGENTZ_TEST_HOSTBIND_H
#define AGENTZ_TEST_HOSTBIND_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "supervisor/agent/tools.h"
#include "supervisor/model/hosttools_int.h"

/* One call's binding: the cell that made it and what the tools act on. */
struct host_binding {
	uint32_t cell;
	struct cells *history;
	enum submit_result (*submit)(void *ctx, uint32_t cell,
	    const char *code, size_t len, const char *summary);
	void *ctx;
};

/* What the store's tools act on: the binding of the call being run. */
static struct agent_tools bound_tools;

static inline struct hosttools *
host_new(void)
{
	struct host_tools t = agent_tools_host(&bound_tools);

	return hosttools_new(&t);
}

static inline enum host_verdict
host_handle(struct hosttools *h, const json_t *resp,
    const struct host_binding *b, const struct redact *red, json_t **outs,
    char **err)
{
	bound_tools.history = b->history;
	bound_tools.submit = b->submit;
	bound_tools.ctx = b->ctx;
	return hosttools_handle(h, resp, b->cell, red, outs, err);
}

/* hosttools_fill on body's input (the request as a tree, changed in
 * place as the request text would be). */
static inline void
host_fill(struct hosttools *h, json_t *body)
{
	const json_t *in = json_object_get(body, "input");
	char *text = in != NULL ? json_dumps(in, JSON_COMPACT |
	    JSON_ENCODE_ANY) : NULL, *out;
	struct jspan span = { text, text != NULL ? strlen(text) : 0 };
	size_t n = 0;

	out = hosttools_fill(h, json_string_value(json_object_get(body,
	    "previous_response_id")), span, &n);
	if (out != NULL)
		(void)json_object_set_new(body, "input", json_loadb(out, n, 0,
		    NULL));
	free(out);
	free(text);
}

/* hosttools_continuation from input (a tree), as a tree. */
static inline json_t *
host_continuation(const json_t *input, const json_t *resp,
    const json_t *outs)
{
	char *text = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY), *out;
	size_t n = 0;
	json_t *next;

	out = hosttools_continuation((struct jspan){ text, strlen(text) },
	    resp, outs, &n);
	next = out != NULL ? json_loadb(out, n, 0, NULL) : NULL;
	free(out);
	free(text);
	return next;
}

#endif
