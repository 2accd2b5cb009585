/*
 * netrec.c - the egress proxy's connections in the run's journal ("net"
 * records), its events and, for a refusal, a line on stderr: the
 * operator sees what a cell tried to reach and why it could not.
 */
#include "supervisor/agent/agent_int.h"

#include "common/log.h"
#include "supervisor/egress/egress.h"
#include "supervisor/text/jsonf.h"

static const char *const what_names[] = { "allowed", "refused", "closed" };

void
agent_net(void *ctx, const struct egress_event *ev)
{
	struct agent *a = ctx;
	const struct cell *c = a->runner != NULL ?
	    runner_current(a->runner) : NULL;
	int closed = ev->what == EGRESS_CLOSED;
	struct jf f[] = { JF_S("what", what_names[ev->what]),
	    JF_I("conn", ev->id), JF_S("method", ev->method),
	    JF_S("host", ev->host), JF_I("port", ev->port),
	    ev->addr[0] ? JF_S("addr", ev->addr) : JF_SKIP,
	    ev->entry != NULL ? JF_S("entry", ev->entry) : JF_SKIP,
	    ev->reason != NULL ? JF_S("reason", ev->reason) : JF_SKIP,
	    c != NULL ? JF_I("cell", c->n) : JF_SKIP,
	    closed ? JF_I("up", ev->up) : JF_SKIP,
	    closed ? JF_I("down", ev->down) : JF_SKIP,
	    closed ? JF_R("seconds", ev->seconds) : JF_SKIP, JF_END };

	if (ev->what == EGRESS_REFUSED)
		log_info("network: refused %s %s:%u: %s", ev->method[0] ?
		    ev->method : "a connection", ev->host[0] ? ev->host : "-",
		    ev->port, ev->reason);
	else
		log_debug("network: %s %s %s:%u%s%s", what_names[ev->what],
		    ev->method, ev->host, ev->port, ev->addr[0] ? " at " : "",
		    ev->addr);
	(void)agent_record(a, "net", f);
	agent_ev_net(a, ev);
}
