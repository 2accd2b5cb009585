/*
 * reload.c - the run's budgets re-read at the operator's word
 * (`agentz ctl NAME budgets OPTIONS`, which the unit's ExecReload= runs
 * with the options file's $AGENTZ_OPTS, so `systemctl reload` re-reads
 * them; see agent_int.h).
 *
 * The options are parsed as the command line is; only the budgets are
 * taken (--max-cells, --deadline, --max-tokens, --max-cost,
 * --max-same-failure, --max-parallel-calls, and --max-egress-bytes in a
 * run with the egress proxy), each replaced, an absent one
 * back to its default: re-reading the file means what it says now. They
 * are checked where they always are (cells and failures when a cell ends;
 * tokens, cost and the deadline also before and during each model call);
 * the run deadline's timer is re-armed at once. The budgets taken are
 * journaled ("budgets", with who set them) and told to the observers; a
 * run resumed from the journal keeps the last ones journaled.
 */
#include "supervisor/agent/agent_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/size.h"
#include "supervisor/cells/past.h"
#include "supervisor/egress/egress.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/jsonf.h"

#define WORDS_MAX 64

/* The run's egress proxy (--network proxy), or NULL. */
static struct egress *
proxy(const struct agent *a)
{
	return a->runner != NULL ? runner_egress(a->runner) : NULL;
}

/* Splits the options at blanks, as systemd splits $AGENTZ_OPTS, into
 * argv after "agentz"; the words live in buf. The count, or -1. */
static int
split(char *buf, char **argv, int max)
{
	char *save, *w;
	int n = 1;

	argv[0] = (char *)(uintptr_t)"agentz";
	for (w = strtok_r(buf, " \t", &save); w != NULL;
	    w = strtok_r(NULL, " \t", &save)) {
		if (n == max - 1)
			return -1;
		argv[n++] = w;
	}
	argv[n] = NULL;
	return n;
}

static char *
refuse(const char *why, int *ok)
{
	struct jf f[] = { JF_B("ok", 0), JF_S("error", why), JF_END };

	*ok = 0;
	return jf_dumps(f, NULL);
}

/* The budgets now, in the log line what says. */
static void
log_budgets(const struct agent *a, const char *what)
{
	char secs[32], usd[32], egress[64] = "";

	size_plain(a->cfg.deadline, secs, sizeof secs);
	size_plain(a->cfg.max_cost, usd, sizeof usd);
	if (proxy(a) != NULL)
		(void)snprintf(egress, sizeof egress, " --max-egress-bytes "
		    "%llu", (unsigned long long)egress_max_bytes(proxy(a)));
	log_info("%s: --max-cells %u --deadline %s --max-tokens %lld "
	    "--max-cost %s --max-same-failure %u%s (0: none)", what,
	    a->cfg.max_cells, secs, a->cfg.max_tokens, usd,
	    a->cfg.max_same_failure, egress);
}

/* The budgets now: {"ok": true, ...}, cells, tokens and failures whole
 * numbers, the deadline and the cost reals. */
static char *
taken(const struct agent *a, int *ok)
{
	struct jf f[] = { JF_B("ok", 1),
	    JF_I("max_cells", (int)a->cfg.max_cells),
	    JF_R("deadline", a->cfg.deadline),
	    JF_I("max_tokens", a->cfg.max_tokens),
	    JF_R("max_cost", a->cfg.max_cost),
	    JF_I("max_same_failure", (int)a->cfg.max_same_failure),
	    proxy(a) != NULL ? JF_I("max_egress_bytes",
	    (long long)egress_max_bytes(proxy(a))) : JF_SKIP, JF_END };

	*ok = 1;
	return jf_dumps(f, NULL);
}

/* The budgets now, journaled with who set them (by). */
static void
record_budgets(struct agent *a, const char *by)
{
	struct jf f[] = { JF_S("by", by),
	    JF_I("max_cells", (long long)a->cfg.max_cells),
	    JF_R("deadline", a->cfg.deadline),
	    JF_I("max_tokens", a->cfg.max_tokens),
	    JF_R("max_cost", a->cfg.max_cost),
	    JF_I("max_same_failure", (long long)a->cfg.max_same_failure),
	    JF_I("max_parallel_calls", (long long)a->cfg.max_parallel_calls),
	    proxy(a) != NULL ? JF_I("max_egress_bytes",
	    (long long)egress_max_bytes(proxy(a))) : JF_SKIP,
	    JF_R("at", loop_wall()), JF_END };

	(void)agent_record(a, "budgets", f);
	agent_ev_budgets(a, by);
}

