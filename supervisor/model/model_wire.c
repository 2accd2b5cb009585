/*
 * model_wire.c - a call whose input is kept as text (model_call_raw): the
 * request is the rewritten body without input plus the input text, and a
 * host-only round's continuation is spliced into that text, never parsed.
 */
#include "supervisor/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/model/model_int.h"

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
void
call_continue_raw(struct call *c, const json_t *resp, const json_t *outputs)
{
	struct jspan in = { c->wire + c->in_off, c->in_len };
	size_t n = 0;
	char *next = hosttools_continuation_raw(in, resp, outputs, &n);

	if (next == NULL || wire_splice(c, next, n) < 0) {
		free(next);
		call_finish(c, NULL, "ModelError", "out of memory");
		return;
	}
	free(next);
	call_round(c);
}

/*
 * The wire text of a raw call: the rewritten body without input, then
 * "input": the (filled) input text. 0, or -1 / ENOMEM.
 */
int
call_wire_build(struct call *c, struct jspan input)
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

