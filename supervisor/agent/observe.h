/*
 * observe.h - what an agent run tells those who watch it: the terminal's
 * status bar, the --json event stream, systemd and the plain log are its
 * observers, registered by the front end (agent.h). The run calls each
 * observer's callbacks in the order they were registered; a NULL
 * callback is skipped. An observer decides nothing about the run.
 */
#ifndef AGENTZ_OBSERVE_H
#define AGENTZ_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/cells/cells.h"
#include "supervisor/model/model.h"
#include "supervisor/run/runner.h"

/* The summary of a repair cell: the cell the model gave after a repair
 * request. */
#define RECOVERY_SUMMARY \
	"Analyze the previous cell's error and generate repair code."

struct agent_config;
struct loop;
struct price;
struct redact;

/* A model request (a cell's call_me, a repair). */
struct agent_req {
	uint64_t n;		/* 1, 2, ... in the run */
	uint64_t call;		/* the model call, once started; 0: none */
	uint32_t cell;		/* the cell that asked, or the failed one */
	const char *purpose;	/* "call_me", "repair" */
	uint64_t t0_us;		/* loop_now_us() at its start */
	struct model_call_stats st;
};

/* The run as it starts. */
struct agent_run_info {
	const struct agent_config *cfg;
	const char *task;		/* NULL: none */
	const struct price *price;	/* NULL: no price known */
	const char *isolation;		/* the runner's; NULL: no runner */
	const char *containment;
	const char *network;		/* the worker's: "none", "host" */
	const char *workspace;		/* the view's */
};

/* What the run spent so far. */
struct agent_totals {
	long long tokens;		/* usage, and estimates without it */
	long long tokens_estimated;	/* the estimates among them */
	double cost;			/* USD, < 0: no price */
	const char *cost_note;		/* ", $0.0123", or "" without a price */
	unsigned cells;
	unsigned failures;		/* consecutive */
};

struct agent_observer {
	void *ctx;		/* the first argument of every callback */
	/* The run's loop and redactor exist: shown from now on through
	 * them; detach: the run is about to free them. */
	void (*attach)(void *ctx, struct loop *l, const struct redact *red);
	void (*detach)(void *ctx);
	/* The model and the control socket are set up: the run goes live;
	 * alive(actx) says whether it makes progress (a watchdog pings only
	 * then). */
	void (*live)(void *ctx, struct loop *l, int (*alive)(void *),
	    void *actx);
	void (*run_start)(void *ctx, const struct agent_run_info *r);
	void (*ready)(void *ctx);	/* the loop runs */
	/* One line of the run's state ("cell 3: ...", a pause, an outage). */
	void (*status)(void *ctx, const char *line);
	void (*cell_start)(void *ctx, const struct cell *c);
	/* Live output of c (NULL: between cells) on stream 1 or 2. */
	void (*output)(void *ctx, const struct cell *c, int stream,
	    const char *p, size_t n);
	/* c's record is complete. */
	void (*cell_end)(void *ctx, const struct cell *c,
	    const struct agent_totals *t);
	/* A step of c's deadline ladder (run/runner.h's enum; the
	 * listeners name it); why in one line. */
	void (*kill)(void *ctx, const struct cell *c, enum ladder_step step,
	    const char *why);
	/* A repair request for failed; its cell will be next. */
	void (*repair)(void *ctx, const struct cell *failed, uint32_t next,
	    unsigned failures);
	void (*request_start)(void *ctx, const struct agent_req *q,
	    int stream);
	/* type NULL: ended well; else the error's type and message. */
	void (*request_end)(void *ctx, const struct agent_req *q,
	    const char *type, const char *msg);
	/* The current request's live bytes of deltas. */
	void (*streaming)(void *ctx, size_t delta_bytes);
	/* Tokens so far, exact; cost in USD, < 0 without a price. */
	void (*totals)(void *ctx, long long tokens, double cost);
	/* A model call waits out an outage (q: its request, NULL: none);
	 * what: the wait in one line, NULL once it is over. */
	void (*outage)(void *ctx, const struct model_outage *o,
	    const struct agent_req *q, const char *what);
	/* The operator's marks: paused, notes not yet delivered. */
	void (*operator)(void *ctx, int paused, unsigned notes);
	/* The budgets changed (cfg holds the new ones); by: who set them,
	 * e.g. "operator". */
	void (*budgets)(void *ctx, const struct agent_config *cfg,
	    const char *by);
	/* A stop was decided (rc, why: NULL for quit() or a signal's). */
	void (*stop)(void *ctx, int rc, const char *why);
	void (*run_over)(void *ctx);	/* the loop is over */
	void (*stopping)(void *ctx);	/* the process is about to end */
	/* The run has ended with rc (reason: the stop's, NULL: none). */
	void (*run_end)(void *ctx, int rc, const char *reason,
	    const struct agent_totals *t);
	/* --network proxy: a connection allowed, refused or closed
	 * (egress.h). */
	void (*net)(void *ctx, const struct egress_event *ev);
};

#endif