/* Takes c's budgets; NULL, or why they cannot be kept. */
static const char *
take(struct agent *a, const struct agent_config *c, int nargs)
{
	if (nargs != 0)
		return "budgets takes options only (e.g. --max-cells 40)";
	if (c->max_cost > 0 && !a->priced)
		return "--max-cost needs the price of the run's model, which "
		    "it has none of (--price at its start)";
	if (c->runner.max_egress_bytes > 0 && proxy(a) == NULL)
		return "--max-egress-bytes needs the egress proxy, which this "
		    "run has not (--network proxy at its start)";
	if (c->runner.max_egress_bytes > (uint64_t)LLONG_MAX)
		return "--max-egress-bytes is too large to journal";
	a->cfg.max_cells = c->max_cells;
	a->cfg.deadline = c->deadline;
	a->cfg.max_tokens = c->max_tokens;
	a->cfg.max_cost = c->max_cost;
	a->cfg.max_same_failure = c->max_same_failure;
	a->cfg.max_parallel_calls = c->max_parallel_calls;
	if (proxy(a) != NULL) {
		egress_set_max_bytes(proxy(a), c->runner.max_egress_bytes);
		a->cfg.runner.max_egress_bytes = c->runner.max_egress_bytes;
	}
	agent_start_deadline(a);
	record_budgets(a, "operator");
	return NULL;
}

/* The reply's JSON text (malloc'ed, NULL when out of memory); *ok 1 when
 * the budgets were taken, 0 when refused (the reply says why). */
char *
agent_op_budgets(struct agent *a, const char *opts, size_t len, int *ok)
{
	char *buf = strndup(opts, len), *argv[WORDS_MAX];
	const char *no = NULL;
	struct agent_config c;
	int argc, nargs = 0;

	if (buf == NULL)
		return refuse("out of memory", ok);
	if ((argc = split(buf, argv, WORDS_MAX)) < 0) {
		free(buf);
		return refuse("too many words", ok);
	}
	/* a bad option is said on the run's stderr, by the usual parser */
	memset(&c, 0, sizeof c);
	if (a->cfg.reparse(argc, argv, &c, &nargs) != 0)
		no = "not options agentz takes (the run's log says which)";
	else
		no = take(a, &c, nargs);
	free(buf);
	if (no != NULL)
		return refuse(no, ok);
	log_budgets(a, "budgets re-read");
	return taken(a, ok);
}

/*
 * --resume: the budgets the operator set last (a "budgets" record) hold
 * over the ones given on the command line: the run keeps what it was
 * told. A cost budget without the model's price cannot be kept (said).
 * The egress budget is the proxy's, which does not exist yet: netops.c
 * takes it (agent_net_resume).
 */
void
agent_resume_budgets(struct agent *a, const struct journal_past *p)
{
	struct past_budgets b;

	if (!journal_past_budgets(p, &b))
		return;
	a->cfg.max_cells = b.max_cells > 0 ? (unsigned)b.max_cells : 0;
	a->cfg.deadline = b.deadline > 0 ? b.deadline : 0;
	a->cfg.max_tokens = b.max_tokens > 0 ? b.max_tokens : 0;
	if (b.max_cost > 0 && !a->priced)
		log_warnx("--resume: the journaled --max-cost is not kept: "
		    "no price is known for the model %s", a->cfg.model);
	else
		a->cfg.max_cost = b.max_cost > 0 ? b.max_cost : 0;
	if (b.max_same_failure >= 0)
		a->cfg.max_same_failure = (unsigned)b.max_same_failure;
	if (b.max_parallel_calls > 0)
		a->cfg.max_parallel_calls = (unsigned)b.max_parallel_calls;
	log_budgets(a, "--resume: the budgets set by the operator (agentz ctl "
	    "budgets) hold");
}
