/*
 * resolve.h - name lookups off the event loop: getaddrinfo(3) blocks, so
 * each lookup runs in a detached thread of its own and its answer comes
 * back through a pipe the loop watches. A lookup whose asker went away
 * is simply dropped when it answers; the resolver may be freed with
 * lookups in flight (the last thread frees what they share).
 */
#ifndef AGENTZ_EGRESS_RESOLVE_H
#define AGENTZ_EGRESS_RESOLVE_H

#include <stdint.h>

#include <netdb.h>

struct loop;
struct resolver;

/* An answer: ai (NULL on failure; the callee owns it: freeaddrinfo) and
 * getaddrinfo's error code. */
typedef void resolve_fn(void *ctx, uint64_t tag, struct addrinfo *ai,
    int gai_err);

struct resolver *resolver_new(struct loop *l, resolve_fn *fn, void *ctx);
void resolver_free(struct resolver *r);

/* Looks host:port up (TCP, IPv4 and IPv6); fn gets tag with the answer.
 * 0, or -1 with errno (EAGAIN: too many in flight). */
int resolver_lookup(struct resolver *r, const char *host, uint16_t port,
    uint64_t tag);

#endif
