/*
 * head.c - a proxy client's request head and a TLS ClientHello's server
 * name (see head.h).
 */
#include "supervisor/egress/head.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int
fail(int *status, const char **why, int code, const char *text)
{
	*status = code;
	*why = text;
	return -1;
}

static int
tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != '\0' && strchr("!#$%&'*+-.^_`|~",
	    c) != NULL);
}

/* A visible character of a request target (no space, no control). */
static int
vchar(char c)
{
	return (unsigned char)c > 0x20 && (unsigned char)c < 0x7f;
}

/* The head's end (after "\r\n\r\n"), 0 while incomplete, or -1 for a
 * bare LF or CR or a control character. */
static long
head_end(const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];

		if (c == '\r') {
			if (i + 1 < n && b[i + 1] != '\n')
				return -1;
			continue;
		}
		if (c == '\n') {
			if (i == 0 || b[i - 1] != '\r')
				return -1;
			if (i >= 3 && b[i - 2] == '\n' && b[i - 3] == '\r')
				return (long)i + 1;
			continue;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -1;
	}
	return 0;
}

/* "host:port" or "[v6]:port" (need_port) or without the port (80). */
static int
authority(const char *a, size_t n, int need_port, struct head *h)
{
	const char *colon = NULL, *host = a;
	size_t hn, i;
	unsigned long port = 0;
	char v6[64];
	unsigned char bin[16];

	if (n > 0 && a[0] == '[') {
		const char *close = memchr(a, ']', n);

		if (close == NULL || (size_t)(close - a) - 1 >= sizeof v6)
			return -1;
		host = a + 1;
		hn = (size_t)(close - a) - 1;
		memcpy(v6, host, hn);
		v6[hn] = '\0';
		if (inet_pton(AF_INET6, v6, bin) != 1)
			return -1;
		if ((size_t)(close - a) + 1 < n) {
			if (close[1] != ':')
				return -1;
			colon = close + 1;
		}
	} else {
		colon = memchr(a, ':', n);
		hn = colon ? (size_t)(colon - a) : n;
		if (colon && memchr(colon + 1, ':', n - hn - 1) != NULL)
			return -1;
	}
	if (hn == 0 || hn >= sizeof h->host)
		return -1;
	if (colon != NULL) {
		size_t pn = n - (size_t)(colon + 1 - a);

		if (pn == 0 || pn > 5)
			return -1;
		for (i = 0; i < pn; i++) {
			if (colon[1 + i] < '0' || colon[1 + i] > '9')
				return -1;
			port = port * 10 + (unsigned long)(colon[1 + i] - '0');
		}
		if (port == 0 || port > 65535)
			return -1;
	} else if (need_port)
		return -1;
	else
		port = 80;
	for (i = 0; i < hn; i++) {
		char c = host[i];

		if (!vchar(c) || c == '@' || c == '/' || c == '?' || c == '#' ||
		    c == '[' || c == ']')
			return -1;
		h->host[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	h->host[hn] = '\0';
	h->port = (uint16_t)port;
	return 0;
}

/* "http://authority[/path]" of an absolute-form target. */
static int
absolute(const char *b, size_t t, size_t tn, struct head *h, int *status,
    const char **why)
{
	const char *p = b + t;
	size_t an;

	if (tn >= 8 && strncasecmp(p, "https://", 8) == 0)
		return fail(status, why, 400, "an https:// URL through a plain "
		    "request: use CONNECT (an HTTPS proxy client does)");
	if (tn < 7 || strncasecmp(p, "http://", 7) != 0)
		return fail(status, why, 400, "not a proxy request: the "
		    "target must be http://HOST/... or CONNECT HOST:PORT");
	p += 7;
	tn -= 7;
	for (an = 0; an < tn && p[an] != '/' && p[an] != '?' && p[an] != '#';
	    an++)
		;
	if (authority(p, an, 0, h) < 0)
		return fail(status, why, 400, "a bad host or port in the URL");
	h->path = (size_t)(p + an - b);
	h->path_len = tn - an;
	return 0;
}

static int
header_lines(const char *b, size_t from, size_t end)
{
	size_t i = from, j;

	while (i + 2 <= end && !(b[i] == '\r' && b[i + 1] == '\n')) {
		if (b[i] == ' ' || b[i] == '\t')
			return -1;	/* obsolete folding */
		for (j = i; j < end && tchar(b[j]); j++)
			;
		if (j == i || j >= end || b[j] != ':')
			return -1;
		while (i < end && b[i] != '\n')
			i++;
		i++;
	}
	return 0;
}

int
head_parse(const char *b, size_t n, struct head *h, int *status,
    const char **why)
{
	long e = head_end(b, n < HEAD_MAX ? n : HEAD_MAX);
	size_t m, t, tn, v, eol;

	memset(h, 0, sizeof *h);
	if (e < 0)
		return fail(status, why, 400, "a bare CR or LF or a control "
		    "character in the request head");
	if (e == 0)
		return n >= HEAD_MAX ? fail(status, why, 431, "the request "
		    "head is over 8 KiB") : 1;
	eol = (size_t)((const char *)memchr(b, '\r', (size_t)e) - b);
	for (m = 0; m < eol && tchar(b[m]); m++)
		;
	if (m == 0 || m >= sizeof h->method || m >= eol || b[m] != ' ')
		return fail(status, why, 400, "a bad request line");
	memcpy(h->method, b, m);
	t = m + 1;
	for (tn = 0; t + tn < eol && vchar(b[t + tn]); tn++)
		;
	v = t + tn;
	if (tn == 0 || v + 9 != eol || b[v] != ' ' ||
	    memcmp(b + v + 1, "HTTP/1.", 7) != 0 ||
	    (b[v + 8] != '0' && b[v + 8] != '1'))
		return fail(status, why, 400, "a bad request line (not "
		    "HTTP/1.x)");
	h->minor = (unsigned)(b[v + 8] - '0');
	h->lines = eol + 2;
	h->len = (size_t)e;
	if (header_lines(b, h->lines, h->len) < 0)
		return fail(status, why, 400, "a bad header line");
	if (strcmp(h->method, "CONNECT") == 0) {
		h->connect = 1;
		if (authority(b + t, tn, 1, h) < 0)
			return fail(status, why, 400, "CONNECT needs HOST:PORT");
		return 0;
	}
	return absolute(b, t, tn, h, status, why);
}

/* Headers the origin server must not see (hop-by-hop, the proxy's, and
 * Host, which comes from the URL). */
static int
dropped(const char *name, size_t n)
{
	static const char *const drop[] = { "host", "connection",
	    "proxy-connection", "proxy-authorization", "proxy-authenticate",
	    "keep-alive", "te", "upgrade", "trailer", NULL };
	size_t i;

	for (i = 0; drop[i] != NULL; i++)
		if (strlen(drop[i]) == n && strncasecmp(drop[i], name, n) == 0)
			return 1;
	return 0;
}

static int
put(char *out, size_t len, size_t *at, const char *p, size_t n)
{
	if (*at + n > len)
		return -1;
	memcpy(out + *at, p, n);
	*at += n;
	return 0;
}

size_t
head_rewrite(const char *b, const struct head *h, char *out, size_t len)
{
	size_t at = 0, i = h->lines, eol, colon;
	char port[8];
	int v6 = strchr(h->host, ':') != NULL;

	(void)snprintf(port, sizeof port, ":%u", h->port);
	if (put(out, len, &at, h->method, strlen(h->method)) < 0 ||
	    put(out, len, &at, " ", 1) < 0 ||
	    ((h->path_len == 0 || b[h->path] != '/') &&
	    put(out, len, &at, "/", 1) < 0) ||
	    put(out, len, &at, b + h->path, h->path_len) < 0 ||
	    put(out, len, &at, h->minor ? " HTTP/1.1\r\nHost: " :
	    " HTTP/1.0\r\nHost: ", 17) < 0 ||
	    (v6 && put(out, len, &at, "[", 1) < 0) ||
	    put(out, len, &at, h->host, strlen(h->host)) < 0 ||
	    (v6 && put(out, len, &at, "]", 1) < 0) ||
	    (h->port != 80 && put(out, len, &at, port, strlen(port)) < 0) ||
	    put(out, len, &at, "\r\n", 2) < 0)
		return 0;
	while (i + 2 <= h->len && !(b[i] == '\r' && b[i + 1] == '\n')) {
		eol = (size_t)((const char *)memchr(b + i, '\n', h->len - i) -
		    b) + 1;
		colon = (size_t)((const char *)memchr(b + i, ':', eol - i) - b);
		if (!dropped(b + i, colon - i) &&
		    put(out, len, &at, b + i, eol - i) < 0)
			return 0;
		i = eol;
	}
	if (put(out, len, &at, "Connection: close\r\n\r\n", 21) < 0)
		return 0;
	return at;
}

static unsigned
be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* The server_name extension's host name in e[0..n). */
static int
sni_ext(const unsigned char *e, size_t n, char *out, size_t len)
{
	size_t list, nl, i;

	if (n < 2 || (list = be16(e)) + 2 > n || list < 3)
		return -1;
	if (e[2] != 0)		/* host_name is the only name type */
		return -1;
	nl = be16(e + 3);
	if (nl == 0 || nl + 5 > list + 2 || nl >= len)
		return -1;
	for (i = 0; i < nl; i++) {
		unsigned char c = e[5 + i];

		if (c <= 0x20 || c >= 0x7f)
			return -1;
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	out[nl] = '\0';
	return 0;
}

int
head_sni(const unsigned char *b, size_t n, char *out, size_t len)
{
	size_t rec, hs, at, skip, ext_end;

	if (n >= 1 && b[0] != 0x16)
		return 2;		/* not a TLS handshake record */
	if (n < 5)
		return 1;
	if (b[1] != 3)
		return 2;
	rec = be16(b + 3);
	if (rec < 4 || rec > 16384)
		return -1;
	if (n < 5 + rec)
		return 1;
	b += 5;				/* the handshake message */
	if (b[0] != 1)
		return -1;		/* not a ClientHello */
	hs = (size_t)b[1] << 16 | (size_t)be16(b + 2);
	if (hs + 4 > rec)
		return -1;		/* continues in another record */
	at = 4 + 2 + 32;		/* version, random */
	if (at + 1 > hs + 4)
		return -1;
	at += 1 + b[at];		/* session id */
	if (at + 2 > hs + 4)
		return -1;
	at += 2 + be16(b + at);		/* cipher suites */
	if (at + 1 > hs + 4)
		return -1;
	at += 1 + b[at];		/* compression methods */
	if (at == hs + 4)
		return 2;		/* no extensions */
	if (at + 2 > hs + 4 || at + 2 + be16(b + at) > hs + 4)
		return -1;
	ext_end = at + 2 + be16(b + at);
	for (at += 2; at + 4 <= ext_end; at += 4 + skip) {
		skip = be16(b + at + 2);
		if (at + 4 + skip > ext_end)
			return -1;
		if (be16(b + at) == 0)
			return sni_ext(b + at + 4, skip, out, len);
	}
	return at == ext_end ? 2 : -1;
}
