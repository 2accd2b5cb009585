/*
 * netrec.c - the egress proxy's connections in the run's journal
 * ("egress" records: held, allowed or refused and by whom, closed with
 * its bytes), its events, and on stderr a refusal or a connection that
 * waits for the operator (also the run's status line): the operator sees
 * what a cell tried to reach and why it could not.
 */
#include "supervisor/agent/agent_int.h"

#include "common/log.h"
#include "supervisor/cells/journal.h"
#include "supervisor/egress/egress.h"
#include "supervisor/text/jsonf.h"

static const char *const what_names[] = { "allowed", "refused", "closed",
	"held" };
static const char *const by_names[] = { "policy", "operator", "timeout" };

void
agent_net(void *ctx, const struct egress_event *ev)
{
	struct agent *a = ctx;
	const struct cell *c = a->runner != NULL ?
	    runner_current(a->runner) : NULL;
	int closed = ev->what == EGRESS_CLOSED;
	int decided = ev->what == EGRESS_ALLOWED || ev->what == EGRESS_REFUSED;
	struct jf f[] = { JF_S("what", what_names[ev->what]),
	    decided ? JF_S("by", by_names[ev->by]) : JF_SKIP,
	    JF_I("conn", ev->id), JF_S("method", ev->method),
	    JF_S("host", ev->host), JF_I("port", ev->port),
	    ev->addr[0] ? JF_S("addr", ev->addr) : JF_SKIP,
	    ev->entry != NULL ? JF_S("entry", ev->entry) : JF_SKIP,
	    ev->reason != NULL ? JF_S("reason", ev->reason) : JF_SKIP,
	    c != NULL ? JF_I("cell", c->n) : JF_SKIP,
	    closed ? JF_I("up", ev->up) : JF_SKIP,
	    closed ? JF_I("down", ev->down) : JF_SKIP,
	    closed ? JF_R("seconds", ev->seconds) : JF_SKIP, JF_END };

	if (ev->what == EGRESS_HELD) {
		log_info("network: %s %s:%u waits for the operator's approval "
		    "(agentz ctl RUN approve [--always] %llu, or reject %llu)",
		    ev->method, ev->host, ev->port, (unsigned long long)ev->id,
		    (unsigned long long)ev->id);
		agent_ev_status(a, "waiting for approval: %s:%u (#%llu)",
		    ev->host, ev->port, (unsigned long long)ev->id);
	} else if (ev->what == EGRESS_REFUSED)
		log_info("network: refused %s %s:%u: %s", ev->method[0] ?
		    ev->method : "a connection", ev->host[0] ? ev->host : "-",
		    ev->port, ev->reason);
	else
		log_debug("network: %s %s %s:%u%s%s", what_names[ev->what],
		    ev->method, ev->host, ev->port, ev->addr[0] ? " at " : "",
		    ev->addr);
	/* many connections a second must not wait for the disk each: the
	 * cell's record, synced, covers them (held ones wait for the
	 * operator: synced at once) */
	journal_lazy(a->journal, ev->what != EGRESS_HELD);
	(void)agent_record(a, "egress", f);
	journal_lazy(a->journal, 0);
	agent_ev_net(a, ev);
}
