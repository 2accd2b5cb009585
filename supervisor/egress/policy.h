/*
 * policy.h - which hosts a cell may reach through the egress proxy: the
 * operator's allow and deny entries (--allow-host, --deny-host, ctl
 * allow/deny) and the addresses never connected to unless an entry
 * names them (loopback, private, link-local such as the cloud metadata
 * address 169.254.169.254, multicast, reserved).
 *
 * An entry: "example.com" (that name only), "*.example.com" (names
 * under it, not itself), "*" (every name and address), an IPv4 or IPv6
 * address, a CIDR ("10.0.0.0/8", "fd00::/8"), each optionally with a
 * port (":443"; an IPv6 address or CIDR in brackets then:
 * "[::1]:8080"). A deny entry wins over an allow entry. Names are
 * compared without case and without a trailing dot.
 *
 * Pure functions (no I/O, no logging): unit-tested and fuzzed.
 */
#ifndef AGENTZ_EGRESS_POLICY_H
#define AGENTZ_EGRESS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

enum policy_kind { POLICY_NAME, POLICY_SUFFIX, POLICY_NET, POLICY_ANY };

struct policy_entry {
	char *text;			/* as the operator wrote it */
	enum policy_kind kind;
	char *name;			/* NAME: "a.b"; SUFFIX: ".b" */
	int family;			/* NET: AF_INET or AF_INET6 */
	unsigned char addr[16];		/* NET: network, host bits zero */
	unsigned prefix;		/* NET: bits */
	uint16_t port;			/* 0: any */
};

struct policy {
	struct policy_entry *allow, *deny;
	size_t nallow, ndeny;
	size_t capallow, capdeny;
};

/* Parses one entry. 0, or -1 and err says what is wrong with it. */
int policy_entry_parse(const char *text, struct policy_entry *e, char *err,
    size_t len);
void policy_entry_clear(struct policy_entry *e);

/* Adds an entry (deny: 1 for the deny list); one already there is not
 * added twice. 0, or -1 (err: the entry's fault, or out of memory). */
int policy_add(struct policy *p, int deny, const char *text, char *err,
    size_t len);
/* Removes an entry written exactly so from a list. 1 removed, 0 none. */
int policy_remove(struct policy *p, int deny, const char *text);
void policy_free(struct policy *p);

enum policy_verdict { POLICY_ALLOWED, POLICY_DENIED, POLICY_UNLISTED };

/*
 * The name (or address literal) a client asked for, before resolving:
 * denied by a deny entry, allowed by an allow entry, else unlisted.
 * *entry is the matching entry's text (NULL when unlisted). host is
 * lowercase, without brackets.
 */
enum policy_verdict policy_check_name(const struct policy *p,
    const char *host, uint16_t port, const char **entry);

/*
 * An address about to be connected to: 0 when it may be, or -1 with
 * *why saying why not ("denied by --deny-host 10.0.0.0/8", "loopback:
 * a loopback address: only an entry naming the address reaches it").
 * Addresses of a special class
 * need an allow entry that is an address or CIDR containing them.
 * why points into a static string or an entry: valid while p is.
 */
int policy_check_addr(const struct policy *p, const struct sockaddr *sa,
    uint16_t port, const char **why, char *buf, size_t len);

/* The class of an address that is not public ("loopback", "private",
 * "link-local", ...), or NULL for an ordinary public address. */
const char *policy_addr_class(const struct sockaddr *sa);

/* "allow: a, *.b; deny: c" (or "allow: nothing") into buf. */
void policy_describe(const struct policy *p, char *buf, size_t len);

#endif
