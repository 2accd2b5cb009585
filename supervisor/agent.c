/*
 * agent.c - the agent run loop (see agent.h).
 *
 * The host never chooses actions. It runs cell n; the model, called by the
 * cell through call_me, registers cell n+1 (once) with set_next_cell_code.
 * A cell that raises, ends without a successor or is killed is followed by
 * a repair cell the supervisor asks the model for; three consecutive
 * failures end the run (exit 1), quit() ends it normally (exit 0), a
 * KeyboardInterrupt/SystemExit from cell code or Ctrl-C ends it with 130.
 */
#include "supervisor/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

extern char **environ;

#include "common/fdio.h"
#include "common/log.h"
#include "supervisor/config.h"
#include "supervisor/hosttools.h"
#include "supervisor/http.h"
#include "supervisor/journal.h"
#include "supervisor/model.h"
#include "supervisor/notify.h"
#include "supervisor/redact.h"
#include "supervisor/runner.h"
#include "supervisor/sig.h"
#include "supervisor/tui.h"
#include "supervisor/view.h"

#define MAX_FAILURES 3
#define RECOVERY_SUMMARY \
	"Analyze the previous cell's error and generate repair code."
#define RECOVERY_PREFIX "Repair the failed cell and continue the original " \
	"task. Existing side effects are not rolled back.\n"

struct agent {
	struct config cfg;
	struct view view;
	const char *task;
	struct loop *loop;
	struct runner *runner;
	struct model *model;
	struct hosttools *host;
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
	unsigned failures;
	struct cell *failed;	/* the record the repair is about */
	struct journal *journal;	/* NULL: not journaled */
	json_t *records;		/* the journal read back (--resume) */
	char *stop_reason;
	json_t *signatures;		/* failure signature -> times seen */
};

/* A call_me from the worker, waiting for its model call. */
struct pending {
	struct agent *a;
	uint64_t req;		/* the worker's request id */
	unsigned gen;		/* worker generation that asked */
};

static void run_cell(struct agent *a, const char *code, size_t len,
    const char *summary, int64_t generated_by);
static void start_recovery(struct agent *a);

static int record(struct agent *a, const char *type, json_t *rec);

static void
stop(struct agent *a, int rc, const char *why)
{
	if (why != NULL)
		log_warnx("%s", why);
	if (a->stop_reason == NULL && why != NULL)
		a->stop_reason = strdup(why);
	loop_stop(a->loop, rc);
}

/*
 * Appends one record (consumed) to the journal, if there is one. A step
 * that cannot be recorded must not happen: the run stops.
 */
static int
record(struct agent *a, const char *type, json_t *rec)
{
	int rc = 0;

	if (a->journal != NULL && rec != NULL &&
	    (rc = journal_append(a->journal, type, rec)) < 0) {
		log_warn("cannot write the journal %s", a->cfg.journal);
		loop_stop(a->loop, EXIT_FAILED);
	}
	json_decref(rec);
	return rc;
}

static json_t *
cell_record(const struct cell *c, json_t *(*part)(const struct cell *))
{
	json_t *o = json_pack("{s:i}", "cell", (int)c->n);

	(void)json_object_update_new(o, part(c));
	return o;
}

/* --- the successor ------------------------------------------------------- */

static void
clear_successor(struct agent *a)
{
	free(a->succ_code);
	free(a->succ_summary);
	a->succ_code = a->succ_summary = NULL;
	a->has_succ = 0;
}

