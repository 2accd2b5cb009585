/*
 * delta.c - a streamed-string event read without a tree (see delta.h).
 */
#include "supervisor/model/delta.h"

#include <string.h>

static const struct delta_name {
	const char *name;
	size_t len;
} delta_names[DELTA_NFIELDS] = {
	{ "type", 4 },
	{ "item_id", 7 },
	{ "output_index", 12 },
	{ "content_index", 13 },
	{ "summary_index", 13 },
	{ "delta", 5 },
	{ "text", 4 },
	{ "refusal", 7 },
	{ "arguments", 9 },
	{ "input", 5 },
	{ "code", 4 },
	{ "diff", 4 },
};

struct delta_scan {
	const char *s;
	size_t len, off;
};

static int
delta_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Consume byte c after white space: 0, or -1 if it is not there. */
static int
delta_byte(struct delta_scan *d, char c)
{
	while (d->off < d->len && delta_space(d->s[d->off]))
		d->off++;
	if (d->off == d->len || d->s[d->off] != c)
		return -1;
	d->off++;
	return 0;
}

/* A string: its body in *body, escaped if *esc. */
static int
delta_string(struct delta_scan *d, struct jspan *body, int *esc)
{
	size_t start;

	while (d->off < d->len && delta_space(d->s[d->off]))
		d->off++;
	start = d->off;
	if (jspan_string(d->s, d->len, &d->off, esc) == -1)
		return -1;
	body->p = d->s + start + 1;
	body->n = d->off - start - 2;
	return 0;
}

/* An index: null (recorded in ev->null) or an integer of at most 18
 * digits, which fits a long long as jansson reads it. Anything else,
 * reals included, is left to jansson. */
static int
delta_index(struct delta_scan *d, struct delta_event *ev, enum delta_field k)
{
	const char *p, *end = d->s + d->len, *digits;
	long long v = 0;

	while (d->off < d->len && delta_space(d->s[d->off]))
		d->off++;
	p = d->s + d->off;
	if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
		ev->null |= 1u << k;
		d->off += 4;
		return 0;
	}
	digits = p + (p < end && *p == '-');
	for (p = digits; p < end && *p >= '0' && *p <= '9'; p++) {
		if (p - digits < 18)	/* more are refused below */
			v = v * 10 + (*p - '0');
	}
	if (p == digits || p - digits > 18 ||
	    (*digits == '0' && p > digits + 1))
		return -1;
	if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
		return -1;
	ev->num[k] = digits > d->s + d->off ? -v : v;
	d->off = (size_t)(p - d->s);
	return 0;
}

/* The value of field k at d->off. */
static int
delta_field(struct delta_scan *d, struct delta_event *ev,
    enum delta_field k, delta_type_fn *want, void *arg)
{
	if (ev->seen & 1u << k)
		return -1;		/* jansson keeps the last one */
	ev->seen |= 1u << k;
	switch (k) {
	case DELTA_TYPE:
		if (delta_string(d, &ev->str[k], &ev->esc[k]) == -1 ||
		    ev->esc[k])
			return -1;
		return want(ev->str[k].p, ev->str[k].n, arg) ? 0 : -1;
	case DELTA_ITEM_ID:
		return delta_string(d, &ev->str[k], &ev->esc[k]) == -1 ||
		    ev->esc[k] ? -1 : 0;
	case DELTA_OUTPUT_INDEX:
	case DELTA_CONTENT_INDEX:
	case DELTA_SUMMARY_INDEX:
		return delta_index(d, ev, k);
	case DELTA_DELTA:
	case DELTA_TEXT:
	case DELTA_REFUSAL:
	case DELTA_ARGUMENTS:
	case DELTA_INPUT:
	case DELTA_CODE:
	case DELTA_DIFF:
		return delta_string(d, &ev->str[k], &ev->esc[k]);
	case DELTA_NFIELDS:
		break;
	}
	return -1;
}

enum delta_field
delta_field_named(const char *name, size_t n)
{
	int k;

	/* Length and first byte first: most keys are not ours. */
	for (k = 0; k < DELTA_NFIELDS; k++) {
		if (delta_names[k].len == n && n > 0 &&
		    delta_names[k].name[0] == name[0] &&
		    memcmp(delta_names[k].name, name, n) == 0)
			return (enum delta_field)k;
	}
	return DELTA_NFIELDS;
}

/* One member: key, colon, value. */
static int
delta_member(struct delta_scan *d, struct delta_event *ev,
    delta_type_fn *want, void *arg)
{
	struct jspan key;
	enum delta_field k;
	int esc;

	if (delta_string(d, &key, &esc) == -1 || esc ||
	    delta_byte(d, ':') == -1)
		return -1;
	k = delta_field_named(key.p, key.n);
	if (k == DELTA_NFIELDS)
		return jspan_skip_at(d->s, d->len, &d->off, 1);
	return delta_field(d, ev, k, want, arg);
}

int
delta_scan(const char *data, size_t len, delta_type_fn *want, void *arg,
    struct delta_event *ev)
{
	struct delta_scan d = { data, len, 0 };

	ev->seen = 0;
	ev->null = 0;
	if (delta_byte(&d, '{') == -1)
		return -1;
	for (;;) {
		if (delta_member(&d, ev, want, arg) == -1)
			return -1;
		if (delta_byte(&d, ',') == 0)
			continue;
		if (delta_byte(&d, '}') == -1)
			return -1;
		while (d.off < d.len && delta_space(d.s[d.off]))
			d.off++;
		return d.off == d.len && (ev->seen & 1u << DELTA_TYPE) ?
		    0 : -1;
	}
}
