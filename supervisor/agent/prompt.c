/*
 * prompt.c - what the model is told and how it is reached: the
 * instructions text, cell 0 (the only code the engine writes), the model
 * client's set-up and its outage waits (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"
#include "supervisor/text/jsonf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/model/hosttools.h"
#include "supervisor/model/http.h"
#include "supervisor/model/model.h"

static const char instructions_fmt[] =
"You are an autonomous agent running inside agentz. You act only by writing "
"Python: each cell you write runs in one persistent Python namespace (a "
"separate worker process), and the code of the next cell is what you submit "
"with the host tool set_next_cell_code from inside the current cell. The "
"host never chooses actions; you write the loop.\n"
"\n"
"Your immutable identity: these instructions, the model (%s), reasoning "
"effort of at least medium, and the two host tools set_next_cell_code and "
"get_history_cells. The host enforces them on every request. Everything "
"else is yours to adjust: the input and context you send, your own tools "
"for call_me, your code and how you structure the work.\n"
"\n"
"The cell protocol:\n"
"- call_me(input=..., **params) calls you again, like "
"client.responses.create, and returns a Response (output_text, output, "
"usage, to_dict()); call_me(..., stream=True) yields events. Tool calls to "
"host tools are handled for you; any other tool call is handed back so a "
"cell can run its own tool loop.\n"
"- set_next_cell_code(code, summary) registers the complete code of the "
"next cell (summary at most 256 characters). It only registers; exactly "
"once per cell (a second call raises NextCellAlreadyScheduled in the "
"cell), and only while the cell runs (later you get 'Cell N has "
"finished'). A cell that ends without a successor is a failure.\n"
"- get_history_cells(start, end) returns history[start:end] with Python "
"slice semantics, the running cell included; with both null only "
"{total}. In cells: CELL_INPUTS, CELL_OUTPUTS, get_last_error(), "
"ENGINE_SOURCE, openai_docs, RUNTIME_INFO.\n"
"- Do not mix host tool calls and your own tool calls in one parallel "
"batch.\n"
"\n"
"Limits: each cell has a wall-clock timeout of %.0f s. At the deadline it "
"gets KeyboardInterrupt; if it is still running %.0f s later, every "
"thread's stack is dumped and the whole worker process tree is killed. "
"The namespace is then rolled back to how it was before that cell (a "
"snapshot taken before it takes over; threads and subprocesses started "
"earlier are gone), or, when there is no snapshot, lost and a fresh "
"worker runs the next cell: the record's \"namespace\" says which. Keep "
"important state in files. Memory is capped at %llu MiB (a MemoryError "
"you can catch, or a kill reported as memory). A failed cell is followed "
"by a repair cell you write from its record; three consecutive failures "
"end the run. Effects outside the namespace (files, network, processes) "
"are never rolled back. At most %u call_me calls of a cell are in flight "
"at once; more wait their turn, in order. The run's token, cost and time "
"budgets are checked before and during every call: a call over one "
"raises BudgetExceeded (a ModelError) and the run stops.\n"
"\n"
"Work directly: read and write files, use the network, run commands, "
"install what you need, without waiting for approval. Never print, log or "
"send secrets such as API keys; printed secrets are redacted anyway.\n"
"Call quit() only when the user explicitly asks you to stop \u2014 not when "
"the task is done, when you are idle, or when you are waiting for a "
"reply: then keep going, or wait for input with input().\n";

static char *
make_instructions(const struct agent_config *c)
{
	char *s;

	if (asprintf(&s, instructions_fmt, c->model, c->cell_timeout, c->grace,
	    (unsigned long long)(c->memory_limit >> 20),
	    c->max_parallel_calls) < 0)
		return NULL;
	return s;
}

/* Cell 0, the only code the engine writes. */
char *
agent_first_cell(const char *task)
{
	char *text, *lit, *code = NULL;

	if (asprintf(&text, "%s\nSubmit the first Python cell.", task) < 0)
		return NULL;
	/* A JSON string without \u escapes above U+001F is a Python literal. */
	lit = jf_string(text, (size_t)-1);
	free(text);
	if (lit != NULL && asprintf(&code, "response = call_me(input=%s)\n"
	    "print(response.output_text)\n", lit) < 0)
		code = NULL;
	free(lit);
	return code;
}

