/*
 * budget.c - the run's budgets and hard stops outside the model (SPEC section 8):
 * cells, tokens and cost (the price, estimates of calls that reported no
 * usage), the run deadline, consecutive and repeated failures
 * (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"
#include "supervisor/text/jsonf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/loop/loop.h"
#include "supervisor/model/model.h"
#include "supervisor/agent/price.h"
#include "supervisor/egress/egress.h"
#include "supervisor/run/runner.h"

#define MAX_FAILURES 3

/* Tokens of the whole run, across restarts. */
long long
agent_tokens(const struct agent *a)
{
	return a->tokens_base + a->tokens_est + (a->model != NULL ?
	    model_total_tokens(a->model) : a->tokens_final);
}

/* USD spent by the whole run, across restarts; 0 without a price. */
double
agent_cost(const struct agent *a)
{
	struct model_usage u = a->usage_final;

	if (!a->priced)
		return 0;
	if (a->model != NULL)
		model_usage(a->model, &u);
	return a->cost_base + a->cost_est + price_cost(&a->price, u.input,
	    u.cached, u.output);
}

double
agent_cost_usd(const struct agent *a)
{
	return a->priced ? agent_cost(a) : -1;
}

/* ", $0.42" for the status lines when a price is known, else "". */
const char *
agent_cost_note(const struct agent *a, char *buf, size_t n)
{
	char money[32];

	if (!a->priced)
		return "";
	(void)snprintf(buf, n, ", %s", price_format(agent_cost(a), money,
	    sizeof money));
	return buf;
}

/*
 * A model call ended: count it, and journal the run's tokens and cost. A
 * call that failed or was cut reports no usage, yet was paid for: its
 * estimate (about 4 bytes a token, sent and streamed) counts instead.
 * id: the call's journal id (calljournal.c), settled by this usage
 * record, which is then written even when the total did not move; -1:
 * none.
 */
void
agent_count_call(struct agent *a, const char *type, long long tokens_at,
    size_t bytes, long long id)
{
	long long total, est;

	if (type != NULL && a->model != NULL &&
	    model_total_tokens(a->model) == tokens_at) {
		est = (long long)(bytes + 3) / 4;
		a->tokens_est += est;
		/* which of the estimate was input is unknown: priced all as
		 * output, the dearest kind (the pessimistic choice) */
		a->cost_est += price_cost(&a->price, 0, 0, est);
	}
	total = agent_tokens(a);
	agent_ev_totals(a);
	if (total != a->tokens_journaled || id >= 0) {
		a->tokens_journaled = total;
		agent_record_usage(a, total, a->tokens_est, &id, id >= 0,
		    agent_cost(a));
	}
}

/* Stops the run once the consecutive failures reach MAX_FAILURES, saying
 * how many cells failed and how many repair requests gave no cell. */
int
agent_too_many_failures(struct agent *a, uint32_t last)
{
	unsigned asked = a->failures - a->failed_cells;
	char why[192];

	if (a->failures < MAX_FAILURES)
		return 0;
	if (asked == 0)
		(void)snprintf(why, sizeof why, "stopping: %u consecutive failed "
		    "cells (the last is cell %u)", a->failures, last);
	else
		(void)snprintf(why, sizeof why, "stopping: %u consecutive "
		    "failures: %u failed cell%s (the last is cell %u) and %u "
		    "repair request%s that gave no cell", a->failures,
		    a->failed_cells, a->failed_cells == 1 ? "" : "s", last,
		    asked, asked == 1 ? "" : "s");
	agent_stop(a, EXIT_FAILED, why);
	return 1;
}

/* What identifies a failure: kind, exception type, the traceback's last
 * line (the message), or the detail. */
char *
agent_failure_signature(const struct cell *c)
{
	const char *tb = c->traceback, *last = tb, *p;
	char *sig;
	int n = 0;

	for (p = tb; p != NULL && *p != '\0'; p++)
		if (*p == '\n' && p[1] != '\0')
			last = p + 1;
	if (last != NULL)
		n = (int)strcspn(last, "\n");
	if (asprintf(&sig, "%s|%s|%.*s|%s", cells_kind_name(c->kind) ?
	    cells_kind_name(c->kind) : "", c->exception_type ?
	    c->exception_type : "", n, last ? last : "", last == NULL &&
	    c->detail ? c->detail : "") < 0)
		return NULL;
	return sig;
}

