/*
 * agentev.c - the agent run's observer that writes its event stream
 * (`agentz --json`, events.h; the schema is docs/operating.md's "The
 * event stream"): the run's start and end, stops, cells, kills (and who
 * ended the cell), repairs, the operator's budgets, model requests and
 * outage waits. Nothing is built while the stream is off
 * (see listen.h).
 */
#include "supervisor/ui/listen.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "supervisor/agent/agent.h"
#include "supervisor/cells/cells.h"
#include "supervisor/egress/egress.h"
#include "supervisor/loop/loop.h"
#include "supervisor/ui/events.h"

static struct {
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
run_options(const struct agent_config *c, const struct ui_opts *u)
{
	return json_pack("{s:f, s:f, s:f, s:I, s:i, s:f, s:I, s:I}",
	    "cell_timeout", c->cell_timeout, "grace", c->grace,
	    "request_timeout", c->request_timeout, "max_output_tokens",
	    (json_int_t)c->max_output_tokens, "max_retries",
	    (int)c->max_retries, "outage_patience", c->outage_patience,
	    "output_limit", (json_int_t)u->output_limit, "memory_limit",
	    (json_int_t)c->memory_limit);
}

/* The run's budgets; max_egress_bytes is null without the egress proxy
 * (ctl refuses one there) or with none set. */
static json_t *
run_limits(const struct agent_config *c)
{
	uint64_t egress = c->runner.max_egress_bytes;

	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "max_cells", int_or_null(c->max_cells), "deadline",
	    num_or_null(c->deadline), "max_tokens", int_or_null(c->max_tokens),
	    "max_cost", num_or_null(c->max_cost), "max_same_failure",
	    int_or_null(c->max_same_failure), "max_restarts",
	    int_or_null(c->max_restarts), "max_egress_bytes",
	    int_or_null(egress > LLONG_MAX ? LLONG_MAX : (long long)egress));
}

static json_t *
run_sandbox(const struct agent_run_info *r, const struct ui_opts *u)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "seccomp",
	    events_str(u->seccomp), "isolation_mode",
	    events_str(u->isolation_mode), "isolation",
	    events_str(r->isolation), "containment",
	    events_str(r->containment), "network",
	    events_str(r->network), "workspace",
	    events_str(r->workspace));
}

static void
ev_run_start(void *ctx, const struct agent_run_info *r)
{
	const struct ui_opts *u = ctx;
	const struct agent_config *c = r->cfg;
	json_t *price = r->price != NULL ? json_pack("{s:f, s:f, s:f}",
	    "input", r->price->input, "cached", r->price->cached, "output",
	    r->price->output) : json_null();
	char *base;

	aev.started = loop_wall();
	if (!events_enabled()) {
		json_decref(price);
		return;
	}
	/* user:password@ is never said */
	base = model_url_shown(c->base_url);
	events_emit("run_start", json_pack("{s:o, s:o, s:o, s:o, s:b, s:o, "
	    "s:i, s:o, s:o, s:o, s:o}", "task", events_str(r->task), "model",
	    events_str(c->model), "base_url", events_str(base != NULL ? base :
	    c->base_url),
	    "service_tier", events_str(c->service_tier), "resume",
	    c->resume, "journal", events_str(c->journal), "pid",
	    (int)getpid(), "options", run_options(c, u), "limits",
	    run_limits(c), "price", price, "sandbox", run_sandbox(r, u)));
	free(base);
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

static void
ev_stop(void *ctx, int rc, const char *why)
{
	(void)ctx;
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

static void
ev_run_end(void *ctx, int rc, const char *reason,
    const struct agent_totals *t)
{
	if (!events_enabled())
		return;
	ev_stop(ctx, rc, reason);	/* a signal has not said */
	events_emit("run_end", json_pack("{s:i, s:o, s:I, s:I, s:I, s:o, "
	    "s:i, s:f}", "exit", rc, "reason", events_str(reason), "cells",
	    (json_int_t)t->cells, "tokens", (json_int_t)t->tokens,
	    "tokens_estimated", (json_int_t)t->tokens_estimated, "cost",
	    t->cost >= 0 ? json_real(t->cost) : json_null(), "failures",
	    (int)t->failures, "duration", aev.started > 0 ? loop_wall() -
	    aev.started : 0.0));
}

static void
ev_cell_start(void *ctx, const struct cell *c)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("cell_start", json_pack("{s:i, s:o, s:o, s:o, s:b}",
	    "cell", (int)c->n, "code", events_strn(c->code, c->code_len),
	    "summary", events_str(c->summary), "generated_by",
	    c->generated_by >= 0 ? json_integer(c->generated_by) : json_null(),
	    "repair",
	    c->summary != NULL && strcmp(c->summary, RECOVERY_SUMMARY) == 0));
}

static void
ev_cell_end(void *ctx, const struct cell *c, const struct agent_totals *t)
{
	(void)ctx;
	(void)t;
	if (events_enabled())
		events_cell_end(c);
}

/* The kill event's "stage" for a step of the ladder (the steps before
 * the deadline are never told). */
static const char *
kill_stage(enum ladder_step step)
{
	switch (step) {
	case LADDER_INTERRUPTED:
		return "interrupt";
	case LADDER_DUMPING:
		return "stack_dump";
	case LADDER_KILLED:
		return "kill";
	case LADDER_OFF:
	case LADDER_ARMED:
		break;
	}
	return "none";
}

static void
ev_kill(void *ctx, const struct cell *c, enum ladder_step step,
    const char *why)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("kill", json_pack("{s:i, s:s, s:o, s:o}", "cell",
	    (int)c->n, "stage", kill_stage(step), "reason", events_str(why),
	    "ended_by", events_str(c->ended_by)));
}

