/*
 * agent_int.h - private to the agent run's files (agent.c, prompt.c,
 * emit.c, budget.c, calljournal.c, resume.c, agentcall.c, repair.c,
 * operator.c, reload.c): the run's state and the functions they share.
 * Nothing outside them includes it; the run's public faces are agent.h
 * and observe.h.
 */
#ifndef AGENTZ_AGENT_INT_H
#define AGENTZ_AGENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "proto/proto.h"
#include "supervisor/agent/agent.h"
#include "supervisor/agent/observe.h"
#include "supervisor/agent/tools.h"
#include "supervisor/model/hosttools.h"
#include "supervisor/model/model.h"
#include "supervisor/agent/price.h"
#include "supervisor/run/runner.h"
#include "supervisor/agent/runstop.h"
#include "supervisor/world/view.h"

struct ctl;
struct jf;
struct journal;
struct journal_past;
struct pending;

/* A model call in the journal (calljournal.c): its id (-1: not
 * journaled), the estimate last journaled. */
struct call_mark {
	long long id;
	long long journaled;
};

/* A failure signature and how many times it was seen (budget.c). */
struct sig_seen {
	char *sig;
	long long seen;
};

struct agent {
	struct agent_config cfg;
	const struct agent_observer *obs;	/* the observers (emit.c) */
	size_t nobs;
	uint64_t requests;		/* model requests numbered so far */
	struct view view;
	const char *task;
	char *task_kept;	/* the task read back from the journal */
	struct loop *loop;
	struct runner *runner;
	struct model *model;
	struct hosttools *host;
	struct agent_tools tools;	/* what the host tools act on (tools.h) */
	struct redact *red;
	char *instructions;
	/* the successor registered for cell succ_for */
	uint32_t succ_for;
	int has_succ;
	char *succ_code, *succ_summary;
	size_t succ_len;
	/* a repair request in flight: its successor becomes cell recovery_for */
	int recovering;
	uint32_t recovery_for;
	/* consecutive failures: failed cells and repair requests that gave
	 * no cell; failed_cells counts only the cells (that ran) */
	unsigned failures, failed_cells;
	struct cell *failed;	/* the record the repair is about */
	struct journal *journal;	/* NULL: not journaled */
	struct journal_past *past;	/* the journal read back (--resume) */
	char *stop_reason;
	int stopping;			/* a stop was decided: stop_rc */
	int stop_rc;
	int journal_broken;		/* 0, or the exit code: EXIT_JOURNAL (a
					   write failed), EXIT_USAGE (gone) */
	int journal_ended;		/* the stop record is written */
	struct sig_seen *sigs;		/* the failure signatures seen */
	size_t nsigs;
	unsigned worst_repeat;		/* most times one signature was seen */
	/* tokens: the journal's (earlier starts), estimates of calls that
	 * reported no usage, what the model counted at its end, the last
	 * total journaled */
	long long tokens_base, tokens_est, tokens_final, tokens_journaled;
	/* money (USD), when a price is known (priced): the journal's, the
	 * estimates of calls that reported no usage; usage_final is what the
	 * model counted at its end */
	struct price price;
	int priced;
	double cost_base, cost_est;
	struct model_usage usage_final;
	double run_started;		/* wall clock of the run's first start */
	uint64_t deadline_timer;	/* the run deadline's, 0: none */
	char *restart_note;		/* for the next model request (resume) */
	long long recovery_tokens_at;	/* the repair request's count_call */
	size_t recovery_bytes, recovery_streamed;
	struct agent_req recovery_req;	/* the repair request's events */
	struct call_mark recovery_mark;	/* the repair request's, journaled */
	long long call_seq;		/* the next model call's journal id */
	struct pending *calls;		/* the cells' model calls in flight */
	/* call_me requests waiting for a free slot of their cell
	 * (--max-parallel-calls), oldest first, and the timer that starts
	 * them once slots free (0: none armed) */
	struct pending *waiting;
	uint64_t waiting_timer;
	struct runstop stops;		/* signals */
	/* the operator (operator.c): the control socket, a pause, a stop
	 * asked for (1 after the cell, 2 now), notes not yet delivered, a
	 * cell held back while paused, the outage being waited out */
	struct ctl *ctl;
	char *run_name;
	int paused, op_stop;
	unsigned notes_pending;
	int held;
	char *held_code, *held_summary;
	size_t held_len;
	int64_t held_gen;
	char outage[160];
};