static enum submit_result
submit(void *ctx, uint32_t cell, const char *code, size_t len,
    const char *summary)
{
	struct agent *a = ctx;
	const struct cell *cur = runner_current(a->runner);
	int for_recovery = a->recovering && cell == a->recovery_for;

	if (!for_recovery && (cur == NULL || cur->n != cell))
		return SUBMIT_INACTIVE;
	if (a->has_succ && a->succ_for == cell)
		return SUBMIT_ALREADY;
	clear_successor(a);
	a->succ_code = malloc(len + 1);
	a->succ_summary = strdup(summary);
	if (a->succ_code == NULL || a->succ_summary == NULL) {
		clear_successor(a);
		return SUBMIT_INACTIVE;
	}
	memcpy(a->succ_code, code, len);
	a->succ_code[len] = '\0';
	a->succ_len = len;
	a->succ_for = cell;
	a->has_succ = 1;
	/* keyed by the cell it follows: a repair cell by the failed one */
	(void)record(a, "successor", json_pack("{s:i, s:s%, s:s}", "cell",
	    (int)(for_recovery && a->failed != NULL ? a->failed->n : cell),
	    "code", code, len, "summary", summary));
	return SUBMIT_OK;
}

static struct host_binding
binding(struct agent *a, uint32_t cell)
{
	struct host_binding b;

	b.cell = cell;
	b.history = runner_cells(a->runner);
	b.submit = submit;
	b.ctx = a;
	return b;
}

/* --- call_me from a cell --------------------------------------------------- */

static int
same_worker(const struct pending *p)
{
	return worker_generation(runner_worker(p->a->runner)) == p->gen;
}

static void
call_event(void *ctx, const char *json, size_t len)
{
	struct pending *p = ctx;

	if (same_worker(p))
		(void)runner_event(p->a->runner, p->req, json, len);
}

static void
reply_error(struct agent *a, uint64_t req, const char *type, const char *msg)
{
	json_t *o = json_pack("{s:s, s:s}", "type", type, "message", msg);
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s != NULL)
		(void)runner_reply(a->runner, req, REPLY_ERROR, s, strlen(s));
	free(s);
	json_decref(o);
}

static void
call_done(void *ctx, const json_t *resp, const char *type, const char *msg)
{
	struct pending *p = ctx;
	struct agent *a = p->a;
	char *s, *clean;
	size_t n;

	tui_set_total(model_total_tokens(a->model));
	if (same_worker(p) && type != NULL) {
		reply_error(a, p->req, type, msg);
	} else if (same_worker(p)) {
		s = json_dumps(resp, JSON_COMPACT);
		/* no copy when there is no secret to clean */
		clean = s != NULL && redact_count(a->red) > 0 ?
		    redact_string(a->red, s, strlen(s), &n) : NULL;
		if (clean == NULL && s != NULL)
			n = strlen(s);
		if (clean != NULL || s != NULL)
			(void)runner_reply(a->runner, p->req, REPLY_OK,
			    clean != NULL ? clean : s, n);
		else
			reply_error(a, p->req, "ModelError", "out of memory");
		free(s);
		free(clean);
	}
	free(p);
}

static void
call_progress(void *ctx, size_t delta_bytes)
{
	(void)ctx;
	tui_set_streaming(delta_bytes);
}

static const struct model_call_ops call_ops = {
	call_event, call_progress, call_done
};

static void
a_request(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct agent *a = ctx;
	json_t *body = json_loadb(q->body.ptr, q->body.len, 0, NULL);
	struct pending *p;
	struct host_binding b;

	if (strcmp(q->method.ptr, "call_me") != 0 || !json_is_object(body)) {
		reply_error(a, q->id, "RuntimeError", "unknown host request");
		json_decref(body);
		return;
	}
	p = calloc(1, sizeof *p);
	if (p == NULL) {
		reply_error(a, q->id, "ModelError", "out of memory");
		json_decref(body);
		return;
	}
	p->a = a;
	p->req = q->id;
	p->gen = worker_generation(runner_worker(a->runner));
	b = binding(a, c->n);
	(void)model_call(a->model, json_object_get(body, "params"),
	    json_is_true(json_object_get(body, "stream")), &b, &call_ops, p);
	json_decref(body);
}

/* --- showing the run ------------------------------------------------------- */

