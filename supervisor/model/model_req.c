/*
 * model_req.c - a call_me request and its answer as the caller sees them
 * (see model.h): the body read once, its input kept as a span of the
 * text, its other parameters parsed; a note put ahead of the input as
 * text; the answer as JSON text or one line.
 */
#include "supervisor/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "supervisor/model/model_int.h"

/* The parameters other than input may take at most this much text: they
 * are parsed into a tree (~21x the text for many small items). */
#define REQ_TREE_MAX ((size_t)1 << 20)

/* The parameters other than input, parsed, and input as a span. */
static json_t *
split_params(struct jspan params, struct jspan *input, char *err,
    size_t size)
{
	struct jspan_iter it;
	struct jspan k, v;
	struct buf rest;
	json_t *j = NULL;

	*input = (struct jspan){ NULL, 0 };
	if (jspan_iter_init(&it, params) != '{') {
		(void)snprintf(err, size, "call_me: the parameters must be "
		    "keyword arguments");
		return NULL;
	}
	buf_init(&rest);
	(void)buf_append(&rest, "{", 1);
	while (jspan_iter_next(&it, &k, &v)) {
		if (jspan_is(k, "input")) {
			*input = v;
			continue;
		}
		if ((rest.len > 1 && buf_append(&rest, ",", 1) < 0) ||
		    buf_append(&rest, k.p - 1, (size_t)(v.p + v.n - k.p + 1)) < 0)
			break;
	}
	if (rest.len + 1 > REQ_TREE_MAX)
		(void)snprintf(err, size, "call_me: the parameters other than "
		    "input are %zu bytes, over their %zu-byte cap", rest.len + 1,
		    REQ_TREE_MAX);
	else if (buf_append(&rest, "}", 1) == 0)
		j = json_loadb((const char *)rest.data, rest.len, 0, NULL);
	buf_clear(&rest);
	return j;
}

struct model_req *
model_req_parse(const char *body, size_t len, int *stream, char *err,
    size_t size)
{
	struct jspan k, v, params = { NULL, 0 };
	struct jspan_iter it;
	struct model_req *q;

	*stream = 0;
	(void)snprintf(err, size, "call_me: the request body is not a JSON "
	    "object");
	if (!jspan_valid(body, len) || jspan_iter_init(&it,
	    (struct jspan){ body, len }) != '{')
		return NULL;
	while (jspan_iter_next(&it, &k, &v)) {
		if (jspan_is(k, "params"))
			params = v;
		else if (jspan_is(k, "stream"))
			*stream = jspan_is(v, "true");
	}
	if ((q = calloc(1, sizeof *q)) == NULL) {
		(void)snprintf(err, size, "out of memory");
		return NULL;
	}
	q->params = split_params(params, &q->input, err, size);
	if (q->params == NULL) {
		free(q);
		return NULL;
	}
	return q;
}

struct model_req *
model_req_text(const char *input)
{
	struct model_req *q = calloc(1, sizeof *q);
	json_t *s = json_string(input);

	if (q != NULL) {
		q->params = json_object();
		q->owned = s != NULL ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
	}
	json_decref(s);
	if (q == NULL || q->params == NULL || q->owned == NULL) {
		model_req_free(q);
		return NULL;
	}
	q->input = (struct jspan){ q->owned, strlen(q->owned) };
	return q;
}

void
model_req_free(struct model_req *q)
{
	if (q == NULL)
		return;
	json_decref(q->params);
	free(q->owned);
	free(q);
}

/* The note as the input's head: a string's opening (note and sep, as a
 * JSON string without its closing quote) or a developer message item. */
static char *
note_head(const char *note, const char *sep, char kind)
{
	char *text = NULL, *head = NULL;
	json_t *j;

	if (kind == '"') {
		if (asprintf(&text, "%s%s", note, sep) < 0)
			return NULL;
		j = json_string(text);
		free(text);
	} else {
		j = json_pack("{s:s, s:s, s:s}", "type", "message", "role",
		    "developer", "content", note);
	}
	head = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) :
	    NULL;
	json_decref(j);
	return head;
}

int
model_req_note(struct model_req *q, const char *note, const char *sep)
{
	struct jspan in = q->input, v;
	char kind = jspan_kind(in), *head, *out = NULL;
	struct jspan_iter it;
	int rc;

	if (kind != '"' && kind != '[')
		return 0;	/* model_call says what is wrong with it */
	if ((head = note_head(note, sep, kind)) == NULL)
		return -1;
	if (kind == '"')	/* "note + "rest of the string */
		rc = asprintf(&out, "%.*s%.*s", (int)strlen(head) - 1, head,
		    (int)in.n - 1, in.p + 1);
	else if (jspan_iter_init(&it, in) == '[')
		rc = asprintf(&out, "[%s%s%.*s", head, jspan_iter_next(&it,
		    NULL, &v) ? "," : "", (int)in.n - 1, in.p + 1);
	else
		rc = -1;
	free(head);
	if (rc < 0)
		return -1;
	free(q->owned);
	q->owned = out;
	q->input = (struct jspan){ out, (size_t)rc };
	return 1;
}

char *
model_answer_json(const struct model_answer *ans, size_t *len)
{
	char *s = json_dumps(ans->resp, JSON_COMPACT);

	if (s != NULL)
		*len = strlen(s);
	return s;
}

char *
model_answer_said(const struct model_answer *ans, const struct redact *red,
    size_t max)
{
	return said_text(ans->resp, red, max);
}
