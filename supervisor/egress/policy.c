/*
 * policy.c - the egress allow and deny lists and the address classes
 * never connected to by default (see policy.h).
 */
#include "supervisor/egress/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 253

static int
bad(char *err, size_t len, const char *text, const char *why)
{
	(void)snprintf(err, len, "'%s': %s", text, why);
	return -1;
}

/* A port after the last ':' of s (s is cut there). 0 none, -1 bad. */
static int
cut_port(char *s, uint16_t *port)
{
	char *c = strrchr(s, ':'), *end;
	unsigned long v;

	*port = 0;
	if (c == NULL)
		return 0;
	if (c[1] < '0' || c[1] > '9')
		return -1;
	errno = 0;
	v = strtoul(c + 1, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	*c = '\0';
	return 0;
}

static int
valid_name(const char *s)
{
	size_t n = strlen(s), label = 0;

	if (n == 0 || n > NAME_MAX_LEN || s[0] == '.' || s[n - 1] == '.')
		return 0;
	for (; *s != '\0'; s++) {
		if (*s == '.') {
			if (label == 0)
				return 0;
			label = 0;
			continue;
		}
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		    *s == '-' || *s == '_'))
			return 0;
		if (++label > 63)
			return 0;
	}
	return 1;
}

static void
lower(char *s)
{
	for (; *s != '\0'; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

/* An address or CIDR in s into e (NET). 0, or -1 if s is none. */
static int
parse_net(char *s, struct policy_entry *e)
{
	char *slash = strchr(s, '/'), *end;
	unsigned long bits;
	unsigned max, i;

	if (slash != NULL)
		*slash = '\0';
	if (inet_pton(AF_INET, s, e->addr) == 1)
		e->family = AF_INET;
	else if (inet_pton(AF_INET6, s, e->addr) == 1)
		e->family = AF_INET6;
	else
		return -1;
	max = e->family == AF_INET ? 32 : 128;
	e->prefix = max;
	if (slash != NULL) {
		errno = 0;
		bits = strtoul(slash + 1, &end, 10);
		if (errno != 0 || slash[1] < '0' || slash[1] > '9' ||
		    *end != '\0' || bits > max)
			return -2;
		e->prefix = (unsigned)bits;
	}
	for (i = e->prefix; i < max; i++)	/* host bits must be zero */
		if (e->addr[i / 8] & (0x80u >> (i % 8)))
			return -3;
	e->kind = POLICY_NET;
	return 0;
}

static int
parse_body(char *s, struct policy_entry *e, char *err, size_t len,
    const char *text)
{
	int rc;

	if (strcmp(s, "*") == 0) {
		e->kind = POLICY_ANY;
		return 0;
	}
	if ((rc = parse_net(s, e)) == 0)
		return 0;
	if (rc == -2)
		return bad(err, len, text, "the prefix length is out of range");
	if (rc == -3)
		return bad(err, len, text, "the address has bits set past "
		    "the prefix");
	lower(s);
	if (s[0] == '*' && s[1] == '.') {
		if (!valid_name(s + 2))
			return bad(err, len, text, "not a host name after '*.'");
		e->kind = POLICY_SUFFIX;
		e->name = strdup(s + 1);
	} else {
		if (s[0] != '\0' && s[strlen(s) - 1] == '.')
			s[strlen(s) - 1] = '\0';
		if (!valid_name(s))
			return bad(err, len, text, "not a host name, address, "
			    "CIDR or '*.' pattern");
		e->kind = POLICY_NAME;
		e->name = strdup(s);
	}
	if (e->name == NULL)
		return bad(err, len, text, "out of memory");
	return 0;
}

int
policy_entry_parse(const char *text, struct policy_entry *e, char *err,
    size_t len)
{
	char s[300], *body = s, *close;
	size_t n = strlen(text);

	memset(e, 0, sizeof *e);
	if (n == 0)
		return bad(err, len, text, "empty");
	if (n >= sizeof s)
		return bad(err, len, "...", "longer than 299 characters");
	memcpy(s, text, n + 1);
	if (s[0] == '[') {		/* [v6] or [v6]:port or [cidr]:port */
		if ((close = strchr(s, ']')) == NULL)
			return bad(err, len, text, "no ']'");
		*close = '\0';
		body = s + 1;
		if (close[1] == ':') {
			if (cut_port(close + 1, &e->port) < 0 || e->port == 0)
				return bad(err, len, text, "the port is not "
				    "1..65535");
		} else if (close[1] != '\0')
			return bad(err, len, text, "text after ']'");
		if (parse_net(body, e) != 0)
			return bad(err, len, text, "not an IPv6 address or "
			    "CIDR in brackets");
		if (e->family != AF_INET6)
			return bad(err, len, text, "brackets are for IPv6");
	} else if (strchr(s, ':') == strrchr(s, ':')) {
		/* no colon or one: a name or IPv4 (CIDR), maybe a port */
		if (cut_port(s, &e->port) < 0)
			return bad(err, len, text, "the port is not 1..65535");
		if (parse_body(body, e, err, len, text) < 0)
			return -1;
	} else if (parse_body(body, e, err, len, text) < 0)
		return -1;		/* IPv6 without a port */
	if ((e->text = strdup(text)) == NULL) {
		policy_entry_clear(e);
		return bad(err, len, text, "out of memory");
	}
	return 0;
}

void
policy_entry_clear(struct policy_entry *e)
{
	free(e->text);
	free(e->name);
	memset(e, 0, sizeof *e);
}

int
policy_add(struct policy *p, int deny, const char *text, char *err,
    size_t len)
{
	struct policy_entry e, **list = deny ? &p->deny : &p->allow, *grown;
	size_t *n = deny ? &p->ndeny : &p->nallow;
	size_t *cap = deny ? &p->capdeny : &p->capallow, i;

	if (policy_entry_parse(text, &e, err, len) < 0)
		return -1;
	for (i = 0; i < *n; i++)
		if (strcmp((*list)[i].text, text) == 0) {
			policy_entry_clear(&e);
			return 0;
		}
	if (*n == *cap) {
		grown = realloc(*list, (*cap ? *cap * 2 : 8) * sizeof **list);
		if (grown == NULL) {
			policy_entry_clear(&e);
			return bad(err, len, text, "out of memory");
		}
		*list = grown;
		*cap = *cap ? *cap * 2 : 8;
	}
	(*list)[(*n)++] = e;
	return 0;
}

int
policy_remove(struct policy *p, int deny, const char *text)
{
	struct policy_entry *list = deny ? p->deny : p->allow;
	size_t *n = deny ? &p->ndeny : &p->nallow, i;

	for (i = 0; i < *n; i++)
		if (strcmp(list[i].text, text) == 0) {
			policy_entry_clear(&list[i]);
			memmove(&list[i], &list[i + 1],
			    (*n - i - 1) * sizeof *list);
			(*n)--;
			return 1;
		}
	return 0;
}

void
policy_free(struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nallow; i++)
		policy_entry_clear(&p->allow[i]);
	for (i = 0; i < p->ndeny; i++)
		policy_entry_clear(&p->deny[i]);
	free(p->allow);
	free(p->deny);
	memset(p, 0, sizeof *p);
}

/* host: an address literal? Its bytes into a (16), family returned. */
static int
literal(const char *host, unsigned char *a)
{
	if (inet_pton(AF_INET, host, a) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, host, a) == 1)
		return AF_INET6;
	return 0;
}