static void
a_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	(void)ctx;
	(void)c;
	/* a closed terminal loses only the live copy: the record keeps it */
	(void)fd_write_all(stream == 1 ? 1 : 2, p, n);
}

static void
show_code(const struct cell *c)
{
	const char *p = c->code, *nl;
	int line = 1;

	(void)fprintf(stderr, "[agentz] cell %u: %s\n", c->n,
	    c->summary != NULL ? c->summary : "");
	while (*p != '\0') {
		nl = strchr(p, '\n');
		(void)fprintf(stderr, "%4d | %.*s\n", line++,
		    (int)(nl != NULL ? nl - p : (long)strlen(p)), p);
		p = nl != NULL ? nl + 1 : p + strlen(p);
	}
}

static void
show_result(const struct agent *a, const struct cell *c)
{
	const char *kind = cells_kind_name(c->kind);

	if (c->traceback != NULL && (a->cfg.verbose || c->status != CELL_OK))
		(void)fputs(c->traceback, stderr);
	(void)fprintf(stderr, "[agentz] cell %u: %s%s%s%s%s (%.1f s, %lld "
	    "tokens so far)\n", c->n, cells_status_name(c->status),
	    kind != NULL ? " " : "", kind != NULL ? kind : "",
	    c->detail != NULL ? ": " : "", c->detail != NULL ? c->detail : "",
	    (double)c->duration_us / 1e6, model_total_tokens(a->model));
}

/* --- the loop ------------------------------------------------------------- */

static void
run_cell(struct agent *a, const char *code, size_t len, const char *summary,
    int64_t generated_by)
{
	struct cell *c;

	/* code may be the successor itself: record the cell (a copy) first */
	c = runner_run(a->runner, code, len, summary, NULL, generated_by);
	clear_successor(a);
	if (c == NULL) {
		stop(a, EXIT_FAILED, "cannot start the next cell");
		return;
	}
	(void)record(a, "input", cell_record(c, cells_inputs_json));
	if (a->cfg.verbose)
		show_code(c);
	notify_status("cell %u: %s", c->n,
	    c->summary != NULL ? c->summary : "");
	tui_set_cell(c->n, c->summary);
}

/* The record of a cell that ended normally without a successor. */
static void
mark_no_successor(struct cell *c)
{
	c->status = CELL_ERROR;
	c->kind = KIND_NO_SUCCESSOR;
	cells_set_detail(c, "the cell ended without submitting the next cell "
	    "with set_next_cell_code");
}

static void
failed(struct agent *a, struct cell *c)
{
	char why[128];

	a->failures++;
	a->failed = c;
	if (a->failures >= MAX_FAILURES) {
		(void)snprintf(why, sizeof why, "stopping: %u consecutive failed "
		    "cells (the last is cell %u)", a->failures, c->n);
		stop(a, EXIT_FAILED, why);
		return;
	}
	start_recovery(a);
}

/* --- hard stops outside the model (SPEC §8) ----------------------------- */

/* What identifies a failure: kind, exception type, the traceback's last
 * line (the message), or the detail. */
static char *
failure_signature(const struct cell *c)
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

/* Stops the run (1) when a budget is spent after cell c. */
static int
over_budget(struct agent *a, const struct cell *c)
{
	char why[512], *sig;
	json_int_t seen;

	why[0] = '\0';
	if (a->cfg.max_cells > 0 && runner_cells(a->runner)->n >=
	    a->cfg.max_cells)
		(void)snprintf(why, sizeof why, "stopping: the budget of %u "
		    "cells is spent", a->cfg.max_cells);
	else if (a->cfg.max_tokens > 0 && model_total_tokens(a->model) >=
	    a->cfg.max_tokens)
		(void)snprintf(why, sizeof why, "stopping: %lld tokens used, the "
		    "budget is %lld", model_total_tokens(a->model),
		    a->cfg.max_tokens);
	if (why[0] == '\0' && c != NULL && c->status == CELL_ERROR &&
	    a->cfg.max_same_failure > 0 && (sig = failure_signature(c))) {
		seen = json_integer_value(json_object_get(a->signatures, sig)) + 1;
		(void)json_object_set_new(a->signatures, sig, json_integer(seen));
		if (seen >= (json_int_t)a->cfg.max_same_failure)
			(void)snprintf(why, sizeof why, "stopping: the same failure "
			    "happened %lld times (%s)", (long long)seen, sig);
		free(sig);
	}
	if (why[0] == '\0')
		return 0;
	stop(a, EXIT_BUDGET, why);
	return 1;
}