static void
record_outage(struct agent *a, const struct model_outage *o)
{
	struct jf f[] = { JF_R("since", o->since),
	    JF_R("next_try_in", o->next_try_in), JF_S("reason", o->reason),
	    JF_END };

	(void)agent_record(a, "outage", f);
}

/* A model call waits out an outage (model.h; model.c logs each wait). */
static void
on_outage(void *ctx, const struct model_outage *o)
{
	struct agent *a = ctx;

	char what[160];

	if (o->over != 0) {
		a->outage[0] = '\0';
		agent_ev_outage(a, o, NULL);
		agent_ev_status(a, "%s", o->over > 0 ?
		    "the model answers again" : "stopped waiting for the model");
		return;
	}
	(void)snprintf(what, sizeof what, "waiting for the model: %s; next "
	    "try in %.0f s", o->reason, o->next_try_in);
	agent_ev_outage(a, o, what);
	(void)snprintf(a->outage, sizeof a->outage, "%s", what);
	agent_ev_status(a, "%s", what);
	record_outage(a, o);
}

/* Before the model ever answered, it said the set-up is wrong (model.h):
 * no waiting or repair fixes that; the run stops (exit 2, as a usage
 * error), journaled and shown like any stop. */
static void
on_setup_error(void *ctx, const char *why)
{
	struct agent *a = ctx;
	char line[1100];

	(void)snprintf(line, sizeof line, "stopping: %s", why);
	agent_stop(a, EXIT_USAGE, line);
}

int
agent_setup_model(struct agent *a)
{
	struct model_config mc;
	struct host_tools ht;
	const char *key = getenv("OPENAI_API_KEY");
	char why[320], shown[256];

	if (http_load(why, sizeof why) < 0) {
		log_warnx("%s", why);
		return -1;
	}
	if (http_url_check(a->cfg.base_url, why, sizeof why) < 0) {
		/* userinfo may be a secret: such a URL is not repeated */
		if (strchr(a->cfg.base_url, '@') != NULL)
			(void)snprintf(shown, sizeof shown, "(with credentials, "
			    "not shown)");
		else
			(void)snprintf(shown, sizeof shown, "'%s'",
			    a->cfg.base_url);
		log_warnx("the model's base URL %s (OPENAI_BASE_URL or "
		    "--base-url) cannot be used: %s (e.g. "
		    "https://api.openai.com/v1, http://127.0.0.1:8000/v1)",
		    shown, why);
		return -1;
	}
	if ((key == NULL || *key == '\0') && a->cfg.needs_key) {
		char *at = model_url_shown(a->cfg.base_url);

		log_warnx("OPENAI_API_KEY is not set (in the environment or "
		    "./.env), and the model is at %s", at != NULL ? at :
		    "api.openai.com");
		free(at);
		return -1;
	}
	a->instructions = make_instructions(&a->cfg);
	a->tools.submit = agent_submit;
	a->tools.ctx = a;
	ht = agent_tools_host(&a->tools);
	a->host = hosttools_new(&ht);
	memset(&mc, 0, sizeof mc);
	mc.base_url = a->cfg.base_url;
	mc.api_key = key != NULL && *key != '\0' ? key : NULL;
	mc.settings.model = a->cfg.model;
	mc.settings.instructions = a->instructions;
	mc.settings.service_tier = *a->cfg.service_tier != '\0' ?
	    a->cfg.service_tier : NULL;
	mc.settings.max_output_tokens = a->cfg.max_output_tokens;
	mc.timeout_ms = (long)(a->cfg.request_timeout * 1000.0);
	mc.max_retries = a->cfg.max_retries > 0 ? a->cfg.max_retries :
	    HTTP_RETRIES_NONE;
	mc.max_rounds = 64;
	mc.outage_patience_ms = a->cfg.outage_patience > 0 ?
	    (long)(a->cfg.outage_patience * 1000.0) : -1;
	if (a->instructions == NULL || a->host == NULL)
		return -1;
	a->model = model_new(a->loop, &mc, a->host, a->red);
	if (a->model == NULL)
		return -1;
	model_set_outage_observer(a->model, on_outage, a);
	model_set_setup_observer(a->model, on_setup_error, a);
	return 0;
}
