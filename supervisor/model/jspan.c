/*
 * jspan.c - JSON spans (see jspan.h): the one scanner of the grammar
 * json_loadb(JSON_ALLOW_NUL) accepts. The validator is iterative (a byte
 * per open container on the stack, no recursion), so a deep text costs no
 * C stack. Strings are read a word at a time (most of a model's text is
 * plain ASCII); numbers are converted as jansson converts them, so that
 * an integer or a real jansson refuses as too big is refused here too.
 */
#include "supervisor/model/jspan.h"

#include "proto/proto.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JSPAN_STR_ESC	1	/* the string has escapes */
#define JSPAN_STR_NUL	2	/* ... one of them "\u0000" */
#define JSPAN_NUM_BUF	64	/* a real this long is converted on stack */

static size_t
ws(const char *s, size_t len, size_t i)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
	    s[i] == '\r'))
		i++;
	return i;
}

/* The length of a valid UTF-8 sequence of 2-4 bytes at p as jansson
 * checks it (shortest form, no surrogates, at most U+10FFFF), else 0. */
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

size_t
jspan_utf8_len(const char *p, size_t left)
{
	return left > 0 ? utf8_seq((const unsigned char *)p, left) : 0;
}

/* Four hex digits at p (which has them) as a value, or -1. */
static long
hex4(const unsigned char *p)
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

/* Code point v (valid, not a surrogate) as UTF-8 in u; its length. */
static size_t
utf8_put(unsigned long v, unsigned char *u)
{
	if (v < 0x80) {
		u[0] = (unsigned char)v;
		return 1;
	}
	if (v < 0x800) {
		u[0] = (unsigned char)(0xc0 | v >> 6);
		u[1] = (unsigned char)(0x80 | (v & 0x3f));
		return 2;
	}
	if (v < 0x10000) {
		u[0] = (unsigned char)(0xe0 | v >> 12);
		u[1] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
		u[2] = (unsigned char)(0x80 | (v & 0x3f));
		return 3;
	}
	u[0] = (unsigned char)(0xf0 | v >> 18);
	u[1] = (unsigned char)(0x80 | (v >> 12 & 0x3f));
	u[2] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
	u[3] = (unsigned char)(0x80 | (v & 0x3f));
	return 4;
}

/*
 * The \uXXXX escape at p, with its low surrogate if it is a high one, as
 * jansson decodes it: a lone or reversed surrogate is an error, "\u0000"
 * is allowed (JSON_ALLOW_NUL). Returns the bytes consumed and the code
 * point in *v, or 0.
 */
static size_t
escape_u(const unsigned char *p, const unsigned char *end, unsigned long *v)
{
	long hi, lo;

	if (end - p < 6 || (hi = hex4(p + 2)) == -1 ||
	    (hi >= 0xdc00 && hi <= 0xdfff))
		return 0;
	*v = (unsigned long)hi;
	if (hi < 0xd800 || hi > 0xdbff)
		return 6;
	if (end - p < 12 || p[6] != '\\' || p[7] != 'u' ||
	    (lo = hex4(p + 8)) == -1 || lo < 0xdc00 || lo > 0xdfff)
		return 0;
	*v = 0x10000 + ((unsigned long)(hi - 0xd800) << 10) +
	    (unsigned long)(lo - 0xdc00);
	return 12;
}

/* The escape at p (a backslash): bytes consumed, or 0 if invalid. Its
 * value is put in u[0..*ulen). */
static size_t
escape(const unsigned char *p, const unsigned char *end, unsigned char *u,
    size_t *ulen)
{
	unsigned long v;
	size_t n = 2;

	*ulen = 1;
	if (end - p < 2)
		return 0;
	switch (p[1]) {
	case '"': case '\\': case '/':
		u[0] = p[1];
		break;
	case 'b': u[0] = '\b'; break;
	case 'f': u[0] = '\f'; break;
	case 'n': u[0] = '\n'; break;
	case 'r': u[0] = '\r'; break;
	case 't': u[0] = '\t'; break;
	case 'u':
		if ((n = escape_u(p, end, &v)) == 0)
			return 0;
		*ulen = utf8_put(v, u);
		break;
	default:
		return 0;
	}
	return n;
}

/*
 * Which of the 8 bytes at p may end a plain run: a control byte, a
 * non-ASCII byte, a quote or a backslash. The usual word-at-a-time tests
 * ("has a byte less than n", "has a zero byte" on v XOR c; Hacker's
 * Delight 6-1): the result is 0 if none does, else its lowest set bit is
 * bit 7 of the first such byte in memory order on a little-endian CPU
 * (a borrow only ever runs upwards, past a byte that already matched).
 */
static uint64_t
stop8(const unsigned char *p)
{
	const uint64_t ones = 0x0101010101010101u, high = ones << 7;
	uint64_t v, q, b;

	memcpy(&v, p, sizeof(v));
	q = v ^ (ones * '"');
	b = v ^ (ones * '\\');
	return (((v - ones * 0x20) & ~v) | ((q - ones) & ~q) |
	    ((b - ones) & ~b) | v) & high;
}

/* The end of the run of plain bytes (printable ASCII but '"' and '\\')
 * starting at p. */