static void
on_run_deadline(struct loop *l, void *ctx)
{
	struct agent *a = ctx;
	char why[96];

	(void)l;
	(void)snprintf(why, sizeof why, "stopping: the run deadline of %.0f s "
	    "was reached", a->cfg.deadline);
	stop(a, EXIT_BUDGET, why);
}

static void
a_finished(void *ctx, struct cell *c)
{
	struct agent *a = ctx;
	int has = a->has_succ && a->succ_for == c->n;

	if (c->status == CELL_OK && !has)
		mark_no_successor(c);
	(void)record(a, "output", cell_record(c, cells_outputs_json));
	show_result(a, c);
	if (c->status == CELL_EXITED) {
		stop(a, EXIT_OK, NULL);
	} else if (c->status == CELL_INTERRUPTED) {
		stop(a, EXIT_SIGINT, "the cell raised KeyboardInterrupt or "
		    "SystemExit: stopping");
	} else if (over_budget(a, c)) {
		return;
	} else if (c->status == CELL_OK) {
		a->failures = 0;
		run_cell(a, a->succ_code, a->succ_len, a->succ_summary, c->n);
	} else {
		failed(a, c);
	}
}

static void
recovery_done(void *ctx, const json_t *resp, const char *type,
    const char *msg)
{
	struct agent *a = ctx;

	(void)resp;
	a->recovering = 0;
	tui_set_total(model_total_tokens(a->model));
	if (type != NULL)
		log_warnx("repair request failed: %s: %s", type, msg);
	if (over_budget(a, NULL))
		return;
	if (type == NULL && a->has_succ && a->succ_for == a->recovery_for) {
		run_cell(a, a->succ_code, a->succ_len, RECOVERY_SUMMARY, -1);
		return;
	}
	if (type == NULL)
		log_warnx("the model did not submit a repair cell");
	failed(a, a->failed);
}

static const struct model_call_ops recovery_ops = {
	NULL, call_progress, recovery_done
};

static void
start_recovery(struct agent *a)
{
	json_t *rec = json_pack("{s:s}", "task", a->task), *params;
	struct host_binding b;
	char *text, *clean;
	size_t n;

	(void)json_object_update_new(rec, cells_json(a->failed));
	text = json_dumps(rec, JSON_COMPACT);
	json_decref(rec);
	clean = text != NULL ? redact_string(a->red, text, strlen(text), &n) :
	    NULL;
	free(text);
	if (clean == NULL) {
		stop(a, EXIT_FAILED, "out of memory");
		return;
	}
	params = json_pack("{s:s+}", "input", RECOVERY_PREFIX, clean);
	free(clean);
	clear_successor(a);
	a->recovering = 1;
	a->recovery_for = (uint32_t)runner_cells(a->runner)->n;
	b = binding(a, a->recovery_for);
	(void)model_call(a->model, params, 0, &b, &recovery_ops, a);
	json_decref(params);
}

