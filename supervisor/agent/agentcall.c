/*
 * agentcall.c - call_me requests from cells: a model call per request,
 * the list of those in flight (each cancelled with its cell or its
 * worker), the answer or error back to the worker (see agent_int.h).
 *
 * A cell has at most --max-parallel-calls calls in flight; its further
 * requests wait in order (a->waiting, oldest first) and start, from a
 * loop timer, as its calls end; a waiting request dies with its cell or
 * worker like a call in flight. Every call is checked against the
 * budgets as it starts (a waiting one when its turn comes), while it
 * streams and when it ends (budget.c): a call that would start over a
 * budget raises BudgetExceeded in the cell, and the run stops as a budget
 * stop; the calls that a budget stop cuts raise BudgetExceeded too.
 */
#include "supervisor/agent/agent_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "proto/proto.h"
#include "supervisor/loop/loop.h"
#include "supervisor/model/hosttools.h"
#include "supervisor/model/model.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"

/* A call_me from the worker, waiting for its model call (a->calls). */
struct pending {
	struct agent *a;
	struct pending *next;
	uint64_t req;		/* the worker's request id */
	unsigned gen;		/* worker generation that asked */
	long long tokens_at;	/* the model's count when it was sent */
	size_t sent, streamed;	/* bytes, for the estimate of a cut call */
	uint64_t call;		/* the model call */
	uint32_t cell;		/* the cell that asked */
	int starting;		/* inside model_call: done only marks ended */
	int ended;
	int gone;		/* the worker that asked died: no answer */
	unsigned dropped;	/* stream events the worker had no room for */
	struct agent_req rq;	/* for the events */
	char *body;		/* waiting for a slot: the request's body */
	size_t body_len;
	struct call_mark mark;	/* in the journal, while it runs */
};

static int
same_worker(const struct pending *p)
{
	return !p->gone &&
	    worker_generation(runner_worker(p->a->runner)) == p->gen;
}

