/*
 * said.c - a model response as one short, clean line (see model_int.h).
 */
#include "supervisor/model/model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "supervisor/text/utf8.h"

/* Appends s to b, a space before it unless b is empty. 0 or -1. */
static int
add(struct buf *b, const char *s, size_t n)
{
	if (n == 0)
		return 0;
	if (b->len > 0 && buf_append(b, " ", 1) < 0)
		return -1;
	return buf_append(b, s, n);
}

static int
add_item(struct buf *b, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	const char *name = json_string_value(json_object_get(item, "name"));
	const json_t *part;
	size_t i;
	char call[96];
	int n;

	if (type != NULL && strcmp(type, "message") == 0) {
		json_array_foreach(json_object_get(item, "content"), i, part) {
			const json_t *t = json_object_get(part, "text");

			if (!json_is_string(t))
				t = json_object_get(part, "refusal");
			if (json_is_string(t) && add(b, json_string_value(t),
			    json_string_length(t)) < 0)
				return -1;
		}
		return 0;
	}
	if (name == NULL)
		return 0;
	n = snprintf(call, sizeof call, "[called %.64s]", name);
	return n > 0 ? add(b, call, (size_t)n) : 0;
}

/* Control characters become spaces, runs of spaces one; in place. */
static size_t
one_line(char *s, size_t n)
{
	size_t i, j = 0;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch == 0x7f)
			ch = ' ';
		if (ch == ' ' && (j == 0 || s[j - 1] == ' '))
			continue;
		s[j++] = (char)ch;
	}
	while (j > 0 && s[j - 1] == ' ')
		j--;
	s[j] = '\0';
	return j;
}

/* Cuts s (n bytes, valid UTF-8) to at most max bytes with "...". */
static void
shorten(char *s, size_t n, size_t max)
{
	static const char dots[] = "...";
	size_t cut;

	if (n <= max)
		return;
	cut = max > sizeof dots - 1 ? max - (sizeof dots - 1) : 0;
	while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	memcpy(s + cut, dots, sizeof dots);
}

char *
said_text(const json_t *response, const struct redact *red, size_t max)
{
	struct buf b;
	const json_t *item;
	char *clean, *text;
	size_t i, n;

	buf_init(&b);
	json_array_foreach(json_object_get(response, "output"), i, item)
		if (add_item(&b, item) < 0) {
			buf_clear(&b);
			return NULL;
		}
	if (b.len == 0)
		return strdup("");
	/* the whole text first: a secret cut in two would escape */
	clean = red != NULL ? redact_string(red, (const char *)b.data, b.len,
	    &n) : NULL;
	if (red != NULL && clean == NULL) {
		buf_clear(&b);
		return NULL;
	}
	if (clean == NULL)
		n = b.len;
	text = utf8_sanitize(clean != NULL ? clean : (const char *)b.data, n,
	    &n);
	free(clean);
	buf_clear(&b);
	if (text == NULL)
		return NULL;
	shorten(text, one_line(text, n), max);
	return text;
}