/* --- set-up ------------------------------------------------------------------ */

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
"thread's stack is dumped and the whole worker process tree is killed: "
"the namespace is lost and a fresh worker runs the next cell, so keep "
"important state in files. Memory is capped at %llu MiB (a MemoryError "
"you can catch, or a kill reported as memory). A failed cell is followed "
"by a repair cell you write from its record; three consecutive failures "
"end the run. Side effects are never rolled back.\n"
"\n"
"Work directly: read and write files, use the network, run commands, "
"install what you need, without waiting for approval. Never print, log or "
"send secrets such as API keys; printed secrets are redacted anyway.\n"
"Call quit() only when the user explicitly asks you to stop — not when "
"the task is done, when you are idle, or when you are waiting for a "
"reply: then keep going, or wait for input with input().\n";

static char *
make_instructions(const struct config *c)
{
	char *s;

	if (asprintf(&s, instructions_fmt, c->model, c->cell_timeout, c->grace,
	    (unsigned long long)(c->memory_limit >> 20)) < 0)
		return NULL;
	return s;
}

/* Cell 0, the only code the engine writes. */
static char *
first_cell(const char *task)
{
	json_t *lit = json_string("");
	char *text, *code = NULL;

	if (asprintf(&text, "%s\nSubmit the first Python cell.", task) < 0)
		return NULL;
	json_decref(lit);
	lit = json_string(text);
	free(text);
	/* A JSON string without \u escapes above U+001F is a Python literal. */
	text = lit != NULL ? json_dumps(lit, JSON_ENCODE_ANY) : NULL;
	if (text != NULL && asprintf(&code, "response = call_me(input=%s)\n"
	    "print(response.output_text)\n", text) < 0)
		code = NULL;
	free(text);
	json_decref(lit);
	return code;
}

static void
a_fatal(void *ctx, const char *why)
{
	struct agent *a = ctx;
	char buf[512];

	(void)snprintf(buf, sizeof buf, "the worker cannot be started: %s", why);
	stop(a, EXIT_WORKER, buf);
}

static void
a_signal(int signo, void *ctx)
{
	struct agent *a = ctx;
	int rc = runner_signal(a->runner, signo);

	if (rc >= 0)
		loop_stop(a->loop, rc);
}

static const struct runner_ops agent_runner_ops = {
	a_output, a_finished, a_request, a_fatal
};

static int
setup_model(struct agent *a)
{
	struct model_config mc;
	const char *key = getenv("OPENAI_API_KEY");

	if ((key == NULL || *key == '\0') &&
	    strstr(a->cfg.base_url, "api.openai.com") != NULL) {
		log_warnx("OPENAI_API_KEY is not set (in the environment or "
		    "./.env), and the model is at %s", a->cfg.base_url);
		return -1;
	}
	a->instructions = make_instructions(&a->cfg);
	a->host = hosttools_new();
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
	if (a->instructions == NULL || a->host == NULL)
		return -1;
	a->model = model_new(a->loop, &mc, a->host, a->red);
	return a->model != NULL ? 0 : -1;
}

/* --- the journal and resuming --------------------------------------------- */

static json_t *
find_run(const json_t *records)
{
	size_t i;
	json_t *r;

	json_array_foreach(records, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));

		if (t != NULL && strcmp(t, "run") == 0)
			return r;
	}
	return NULL;
}

/* Reads the journal back (--resume); the task comes from it. */
static int
load_journal(struct agent *a)
{
	const char *task;
	char *err = NULL;

	a->records = journal_load(a->cfg.journal, &err);
	if (a->records == NULL) {
		log_warnx("--resume: %s", err != NULL ? err : "out of memory");
		free(err);
		return -1;
	}
	task = json_string_value(json_object_get(find_run(a->records),
	    "task"));
	if (task == NULL) {
		log_warnx("--resume: %s holds no run record", a->cfg.journal);
		return -1;
	}
	if (a->task != NULL && strcmp(a->task, task) != 0) {
		log_warnx("--resume: the task given differs from the one in %s",
		    a->cfg.journal);
		return -1;
	}
	a->task = task;
	return 0;
}

