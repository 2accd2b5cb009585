/*
 * head.h - a proxy client's request head: "CONNECT host:port HTTP/1.1"
 * (a tunnel: TLS passes through untouched) or an absolute-form plain-HTTP
 * request ("GET http://host[:port]/path HTTP/1.1"), and the head the
 * origin server gets for the latter (origin-form, Host from the URL, no
 * Proxy-* or hop-by-hop headers, "Connection: close": one request per
 * connection). And the name a TLS ClientHello asks for (SNI), which must
 * be the CONNECT's.
 *
 * Strict on purpose: CRLF line ends, no folded or nameless header lines,
 * no control characters, a bounded head. Pure functions (no I/O):
 * unit-tested and fuzzed.
 */
#ifndef AGENTZ_EGRESS_HEAD_H
#define AGENTZ_EGRESS_HEAD_H

#include <stddef.h>
#include <stdint.h>

#define HEAD_MAX 8192
#define HEAD_HOST_MAX 254

struct head {
	int connect;			/* 1: CONNECT; 0: absolute-form */
	char method[16];
	char host[HEAD_HOST_MAX];	/* lowercase, IPv6 without brackets */
	uint16_t port;
	size_t path, path_len;		/* absolute-form: "/..." in buf (0
					 * length: "/") */
	unsigned minor;			/* HTTP/1.<minor> */
	size_t lines;			/* where the header lines start */
	size_t len;			/* the head, blank line included */
};

/*
 * Parses buf[0..n). 0: a complete head in h; 1: incomplete (read more;
 * n >= HEAD_MAX is then an error); -1: not a request this proxy serves,
 * *status the HTTP status to answer (400, 405, 431, 501) and *why one
 * line.
 */
int head_parse(const char *buf, size_t n, struct head *h, int *status,
    const char **why);

/*
 * The absolute-form request's head for the origin server into out.
 * Its length, or 0 when out is too small.
 */
size_t head_rewrite(const char *buf, const struct head *h, char *out,
    size_t len);

/*
 * The server name of a TLS ClientHello at the start of buf[0..n):
 * 0 found (name, lowercase, into out), 1 incomplete, 2 not TLS or no
 * name in it, -1 a malformed hello or one split across records (which
 * the proxy refuses: the name could not be checked).
 */
int head_sni(const unsigned char *buf, size_t n, char *out, size_t len);

#endif
