/*
 * jspan.c - JSON spans (see jspan.h). The validator is iterative (a byte
 * per open container on the stack, no recursion), so a deep text costs no
 * C stack.
 */
#include "supervisor/jspan.h"

#include <string.h>

static size_t
ws(const char *s, size_t len, size_t i)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
	    s[i] == '\r'))
		i++;
	return i;
}

/* The length of a valid UTF-8 sequence of 2-4 bytes at p, else 0. */
static size_t
utf8_seq(const unsigned char *p, size_t left)
{
	unsigned long v;
	size_t i, n;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (left < n)
		return 0;
	v = p[0] & (0x7fu >> n);
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) ||
	    (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
		return 0;
	return n;
}

static long
hex4(const char *p)
{
	long v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		v <<= 4;
		if (p[i] >= '0' && p[i] <= '9')
			v |= p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			v |= p[i] - 'a' + 10;
		else if (p[i] >= 'A' && p[i] <= 'F')
			v |= p[i] - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* A \u escape at s[*i] (just past the backslash and 'u'); surrogates
 * must pair as jansson requires. */
static int
escape_u(const char *s, size_t len, size_t *i)
{
	long v, lo;

	if (len - *i < 4 || (v = hex4(s + *i)) < 0)
		return -1;
	*i += 4;
	if (v >= 0xdc00 && v <= 0xdfff)
		return -1;
	if (v < 0xd800 || v > 0xdbff)
		return 0;
	if (len - *i < 6 || s[*i] != '\\' || s[*i + 1] != 'u' ||
	    (lo = hex4(s + *i + 2)) < 0xdc00 || lo > 0xdfff)
		return -1;
	*i += 6;
	return 0;
}

/* A string at s[*i] (its opening quote). */
static int
string(const char *s, size_t len, size_t *i)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n;

	if (*i >= len || s[*i] != '"')
		return -1;
	for ((*i)++; *i < len;) {
		if (u[*i] == '"') {
			(*i)++;
			return 0;
		}
		if (u[*i] < 0x20)
			return -1;
		if (u[*i] == '\\') {
			if (len - *i < 2)
				return -1;
			*i += 2;
			if (s[*i - 1] == 'u') {
				if (escape_u(s, len, i) < 0)
					return -1;
			} else if (strchr("\"\\/bfnrt", s[*i - 1]) == NULL ||
			    s[*i - 1] == '\0') {
				return -1;
			}
		} else if (u[*i] >= 0x80) {
			if ((n = utf8_seq(u + *i, len - *i)) == 0)
				return -1;
			*i += n;
		} else {
			(*i)++;
		}
	}
	return -1;
}

static size_t
digits(const char *s, size_t len, size_t i)
{
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

static int
number(const char *s, size_t len, size_t *i)
{
	size_t j = *i, k;

	if (j < len && s[j] == '-')
		j++;
	if (j < len && s[j] == '0')
		j++;
	else if ((k = digits(s, len, j)) > j)
		j = k;
	else
		return -1;
	if (j < len && s[j] == '.') {
		if ((k = digits(s, len, j + 1)) == j + 1)
			return -1;
		j = k;
	}
	if (j < len && (s[j] == 'e' || s[j] == 'E')) {
		j++;
		if (j < len && (s[j] == '+' || s[j] == '-'))
			j++;
		if ((k = digits(s, len, j)) == j)
			return -1;
		j = k;
	}
	*i = j;
	return 0;
}

static int
scalar(const char *s, size_t len, size_t *i)
{
	static const char *const lit[] = { "true", "false", "null" };
	size_t k, n;

	if (s[*i] == '"')
		return string(s, len, i);
	for (k = 0; k < 3; k++) {
		n = strlen(lit[k]);
		if (len - *i >= n && memcmp(s + *i, lit[k], n) == 0) {
			*i += n;
			return 0;
		}
	}
	return number(s, len, i);
}

/* After '{' or ',' in an object: a key and its colon. */
static int
key_colon(const char *s, size_t len, size_t *i)
{
	*i = ws(s, len, *i);
	if (string(s, len, i) < 0)
		return -1;
	*i = ws(s, len, *i);
	if (*i >= len || s[*i] != ':')
		return -1;
	(*i)++;
	return 0;
}

/* After a value inside containers: closers and at most one comma. 1 when
 * the outermost value ended, 0 when another value follows, -1. */
static int
after_value(const char *s, size_t len, size_t *i, char *stack, int *depth)
{
	for (;;) {
		if (*depth == 0)
			return 1;
		*i = ws(s, len, *i);
		if (*i >= len)
			return -1;
		if (s[*i] == ',') {
			(*i)++;
			return stack[*depth - 1] == '{' ? key_colon(s, len, i) : 0;
		}
		if (s[*i] != (stack[*depth - 1] == '{' ? '}' : ']'))
			return -1;
		(*i)++;
		(*depth)--;
	}
}

int
jspan_skip(const char *s, size_t len, size_t *off)
{
	char stack[JSPAN_DEPTH];
	int depth = 0, rc;
	size_t i = *off;
	char c;

	for (;;) {
		i = ws(s, len, i);
		if (i >= len)
			return -1;
		c = s[i];
		if (c == '{' || c == '[') {
			if (depth == JSPAN_DEPTH)
				return -1;
			stack[depth++] = c;
			i = ws(s, len, i + 1);
			if (i < len && s[i] == (c == '{' ? '}' : ']')) {
				i++;
				depth--;
			} else {
				if (c == '{' && key_colon(s, len, &i) < 0)
					return -1;
				continue;
			}
		} else if (scalar(s, len, &i) < 0) {
			return -1;
		}
		if ((rc = after_value(s, len, &i, stack, &depth)) < 0)
			return -1;
		if (rc == 1) {
			*off = i;
			return 0;
		}
	}
}

int
jspan_valid(const char *s, size_t len)
{
	size_t off = 0;

	return jspan_skip(s, len, &off) == 0 && ws(s, len, off) == len;
}

char
jspan_kind(struct jspan v)
{
	size_t i = ws(v.p, v.n, 0);

	return i < v.n ? v.p[i] : 0;
}

int
jspan_iter_init(struct jspan_iter *it, struct jspan v)
{
	char k = jspan_kind(v);

	memset(it, 0, sizeof *it);
	if (k != '{' && k != '[')
		return 0;
	it->s = v.p;
	it->len = v.n;
	it->off = ws(v.p, v.n, 0) + 1;
	it->kind = k;
	return k;
}

int
jspan_iter_next(struct jspan_iter *it, struct jspan *key, struct jspan *val)
{
	size_t i = ws(it->s, it->len, it->off), k0;

	if (i >= it->len || it->s[i] == (it->kind == '{' ? '}' : ']'))
		return 0;
	if (it->started) {
		if (it->s[i] != ',')
			return 0;
		i = ws(it->s, it->len, i + 1);
	}
	it->started = 1;
	if (it->kind == '{') {
		k0 = i;
		if (string(it->s, it->len, &i) < 0)
			return 0;
		if (key != NULL)
			*key = (struct jspan){ it->s + k0 + 1, i - k0 - 2 };
		i = ws(it->s, it->len, i);
		if (i >= it->len || it->s[i] != ':')
			return 0;
		i = ws(it->s, it->len, i + 1);
	}
	k0 = i;
	if (jspan_skip(it->s, it->len, &i) < 0)
		return 0;
	*val = (struct jspan){ it->s + k0, i - k0 };
	it->off = i;
	return 1;
}

int
jspan_is(struct jspan v, const char *s)
{
	size_t n = strlen(s);

	return v.n == n && memcmp(v.p, s, n) == 0;
}
