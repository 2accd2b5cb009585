/*
 * agentcli.c - `agentz "task"` from the command line: the options become
 * the run's settings (agent.h) and its observers are registered
 * (ui/listen.h); see agentcli.h.
 */
#include "supervisor/front/agentcli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "supervisor/agent/agent.h"
#include "supervisor/front/config.h"
#include "supervisor/ui/listen.h"
#include "supervisor/ui/tui.h"

/* `agentz ctl NAME budgets OPTIONS`: the budgets parsed as the command
 * line's (agent.h). */
static int
reparse(int argc, char **argv, struct agent_config *out, int *nargs)
{
	struct config c;
	int rc;

	rc = config_parse(&c, argc, argv, "agentz ctl budgets");
	if (rc == 0) {
		out->max_cells = c.max_cells;
		out->deadline = c.deadline;
		out->max_tokens = c.max_tokens;
		out->max_cost = c.max_cost;
		out->max_same_failure = c.max_same_failure;
		out->max_parallel_calls = c.max_parallel_calls;
		out->runner.max_egress_bytes = c.max_egress_bytes;
		*nargs = c.nargs;
	}
	config_clear(&c);
	return rc;
}

/* The run's settings from the options c (wpath: agentz-worker). */
static void
agent_settings(struct agent_config *ac, const struct config *c,
    const char *wpath)
{
	memset(ac, 0, sizeof *ac);
	ac->task = c->nargs == 1 ? c->args[0] : NULL;
	ac->worker_path = wpath;
	ac->model = c->model;
	ac->base_url = c->base_url;
	ac->service_tier = c->service_tier;
	ac->needs_key = config_needs_key(c->base_url);
	ac->request_timeout = c->request_timeout;
	ac->max_output_tokens = c->max_output_tokens;
	ac->max_retries = c->max_retries;
	ac->outage_patience = c->outage_patience;
	ac->max_cells = c->max_cells;
	ac->deadline = c->deadline;
	ac->max_tokens = c->max_tokens;
	ac->max_cost = c->max_cost;
	ac->price = c->price;
	ac->has_price = c->has_price;
	ac->max_same_failure = c->max_same_failure;
	ac->max_parallel_calls = c->max_parallel_calls;
	ac->journal = c->journal;
	ac->resume = c->resume;
	ac->max_restarts = c->max_restarts;
	ac->cell_timeout = c->cell_timeout;
	ac->grace = c->grace;
	ac->memory_limit = c->memory_limit;
	config_runner(&ac->runner, c, wpath, 0);
	ac->runner.pause_ui = tui_pause;  /* input() owns the terminal then */
	ac->runner.snapshot_every_cell = 1;  /* each cell follows a model call */
	config_view(&ac->view, c);
	ac->reparse = reparse;
}

static void
ui_settings(struct ui_opts *u, const struct config *c)
{
	memset(u, 0, sizeof *u);
	u->json = c->json;
	u->verbose = c->verbose;
	u->seccomp = config_sandbox_name(c->sandbox);
	u->isolation_mode = config_isolation_name(c->isolation);
	u->output_limit = c->output_limit;
}

/* The run's observers, in the order listen.h gives; their count. */
static size_t
observers(struct agent_observer *obs, const struct ui_opts *u)
{
	size_t n = 0;

	ui_gate_observer(&obs[n++]);
	ui_events_observer(&obs[n++], u);
	ui_show_observer(&obs[n++], u);
	if (!u->json)	/* stdout is the event stream's */
		ui_tui_observer(&obs[n++]);
	ui_notify_observer(&obs[n++]);
	return n;
}

static int
run(const struct config *c)
{
	struct agent_config ac;
	struct agent_observer obs[5];
	struct ui_opts u;
	char *wpath;
	size_t n;
	int rc;

	wpath = config_worker_path(c);
	if (wpath == NULL)
		fatal("agent: worker path");
	if (config_check(c, "agentz", wpath) < 0) {	/* said why */
		free(wpath);
		return EXIT_USAGE;
	}
	agent_settings(&ac, c, wpath);
	ui_settings(&u, c);
	n = observers(obs, &u);
	rc = agent_main(&ac, obs, n);
	free(wpath);
	return rc;
}

int
agentcli_main(int argc, char **argv)
{
	struct config c;
	int rc;

	rc = config_parse(&c, argc, argv, "agentz");
	if (rc != 0) {
		config_clear(&c);
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	}
	log_init("agentz", c.verbose);
	if (c.resume && c.journal == NULL) {
		(void)fprintf(stderr, "agentz: --resume needs --journal FILE "
		    "(or AGENTZ_JOURNAL): the journal of the run to continue\n");
		config_clear(&c);
		return EXIT_USAGE;
	}
	if (c.nargs > 1 ||
	    (!c.resume && (c.nargs != 1 || *c.args[0] == '\0'))) {
		(void)fprintf(stderr, "agentz: give the task as one argument, "
		    "e.g. agentz \"summarise README.md\", or --resume with "
		    "--journal FILE (see agentz --help)\n");
		config_clear(&c);
		return EXIT_USAGE;
	}
	rc = run(&c);
	config_clear(&c);
	return rc;
}
