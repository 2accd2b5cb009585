/*
 * agentev.c - what the agent run tells its event stream (`agentz --json`,
 * front/events.h; the schema is README.md's "The event stream"): the
 * run's start and end, stops, cells, kills, repairs, model requests and
 * outage waits, each built from the run's state. Nothing is built while
 * the stream is off (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "supervisor/cells/record_json.h"
#include "supervisor/front/config.h"
#include "supervisor/front/events.h"
#include "supervisor/loop/loop.h"
#include "supervisor/run/runner.h"

static struct {
	uint64_t requests;	/* numbers given so far */
	double started;		/* wall clock of run_start */
	int stopped;		/* a stop event went out */
} aev;

/* A number, or null for "none" (a limit of 0). */
static json_t *
num_or_null(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

static json_t *
int_or_null(long long v)
{
	return v > 0 ? json_integer(v) : json_null();
}

static json_t *
run_options(const struct config *c)
{
	return json_pack("{s:f, s:f, s:f, s:I, s:i, s:f, s:I, s:I}",
	    "cell_timeout", c->cell_timeout, "grace", c->grace,
	    "request_timeout", c->request_timeout, "max_output_tokens",
	    (json_int_t)c->max_output_tokens, "max_retries",
	    (int)c->max_retries, "outage_patience", c->outage_patience,
	    "output_limit", (json_int_t)c->output_limit, "memory_limit",
	    (json_int_t)c->memory_limit);
}

static json_t *
run_limits(const struct config *c)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
	    "max_cells", int_or_null(c->max_cells), "deadline",
	    num_or_null(c->deadline), "max_tokens", int_or_null(c->max_tokens),
	    "max_cost", num_or_null(c->max_cost), "max_same_failure",
	    int_or_null(c->max_same_failure), "max_restarts",
	    int_or_null(c->max_restarts));
}

static json_t *
run_sandbox(const struct agent *a)
{
	const struct runner *r = a->runner;

	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "seccomp",
	    events_str(config_sandbox_name(a->cfg.sandbox)), "isolation_mode",
	    events_str(config_isolation_name(a->cfg.isolation)), "isolation", events_str(r != NULL ?
	    runner_isolation(r) : NULL), "containment", events_str(r != NULL ?
	    runner_containment(r) : NULL), "workspace",
	    events_str(a->view.workspace));
}

void
agent_ev_run_start(const struct agent *a)
{
	json_t *price = a->priced ? json_pack("{s:f, s:f, s:f}", "input",
	    a->price.input, "cached", a->price.cached, "output",
	    a->price.output) : json_null();

	aev.started = loop_wall();
	if (!events_enabled()) {
		json_decref(price);
		return;
	}
	events_emit("run_start", json_pack("{s:o, s:o, s:o, s:o, s:b, s:o, "
	    "s:i, s:o, s:o, s:o, s:o}", "task", events_str(a->task), "model",
	    events_str(a->cfg.model), "base_url", events_str(a->cfg.base_url),
	    "service_tier", events_str(a->cfg.service_tier), "resume",
	    a->cfg.resume, "journal", events_str(a->cfg.journal), "pid",
	    (int)getpid(), "options", run_options(&a->cfg), "limits",
	    run_limits(&a->cfg), "price", price, "sandbox", run_sandbox(a)));
}

/* What kind of stop an exit status is. */
static const char *
stop_kind(int rc)
{
	switch (rc) {
	case EXIT_OK:
		return "quit";
	case EXIT_FAILED:
		return "failures";
	case EXIT_USAGE:
		return "usage";
	case EXIT_WORKER:
		return "worker";
	case EXIT_BUDGET:
		return "budget";
	case EXIT_JOURNAL:
		return "journal";
	case EXIT_SIGINT:
		return "interrupted";
	case EXIT_OPERATOR:
		return "operator";
	default:
		return rc > 128 ? "signal" : "other";
	}
}

void
agent_ev_stop(int rc, const char *why)
{
	if (aev.stopped)
		return;
	aev.stopped = 1;
	if (why == NULL && rc == EXIT_OK)
		why = "quit()";
	else if (why == NULL && rc > 128)
		why = rc == EXIT_SIGINT ? "interrupted (SIGINT)" :
		    "stopped by a signal";
	events_emit(rc == EXIT_BUDGET ? "budget_stop" : "stop", json_pack(
	    "{s:i, s:s, s:o}", "exit", rc, "kind", stop_kind(rc), "reason",
	    events_str(why)));
}