static const unsigned char *
plain_run(const unsigned char *p, const unsigned char *end)
{
	while (end - p >= 8) {
		uint64_t m = stop8(p);

		if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return p + (__builtin_ctzll(m) >> 3);
#else
			break;	/* find it byte by byte */
#endif
		}
		p += 8;
	}
	while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* A string at s[*i] (its opening quote): 0 with *i past it and *flags
 * (JSPAN_STR_*) set, or -1. */
static int
string(const char *s, size_t len, size_t *i, int *flags)
{
	const unsigned char *p = (const unsigned char *)s + *i + 1;
	const unsigned char *end = (const unsigned char *)s + len;
	unsigned char u[4];
	size_t n, ulen;

	*flags = 0;
	if (*i >= len || s[*i] != '"')
		return -1;
	for (;;) {
		p = plain_run(p, end);
		if (p == end || *p < 0x20)
			return -1;	/* unterminated, or a raw control */
		if (*p == '"')
			break;
		if (*p == '\\') {
			if ((n = escape(p, end, u, &ulen)) == 0)
				return -1;
			*flags |= JSPAN_STR_ESC |
			    (ulen == 1 && u[0] == '\0' ? JSPAN_STR_NUL : 0);
		} else {
			n = utf8_seq(p, (size_t)(end - p));
		}
		if (n == 0)
			return -1;
		p += n;
	}
	*i = (size_t)(p + 1 - (const unsigned char *)s);
	return 0;
}

static size_t
digits(const char *s, size_t len, size_t i)
{
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

/* Does s[0..n), a real in JSON syntax, convert without overflow, as
 * jansson converts it (its '.' as the locale's decimal point)? */
static int
real_fits(const char *s, size_t n)
{
	const char *point = localeconv()->decimal_point;
	char small[JSPAN_NUM_BUF], *buf, *dot, *end;
	double v;
	int ok;

	buf = n < sizeof(small) ? small : malloc(n + 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if ((dot = strchr(buf, '.')) != NULL)
		*dot = point[0];
	errno = 0;
	v = strtod(buf, &end);
	ok = end == buf + n && !((v == HUGE_VAL || v == -HUGE_VAL) &&
	    errno == ERANGE);
	if (buf != small)
		free(buf);
	return ok;
}

/* Does the integer s[0..n) (-?digits, no leading zero) fit a long long,
 * which jansson requires? */
static int
int_fits(const char *s, size_t n)
{
	char buf[24];

	if (n - (s[0] == '-') <= 18)
		return 1;
	if (n >= sizeof(buf))
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	(void)strtoll(buf, NULL, 10);
	return errno != ERANGE;
}

static int
number(const char *s, size_t len, size_t *i)
{
	size_t j = *i, k;
	int real = 0;

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
		real = 1;
	}
	if (j < len && (s[j] == 'e' || s[j] == 'E')) {
		j++;
		if (j < len && (s[j] == '+' || s[j] == '-'))
			j++;
		if ((k = digits(s, len, j)) == j)
			return -1;
		j = k;
		real = 1;
	}
	if (j < len && s[j] >= '0' && s[j] <= '9')
		return -1;		/* a leading zero */
	if (!(real ? real_fits : int_fits)(s + *i, j - *i))
		return -1;
	*i = j;
	return 0;
}

static int
scalar(const char *s, size_t len, size_t *i)
{
	static const char *const lit[] = { "true", "false", "null" };
	size_t k, n;
	int flags;

	if (s[*i] == '"')
		return string(s, len, i, &flags);
	if (s[*i] != 't' && s[*i] != 'f' && s[*i] != 'n')
		return number(s, len, i);
	for (k = 0; k < 3; k++) {
		n = strlen(lit[k]);
		if (len - *i >= n && memcmp(s + *i, lit[k], n) == 0) {
			*i += n;
			return 0;
		}
	}
	return -1;
}

/* After '{' or ',' in an object: a key (no "\u0000" in it, as jansson
 * requires) and its colon. */
static int
key_colon(const char *s, size_t len, size_t *i)
{
	int flags;

	*i = ws(s, len, *i);
	if (string(s, len, i, &flags) < 0 || (flags & JSPAN_STR_NUL))
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
jspan_skip_at(const char *s, size_t len, size_t *off, int outer)
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
			if (depth + outer >= JSPAN_DEPTH)
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
jspan_skip(const char *s, size_t len, size_t *off)
{
	return jspan_skip_at(s, len, off, 0);
}

int
jspan_valid(const char *s, size_t len)
{
	size_t off = 0;

	return jspan_skip(s, len, &off) == 0 && ws(s, len, off) == len;
}

int
jspan_string(const char *s, size_t len, size_t *off, int *esc)
{
	int flags;

	*off = ws(s, len, *off);
	if (string(s, len, off, &flags) < 0)
		return -1;
	*esc = flags != 0;
	return 0;
}

int
jspan_unescape(struct jspan body, struct buf *out)
{
	const unsigned char *p = (const unsigned char *)body.p, *run;
	const unsigned char *end = p + body.n;
	unsigned char u[4];
	size_t n, ulen;

	while (p < end) {
		for (run = p; p < end && *p != '\\'; p++)
			;
		if (buf_append(out, run, (size_t)(p - run)) == -1)
			return -1;
		if (p == end)
			break;
		if ((n = escape(p, end, u, &ulen)) == 0) {
			errno = EINVAL;
			return -1;
		}
		if (buf_append(out, u, ulen) == -1)
			return -1;
		p += n;
	}
	return 0;
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
	int flags;

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
		if (string(it->s, it->len, &i, &flags) < 0)
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
