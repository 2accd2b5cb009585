/*
 * size.c - sizes as the operator writes them, and plain numbers as
 * shown (see size.h).
 */
#include "common/size.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
size_parse(const char *s, uint64_t *out)
{
	char *end;
	double v;
	double mult = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0 || !isfinite(v))
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1024.0; end++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end != '\0' || v * mult > 1e18)
		return -1;
	*out = (uint64_t)(v * mult);
	return 0;
}

void
size_format(uint64_t n, char *out, size_t len)
{
	static const char unit[] = "GMK";
	int shift;

	for (shift = 30; shift > 0; shift -= 10)
		if (n > 0 && n % ((uint64_t)1 << shift) == 0) {
			(void)snprintf(out, len, "%llu%c",
			    (unsigned long long)(n >> shift),
			    unit[(30 - shift) / 10]);
			return;
		}
	(void)snprintf(out, len, "%llu bytes", (unsigned long long)n);
}

/* Drops the trailing zeros of a "%.Nf" number, and its point with them. */
static void
trim_zeros(char *s)
{
	char *dot = strchr(s, '.'), *end;

	if (dot == NULL)
		return;
	end = dot + strlen(dot);
	while (end > dot + 1 && end[-1] == '0')
		end--;
	if (end == dot + 1)
		end = dot;
	*end = '\0';
}

void
size_plain(double v, char *out, size_t len)
{
	if (len == 0)
		return;
	(void)snprintf(out, len, "%.*f", v > 0 && v < 0.0005 ? 6 : 3, v);
	trim_zeros(out);
}
