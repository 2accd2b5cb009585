/*
 * netops.c - the operator's hand on the egress policy through the
 * control socket: `agentz ctl RUN allow HOST`, `deny HOST` (an entry
 * added now, journaled as an "egress_policy" record with the whole policy, and
 * said on stderr), `network` (the network, its policy, the live
 * connections), and the answers to a held connection (--network-ask):
 * `approve [--always] ID`, `reject ID`. Connections already open keep
 * their verdict.
 */
#include "supervisor/agent/agent_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/cells/past.h"
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
	(void)agent_record(a, "egress_policy", (struct jf[]){ JF_S("command",
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

/* "[--always] ID" or "ID" (a leading '#' allowed): 0, or -1. */
static int
approval_id(const struct ctl_req *q, int allow_always, int *always,
    uint64_t *id)
{
	char arg[64], *p = arg, *end;
	unsigned long long v;

	*always = 0;
	if (q->arg_len >= sizeof arg)
		return -1;
	memcpy(arg, q->arg, q->arg_len);
	arg[q->arg_len] = '\0';
	if (allow_always && strncmp(p, "--always", 8) == 0 &&
	    (p[8] == ' ' || p[8] == '\t')) {
		*always = 1;
		p += 9;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	if (*p == '#')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0)
		return -1;
	*id = v;
	return 0;
}

static char *
answer_approval(struct agent *a, const struct ctl_req *q, int approve,
    int *ok)
{
	struct egress *e = a->runner != NULL ? runner_egress(a->runner) : NULL;
	char why[200];
	uint64_t id;
	int always, rc;

	if (e == NULL)
		return no_proxy(a, ok);
	if (approval_id(q, approve, &always, &id) < 0) {
		(void)snprintf(why, sizeof why, "expected %s, got '%.*s'",
		    approve ? "[--always] ID" : "ID", (int)(q->arg_len > 60 ?
		    60 : q->arg_len), q->arg);
		return answer((struct jf[]){ JF_B("ok", 0), JF_S("error", why),
		    JF_END }, 0, ok);
	}
	rc = approve ? egress_approve(e, id, always) : egress_reject(e, id);
	if (rc < 0) {
		(void)snprintf(why, sizeof why, "no connection #%llu waits for "
		    "approval", (unsigned long long)id);
		return answer((struct jf[]){ JF_B("ok", 0), JF_S("error", why),
		    JF_END }, 0, ok);
	}
	log_info("network: the operator %s connection #%llu%s", approve ?
	    "approved" : "rejected", (unsigned long long)id, always ?
	    " (and its host:port from now on)" : "");
	if (always)
		(void)agent_record(a, "egress_policy", (struct jf[]){
		    JF_S("command", "approve --always"), JF_I("conn", id),
		    JF_S("entry", egress_last_always(e)),
		    JF_S("policy", runner_network_desc(a->runner)), JF_END });
	return answer((struct jf[]){ JF_B("ok", 1), JF_END }, 1, ok);
}

char *
agent_op_approve(struct agent *a, const struct ctl_req *q, int *ok)
{
	return answer_approval(a, q, 1, ok);
}

char *
agent_op_reject(struct agent *a, const struct ctl_req *q, int *ok)
{
	return answer_approval(a, q, 0, ok);
}

unsigned
agent_net_waiting(struct agent *a, char *buf, size_t len)
{
	struct egress *e = a->runner != NULL ? runner_egress(a->runner) : NULL;

	if (len > 0)
		buf[0] = '\0';
	return e != NULL ? egress_held(e, buf, len) : 0;
}

void
agent_net_resume(struct agent *a)
{
	struct egress *e = a->runner != NULL ? runner_egress(a->runner) : NULL;
	struct past_budgets b;
	const char *cmd, *entry;
	char err[400];
	size_t i, n = 0;
	uint64_t before;
	int deny;

	/* the budget the operator set last holds, and it counts the whole
	 * run's bytes, not this process's */
	if (e != NULL && a->past != NULL) {
		if (journal_past_budgets(a->past, &b) &&
		    b.max_egress_bytes >= 0) {
			egress_set_max_bytes(e, (uint64_t)b.max_egress_bytes);
			a->cfg.runner.max_egress_bytes =
			    (uint64_t)b.max_egress_bytes;
			log_info("--resume: the egress budget set by the "
			    "operator holds: --max-egress-bytes %lld (0: none)",
			    b.max_egress_bytes);
		}
		if ((before = journal_past_egress_bytes(a->past)) > 0) {
			egress_count_before(e, before);
			log_info("--resume: %llu bytes went through the egress "
			    "proxy before; they count against "
			    "--max-egress-bytes", (unsigned long long)before);
		}
	}
	for (i = 0; a->past != NULL &&
	    journal_past_egress(a->past, i, &cmd, &entry); i++) {
		if (cmd == NULL || entry == NULL)
			continue;
		deny = strcmp(cmd, "deny") == 0;
		if (e == NULL) {
			log_warnx("--resume: the operator's egress policy "
			    "changes do not hold: this run's network is %s",
			    a->runner != NULL ? runner_network(a->runner) :
			    "not set up");
			return;
		}
		if (egress_policy_edit(e, deny, 0, entry, err,
		    sizeof err) == 0)
			n++;
		else
			log_warnx("--resume: a journaled egress entry is refused: "
			    "%s", err);
	}
	if (n > 0)
		log_info("--resume: the operator's %zu egress policy change%s "
		    "hold: %s", n, n == 1 ? "" : "s",
		    runner_network_desc(a->runner));
}
