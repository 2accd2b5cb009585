/*
 * egress.h - the worker's way out (--network proxy): an HTTP proxy in
 * the supervisor's event loop, listening inside the worker's network
 * namespace (the only address a cell can reach there besides its own
 * loopback). It serves CONNECT (TLS passes through untouched; a
 * ClientHello's server name must be the CONNECT's host) and plain-HTTP
 * absolute-form requests, one per connection. The supervisor resolves
 * names itself and checks every address it connects to (policy.h): no
 * DNS rebinding onto loopback, the metadata address or private ranges.
 * Bounded: a cap on connections, fixed buffers per connection, timeouts
 * for a head, a connect and an idle tunnel.
 *
 * Each connection is told through egress_ops.conn: once decided
 * (allowed or refused, with why) and once closed (bytes each way).
 */
#ifndef AGENTZ_EGRESS_H
#define AGENTZ_EGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/egress/policy.h"

struct loop;
struct egress;

/* The port the proxy listens on inside the worker's namespace. */
#define EGRESS_PORT 3128

enum egress_what { EGRESS_ALLOWED, EGRESS_REFUSED, EGRESS_CLOSED,
	EGRESS_HELD };

/* Who decided: the policy (its entries, the address checks, the
 * proxy's limits), the operator (approve, reject), the approval's
 * timeout. */
enum egress_by { EGRESS_BY_POLICY, EGRESS_BY_OPERATOR, EGRESS_BY_TIMEOUT };

struct egress_event {
	enum egress_what what;
	enum egress_by by;		/* ALLOWED, REFUSED: who decided */
	uint64_t id;			/* the connection's, from 1; HELD: the
					 * approval's id too */
	const char *method;		/* "CONNECT", "GET", ... or "" */
	const char *host;		/* as asked, or "" */
	unsigned port;
	const char *addr;		/* connected to, or "" */
	const char *entry;		/* the allow entry, or NULL */
	const char *reason;		/* refused: why; closed: NULL or
					 * what ended it */
	uint64_t up, down;		/* bytes (CLOSED) */
	double seconds;			/* since accepted (CLOSED) */
};

struct egress_ops {
	void (*conn)(void *ctx, const struct egress_event *ev);
};

struct egress_limits {
	unsigned max_conns;		/* at once; more are answered 503 */
	unsigned head_ms;		/* for the request head */
	unsigned connect_ms;		/* for the connect */
	unsigned idle_ms;		/* no byte either way */
	int ask;			/* hold an unlisted host for the
					 * operator (--network-ask) */
	unsigned approval_ms;		/* then refused (--approval-timeout) */
	uint64_t max_bytes;		/* both ways, the run's; 0: none
					 * (--max-egress-bytes) */
};

/* The defaults: 64 connections, 10 s, 30 s, 300 s, no asking, 300 s. */
extern const struct egress_limits egress_default_limits;

/* Takes the policy (moved: *p is emptied). NULL with errno. */
struct egress *egress_new(struct loop *l, struct policy *p,
    const struct egress_limits *lim, const struct egress_ops *ops,
    void *ctx);
/* Closes every connection; accepts NULL. */
void egress_free(struct egress *e);

/* Serves the listening socket fd (taken; a new one after the worker's
 * network was rebuilt replaces the old). 0 or -1 with errno. */
int egress_listen(struct egress *e, int fd);

/* ctl allow/deny: adds (or with remove, takes away) an entry. 0, or -1
 * and err says why. Live connections keep their verdict. */
int egress_policy_edit(struct egress *e, int deny, int remove,
    const char *entry, char *err, size_t len);
const struct policy *egress_policy(const struct egress *e);
/*
 * The operator's answer to held connection id: approve (always: its
 * host:port is added to the allow list too) or reject. 0, or -1 with
 * errno ENOENT (no such connection waits).
 */
int egress_approve(struct egress *e, uint64_t id, int always);
int egress_reject(struct egress *e, uint64_t id);
/* The held connections, "#3 pypi.org:443, #5 x.io:80" (or ""), and how
 * many. */
unsigned egress_held(const struct egress *e, char *buf, size_t len);
/* The entry the last approve --always added ("host:port"), or "". */
const char *egress_last_always(const struct egress *e);
/* Bytes through the proxy so far (both ways), and whether they reached
 * max_bytes: then every connection was closed and new ones are
 * refused. */
uint64_t egress_bytes(const struct egress *e);
int egress_spent(const struct egress *e);
/* The run's byte budget (both ways, 0: none), set anew (`agentz ctl
 * NAME budgets`): one that is spent already closes every connection
 * now; a larger one lets connections through again. */
void egress_set_max_bytes(struct egress *e, uint64_t max);
uint64_t egress_max_bytes(const struct egress *e);
/* Bytes that went through before this process (--resume, from the
 * journal): counted against the budget as if they were ours. */
void egress_count_before(struct egress *e, uint64_t bytes);
/* Connections open now. */
unsigned egress_live(const struct egress *e);
/* One line per live connection ("#3 CONNECT pypi.org:443 -> 1.2.3.4
 * up 512 down 4096 12.1 s") into buf. */
void egress_list(const struct egress *e, char *buf, size_t len);

#endif
