/*
 * response_share.c - json_loadb() of a non-delta event without copying
 * the long streamed text it repeats.
 *
 * content_part.done, output_item.done and response.completed each carry
 * the whole text of a part that its deltas already accumulated. Parsing
 * them with jansson copies that text once per event. Instead, a string
 * value of the event that is long, has no escapes and equals an
 * accumulated text byte for byte is replaced, in a copy of the event, by
 * a placeholder "\u0000<n>"; jansson parses the (small) copy and the
 * placeholders are then set to one json_t string of the text, shared by
 * every event that repeats it. The tree is the one json_loadb() builds
 * from the original: the copy differs only inside string literals, so
 * duplicate keys, nesting and errors come out the same, and the event is
 * refused (plain json_loadb() is used) when it contains "\u0000" at all,
 * so that no genuine string can look like a placeholder.
 */
#include "supervisor/model/response_int.h"

#include "supervisor/model/jspan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SHARE_MIN		/* the fuzz target lowers it */
#define SHARE_MIN	4096	/* shorter strings are parsed as they are */
#endif
#define SHARE_MAX	16	/* placeholders per event */

struct share {
	struct jspan lit[SHARE_MAX];	/* the literals, quotes included */
	json_t *val[SHARE_MAX];		/* references held */
	size_t n;
};

/* The shared string equal to body, made from an accumulator if need be;
 * NULL if no accumulated text equals it. */
static json_t *
share_text(struct response *r, struct jspan body)
{
	const json_t *s = r->shared;
	size_t i;

	if (s != NULL && json_string_length(s) == body.n &&
	    memcmp(json_string_value(s), body.p, body.n) == 0)
		return r->shared;
	for (i = 0; i < r->naccs; i++) {
		const struct buf *b = &r->accs[i].buf;

		if (!r->accs[i].have_buf || b->len != body.n ||
		    memcmp(b->data, body.p, body.n) != 0)
			continue;
		/* Valid UTF-8 without NUL: it equals a valid literal. */
		json_decref(r->shared);
		r->shared = json_stringn_nocheck(body.p, body.n);
		return r->shared;
	}
	return NULL;
}

/* Is the string ending at data[off] a member's key? */
static int
share_is_key(const char *data, size_t len, size_t off)
{
	while (off < len && (data[off] == ' ' || data[off] == '\t' ||
	    data[off] == '\n' || data[off] == '\r'))
		off++;
	return off < len && data[off] == ':';
}

/* Finds the literals to share; 0 if there are none (or it cannot). */
static size_t
share_find(struct response *r, const char *data, size_t len,
    struct share *sh)
{
	const char *q;
	size_t off = 0, start;
	int esc;

	sh->n = 0;
	while (sh->n < SHARE_MAX &&
	    (q = memchr(data + off, '"', len - off)) != NULL) {
		start = (size_t)(q - data);
		off = start;
		if (jspan_string(data, len, &off, &esc) == -1) {
			while (sh->n > 0)
				json_decref(sh->val[--sh->n]);
			return 0;
		}
		if (esc || off - start - 2 < SHARE_MIN ||
		    share_is_key(data, len, off))
			continue;
		/* Held: a later literal may replace r->shared. */
		sh->val[sh->n] = json_incref(share_text(r, (struct jspan){
		    data + start + 1, off - start - 2 }));
		if (sh->val[sh->n] != NULL)
			sh->lit[sh->n++] = (struct jspan){ data + start,
			    off - start };
	}
	return sh->n;
}

/* Puts the shared strings where the placeholders are in j. */
static void
share_fill(json_t *j, const struct share *sh)
{
	const char *s;
	size_t i;
	void *it;

	if (json_is_object(j)) {
		for (it = json_object_iter(j); it != NULL;
		    it = json_object_iter_next(j, it)) {
			s = json_string_value(json_object_iter_value(it));
			if (s != NULL && s[0] == '\0' &&
			    json_string_length(json_object_iter_value(it)) > 1)
				json_object_iter_set(j, it,
				    sh->val[atoi(s + 1)]);
			else
				share_fill(json_object_iter_value(it), sh);
		}
	} else if (json_is_array(j)) {
		for (i = 0; i < json_array_size(j); i++) {
			s = json_string_value(json_array_get(j, i));
			if (s != NULL && s[0] == '\0' &&
			    json_string_length(json_array_get(j, i)) > 1)
				json_array_set(j, i, sh->val[atoi(s + 1)]);
			else
				share_fill(json_array_get(j, i), sh);
		}
	}
}

json_t *
response_load_shared(struct response *r, const char *data, size_t len)
{
	struct share sh;
	struct buf copy;
	json_t *j = NULL;
	size_t i, at = 0;
	char ph[32];
	int ok = 1;

	if (r->fast_off || len < SHARE_MIN || memmem(data, len, "\\u0000", 6) != NULL ||
	    share_find(r, data, len, &sh) == 0)
		return NULL;
	buf_init(&copy);
	for (i = 0; i < sh.n && ok; i++) {
		(void)snprintf(ph, sizeof(ph), "\"\\u0000%zu\"", i);
		ok = buf_append(&copy, data + at,
		    (size_t)(sh.lit[i].p - data) - at) == 0 &&
		    buf_append(&copy, ph, strlen(ph)) == 0;
		at = (size_t)(sh.lit[i].p - data) + sh.lit[i].n;
	}
	if (ok && buf_append(&copy, data + at, len - at) == 0)
		j = json_loadb((const char *)copy.data, copy.len,
		    JSON_ALLOW_NUL, NULL);
	buf_clear(&copy);
	if (json_is_string(j)) {	/* the event is one long string */
		json_decref(j);
		j = NULL;
	}
	if (j != NULL)
		share_fill(j, &sh);
	for (i = 0; i < sh.n; i++)
		json_decref(sh.val[i]);
	return j;
}