/*
 * agent.c: stopping, journal records, the successor, the run loop.
 * agent_stop decides a stop (rc, why: one line, or NULL for quit()); the
 * first decided one holds. agent_stopping: 1 once a stop is decided;
 * from then on nothing starts a model call, a repair or a cell.
 */
void agent_stop(struct agent *a, int rc, const char *why);
int agent_stopping(const struct agent *a);
int agent_record(struct agent *a, const char *type, const struct jf *f);
/* A "usage" record: the tokens counted, the estimated part, the calls it
 * settles (ncalls of them) and, when a price is known, the cost. */
void agent_record_usage(struct agent *a, long long tokens, long long estimated,
    const long long *calls, size_t ncalls, double cost);
int agent_record_cell(struct agent *a, const struct cell *c, int outputs);
void agent_clear_successor(struct agent *a);
enum submit_result agent_submit(void *ctx, uint32_t cell, const char *code,
    size_t len, const char *summary);
void agent_run_cell(struct agent *a, const char *code, size_t len,
    const char *summary, int64_t generated_by);

/* prompt.c: cell 0 and the model client */
char *agent_first_cell(const char *task);
int agent_setup_model(struct agent *a);


/* budget.c: budgets, spending and failure counts */
long long agent_tokens(const struct agent *a);
double agent_cost(const struct agent *a);
const char *agent_cost_note(const struct agent *a, char *buf, size_t n);
/* a call ended (type NULL: well); id: its journal id, -1 none */
void agent_count_call(struct agent *a, const char *type,
    long long tokens_at, size_t bytes, long long id);

/* calljournal.c: model calls in flight, journaled (counted on resume) */
void agent_call_opened(struct agent *a, struct call_mark *m, size_t sent);
void agent_call_grew(struct agent *a, struct call_mark *m, size_t bytes);
void agent_settle_cut_calls(struct agent *a);
int agent_too_many_failures(struct agent *a, uint32_t last);
char *agent_failure_signature(const struct cell *c);
long long agent_count_failure(struct agent *a, const struct cell *c,
    const char *sig);
void agent_failures_free(struct agent *a);
int agent_over_budget(struct agent *a, const struct cell *c);
int agent_resume_over_budget(struct agent *a);
void agent_start_deadline(struct agent *a);
int agent_set_price(struct agent *a);
/*
 * Budgets hard inside a cell: before a model request (a call_me, a
 * repair), 1 when --max-tokens, --max-cost (the calls in flight counted
 * by their estimate, and more: the estimate of the request's own input)
 * or --deadline is spent; the run is then stopped as a budget stop and
 * why says which budget and by how much.
 */
int agent_budget_refuse(struct agent *a, long long more, char *why,
    size_t n);
/* While calls stream and as they end: stops the run (1) once a budget
 * is crossed, the streamed estimates counted. */
int agent_budget_watch(struct agent *a);

/* resume.c: the journal, resuming, the restart note (put ahead of q's
 * input, sep after it; returns the bytes it added, 0 when none; cell and
 * purpose name the request, for the notes' delivery record) */
size_t agent_add_restart_note(struct agent *a, struct model_req *q,
    const char *sep, uint32_t cell, const char *purpose);
int agent_open_journal(struct agent *a);
int agent_resume(struct agent *a);

/* agentcall.c: call_me requests in flight */
void agent_worker_death(void *ctx, struct cell *c);
void agent_calls_cell_over(struct agent *a, struct cell *c);
void agent_calls_cut(struct agent *a, struct cell *c, const char *why);
void agent_request(void *ctx, struct cell *c, const struct msg_request *q);
/* Tokens of the calls in flight (a repair's included) that no usage has
 * counted yet: about 4 bytes a token, sent and streamed. */
