/*
 * netops.c - the operator's hand on the egress policy through the
 * control socket: `agentz ctl RUN allow HOST`, `deny HOST` (an entry
 * added now, journaled as an "egress" record with the whole policy, and
 * said on stderr) and `network` (the network, its policy, the live
 * connections). Connections already open keep their verdict.
 */
#include "supervisor/agent/agent_int.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/egress/egress.h"
#include "supervisor/run/runner.h"
#include "supervisor/text/jsonf.h"

static char *
answer(const struct jf *f, int ok, int *said)
{
	*said = ok;
	return jf_dumps(f, NULL);
}

static char *
no_proxy(struct agent *a, int *ok)
{
	char why[200];

	(void)snprintf(why, sizeof why, "this run's network is %s, without "
	    "the egress proxy (--network proxy)", a->runner != NULL ?
	    runner_network(a->runner) : "not set up");
	return answer((struct jf[]){ JF_B("ok", 0), JF_S("error", why),
	    JF_END }, 0, ok);
}

static char *
edit(struct agent *a, const struct ctl_req *q, int deny, int *ok)
{
	struct egress *e = a->runner != NULL ? runner_egress(a->runner) : NULL;
	char entry[CTL_LINE_MAX], err[400];
	const char *policy;

	if (e == NULL)
		return no_proxy(a, ok);
	(void)snprintf(entry, sizeof entry, "%.*s", (int)q->arg_len, q->arg);
	if (egress_policy_edit(e, deny, 0, entry, err, sizeof err) < 0)
		return answer((struct jf[]){ JF_B("ok", 0), JF_S("error", err),
		    JF_END }, 0, ok);
	policy = runner_network_desc(a->runner);
	log_info("network: the operator %s %s: %s", deny ? "denied" :
	    "allowed", entry, policy);
	(void)agent_record(a, "egress", (struct jf[]){ JF_S("command",
	    deny ? "deny" : "allow"), JF_S("entry", entry),
	    JF_S("policy", policy), JF_END });
	return answer((struct jf[]){ JF_B("ok", 1), JF_S("policy", policy),
	    JF_END }, 1, ok);
}

char *
agent_op_allow(struct agent *a, const struct ctl_req *q, int *ok)
{
	return edit(a, q, 0, ok);
}

char *
agent_op_deny(struct agent *a, const struct ctl_req *q, int *ok)
{
	return edit(a, q, 1, ok);
}

char *
agent_op_network(struct agent *a, const struct ctl_req *q, int *ok)
{
	struct egress *e = a->runner != NULL ? runner_egress(a->runner) : NULL;
	char live[8192];

	(void)q;
	if (e == NULL)
		return answer((struct jf[]){ JF_B("ok", 1), JF_S("network",
		    a->runner != NULL ? runner_network(a->runner) : "none"),
		    JF_END }, 1, ok);
	egress_list(e, live, sizeof live);
	return answer((struct jf[]){ JF_B("ok", 1), JF_S("network", "proxy"),
	    JF_S("policy", runner_network_desc(a->runner)),
	    JF_I("live", egress_live(e)), JF_S("connections", live),
	    JF_END }, 1, ok);
}
