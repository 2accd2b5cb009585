/*
 * jspan.h - JSON text handled as spans, without building a tree.
 *
 * For bodies too big to parse into jansson trees (a jansson tree of many
 * small items is ~21x the text): a validator of the grammar json_loadb()
 * accepts (RFC 8259, strictly valid UTF-8, nesting at most JSPAN_DEPTH),
 * and iterators over the members of an object or the elements of an
 * array that hand out each value as a span of the original text, and the
 * pieces the response delta fast path (delta.h) reads an event with. The
 * one scanner of that grammar in the supervisor: what it accepts,
 * json_loadb(JSON_DECODE_ANY | JSON_ALLOW_NUL) accepts, and the reverse
 * (a differential fuzzer, tests/fuzz/fuzz_jspan.c, checks it) but for
 * a raw NUL byte right after a number or literal, which jansson's lexer
 * skips ("1\0" loads) and this scanner refuses. Nothing here allocates but
 * jspan_unescape() and the check of a real longer than 63 bytes.
 */
#ifndef AGENTZ_JSPAN_H
#define AGENTZ_JSPAN_H

#include <stddef.h>

struct buf;		/* proto/proto.h */

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

/* jspan_skip() inside outer open containers: a container there counts
 * towards JSPAN_DEPTH as if the text began outside them. */
int jspan_skip_at(const char *s, size_t len, size_t *off, int outer);

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

/*
 * Skips white space and one string at s[*off]: 0 with *off just past its
 * closing quote and *esc set when it has escapes (its body, between the
 * quotes, then needs jspan_unescape()), or -1 if there is no valid string.
 */
int jspan_string(const char *s, size_t len, size_t *off, int *esc);

/* Appends the value of the string whose body (the text between its
 * quotes, valid as jspan_string() found it) is body to out. 0, or -1 with
 * errno ENOMEM (or EINVAL for an invalid body). */
int jspan_unescape(struct jspan body, struct buf *out);

/* The length of the valid UTF-8 sequence of 2-4 bytes at p (left bytes
 * there), as jansson checks it; 0 for anything else, ASCII included. */
size_t jspan_utf8_len(const char *p, size_t left);

/* Is v the string "s" (plain, no escapes)? */
int jspan_is(struct jspan v, const char *s);
/* The first non-blank byte of v, or 0. */
char jspan_kind(struct jspan v);

#endif