static void
pending_unlink(struct pending *p)
{
	struct pending **pp;

	for (pp = &p->a->calls; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

static struct pending *
pending_of(const struct agent *a, int all, uint32_t cell)
{
	struct pending *p;

	for (p = a->calls; p != NULL; p = p->next)
		if (all || p->cell == cell)
			return p;
	return NULL;
}

static void
reply_error(struct agent *a, uint64_t req, const char *type, const char *msg)
{
	runner_reply_error(a->runner, req, type, msg);
}

static void
pending_free(struct pending *p)
{
	if (p != NULL)
		free(p->body);
	free(p);
}

/*
 * The requests of cell (all: of every cell) waiting for a slot go; their
 * thread is told why, unless its worker is gone.
 */
static void
drop_waiting(struct agent *a, int all, uint32_t cell, int gone,
    const char *why)
{
	struct pending **pp = &a->waiting, *p;

	while ((p = *pp) != NULL) {
		if (!all && p->cell != cell) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (!gone && same_worker(p))
			reply_error(a, p->req, "ModelError", why);
		pending_free(p);
	}
}

/*
 * Ends the model calls of cell (all: of every cell of the worker) at
 * once, their connections closed; gone: their worker died, nothing to
 * answer. Returns how many of cell's calls were ended.
 */
static unsigned
end_calls(struct agent *a, int all, uint32_t cell, int gone, const char *why)
{
	struct pending *p;
	unsigned n = 0;

	drop_waiting(a, all, cell, gone, why);
	while ((p = pending_of(a, all, cell)) != NULL) {
		n += p->cell == cell;
		p->gone |= gone;
		if (model_end(a->model, p->call, why) == 0) {
			pending_unlink(p);	/* not open: nothing runs */
			agent_ev_request_end(a, &p->rq, "ModelError", why);
			pending_free(p);
		}
	}
	return n;
}

/* c's record says its model calls were cancelled (n > 0). */
static void
note_cancelled(struct cell *c, unsigned n)
{
	char *d;

	c->calls_cancelled += n;
	if (n == 0 || asprintf(&d, "%s%s%u model call%s in flight %s "
	    "cancelled", c->detail != NULL ? c->detail : "", c->detail != NULL ?
	    "; " : "", n, n == 1 ? "" : "s", n == 1 ? "was" : "were") < 0)
		return;
	cells_set_detail(c, d);
	free(d);
	log_warnx("cell %u: %u model call%s in flight cancelled", c->n, n,
	    n == 1 ? "" : "s");
}

/* The worker died or was killed: every call it made ends now. */
void
agent_worker_death(void *ctx, struct cell *c)
{
	struct agent *a = ctx;
	char why[96];
	unsigned n;

	if (a->calls == NULL)
		return;
	if (c != NULL)
		(void)snprintf(why, sizeof why, "cell %u was killed: its model "
		    "call was cancelled", c->n);
	else
		(void)snprintf(why, sizeof why, "the worker died: the model "
		    "call was cancelled");
	n = end_calls(a, 1, c != NULL ? c->n : 0, 1, why);
	if (c != NULL)
		note_cancelled(c, n);
	else
		log_warnx("the worker died: the model calls of its threads "
		    "were cancelled");
}

/*
 * Cell c ended: its stored host outputs go; a timed-out cell's calls end
 * now (their thread is told), those of a cell that ended normally may
 * finish their round but are not continued (SPEC section 3: Cell N has finished).
 */
void
agent_calls_cell_over(struct agent *a, struct cell *c)
{
	struct pending *p;
	char why[160];

	hosttools_cell_over(a->host, c->n);
	(void)snprintf(why, sizeof why, "Cell %u has finished: the model call "
	    "waiting for a free slot was not started", c->n);
	drop_waiting(a, 0, c->n, 0, why);
	if (c->timeout_stage != TIMEOUT_NONE) {
		if (c->ended_by != NULL)	/* the operator's, say */
			(void)snprintf(why, sizeof why, "cell %u was ended "
			    "early by %.64s: its model call was cancelled",
			    c->n, c->ended_by);
		else
			(void)snprintf(why, sizeof why, "cell %u exceeded its "
			    "timeout: its model call was cancelled", c->n);
		note_cancelled(c, end_calls(a, 0, c->n, 0, why));
		return;
	}
	for (p = a->calls; p != NULL; p = p->next)
		if (p->cell == c->n)
			(void)model_seal(a->model, p->call);
}

/* The run stopped while cell c ran (why): its calls end unanswered (its
 * worker is about to go), its record says so. */
void
agent_calls_cut(struct agent *a, struct cell *c, const char *why)
{
	char buf[256];

	hosttools_cell_over(a->host, c->n);
	(void)snprintf(buf, sizeof buf, "the run stopped (%s): the model call "
	    "was cancelled", why);
	note_cancelled(c, end_calls(a, 0, c->n, 1, buf));
}

static void
call_event(void *ctx, const char *json, size_t len)
{
	struct pending *p = ctx;

	if (same_worker(p) && runner_event(p->a->runner, p->req, json,
	    len) < 0 && errno == ENOBUFS)
		p->dropped++;
}

static void wake_waiting(struct agent *a);

static void
call_done(void *ctx, const struct model_answer *ans, const char *type,
    const char *msg)
{
	struct pending *p = ctx;
	struct agent *a = p->a;
	char *s, *clean;
	size_t n, len;

	pending_unlink(p);
	if (type != NULL && a->stopping && a->stop_rc == EXIT_BUDGET &&
	    a->stop_reason != NULL) {	/* cut by a budget stop */
		type = "BudgetExceeded";
		msg = a->stop_reason;
	}
	agent_ev_request_end(a, &p->rq, type, msg);
	agent_count_call(a, type, p->tokens_at, p->sent + p->streamed,
	    p->mark.id);
	(void)agent_budget_watch(a);	/* its usage may cross a budget */
	wake_waiting(a);
	if (same_worker(p) && type != NULL) {
		reply_error(a, p->req, type, msg);
	} else if (same_worker(p) && p->dropped > 0) {
		char why[160];

		(void)snprintf(why, sizeof why, "%u stream events were dropped: "
		    "the cell did not read its stream and the queue to it was "
		    "full", p->dropped);
		reply_error(a, p->req, "ModelError", why);
	} else if (same_worker(p)) {
		s = model_answer_json(ans, &len);
		/* no copy when there is no secret to clean */
		clean = s != NULL && redact_count(a->red) > 0 ?
		    redact_string(a->red, s, len, &n) : NULL;
		if (clean == NULL && s != NULL)
			n = len;
		if (clean != NULL || s != NULL)
			(void)runner_reply(a->runner, p->req, REPLY_OK,
			    clean != NULL ? clean : s, n);
		else
			reply_error(a, p->req, "ModelError", "out of memory");
		free(s);
		free(clean);
	}
	if (p->starting)
		p->ended = 1;	/* call_start frees it */
	else
		pending_free(p);
}

static void
call_progress(void *ctx, size_t delta_bytes)
{
	struct pending *p = ctx;

	if (delta_bytes > p->streamed)
		p->streamed = delta_bytes;
	agent_call_grew(p->a, &p->mark, p->sent + p->streamed);
	agent_ev_streaming(p->a, delta_bytes);
	/* crossing a budget stops the run; the loop ends the stream */
	(void)agent_budget_watch(p->a);
}

static void
call_stats(void *ctx, const struct model_call_stats *s)
{
	struct pending *p = ctx;

	p->rq.st = *s;
}

static const struct model_call_ops call_ops = {
	call_event, call_progress, call_done, call_stats
};

const struct agent_req *
agent_call_req(const struct agent *a, uint64_t call)
{
	const struct pending *p;

	if (a->recovering && a->recovery_req.call == call)
		return &a->recovery_req;
	for (p = a->calls; p != NULL; p = p->next)
		if (p->call == call)
			return &p->rq;
	return NULL;
}

static struct pending *
pending_new(struct agent *a, const struct msg_request *q)
{
	struct pending *p = calloc(1, sizeof *p);

	if (p == NULL) {
		reply_error(a, q->id, "ModelError", "out of memory");
		return NULL;
	}
	p->a = a;
	p->req = q->id;
	p->gen = worker_generation(runner_worker(a->runner));
	p->sent = q->body.len;
	return p;
}

/* p becomes cell's call in flight (a->calls), cancelled with the cell. */
static void
call_begin(struct agent *a, struct pending *p, uint32_t cell)
{
	p->cell = cell;
	p->starting = 1;
	p->tokens_at = model_total_tokens(a->model);
	agent_call_opened(a, &p->mark, p->sent);
	p->next = a->calls;
	a->calls = p;
}

/* The model call started as id (0: it already ended, done was called). */
static void
call_started(struct pending *p, uint64_t id)
{
	p->call = id;
	p->starting = 0;
	if (p->ended)
		pending_free(p);
}

/*
 * Starts p's model call for its cell (p->cell), the request's body given
 * (borrowed): refused with BudgetExceeded when a budget is spent. The
 * body's input stays text (model.h: model_req).
 */
static void
call_start(struct agent *a, struct pending *p, const char *text, size_t len)
{
	struct model_req *q;
	char why[512];
	int stream;

	/* its own input is paid as soon as it is sent: counted */
	if (agent_budget_refuse(a, (long long)(len + 3) / 4, why,
	    sizeof why)) {
		reply_error(a, p->req, "BudgetExceeded", why);
		pending_free(p);
		return;
	}
	/* hostreq.c routes only call_me here */
	if ((q = model_req_parse(text, len, &stream, why, sizeof why)) ==
	    NULL) {
		reply_error(a, p->req, "TypeError", why);
		pending_free(p);
		return;
	}
	(void)agent_add_restart_note(a, q, "\n\n", p->cell, "call_me");
	call_begin(a, p, p->cell);
	agent_ev_request_start(a, &p->rq, p->cell, "call_me", stream);
	call_started(p, model_call(a->model, q, stream, p->cell, &call_ops,
	    p));
	model_req_free(q);
}

/* Model calls of cell in flight. */
static unsigned
in_flight(const struct agent *a, uint32_t cell)
{
	const struct pending *p;
	unsigned n = 0;

	for (p = a->calls; p != NULL; p = p->next)
		n += p->cell == cell;
	return n;
}

/* p waits, last in line, for a slot of its cell; its body is copied. */
static void
call_wait(struct agent *a, struct pending *p, const struct msg_request *q)
{
	struct pending **pp;

	p->body = malloc(q->body.len + 1);
	if (p->body == NULL) {
		reply_error(a, p->req, "ModelError", "out of memory");
		pending_free(p);
		return;
	}
	memcpy(p->body, q->body.ptr, q->body.len);
	p->body_len = q->body.len;
	for (pp = &a->waiting; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = p;
}

/* The oldest waiting request whose cell has a free slot, unlinked; NULL
 * when none has one. */
static struct pending *
next_waiting(struct agent *a)
{
	struct pending **pp, *p;

	for (pp = &a->waiting; (p = *pp) != NULL; pp = &p->next)
		if (in_flight(a, p->cell) < a->cfg.max_parallel_calls) {
			*pp = p->next;
			return p;
		}
	return NULL;
}

/* Starts the waiting requests whose cell has a free slot, oldest first
 * (the list is looked at afresh after each start: one may change it). */
static void
on_waiting(struct loop *l, void *ctx)
{
	struct agent *a = ctx;
	struct pending *p;
	char *body;

	(void)l;
	a->waiting_timer = 0;
	while (!a->stopping && !loop_stopped(a->loop) &&
	    (p = next_waiting(a)) != NULL) {
		body = p->body;
		p->body = NULL;
		call_start(a, p, body, p->body_len);
		free(body);
	}
}

/* A slot may have freed: the waiting requests are looked at from the
 * loop, never inside a call's callback. */
static void
wake_waiting(struct agent *a)
{
	if (a->waiting != NULL && a->waiting_timer == 0 &&
	    !loop_stopped(a->loop))
		a->waiting_timer = loop_timer(a->loop, 0, on_waiting, a);
}

void
agent_request(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct agent *a = ctx;
	struct pending *p;

	if (a->stopping) {	/* nothing new starts */
		reply_error(a, q->id, "ModelError", "the run is stopping: no "
		    "new model call starts");
		return;
	}
	if ((p = pending_new(a, q)) == NULL)
		return;
	p->cell = c->n;
	if (a->waiting != NULL || in_flight(a, c->n) >=
	    a->cfg.max_parallel_calls)
		call_wait(a, p, q);
	else
		call_start(a, p, q->body.ptr, q->body.len);
}

long long
agent_calls_estimate(const struct agent *a)
{
	const struct pending *p;
	size_t bytes = 0;

	for (p = a->calls; p != NULL; p = p->next)
		bytes += p->sent + p->streamed;
	if (a->recovering)
		bytes += a->recovery_bytes + a->recovery_streamed;
	return bytes == 0 ? 0 : (long long)(bytes + 3) / 4;
}

void
agent_calls_clear(struct agent *a)
{
	struct pending *p;

	if (a->waiting_timer != 0)	/* a->loop is NULL before the run */
		loop_timer_cancel(a->loop, a->waiting_timer);
	a->waiting_timer = 0;
	while ((p = a->waiting) != NULL) {
		a->waiting = p->next;
		pending_free(p);
	}
}
