/*
 * jspan.h - JSON text handled as spans, without building a tree.
 *
 * For bodies too big to parse into jansson trees (a jansson tree of many
 * small items is ~21x the text): a validator of the grammar json_loadb()
 * accepts (RFC 8259, strictly valid UTF-8, nesting at most JSPAN_DEPTH),
 * and iterators over the members of an object or the elements of an
 * array that hand out each value as a span of the original text. Nothing
 * here allocates.
 */
#ifndef AGENTZ_JSPAN_H
#define AGENTZ_JSPAN_H

#include <stddef.h>

#define JSPAN_DEPTH 2048	/* as jansson's JSON_PARSER_MAX_DEPTH */

struct jspan {
	const char *p;
	size_t n;
};

/*
 * Skips white space and one valid JSON value at s[*off] (s has len
 * bytes). 0 with *off just past the value, -1 when the text there is not
 * a valid value.
 */
int jspan_skip(const char *s, size_t len, size_t *off);

/* A whole text that is one value (white space around allowed)? 1 / 0. */
int jspan_valid(const char *s, size_t len);

struct jspan_iter {
	const char *s;
	size_t len, off;
	char kind;		/* '{' or '[' */
	int started;
};

/*
 * Starts iterating the container v (a valid value). Returns '{' for an
 * object, '[' for an array, 0 for anything else.
 */
int jspan_iter_init(struct jspan_iter *it, struct jspan v);
/*
 * The next member (key: the raw text between its quotes, still escaped)
 * or element (key NULL or ignored). 1 with *val, 0 at the end.
 */
int jspan_iter_next(struct jspan_iter *it, struct jspan *key,
    struct jspan *val);

/* Is v the string "s" (plain, no escapes)? */
int jspan_is(struct jspan v, const char *s);
/* The first non-blank byte of v, or 0. */
char jspan_kind(struct jspan v);

#endif
