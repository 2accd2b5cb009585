/*
 * egressrun.c - the run's egress proxy (--network proxy): made once the
 * jail's network namespace exists, listening there again after the jail
 * was rebuilt (a new namespace), its address in the workers'
 * environment, its connections told to the front end (runner_ops.net).
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define PROXY_URL "http://127.0.0.1:3128"

_Static_assert(EGRESS_PORT == 3128, "PROXY_URL names the port");

/* What every process of the worker's tree gets: the proxy for HTTP,
 * HTTPS and anything else (curl reads the lower-case http_proxy only),
 * and the namespace's own loopback reached directly. */
static const char *const proxy_env[] = {
	"HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL,
	"ALL_PROXY=" PROXY_URL, "http_proxy=" PROXY_URL,
	"https_proxy=" PROXY_URL, "all_proxy=" PROXY_URL,
	"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	NULL
};

/* The running cell's account of its connections. */
static void
count(struct cell *c, const struct egress_event *ev)
{
	char *why;

	if (c == NULL)
		return;
	switch (ev->what) {
	case EGRESS_ALLOWED:
		c->egress.allowed++;
		break;
	case EGRESS_REFUSED:
		c->egress.refused++;
		if (ev->reason != NULL && (why = strdup(ev->reason)) != NULL) {
			free(c->egress.last_refused);
			c->egress.last_refused = why;
		}
		break;
	case EGRESS_CLOSED:
		c->egress.up += ev->up;
		c->egress.down += ev->down;
		break;
	case EGRESS_HELD:
		break;
	}
}

static void
on_conn(void *ctx, const struct egress_event *ev)
{
	struct runner *r = ctx;

	count(r->current, ev);
	if (r->ops.net != NULL)
		r->ops.net(r->ctx, ev);
}

static int
policy_from(struct policy *p, const struct runner_config *c)
{
	char err[400];
	size_t i;

	for (i = 0; c->allow_hosts != NULL && c->allow_hosts[i] != NULL; i++)
		if (policy_add(p, 0, c->allow_hosts[i], err, sizeof err) < 0)
			goto bad;
	for (i = 0; c->deny_hosts != NULL && c->deny_hosts[i] != NULL; i++)
		if (policy_add(p, 1, c->deny_hosts[i], err, sizeof err) < 0)
			goto bad;
	return 0;
bad:
	log_warnx("network: %s", err);
	return -1;
}

int
egressrun_new(struct runner *r)
{
	static const struct egress_ops ops = { on_conn };
	struct egress_limits lim;
	struct policy p;
	int fd;

	if (r->jail == NULL || r->jc.network != JAIL_NET_PROXY ||
	    !jail_active(r->jail))
		return 0;
	memset(&p, 0, sizeof p);
	if (policy_from(&p, &r->cfg) < 0) {
		policy_free(&p);
		return -1;
	}
	lim = egress_default_limits;
	lim.ask = r->cfg.network_ask;
	lim.max_bytes = r->cfg.max_egress_bytes;
	if (r->cfg.approval_ms > 0)
		lim.approval_ms = (unsigned)r->cfg.approval_ms;
	r->egress = egress_new(r->loop, &p, &lim, &ops, r);
	policy_free(&p);
	if (r->egress == NULL) {
		log_warn("network: cannot start the egress proxy");
		return -1;
	}
	if ((fd = jail_net_listen(r->jail, EGRESS_PORT)) < 0 ||
	    egress_listen(r->egress, fd) < 0) {
		log_warn("network: cannot listen in the worker's network "
		    "namespace");
		egress_free(r->egress);
		r->egress = NULL;
		return -1;
	}
	r->cfg.worker.set_env = proxy_env;
	return 0;
}

void
egressrun_relisten(struct runner *r)
{
	int fd;

	if (r->egress == NULL)
		return;
	if ((fd = jail_net_listen(r->jail, EGRESS_PORT)) < 0 ||
	    egress_listen(r->egress, fd) < 0)
		log_warn("network: the rebuilt namespace has no egress proxy");
}

void
egressrun_free(struct runner *r)
{
	egress_free(r->egress);
	r->egress = NULL;
}

struct egress *
runner_egress(struct runner *r)
{
	return r->egress;
}

const char *
runner_network_desc(struct runner *r)
{
	char pol[sizeof r->netdesc - 128];

	if (r->egress == NULL)
		return runner_network(r);
	policy_describe(egress_policy(r->egress), pol, sizeof pol);
	(void)snprintf(r->netdesc, sizeof r->netdesc, "proxy %s (%s%s)",
	    PROXY_URL, pol, r->cfg.network_ask ? "; others wait for the "
	    "operator's approval" : "");
	return r->netdesc;
}
