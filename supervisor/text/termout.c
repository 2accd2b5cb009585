/*
 * termout.c - the terminal filter for cell output and visible model text
 * (see termout.h). A small ECMA-48 parser: ground, ESC, CSI, ESC with
 * intermediates, and string sequences (OSC, DCS, SOS, PM, APC) swallowed
 * up to BEL or ST.
 */
#include "supervisor/text/termout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_GROUND, T_ESC, T_ESCINT, T_CSI, T_STR, T_STR_ESC };

/* A string sequence longer than this is abandoned: the rest is text. */
#define STR_MAX 4096

void
termout_init(struct termout *t)
{
	memset(t, 0, sizeof *t);
}

/* Is the collected CSI an SGR: ESC [ then only digits, ';' and ':'? */
static int
is_sgr(const struct termout *t)
{
	size_t i;

	if (t->seq_len >= sizeof t->seq)
		return 0;
	for (i = 2; i < t->seq_len; i++)
		if (!((t->seq[i] >= '0' && t->seq[i] <= '9') ||
		    t->seq[i] == ';' || t->seq[i] == ':'))
			return 0;
	return 1;
}

/* A byte below 0x80 in the ground state. */
static size_t
ground_ascii(struct termout *t, unsigned char b, char *o)
{
	if (b == '\n' || b == '\t' || (b >= 0x20 && b != 0x7f)) {
		o[0] = (char)b;
		return 1;
	}
	if (b == '\r')
		t->cr = 1;
	else if (b == 0x1b)
		t->state = T_ESC;
	return 0;		/* every other control is dropped */
}

/* A byte of the ground state, UTF-8 aware for the C1 controls. */
static size_t
ground(struct termout *t, unsigned char b, char *o)
{
	size_t k = 0;

	if (t->lead_c2) {
		t->lead_c2 = 0;
		t->cont = 0;
		if (b >= 0x80 && b <= 0x9f)
			return 0;	/* U+0080-U+009F: a C1 control */
		o[k++] = (char)0xc2;
		if (b >= 0xa0 && b <= 0xbf) {
			o[k++] = (char)b;
			return k;
		}
	}
	if (b < 0x80) {
		t->cont = 0;
		return k + ground_ascii(t, b, o + k);
	}
	if (b <= 0xbf) {
		if (t->cont > 0) {
			t->cont--;
			o[k++] = (char)b;
		} else if (b >= 0xa0) {
			o[k++] = (char)b;
		}			/* a stray 0x80-0x9f: C1 in 8 bits */
		return k;
	}
	if (b == 0xc2) {
		t->lead_c2 = 1;
		return k;
	}
	t->cont = b < 0xe0 ? 1 : b < 0xf0 ? 2 : b < 0xf8 ? 3 : 0;
	o[k++] = (char)b;
	return k;
}

/* One byte in any state; returns the bytes written to o. */
static size_t
step(struct termout *t, unsigned char b, char *o)
{
	size_t k = 0;

	if (t->state == T_GROUND && t->cr) {
		t->cr = 0;
		if (b == '\n') {
			o[0] = '\r';
			o[1] = '\n';
			return 2;
		}
		o[k++] = '\n';	/* a lone \r: a new line, no overwrite */
	}
	switch (t->state) {
	case T_GROUND:
		return k + ground(t, b, o + k);
	case T_ESC:
		if (b == '[') {
			t->state = T_CSI;
			t->seq[0] = 0x1b;
			t->seq[1] = '[';
			t->seq_len = 2;
		} else if (b == ']' || b == 'P' || b == 'X' || b == '^' ||
		    b == '_') {
			t->state = T_STR;
			t->str_len = 0;
		} else if (b >= 0x20 && b <= 0x2f) {
			t->state = T_ESCINT;
		} else if (b == 0x1b) {
			t->state = T_ESC;
		} else if (b >= 0x30 && b <= 0x7e) {
			t->state = T_GROUND;
		} else {
			t->state = T_GROUND;
			return k + step(t, b, o + k);
		}
		return k;
	case T_ESCINT:
		if (b >= 0x20 && b <= 0x2f)
			return k;
		t->state = T_GROUND;
		if (b >= 0x30 && b <= 0x7e)
			return k;
		return k + step(t, b, o + k);
	case T_CSI:
		if (b >= 0x20 && b <= 0x3f) {
			if (t->seq_len < sizeof t->seq)
				t->seq[t->seq_len++] = (char)b;
			return k;
		}
		t->state = T_GROUND;
		if (b == 'm' && is_sgr(t)) {
			memcpy(o + k, t->seq, t->seq_len);
			k += t->seq_len;
			o[k++] = 'm';
			t->coloured = 1;
			return k;
		}
		if (b >= 0x40 && b <= 0x7e)
			return k;	/* any other CSI: dropped */
		return k + step(t, b, o + k);
	case T_STR:
		if (b == 0x07)
			t->state = T_GROUND;
		else if (b == 0x1b)
			t->state = T_STR_ESC;
		else if (++t->str_len > STR_MAX)
			t->state = T_GROUND;
		return k;
	case T_STR_ESC:
		t->state = T_GROUND;
		if (b == '\\')
			return k;
		t->state = T_ESC;	/* ESC ends the string, starts anew */
		return k + step(t, b, o + k);
	default:
		t->state = T_GROUND;
		return k;
	}
}

size_t
termout_feed(struct termout *t, const char *p, size_t n, char *out)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += step(t, (unsigned char)p[i], out + k);
	return k;
}

size_t
termout_flush(struct termout *t, char *out)
{
	size_t k = 0;
	int coloured = t->coloured;

	if (t->state == T_GROUND && t->cr)
		out[k++] = '\n';
	termout_init(t);
	if (coloured) {
		memcpy(out + k, "\033[0m", 4);
		k += 4;
	}
	return k;
}

char *
termout_visible(const char *p, size_t n, int multiline)
{
	char *r = malloc(n * 6 + 1), *o = r;
	const unsigned char *s = (const unsigned char *)p;
	size_t i;

	if (r == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		unsigned char b = s[i];

		if (b == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 &&
		    s[i + 1] <= 0x9f) {
			o += sprintf(o, "\\u%04x", s[++i]);
		} else if (multiline && (b == '\n' || b == '\t')) {
			*o++ = (char)b;
		} else if (b == '\n' || b == '\r' || b == '\t') {
			*o++ = '\\';
			*o++ = b == '\n' ? 'n' : b == '\r' ? 'r' : 't';
		} else if (b < 0x20 || b == 0x7f) {
			o += sprintf(o, "\\x%02x", b);
		} else {
			*o++ = (char)b;
		}
	}
	*o = '\0';
	return r;
}