void
agent_record_usage(struct agent *a, long long tokens, long long estimated,
    const long long *calls, size_t ncalls, double cost)
{
	struct jf f[] = { JF_I("tokens", tokens), JF_I("estimated", estimated),
	    ncalls > 0 ? JF_IA("calls", calls, ncalls) : JF_SKIP,
	    a->priced ? JF_R("cost", cost) : JF_SKIP, JF_END };

	(void)agent_record(a, "usage", f);
}

/*
 * Counts c's failure signature (a restart is not the code's failure);
 * returns how many times it was seen, 0 for a cell that did not fail.
 * The signatures seen are few (a run stops after a few failures in a
 * row): a list searched in order.
 */
long long
agent_count_failure(struct agent *a, const struct cell *c, const char *sig)
{
	struct sig_seen *grown;
	long long seen = 1;
	size_t i;

	if (c->status != CELL_ERROR || c->kind == KIND_RESTART ||
	    c->kind == KIND_STOPPED)
		return 0;
	for (i = 0; i < a->nsigs; i++)
		if (strcmp(a->sigs[i].sig, sig) == 0)
			break;
	if (i < a->nsigs) {
		seen = ++a->sigs[i].seen;
	} else if ((grown = realloc(a->sigs, (a->nsigs + 1) *
	    sizeof *grown)) != NULL) {
		a->sigs = grown;
		if ((grown[i].sig = strdup(sig)) != NULL) {
			grown[i].seen = 1;
			a->nsigs++;
		}
	}
	if (seen > (long long)a->worst_repeat)
		a->worst_repeat = (unsigned)seen;
	return seen;
}

void
agent_failures_free(struct agent *a)
{
	size_t i;

	for (i = 0; i < a->nsigs; i++)
		free(a->sigs[i].sig);
	free(a->sigs);
	a->sigs = NULL;
	a->nsigs = 0;
}

/*
 * Says in why (left alone otherwise) that the token or cost budget is
 * spent, with more tokens (estimates, which note names) counted, and by
 * how much it is exceeded; 1 when one is.
 */
static int
spent(const struct agent *a, long long more, const char *note, char *why,
    size_t n)
{
	const char *est = more > 0 ? note : "";
	long long t = agent_tokens(a) + more;
	char cost[32], budget[32], over[32];
	double usd;

	if (a->cfg.max_tokens > 0 && t >= a->cfg.max_tokens) {
		(void)snprintf(why, n, "stopping: %lld tokens used, the budget "
		    "is %lld (--max-tokens): %lld over%s", t, a->cfg.max_tokens,
		    t - a->cfg.max_tokens, est);
		return 1;
	}
	if (a->cfg.max_cost <= 0 || !a->priced)
		return 0;
	/* the estimate priced all as output, as agent_count_call does */
	usd = agent_cost(a) + price_cost(&a->price, 0, 0, more);
	if (usd < a->cfg.max_cost)
		return 0;
	(void)snprintf(why, n, "stopping: the model calls cost %s, the cost "
	    "budget (--max-cost) is %s: %s over%s", price_format(usd, cost,
	    sizeof cost), price_format(a->cfg.max_cost, budget,
	    sizeof budget), price_format(usd - a->cfg.max_cost, over,
	    sizeof over), est);
	return 1;
}

/* Says in why that the run deadline has passed, and by how much. */
static int
past_deadline(const struct agent *a, char *why, size_t n)
{
	double ran = loop_wall() - a->run_started;

	if (a->cfg.deadline <= 0 || ran < a->cfg.deadline)
		return 0;
	(void)snprintf(why, n, "stopping: the run deadline of %.0f s was "
	    "reached (--deadline): %.1f s over", a->cfg.deadline,
	    ran - a->cfg.deadline);
	return 1;
}

int
agent_budget_refuse(struct agent *a, long long more, char *why, size_t n)
{
	if (!spent(a, agent_calls_estimate(a) + more, " (counting the "
	    "estimate of the calls in flight and of the request refused)",
	    why, n) && !past_deadline(a, why, n))
		return 0;
	if (!a->stopping)	/* the first decided stop stands */
		agent_stop(a, EXIT_BUDGET, why);
	return 1;
}