static void
ev_budgets(void *ctx, const struct agent_config *c, const char *by)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("budgets", json_pack("{s:o, s:o}", "by", events_str(by),
	    "limits", run_limits(c)));
}

static void
ev_repair(void *ctx, const struct cell *failed, uint32_t next,
    unsigned failures)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("repair", json_pack("{s:i, s:i, s:s, s:s?, s:o, s:o, "
	    "s:i}", "cell", (int)failed->n, "next_cell", (int)next,
	    "status", cells_status_name(failed->status), "kind",
	    cells_kind_name(failed->kind), "exception_type",
	    events_str(failed->exception_type), "detail",
	    events_str(failed->detail), "failures", (int)failures));
}

/* --- model requests ----------------------------------------------------------- */

static void
ev_request_start(void *ctx, const struct agent_req *q, int stream)
{
	(void)ctx;
	if (!events_enabled())
		return;
	events_emit("model_request_start", json_pack("{s:I, s:i, s:s, s:b}",
	    "request", (json_int_t)q->n, "cell", (int)q->cell, "purpose",
	    q->purpose, "stream", stream));
}

static json_t *
request_error(const char *type, const char *msg)
{
	return type != NULL ? json_pack("{s:s, s:o}", "type", type, "message",
	    events_str(msg)) : json_null();
}

static void
ev_request_end(void *ctx, const struct agent_req *q, const char *type,
    const char *msg)
{
	const struct model_call_stats *s = &q->st;

	(void)ctx;
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

static void
ev_outage(void *ctx, const struct model_outage *o, const struct agent_req *q,
    const char *what)
{
	json_t *f;

	(void)ctx;
	(void)what;
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
		if (o->hint != NULL)	/* nothing ever answered */
			(void)json_object_set_new(f, "hint",
			    events_str(o->hint));
		events_emit("outage_wait_start", f);
		return;
	}
	(void)json_object_set_new(f, "outcome", json_string(o->over > 0 ?
	    "answered" : "gave_up"));
	events_emit("outage_wait_end", f);
}

static const char *const net_what[] = { "allowed", "refused", "closed",
	"held" };
static const char *const net_by[] = { "policy", "operator", "timeout" };

static void
ev_net(void *ctx, const struct egress_event *e)
{
	json_t *f;

	(void)ctx;
	if (!events_enabled())
		return;
	f = json_pack("{s:s, s:I, s:s, s:s, s:i, s:o, s:o, s:o}", "what",
	    net_what[e->what], "conn", (json_int_t)e->id, "method", e->method, "host",
	    e->host, "port", (int)e->port, "addr", events_str(e->addr[0] ?
	    e->addr : NULL), "entry", events_str(e->entry), "reason",
	    events_str(e->reason));
	if (f != NULL && (e->what == EGRESS_ALLOWED ||
	    e->what == EGRESS_REFUSED))
		(void)json_object_set_new(f, "by", json_string(net_by[e->by]));
	if (f != NULL && e->what == EGRESS_CLOSED) {
		(void)json_object_set_new(f, "up", json_integer((json_int_t)
		    e->up));
		(void)json_object_set_new(f, "down", json_integer((json_int_t)
		    e->down));
		(void)json_object_set_new(f, "seconds", json_real(e->seconds));
	}
	events_emit(e->what == EGRESS_HELD ? "network_approval" : "egress", f);
}

/* --- the observer --------------------------------------------------------- */

static void
ev_attach(void *ctx, struct loop *l, const struct redact *red)
{
	const struct ui_opts *u = ctx;

	(void)l;
	if (u->json)		/* stdout is the event stream's */
		events_start(red);
}

static void
ev_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	(void)ctx;
	/* a stalled reader loses only the live copy: the record keeps it */
	if (events_enabled())
		events_cell_output(c != NULL ? (long)c->n : -1, stream, p, n);
}

void
ui_events_observer(struct agent_observer *o, const struct ui_opts *u)
{
	memset(o, 0, sizeof *o);
	o->ctx = (void *)(uintptr_t)u;
	o->attach = ev_attach;
	o->run_start = ev_run_start;
	o->cell_start = ev_cell_start;
	o->output = ev_output;
	o->cell_end = ev_cell_end;
	o->kill = ev_kill;
	o->repair = ev_repair;
	o->budgets = ev_budgets;
	o->request_start = ev_request_start;
	o->request_end = ev_request_end;
	o->outage = ev_outage;
	o->stop = ev_stop;
	o->run_end = ev_run_end;
	o->net = ev_net;
}