static int
in_net(const struct policy_entry *e, int family, const unsigned char *a)
{
	unsigned full = e->prefix / 8, rest = e->prefix % 8;
	unsigned char m;

	if (e->family != family)
		return 0;
	if (memcmp(e->addr, a, full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	m = (unsigned char)(0xffu << (8 - rest));
	return (e->addr[full] & m) == (a[full] & m);
}

static int
name_match(const struct policy_entry *e, const char *host)
{
	size_t n = strlen(host), s;

	if (e->kind == POLICY_NAME)
		return strcmp(e->name, host) == 0;
	s = strlen(e->name);		/* ".example.com" */
	return n > s && strcmp(host + n - s, e->name) == 0;
}

/* Does e match the name host (family 0) or the address a? */
static int
entry_match(const struct policy_entry *e, const char *host, int family,
    const unsigned char *a, uint16_t port)
{
	if (e->port != 0 && e->port != port)
		return 0;
	switch (e->kind) {
	case POLICY_ANY:
		return 1;
	case POLICY_NET:
		return family != 0 && in_net(e, family, a);
	case POLICY_NAME:
	case POLICY_SUFFIX:
		return family == 0 && host != NULL && name_match(e, host);
	}
	return 0;
}

static const struct policy_entry *
find(const struct policy_entry *list, size_t n, const char *host,
    int family, const unsigned char *a, uint16_t port)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (entry_match(&list[i], host, family, a, port))
			return &list[i];
	return NULL;
}

enum policy_verdict
policy_check_name(const struct policy *p, const char *host, uint16_t port,
    const char **entry)
{
	unsigned char a[16];
	char name[NAME_MAX_LEN + 2];
	size_t n = strlen(host);
	int family = literal(host, a);
	const struct policy_entry *e;

	*entry = NULL;
	if (family == 0 && n > 1 && n < sizeof name && host[n - 1] == '.') {
		memcpy(name, host, n - 1);	/* "example.com." */
		name[n - 1] = '\0';
		host = name;
	}
	if ((e = find(p->deny, p->ndeny, host, family, a, port)) != NULL) {
		*entry = e->text;
		return POLICY_DENIED;
	}
	if ((e = find(p->allow, p->nallow, host, family, a, port)) != NULL) {
		*entry = e->text;
		return POLICY_ALLOWED;
	}
	return POLICY_UNLISTED;
}

static int
v4_in(uint32_t a, uint32_t net, unsigned bits)
{
	return bits == 0 || (a >> (32 - bits)) == (net >> (32 - bits));
}

static const char *
class4(uint32_t a)
{
	static const struct { uint32_t net; unsigned bits; const char *c; }
	    t[] = {
		{ 0x00000000, 8, "unspecified" },
		{ 0x7f000000, 8, "loopback" },
		{ 0x0a000000, 8, "private" },
		{ 0xac100000, 12, "private" },
		{ 0xc0a80000, 16, "private" },
		{ 0x64400000, 10, "shared (carrier-grade NAT)" },
		{ 0xa9fe0000, 16, "link-local" },
		{ 0xc0000000, 24, "IETF protocol assignments" },
		{ 0xc0000200, 24, "documentation" },
		{ 0xc6336400, 24, "documentation" },
		{ 0xcb007100, 24, "documentation" },
		{ 0xc6120000, 15, "benchmarking" },
		{ 0xe0000000, 4, "multicast" },
		{ 0xf0000000, 4, "reserved" },
	};
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		if (v4_in(a, t[i].net, t[i].bits))
			return t[i].c;
	return NULL;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static const char *
class6(const unsigned char *a)
{
	static const unsigned char zero[16], mapped[12] = { [10] = 0xff,
	    [11] = 0xff }, nat64[12] = { 0, 0x64, 0xff, 0x9b };

	if (memcmp(a, zero, 15) == 0)
		return a[15] == 1 ? "loopback" : a[15] == 0 ? "unspecified" :
		    "reserved";
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
		return class4(be32(a + 12));
	if (memcmp(a, zero, 12) == 0)
		return "reserved";	/* IPv4-compatible, deprecated */
	if ((a[0] & 0xfe) == 0xfc)
		return "private";
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return "link-local";
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return "site-local";
	if (a[0] == 0xff)
		return "multicast";
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8)
		return "documentation";
	if (a[0] == 0x01 && a[1] == 0x00 && memcmp(a + 2, zero, 6) == 0)
		return "discard";
	if (a[0] == 0x20 && a[1] == 0x02)	/* 6to4: its IPv4 */
		return class4(be32(a + 2));
	return NULL;
}

/* The address's family and bytes; 0 for another family. */
static int
addr_bytes(const struct sockaddr *sa, unsigned char *a)
{
	if (sa->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->
		    sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->
		    sin6_addr, 16);
		return AF_INET6;
	}
	return 0;
}

