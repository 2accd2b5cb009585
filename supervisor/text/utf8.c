/*
 * utf8.c - UTF-8 validation with U+FFFD replacement (see utf8.h).
 */
#include "supervisor/text/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t
utf8_seq_len(const unsigned char *p, size_t n)
{
	uint32_t cp;
	size_t len, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

char *
utf8_sanitize(const char *p, size_t n, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, o = 0, k;
	char *out;

	/* Worst case: every byte becomes the 3-byte U+FFFD. */
	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	out = malloc(n * 3 + 1);
	if (out == NULL)
		return NULL;
	while (i < n) {
		k = utf8_seq_len(s + i, n - i);
		if (k == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, s + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}