int
agent_budget_watch(struct agent *a)
{
	char why[512];

	/* a stop decided (a signal's too) is not a budget's to take over */
	if (a->stopping || loop_stopped(a->loop) ||
	    !spent(a, agent_calls_estimate(a), " (calls in flight counted by "
	    "their estimate)", why, sizeof why))
		return 0;
	agent_stop(a, EXIT_BUDGET, why);
	return 1;
}

/* Stops the run (1) when a budget is spent after cell c. */
int
agent_over_budget(struct agent *a, const struct cell *c)
{
	char why[512], *sig;
	long long seen;

	why[0] = '\0';
	if (a->cfg.max_cells > 0 && runner_cells(a->runner)->n >=
	    a->cfg.max_cells)
		(void)snprintf(why, sizeof why, "stopping: the budget of %u "
		    "cells is spent", a->cfg.max_cells);
	else
		(void)spent(a, 0, "", why, sizeof why);
	if (why[0] == '\0' && a->runner != NULL &&
	    runner_egress(a->runner) != NULL &&
	    egress_spent(runner_egress(a->runner)))
		(void)snprintf(why, sizeof why, "stopping: %llu bytes went "
		    "through the egress proxy, the budget is spent "
		    "(--max-egress-bytes)", (unsigned long long)egress_bytes(
		    runner_egress(a->runner)));
	if (why[0] == '\0' && c != NULL && a->cfg.max_same_failure > 0 &&
	    (sig = agent_failure_signature(c)) != NULL) {
		seen = agent_count_failure(a, c, sig);
		if (seen >= (long long)a->cfg.max_same_failure)
			(void)snprintf(why, sizeof why, "stopping: the same failure "
			    "happened %lld times (%s)", seen, sig);
		free(sig);
	}
	if (why[0] == '\0')
		return 0;
	agent_stop(a, EXIT_BUDGET, why);
	return 1;
}

static void
on_run_deadline(struct loop *l, void *ctx)
{
	struct agent *a = ctx;
	char why[512];

	(void)l;
	a->deadline_timer = 0;
	if (!past_deadline(a, why, sizeof why))	/* the timer's rounding */
		(void)snprintf(why, sizeof why, "stopping: the run deadline of "
		    "%.0f s was reached (--deadline): 0.0 s over",
		    a->cfg.deadline);
	agent_stop(a, EXIT_BUDGET, why);
}

/* Stops (1) a resumed run whose budget was spent before the restart. */
int
agent_resume_over_budget(struct agent *a)
{
	char why[192];
	double ran = loop_wall() - a->run_started;

	if (agent_over_budget(a, NULL))
		return 1;
	if (a->cfg.max_same_failure > 0 &&
	    a->worst_repeat >= a->cfg.max_same_failure)
		(void)snprintf(why, sizeof why, "stopping: the same failure "
		    "happened %u times", a->worst_repeat);
	else if (a->cfg.deadline > 0 && ran >= a->cfg.deadline)
		(void)snprintf(why, sizeof why, "stopping: the run deadline of "
		    "%.0f s was reached (the run started %.0f s ago)",
		    a->cfg.deadline, ran);
	else
		return 0;
	agent_stop(a, EXIT_BUDGET, why);
	return 1;
}

/* (Re)arms the run deadline's timer; one already past fires at once (a
 * resumed run past it is stopped by resume_over_budget first). */
void
agent_start_deadline(struct agent *a)
{
	double left = a->cfg.deadline - (loop_wall() - a->run_started);

	loop_timer_cancel(a->loop, a->deadline_timer);
	a->deadline_timer = 0;
	if (a->cfg.deadline > 0)
		a->deadline_timer = loop_timer(a->loop, left > 0 ?
		    (uint64_t)(left * 1000.0) : 0, on_run_deadline, a);
}

/*
 * The price of the run's model: --price, else the built-in table. Without
 * one, --max-cost cannot be kept: refused (-1) before anything starts.
 */
int
agent_set_price(struct agent *a)
{
	if (a->cfg.has_price) {
		a->price = a->cfg.price;
		a->priced = 1;
	} else {
		a->priced = price_lookup(a->cfg.model, &a->price) == 0;
	}
	if (a->cfg.max_cost > 0 && !a->priced) {
		(void)fprintf(stderr, "agentz: --max-cost needs the price of the "
		    "model %s, which is not built in: give it with --price "
		    "IN,CACHED,OUT (USD per 1M input, cached input and output "
		    "tokens)\n", a->cfg.model);
		return -1;
	}
	return 0;
}
