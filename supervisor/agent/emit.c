/*
 * emit.c - what the agent run tells its observers (observe.h): each
 * agent_ev_* builds the payload from the run's state and calls every
 * registered observer that has a callback for it, in their order (see
 * agent_int.h).
 */
#include "supervisor/agent/agent_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/loop/loop.h"
#include "supervisor/run/runner.h"

/* Calls ev of every observer of a that has one, with the given arguments
 * after its ctx. */
#define EMIT(a, ev, ...) do {						\
	size_t i_;							\
	for (i_ = 0; i_ < (a)->nobs; i_++)				\
		if ((a)->obs[i_].ev != NULL)				\
			(a)->obs[i_].ev((a)->obs[i_].ctx, __VA_ARGS__);	\
} while (0)

#define EMIT0(a, ev) do {						\
	size_t i_;							\
	for (i_ = 0; i_ < (a)->nobs; i_++)				\
		if ((a)->obs[i_].ev != NULL)				\
			(a)->obs[i_].ev((a)->obs[i_].ctx);		\
} while (0)

/* --- the run's life ------------------------------------------------------- */

void
agent_ev_attach(struct agent *a)
{
	EMIT(a, attach, a->loop, a->red);
}

void
agent_ev_live(struct agent *a, int (*alive)(void *))
{
	EMIT(a, live, a->loop, alive, a);
}

void
agent_ev_ready(struct agent *a)
{
	EMIT0(a, ready);
}

void
agent_ev_run_over(struct agent *a)
{
	EMIT0(a, run_over);
}

void
agent_ev_stopping(struct agent *a)
{
	EMIT0(a, stopping);
}

void
agent_ev_detach(struct agent *a)
{
	EMIT0(a, detach);
}

void
agent_ev_run_start(const struct agent *a)
{
	struct agent_run_info r;

	memset(&r, 0, sizeof r);
	r.cfg = &a->cfg;
	r.task = a->task;
	r.price = a->priced ? &a->price : NULL;
	if (a->runner != NULL) {
		r.isolation = runner_isolation(a->runner);
		r.containment = runner_containment(a->runner);
		r.network = runner_network(a->runner);
	}
	r.workspace = a->view.workspace;
	EMIT(a, run_start, &r);
}

static void
totals(const struct agent *a, struct agent_totals *t, char *note, size_t n)
{
	t->tokens = agent_tokens(a);
	t->tokens_estimated = a->tokens_est;
	t->cost = agent_cost_usd(a);
	t->cost_note = agent_cost_note(a, note, n);
	t->cells = a->runner != NULL ? (unsigned)runner_cells(a->runner)->n :
	    0;
	t->failures = a->failures;
}

void
agent_ev_run_end(const struct agent *a, int rc)
{
	struct agent_totals t;
	char note[48];
	const char *why = a->stop_reason;

	/* a usage error (the set-up refused) was said in one log line */
	if (why == NULL && rc == EXIT_USAGE)
		why = log_last_warning();
	totals(a, &t, note, sizeof note);
	EMIT(a, run_end, rc, why, &t);
}

void
agent_ev_stop(const struct agent *a, int rc, const char *why)
{
	EMIT(a, stop, rc, why);
}

void
agent_ev_status(const struct agent *a, const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	EMIT(a, status, line);
}

/* --- cells ---------------------------------------------------------------- */

void
agent_ev_cell_start(const struct agent *a, const struct cell *c)
{
	EMIT(a, cell_start, c);
}

void
agent_ev_cell_end(const struct agent *a, const struct cell *c)
{
	struct agent_totals t;
	char note[48];

	totals(a, &t, note, sizeof note);
	EMIT(a, cell_end, c, &t);
}

void
agent_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	struct agent *a = ctx;

	EMIT(a, output, c, stream, p, n);
}

void
agent_ev_kill(void *ctx, const struct cell *c, enum ladder_step step,
    const char *why)
{
	struct agent *a = ctx;

	EMIT(a, kill, c, step, why);
}

void
agent_ev_repair(const struct agent *a, const struct cell *failed)
{
	EMIT(a, repair, failed, a->recovery_for, a->failures);
}

/* --- model requests ------------------------------------------------------- */

void
agent_ev_request_start(struct agent *a, struct agent_req *q, uint32_t cell,
    const char *purpose, int stream)
{
	memset(q, 0, sizeof *q);
	q->n = ++a->requests;
	q->cell = cell;
	q->purpose = purpose;
	q->t0_us = loop_now_us();
	EMIT(a, request_start, q, stream);
}

void
agent_ev_request_end(const struct agent *a, const struct agent_req *q,
    const char *type, const char *msg)
{
	EMIT(a, request_end, q, type, msg);
}

void
agent_ev_streaming(const struct agent *a, size_t delta_bytes)
{
	EMIT(a, streaming, delta_bytes);
}

void
agent_ev_totals(const struct agent *a)
{
	EMIT(a, totals, agent_tokens(a), agent_cost_usd(a));
}

void
agent_ev_outage(const struct agent *a, const struct model_outage *o,
    const char *what)
{
	EMIT(a, outage, o, agent_call_req(a, o->call), what);
}

void
agent_ev_net(const struct agent *a, const struct egress_event *ev)
{
	EMIT(a, net, ev);
}

void
agent_ev_operator(const struct agent *a)
{
	EMIT(a, operator, a->paused, a->notes_pending);
}

void
agent_ev_budgets(const struct agent *a, const char *by)
{
	EMIT(a, budgets, &a->cfg, by);
}
