/*
 * agent.h - `agentz "task"`: the run where the model writes the loop.
 * Cell 0 asks the model for the first cell; every next cell is the code
 * the model submitted with set_next_cell_code from inside the current
 * one; a failed cell is followed by a repair cell (SPEC section 6).
 *
 * The front end builds the run's settings from the operator's options
 * (struct agent_config) and registers the run's observers (observe.h):
 * the run shows nothing itself.
 */
#ifndef AGENTZ_AGENT_H
#define AGENTZ_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/agent/price.h"
#include "supervisor/run/runner.h"
#include "supervisor/world/view.h"

/* --max-parallel-calls: the default and the most accepted */
#define MAX_PARALLEL_CALLS_DEFAULT	8
#define MAX_PARALLEL_CALLS_MAX		256

struct agent_observer;

struct agent_config {
	const char *task;		/* NULL: --resume without one */
	const char *worker_path;	/* agentz-worker */
	/* the model */
	const char *model;		/* --model, AGENTZ_MODEL */
	const char *base_url;		/* --base-url, OPENAI_BASE_URL */
	const char *service_tier;	/* --service-tier, "" = not sent */
	int needs_key;			/* the base URL's host is OpenAI's */
	double request_timeout;		/* seconds per model request */
	long max_output_tokens;
	unsigned max_retries;
	double outage_patience;		/* seconds an outage is waited out,
					 * 0 = not at all */
	/* hard stops outside the model (0 = none); reload.c re-reads them */
	unsigned max_cells;
	double deadline;		/* seconds of run wall clock */
	long long max_tokens;
	double max_cost;		/* USD; 0 = none */
	struct price price;		/* --price for the run's model */
	int has_price;			/* --price was given */
	unsigned max_same_failure;	/* identical failure signatures */
	/* model calls in flight per cell; more wait in order (FIFO) */
	unsigned max_parallel_calls;
	const char *journal;		/* --journal, NULL: none */
	int resume;			/* --resume: continue that journal */
	unsigned max_restarts;		/* resumes of one run, 0 = unlimited */
	/* told to the model (prompt.c) and the operator */
	double cell_timeout;		/* seconds */
	double grace;			/* seconds */
	uint64_t memory_limit;		/* bytes, 0 = none */
	/* the runner's settings (the agent adds its own: red, jail) and
	 * the worker's view */
	struct runner_config runner;
	struct view_options view;
	/*
	 * Options for `agentz ctl NAME budgets` (argv after "agentz", as the
	 * command line): the budgets above in *out (the rest of it free),
	 * the operands after them in *nargs. 0, or nonzero after saying why
	 * on stderr (as the command line's parser does).
	 */
	int (*reparse)(int argc, char **argv, struct agent_config *out,
	    int *nargs);
};

/*
 * Runs the agent (cfg and the nobs observers in obs are the caller's,
 * kept until it returns). Returns the process exit status (EXIT_*,
 * common/exitcodes.h).
 */
int agent_main(const struct agent_config *cfg,
    const struct agent_observer *obs, size_t nobs);

#endif