static int
open_journal(struct agent *a)
{
	struct stat st;

	if (a->cfg.journal == NULL)
		return 0;
	/* nothing to resume yet: a new run (how a unit starts the first time) */
	if (a->cfg.resume && (stat(a->cfg.journal, &st) < 0 || st.st_size == 0)) {
		if (a->task == NULL) {
			log_warnx("--resume: %s holds no run, and no task was given",
			    a->cfg.journal);
			return -1;
		}
		a->cfg.resume = 0;
	}
	if (a->cfg.resume && load_journal(a) < 0)
		return -1;
	if (!a->cfg.resume && stat(a->cfg.journal, &st) == 0 && st.st_size > 0) {
		log_warnx("the journal %s already holds a run: continue it with "
		    "--resume, or give another --journal", a->cfg.journal);
		return -1;
	}
	a->journal = journal_open(a->cfg.journal, a->red);
	if (a->journal == NULL) {
		log_warn("cannot open the journal %s", a->cfg.journal);
		return -1;
	}
	return record(a, a->cfg.resume ? "resume" : "run", json_pack(
	    "{s:s, s:s, s:f}", "task", a->task, "model", a->cfg.model, "at",
	    loop_wall()));
}

/* The journal's records of one type by cell number, as an object. */
static json_t *
by_cell(const json_t *records, const char *type)
{
	json_t *o = json_object(), *r;
	char key[24];
	size_t i;

	json_array_foreach(records, i, r) {
		const char *t = json_string_value(json_object_get(r, "type"));

		if (t == NULL || strcmp(t, type) != 0)
			continue;
		(void)snprintf(key, sizeof key, "%lld", (long long)
		    json_integer_value(json_object_get(r, "cell")));
		(void)json_object_set(o, key, r);
	}
	return o;
}

/* Rebuilds the history; returns the last cell, or NULL when none ran. */
static struct cell *
restore_cells(struct agent *a)
{
	json_t *in = by_cell(a->records, "input");
	json_t *out = by_cell(a->records, "output");
	struct cell *c = NULL;
	char key[24];
	size_t n;

	for (n = 0;; n++) {
		const json_t *i, *o;

		(void)snprintf(key, sizeof key, "%zu", n);
		i = json_object_get(in, key);
		o = json_object_get(out, key);
		if (i == NULL || (c = runner_restore(a->runner, i, o)) == NULL)
			break;
		if (o == NULL)	/* it was running when we went down */
			(void)record(a, "output", cell_record(c,
			    cells_outputs_json));
		a->failures = c->status == CELL_ERROR ? a->failures + 1 : 0;
	}
	json_decref(in);
	json_decref(out);
	return runner_last(a->runner);
}

/* Continues a journaled run. 1 when there is nothing left to do. */
static int
resume(struct agent *a)
{
	json_t *succ = by_cell(a->records, "successor");
	struct cell *last = restore_cells(a);
	const json_t *s = NULL;
	char key[24];

	if (last != NULL) {
		(void)snprintf(key, sizeof key, "%u", last->n);
		s = json_object_get(succ, key);
	}
	log_info("resuming: %zu cells in %s", runner_cells(a->runner)->n,
	    a->cfg.journal);
	if (last != NULL && last->status == CELL_EXITED) {
		log_info("the run had already ended with quit()");
		json_decref(succ);
		return 1;
	}
	if (last != NULL && s != NULL) {	/* its successor was given */
		int ok = last->status == CELL_OK;

		run_cell(a, json_string_value(json_object_get(s, "code")),
		    json_string_length(json_object_get(s, "code")), ok ?
		    json_string_value(json_object_get(s, "summary")) :
		    RECOVERY_SUMMARY, ok ? (int64_t)last->n : -1);
	} else if (last != NULL) {
		if (a->failures > 0)
			a->failures--;	/* failed() counts this one again */
		failed(a, last);
	}
	json_decref(succ);
	return last == NULL ? -1 : 0;
}

