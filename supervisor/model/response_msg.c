/*
 * response_msg.c - what a Response says about itself: its status, set
 * once (response_set), the messages and codes of failures and protocol
 * errors (cleaned for a terminal, cut on a character boundary), id, model
 * and usage, the getters of response.h, and the one-line summary of an
 * HTTP error body (response_parse_error_body).
 */
#include "supervisor/model/response.h"

#include "supervisor/model/jspan.h"
#include "supervisor/model/response_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- messages ---------------------------------------------------------- */

/* Cut an incomplete UTF-8 sequence left at the end of s by truncation. */
static void
response_utf8_trim(char *s, size_t len)
{
	size_t i = len, need;
	unsigned char c;

	while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	c = (unsigned char)s[i - 1];
	need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	if (len - (i - 1) < need)
		s[i - 1] = '\0';
}

/*
 * Make what vsnprintf() (returning n) put in buf safe to print: control
 * characters become spaces (server text ends up on a terminal), a
 * multi-byte character cut by truncation is dropped, and a byte that is
 * not valid UTF-8 becomes '?' (the message must fit a JSON string). The va_list stays
 * in the function that started it.
 */
static void
response_clean(char *buf, size_t size, int n)
{
	size_t k;
	char *s;

	if (n < 0) {
		buf[0] = '\0';
		return;
	}
	if ((size_t)n >= size)
		response_utf8_trim(buf, strlen(buf));
	for (s = buf; *s != '\0'; s += k) {
		k = 1;
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
		else if ((unsigned char)*s >= 0x80 &&
		    (k = jspan_utf8_len(s, strlen(s))) == 0) {
			*s = '?';	/* jansson quotes bad bytes in errors */
			k = 1;
		}
	}
}

void __attribute__((format(printf, 3, 4)))
response_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	response_clean(buf, size, n);
}

/* Leave RESPONSE_IN_PROGRESS for status, with code (may be NULL) and a
 * message (fmt may be NULL). Later calls change nothing. */
void __attribute__((format(printf, 4, 5)))
response_set(struct response *r, enum response_status status,
    const char *code, const char *fmt, ...)
{
	if (r->status != RESPONSE_IN_PROGRESS)
		return;
	r->status = status;
	if (code != NULL)
		response_format(r->code, sizeof(r->code), "%s", code);
	if (fmt != NULL) {
		va_list ap;
		int n;

		va_start(ap, fmt);
		n = vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
		va_end(ap);
		response_clean(r->msg, sizeof(r->msg), n);
	}
}

/* A protocol error: record it (if first) and refuse further input. The
 * caller returns -1. */
