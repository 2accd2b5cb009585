/*
 * model_wire.c - a call's request text: the rewritten body without input,
 * then the input kept as text (see model_int.h). A host-only round's
 * continuation is the next input, built as text, never parsed.
 */
#include "supervisor/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/model/model_int.h"

/*
 * The wire becomes the head, then "input": in (len bytes of JSON) when
 * has, then the closing brace. 0, or -1 / ENOMEM (wire unchanged).
 */
static int
wire_set_input(struct call *c, const char *in, size_t len, int has)
{
	static const char key[] = "\"input\":";
	size_t comma = has && c->head_len > 1;
	size_t off = c->head_len + comma + (has ? sizeof key - 1 : 0);
	char *w = malloc(off + (has ? len : 0) + 2);

	if (w == NULL)
		return -1;
	memcpy(w, c->head, c->head_len);
	if (comma)
		w[c->head_len] = ',';
	if (has) {
		memcpy(w + c->head_len + comma, key, sizeof key - 1);
		memcpy(w + off, in, len);
	}
	len = has ? len : 0;
	memcpy(w + off + len, "}", 2);
	free(c->wire);
	c->wire = w;
	c->wire_len = off + len + 1;
	c->in_off = off;
	c->in_len = len;
	return 0;
}

void
call_continue(struct call *c, const json_t *resp, const json_t *outputs)
{
	struct jspan in = { c->wire + c->in_off, c->in_len };
	size_t n = 0;
	char *next = hosttools_continuation(in, resp, outputs, &n);

	if (next == NULL || wire_set_input(c, next, n, 1) < 0) {
		free(next);
		call_finish(c, NULL, "ModelError", "out of memory");
		return;
	}
	free(next);
	call_round(c);
}

int
call_wire_build(struct call *c, json_t *body, struct jspan input)
{
	const char *prev = json_string_value(json_object_get(body,
	    "previous_response_id"));
	json_t *extra = json_object_get(body, "input");
	char *etext = NULL, *filled = NULL;
	size_t flen = 0;
	int rc = -1;

	if (extra != NULL) {	/* extra_body's input: it wins */
		etext = json_dumps(extra, JSON_COMPACT | JSON_ENCODE_ANY);
		if (etext == NULL)
			return -1;
		input = (struct jspan){ etext, strlen(etext) };
	}
	filled = hosttools_fill(c->m->h, prev, input, &flen);
	(void)json_object_del(body, "input");
	c->head = json_dumps(body, JSON_COMPACT);
	if (c->head != NULL && (c->head_len = strlen(c->head)) >= 2) {
		c->head_len--;		/* without its closing brace */
		rc = wire_set_input(c, filled != NULL ? filled : input.p,
		    filled != NULL ? flen : input.n, filled != NULL ||
		    input.n > 0);
	}
	free(filled);
	free(etext);
	return rc;
}
