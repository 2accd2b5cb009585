/*
 * repair.c - after a failed cell: the repair request to the model (the
 * failed cell's record, redacted) and what its answer starts: the repair
 * cell, or one more failure (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/model/model.h"
#include "supervisor/text/jsonf.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"

#define SAID_MAX 300	/* bytes of the model's words in a log line */
#define RECOVERY_PREFIX "Repair the failed cell and continue the original " \
	"task. Existing side effects are not rolled back.\n"

/* ran: c is a cell that ran and failed, not a repair that gave none. */
void
agent_failed(struct agent *a, struct cell *c, int ran)
{
	a->failures++;
	a->failed_cells += ran != 0;
	a->failed = c;
	if (!agent_too_many_failures(a, c->n))
		agent_start_recovery(a);
}

/* The repair answer held no cell: say what the model said instead. */
static void
no_repair_cell(const struct agent *a, const struct model_answer *ans)
{
	char *said = model_answer_said(ans, a->red, SAID_MAX);

	if (said != NULL && *said != '\0')
		log_warnx("the model did not submit a repair cell; it said: %s",
		    said);
	else
		log_warnx("the model did not submit a repair cell (its answer "
		    "held no text)");
	free(said);
}

static void
recovery_done(void *ctx, const struct model_answer *ans, const char *type,
    const char *msg)
{
	struct agent *a = ctx;

	a->recovering = 0;
	agent_ev_request_end(a, &a->recovery_req, type, msg);
	agent_count_call(a, type, a->recovery_tokens_at, a->recovery_bytes +
	    a->recovery_streamed, a->recovery_mark.id);
	if (a->stopping)
		return;		/* nothing new starts */
	if (type != NULL)
		log_warnx("repair request failed: %s: %s", type, msg);
	if (agent_over_budget(a, NULL))
		return;
	if (type == NULL && a->has_succ && a->succ_for == a->recovery_for) {
		agent_run_cell(a, a->succ_code, a->succ_len, RECOVERY_SUMMARY,
		    -1);
		return;
	}
	if (type == NULL)
		no_repair_cell(a, ans);
	agent_failed(a, a->failed, 0);
}

static void
recovery_progress(void *ctx, size_t delta_bytes)
{
	struct agent *a = ctx;

	if (delta_bytes > a->recovery_streamed)
		a->recovery_streamed = delta_bytes;
	agent_call_grew(a, &a->recovery_mark, a->recovery_bytes +
	    a->recovery_streamed);
	agent_ev_streaming(a, delta_bytes);
	(void)agent_budget_watch(a);	/* crossing a budget stops the run */
}

static void
recovery_stats(void *ctx, const struct model_call_stats *s)
{
	struct agent *a = ctx;

	a->recovery_req.st = *s;
}

static const struct model_call_ops recovery_ops = {
	NULL, recovery_progress, recovery_done, recovery_stats
};

void
agent_start_recovery(struct agent *a)
{
	struct jf task[] = { JF_S("task", a->task), JF_END };
	struct model_req *q;
	char *text, *clean, *input, why[512];
	uint64_t req, call;
	size_t n;

	if (a->stopping)
		return;		/* nothing new starts */
	if (agent_budget_refuse(a, 0, why, sizeof why))	/* stopped */
		return;
	/* {"task":...} and the failed cell's whole record */
	text = cells_json_text(a->failed, task, NULL, &n);
	clean = text != NULL ? redact_string(a->red, text, n, &n) : NULL;
	free(text);
	if (clean == NULL || asprintf(&input, "%s%s", RECOVERY_PREFIX,
	    clean) < 0 || (q = model_req_text(input)) == NULL) {
		free(clean);
		agent_stop(a, EXIT_FAILED, "out of memory");
		return;
	}
	free(clean);
	/* the notes apart, a blank line before the repair request */
	n = strlen(input) + agent_add_restart_note(a, q, "\n\n",
	    a->failed->n, "repair");
	free(input);
	agent_clear_successor(a);
	a->recovering = 1;
	a->recovery_tokens_at = model_total_tokens(a->model);
	a->recovery_bytes = n;
	a->recovery_streamed = 0;
	a->recovery_for = (uint32_t)runner_cells(a->runner)->n;
	agent_ev_repair(a, a->failed);
	agent_ev_request_start(a, &a->recovery_req, a->failed->n, "repair",
	    0);
	req = a->recovery_req.n;
	agent_call_opened(a, &a->recovery_mark, a->recovery_bytes);
	call = model_call(a->model, q, 0, a->recovery_for, &recovery_ops, a);
	if (a->recovery_req.n == req)	/* not ended and asked again */
		a->recovery_req.call = call;
	model_req_free(q);
}