void __attribute__((format(printf, 2, 3)))
response_protocol(struct response *r, const char *fmt, ...)
{
	char msg[RESPONSE_MSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	response_clean(msg, sizeof(msg), n);
	r->broken = 1;
	response_set(r, RESPONSE_ERROR, NULL, "%s", msg);
}

/* "event <name>" for messages, or "event #<n>" when it has no name. */
void
response_event_name(const char *event, size_t n, char *buf, size_t size)
{
	if (event != NULL && *event != '\0' && strcmp(event, "message") != 0)
		response_format(buf, size, "event %s", event);
	else
		response_format(buf, size, "event #%zu", n);
}

/* The code of an error object as text: "code" (string or number), else
 * "type" when use_type is set. "" if neither. */
static void
response_code_str(json_t *obj, int use_type, char *buf, size_t size)
{
	json_t *code = json_object_get(obj, "code");

	buf[0] = '\0';
	if (json_is_string(code))
		response_format(buf, size, "%s", json_string_value(code));
	else if (json_is_integer(code))
		response_format(buf, size, "%lld",
		    (long long)json_integer_value(code));
	else if (use_type && json_is_string(json_object_get(obj, "type")))
		response_format(buf, size, "%s",
		    json_string_value(json_object_get(obj, "type")));
}

/* Fail with "<what>[: <code>][: <message>]" from an error object. */
void
response_fail_from(struct response *r, const char *what, json_t *err,
    int use_type)
{
	char code[RESPONSE_CODE_MAX];
	const char *msg;

	response_code_str(err, use_type, code, sizeof(code));
	msg = json_string_value(json_object_get(err, "message"));
	if (code[0] != '\0' && msg != NULL)
		response_set(r, RESPONSE_FAILED, code, "%s: %s: %s", what, code,
		    msg);
	else if (msg != NULL)
		response_set(r, RESPONSE_FAILED, NULL, "%s: %s", what, msg);
	else if (code[0] != '\0')
		response_set(r, RESPONSE_FAILED, code, "%s: %s", what, code);
	else
		response_set(r, RESPONSE_FAILED, NULL, "%s", what);
}


static long long
response_count(json_t *v)
{
	double d;

	if (json_is_integer(v))
		return json_integer_value(v) > 0 ? json_integer_value(v) : 0;
	if (!json_is_real(v))
		return 0;
	d = json_real_value(v);
	return d > 0 && d < 1e18 ? (long long)d : 0;
}

/* Replace *slot with a new reference to v if v is a string. */
static void
response_keep_string(json_t **slot, json_t *v)
{
	if (!json_is_string(v))
		return;
	json_decref(*slot);
	*slot = json_incref(v);
}

/* obj[key] if it has the given type, else a fresh one put there.
 * Borrowed; NULL when out of memory. */
void
response_note_meta(struct response *r, json_t *resp)
{
	response_keep_string(&r->id, json_object_get(resp, "id"));
	response_keep_string(&r->model, json_object_get(resp, "model"));
}

void
response_read_usage(struct response *r, json_t *u)
{
	struct response_usage *us = &r->usage;

	if (!json_is_object(u))
		return;
	us->input_tokens = response_count(json_object_get(u, "input_tokens"));
	us->output_tokens = response_count(json_object_get(u,
	    "output_tokens"));
	us->cached_tokens = response_count(json_object_get(
	    json_object_get(u, "input_tokens_details"), "cached_tokens"));
	us->reasoning_tokens = response_count(json_object_get(
	    json_object_get(u, "output_tokens_details"), "reasoning_tokens"));
	if (json_is_number(json_object_get(u, "total_tokens")))
		us->total_tokens = response_count(json_object_get(u,
		    "total_tokens"));
	else
		us->total_tokens = us->input_tokens + us->output_tokens;
	r->have_usage = 1;
}

enum response_status
response_status(const struct response *r)
{
	return r->status;
}

const char *
response_status_name(enum response_status status)
{
	switch (status) {
	case RESPONSE_IN_PROGRESS:
		return "in_progress";
	case RESPONSE_COMPLETED:
		return "completed";
	case RESPONSE_INCOMPLETE:
		return "incomplete";
	case RESPONSE_FAILED:
		return "failed";
	case RESPONSE_ERROR:
		return "error";
	}
	return "unknown";
}

const char *
response_id(const struct response *r)
{
	return json_string_value(r->id);
}

const char *
response_model(const struct response *r)
{
	return json_string_value(r->model);
}

const char *
response_error(const struct response *r)
{
	return r->msg[0] != '\0' ? r->msg : NULL;
}

const char *
response_error_code(const struct response *r)
{
	return r->code[0] != '\0' ? r->code : NULL;
}

const struct response_usage *
response_usage(const struct response *r)
{
	return r->have_usage ? &r->usage : NULL;
}

size_t
response_delta_bytes(const struct response *r)
{
	return r->delta_bytes;
}

json_t *
response_last_event(const struct response *r)
{
	struct response_lazy *z = r->lazy;

	/* The fast path only takes what json_loadb() accepts: NULL here
	 * means out of memory. */
	if (r->last == NULL && z->pending && z->ev == NULL)
		z->ev = json_loadb((const char *)z->data.data, z->data.len, JSON_ALLOW_NUL,
		    NULL);
	return r->last != NULL ? r->last : z->ev;
}

void
response_set_fast(struct response *r, int on)
{
	r->fast_off = !on;
}

size_t
response_fast_count(const struct response *r)
{
	return r->nfast;
}

static void
response_excerpt(const char *body, size_t len, char *buf, size_t size)
{
	size_t i, n = len < RESPONSE_EXCERPT_MAX ? len : RESPONSE_EXCERPT_MAX;

	while (n > 0 && (unsigned char)body[0] <= ' ') {
		body++;
		n--;
	}
	while (n > 0 && (unsigned char)body[n - 1] <= ' ')
		n--;
	if (n >= size)
		n = size - 1;
	for (i = 0; i < n; i++) {
		if ((unsigned char)body[i] < 0x20 || body[i] == 0x7f)
			buf[i] = ' ';
		else
			buf[i] = body[i];
	}
	buf[n] = '\0';
	if (len > n)
		response_utf8_trim(buf, n);
}

char *
response_parse_error_body(long status, const char *body, size_t len,
    char **codep)
{
	char line[RESPONSE_MSG_MAX], code[RESPONSE_CODE_MAX], text[256];
	char *out;
	json_t *doc, *err, *obj;
	const char *msg;

	doc = len > 0 ? json_loadb(body, len, JSON_ALLOW_NUL, NULL) : NULL;
	err = json_object_get(doc, "error");
	obj = json_is_object(err) ? err : doc;
	response_code_str(obj, 1, code, sizeof(code));
	if ((msg = json_string_value(json_object_get(obj, "message"))) == NULL)
		msg = json_string_value(err);
	if (msg == NULL)
		msg = json_string_value(json_object_get(doc, "detail"));
	if (msg != NULL && code[0] != '\0')
		response_format(line, sizeof(line), "HTTP %ld: %s: %s", status,
		    code, msg);
	else if (msg != NULL)
		response_format(line, sizeof(line), "HTTP %ld: %s", status,
		    msg);
	else {
		response_excerpt(body != NULL ? body : "", len, text,
		    sizeof(text));
		response_format(line, sizeof(line), "HTTP %ld: %s", status,
		    text[0] != '\0' ? text : "empty body");
	}
	json_decref(doc);
	if (codep != NULL)
		*codep = NULL;
	if ((out = strdup(line)) == NULL)
		return NULL;
	if (codep != NULL && code[0] != '\0' &&
	    (*codep = strdup(code)) == NULL) {
		free(out);
		return NULL;
	}
	return out;
}