static int
agent_run(struct agent *a, const char *wpath)
{
	struct runner_config rcfg;
	char *code;
	int rc;

	a->loop = loop_new();
	a->red = redact_new();
	if (a->loop == NULL || a->red == NULL ||
	    redact_add_from_environ(a->red, environ) < 0 ||
	    sig_setup(a->loop, a_signal, a) < 0)
		fatal("agent: set-up");
	if (open_journal(a) < 0 || setup_model(a) < 0)
		return EXIT_USAGE;
	notify_init(a->loop);
	a->signatures = json_object();
	if (a->cfg.deadline > 0)
		(void)loop_timer(a->loop, (uint64_t)(a->cfg.deadline * 1000.0),
		    on_run_deadline, a);
	if (tui_init(a->loop, 1))
		(void)atexit(tui_end);
	runner_config_init(&rcfg, &a->cfg, wpath, 0);
	rcfg.red = a->red;
	rcfg.jail = &a->view.jc;
	a->runner = runner_new(a->loop, &rcfg, &agent_runner_ops, a);
	if (a->runner != NULL) {
		log_info("isolation: %s", runner_isolation(a->runner));
		(void)record(a, "isolation", json_pack("{s:s, s:s}", "isolation",
		    runner_isolation(a->runner), "containment",
		    runner_containment(a->runner)));
	}
	if (a->runner == NULL)
		return EXIT_WORKER;	/* said why */
	if (runner_start(a->runner) < 0) {
		log_warn("cannot start %s", wpath);
		return EXIT_WORKER;
	}
	rc = a->cfg.resume ? resume(a) : -1;
	if (rc > 0)
		return EXIT_OK;
	if (rc < 0) {	/* a new run, or a journal without a cell */
		code = first_cell(a->task);
		if (code != NULL)
			run_cell(a, code, strlen(code),
			    "Ask the model for the first cell.", -1);
		else
			stop(a, EXIT_FAILED, "out of memory writing cell 0");
		free(code);
	}
	notify_ready();
	rc = loop_run(a->loop);
	(void)record(a, "stop", json_pack("{s:i, s:s?, s:f}", "exit", rc,
	    "reason", a->stop_reason, "at", loop_wall()));
	tui_end();
	notify_stopping();
	return rc;
}

static void
agent_free(struct agent *a)
{
	model_free(a->model);
	runner_free(a->runner);
	view_clear(&a->view);
	hosttools_free(a->host);
	redact_free(a->red);
	loop_free(a->loop);
	clear_successor(a);
	free(a->instructions);
	journal_close(a->journal);
	json_decref(a->records);
	json_decref(a->signatures);
	free(a->stop_reason);
	config_clear(&a->cfg);
}

int
agent_main(int argc, char **argv)
{
	struct agent a;
	char *wpath;
	int rc;

	memset(&a, 0, sizeof a);
	rc = config_parse(&a.cfg, argc, argv, "agentz");
	if (rc != 0) {
		config_clear(&a.cfg);
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	}
	log_init("agentz", a.cfg.verbose);
	if ((a.cfg.resume && a.cfg.journal == NULL) || a.cfg.nargs > 1 ||
	    (!a.cfg.resume && (a.cfg.nargs != 1 || *a.cfg.args[0] == '\0'))) {
		(void)fprintf(stderr, "agentz: give the task as one argument, "
		    "e.g. agentz \"summarise README.md\", or --resume with "
		    "--journal FILE (see agentz --help)\n");
		config_clear(&a.cfg);
		return EXIT_USAGE;
	}
	a.task = a.cfg.nargs == 1 ? a.cfg.args[0] : NULL;
	wpath = config_worker_path(&a.cfg);
	if (wpath == NULL)
		fatal("agent: worker path");
	if (view_init(&a.view, &a.cfg, wpath, "agentz") < 0)
		rc = EXIT_USAGE;
	else
		rc = agent_run(&a, wpath);
	agent_free(&a);
	free(wpath);
	return rc;
}