void
agent_ev_run_end(const struct agent *a, int rc)
{
	double cost = agent_cost_usd(a);

	if (!events_enabled())
		return;
	agent_ev_stop(rc, a->stop_reason);	/* a signal has not said */
	events_emit("run_end", json_pack("{s:i, s:o, s:I, s:I, s:I, s:o, "
	    "s:i, s:f}", "exit", rc, "reason", events_str(a->stop_reason),
	    "cells",
	    (json_int_t)(a->runner != NULL ? runner_cells(a->runner)->n : 0),
	    "tokens", (json_int_t)agent_tokens(a), "tokens_estimated",
	    (json_int_t)a->tokens_est, "cost", cost >= 0 ? json_real(cost) :
	    json_null(), "failures", (int)a->failures, "duration",
	    aev.started > 0 ? loop_wall() - aev.started : 0.0));
}

void
agent_ev_cell_start(const struct cell *c)
{
	if (!events_enabled())
		return;
	events_emit("cell_start", json_pack("{s:i, s:o, s:o, s:o, s:b}",
	    "cell", (int)c->n, "code", events_strn(c->code, c->code_len),
	    "summary", events_str(c->summary), "generated_by",
	    c->generated_by >= 0 ? json_integer(c->generated_by) : json_null(),
	    "repair",
	    c->summary != NULL && strcmp(c->summary, RECOVERY_SUMMARY) == 0));
}

void
agent_ev_cell_end(const struct cell *c)
{
	if (events_enabled())
		events_cell_end(cells_json(c));
}

void
agent_ev_kill(void *ctx, const struct cell *c, const char *stage,
    const char *why)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("kill", json_pack("{s:i, s:s, s:o}", "cell", (int)c->n,
	    "stage", stage, "reason", events_str(why)));
}

void
agent_ev_repair(const struct agent *a, const struct cell *failed)
{
	if (!events_enabled())
		return;
	events_emit("repair", json_pack("{s:i, s:i, s:s, s:s?, s:o, s:o, "
	    "s:i}", "cell", (int)failed->n, "next_cell", (int)a->recovery_for,
	    "status", cells_status_name(failed->status), "kind",
	    cells_kind_name(failed->kind), "exception_type",
	    events_str(failed->exception_type), "detail",
	    events_str(failed->detail), "failures", (int)a->failures));
}

/* --- model requests ----------------------------------------------------------- */

void
agent_ev_request_start(struct agent_req *q, uint32_t cell,
    const char *purpose, int stream)
{
	memset(q, 0, sizeof *q);
	q->n = ++aev.requests;
	q->cell = cell;
	q->purpose = purpose;
	q->t0_us = loop_now_us();
	if (!events_enabled())
		return;
	events_emit("model_request_start", json_pack("{s:I, s:i, s:s, s:b}",
	    "request", (json_int_t)q->n, "cell", (int)cell, "purpose", purpose,
	    "stream", stream));
}

static json_t *
request_error(const char *type, const char *msg)
{
	return type != NULL ? json_pack("{s:s, s:o}", "type", type, "message",
	    events_str(msg)) : json_null();
}

void
agent_ev_request_end(const struct agent_req *q, const char *type,
    const char *msg)
{
	const struct model_call_stats *s = &q->st;

	if (!events_enabled())
		return;
	events_emit("model_request_end", json_pack("{s:I, s:i, s:s, s:I, s:I, "
	    "s:I, s:I, s:i, s:i, s:i, s:f, s:o}", "request", (json_int_t)q->n,
	    "cell", (int)q->cell, "purpose", q->purpose, "tokens_in",
	    (json_int_t)s->usage.input, "tokens_cached",
	    (json_int_t)s->usage.cached, "tokens_out",
	    (json_int_t)s->usage.output, "tokens_total",
	    (json_int_t)s->usage.total, "requests", (int)s->requests,
	    "retries", (int)(s->attempts > s->requests ? s->attempts -
	    s->requests : 0), "outage_tries", (int)s->outage_tries,
	    "latency_ms", (double)(loop_now_us() - q->t0_us) / 1000.0,
	    "error", request_error(type, msg)));
}

void
agent_ev_outage(const struct agent *a, const struct model_outage *o)
{
	const struct agent_req *q = agent_call_req(a, o->call);
	json_t *f;

	if (!events_enabled())
		return;
	f = json_pack("{s:o, s:o, s:I, s:f, s:f, s:f, s:i, s:o}", "request",
	    q != NULL ? json_integer((json_int_t)q->n) : json_null(), "cell",
	    q != NULL ? json_integer(q->cell) : json_null(), "call",
	    (json_int_t)o->call, "since", o->since, "waited", o->waited,
	    "patience", o->patience, "tries", (int)o->tries, "reason",
	    events_str(o->reason));
	if (o->over == 0) {
		(void)json_object_set_new(f, "next_try_in",
		    json_real(o->next_try_in));
		events_emit("outage_wait_start", f);
		return;
	}
	(void)json_object_set_new(f, "outcome", json_string(o->over > 0 ?
	    "answered" : "gave_up"));
	events_emit("outage_wait_end", f);
}