const char *
policy_addr_class(const struct sockaddr *sa)
{
	unsigned char a[16];
	int f = addr_bytes(sa, a);

	if (f == AF_INET)
		return class4(be32(a));
	if (f == AF_INET6)
		return class6(a);
	return "not an IP address";
}

int
policy_check_addr(const struct policy *p, const struct sockaddr *sa,
    uint16_t port, const char **why, char *buf, size_t len)
{
	unsigned char a[16];
	int f = addr_bytes(sa, a);
	const struct policy_entry *e;
	const char *cls;
	size_t i;

	if (f == 0) {
		*why = "not an IP address";
		return -1;
	}
	if ((e = find(p->deny, p->ndeny, NULL, f, a, port)) != NULL &&
	    e->kind == POLICY_NET) {
		(void)snprintf(buf, len, "denied by --deny-host %s", e->text);
		*why = buf;
		return -1;
	}
	if ((cls = policy_addr_class(sa)) == NULL)
		return 0;
	for (i = 0; i < p->nallow; i++)
		if (p->allow[i].kind == POLICY_NET &&
		    entry_match(&p->allow[i], NULL, f, a, port))
			return 0;
	(void)snprintf(buf, len, "a %s address: only an entry naming the "
	    "address reaches it (--allow-host ADDRESS or CIDR)", cls);
	*why = buf;
	return -1;
}

static size_t
entries_text(char *buf, size_t len, size_t at, const struct policy_entry *l,
    size_t n)
{
	size_t i;
	int w;

	for (i = 0; i < n && at < len; i++) {
		w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
		    l[i].text);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return at;
}

void
policy_describe(const struct policy *p, char *buf, size_t len)
{
	size_t at;
	int w;

	if (len == 0)
		return;
	buf[0] = '\0';
	w = snprintf(buf, len, "allow: %s", p->nallow ? "" : "nothing");
	at = w < 0 ? 0 : (size_t)w;
	at = entries_text(buf, len, at, p->allow, p->nallow);
	if (p->ndeny == 0 || at >= len)
		return;
	w = snprintf(buf + at, len - at, "; deny: ");
	if (w > 0)
		at += (size_t)w;
	if (at < len)
		(void)entries_text(buf, len, at, p->deny, p->ndeny);
}