long long agent_calls_estimate(const struct agent *a);
/* Frees the call_me requests still waiting for a slot (the run ended). */
void agent_calls_clear(struct agent *a);

/* emit.c: what the run tells its observers (observe.h) */
void agent_ev_attach(struct agent *a);
void agent_ev_live(struct agent *a, int (*alive)(void *));
void agent_ev_ready(struct agent *a);
void agent_ev_run_over(struct agent *a);
void agent_ev_stopping(struct agent *a);
void agent_ev_detach(struct agent *a);
void agent_ev_run_start(const struct agent *a);
void agent_ev_run_end(const struct agent *a, int rc);
void agent_ev_stop(const struct agent *a, int rc, const char *why);
void agent_ev_status(const struct agent *a, const char *fmt, ...)
    LOG_PRINTF(2, 3);
void agent_ev_cell_start(const struct agent *a, const struct cell *c);
void agent_ev_cell_end(const struct agent *a, const struct cell *c);
void agent_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n);
void agent_ev_kill(void *ctx, const struct cell *c, enum ladder_step step,
    const char *why);
void agent_ev_repair(const struct agent *a, const struct cell *failed);
/* numbers q (1, 2, ... in the run) and starts its clock */
void agent_ev_request_start(struct agent *a, struct agent_req *q,
    uint32_t cell, const char *purpose, int stream);
void agent_ev_request_end(const struct agent *a, const struct agent_req *q,
    const char *type, const char *msg);
void agent_ev_streaming(const struct agent *a, size_t delta_bytes);
void agent_ev_totals(const struct agent *a);
void agent_ev_outage(const struct agent *a, const struct model_outage *o,
    const char *what);
void agent_ev_operator(const struct agent *a);
void agent_ev_budgets(const struct agent *a, const char *by);
void agent_ev_net(const struct agent *a, const struct egress_event *ev);

/* netrec.c: runner_ops.net: the connection journaled, shown, told */
void agent_net(void *ctx, const struct egress_event *ev);

/* agentcall.c: the request of model call id (a cell's or the repair's),
 * NULL when none is open */
const struct agent_req *agent_call_req(const struct agent *a, uint64_t call);

/* budget.c: USD spent by the run, < 0 without a price */
double agent_cost_usd(const struct agent *a);
/* operator.c: the control socket and what its commands change */
void agent_ctl_open(struct agent *a);
void agent_ctl_close(struct agent *a);
int agent_op_hold(struct agent *a, const char *code, size_t len,
    const char *summary, int64_t generated_by);
int agent_op_stop_due(struct agent *a);
void agent_op_notes_delivered(struct agent *a, uint32_t cell,
    const char *purpose);
void agent_op_renote(struct agent *a);

/* reload.c: budgets re-read from options (agentz ctl NAME budgets ...),
 * journaled; --resume keeps the last ones journaled */
char *agent_op_budgets(struct agent *a, const char *opts, size_t len, int *ok);
void agent_resume_budgets(struct agent *a, const struct journal_past *p);

/* netops.c: ctl allow HOST, deny HOST, network (--network proxy); the
 * command's reply (operator.c's op_fn) */
struct ctl_req;
char *agent_op_allow(struct agent *a, const struct ctl_req *q, int *ok);
char *agent_op_deny(struct agent *a, const struct ctl_req *q, int *ok);
char *agent_op_network(struct agent *a, const struct ctl_req *q, int *ok);
char *agent_op_approve(struct agent *a, const struct ctl_req *q, int *ok);
char *agent_op_reject(struct agent *a, const struct ctl_req *q, int *ok);
/* The connections waiting for the operator ("#3 pypi.org:443, ...")
 * into buf; how many (0: buf is ""). */
unsigned agent_net_waiting(struct agent *a, char *buf, size_t len);
/* --resume: the journaled ctl allow/deny/approve --always changes made
 * again on the new run's proxy (logged). */
void agent_net_resume(struct agent *a);

/* repair.c: repair requests after a failure */
void agent_failed(struct agent *a, struct cell *c, int ran);
void agent_start_recovery(struct agent *a);

#endif
