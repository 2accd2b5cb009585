/*
 * reload.c - the run's budgets re-read at the operator's word
 * (`agentz ctl NAME budgets OPTIONS`, which the unit's ExecReload= runs
 * with the options file's $AGENTZ_OPTS, so `systemctl reload` re-reads
 * them; see agent_int.h).
 *
 * The options are parsed as the command line is; only the budgets are
 * taken (--max-cells, --deadline, --max-tokens, --max-cost,
 * --max-same-failure, --max-parallel-calls), each replaced, an absent one
 * back to its default: re-reading the file means what it says now. They
 * are checked where they always are (cells and failures when a cell ends;
 * tokens, cost and the deadline also before and during each model call);
 * the run deadline's timer is re-armed at once.
 */
#include "supervisor/agent/agent_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/text/jsonf.h"

#define WORDS_MAX 64

/* Splits the options at blanks, as systemd splits $AGENTZ_OPTS, into
 * argv after "agentz"; the words live in buf. The count, or -1. */
static int
split(char *buf, char **argv, int max)
{
	char *save, *w;
	int n = 1;

	argv[0] = (char *)(uintptr_t)"agentz";
	for (w = strtok_r(buf, " \t", &save); w != NULL;
	    w = strtok_r(NULL, " \t", &save)) {
		if (n == max - 1)
			return -1;
		argv[n++] = w;
	}
	argv[n] = NULL;
	return n;
}

static char *
refuse(const char *why, int *ok)
{
	struct jf f[] = { JF_B("ok", 0), JF_S("error", why), JF_END };

	*ok = 0;
	return jf_dumps(f, NULL);
}

/* The budgets now: {"ok": true, ...}, cells, tokens and failures whole
 * numbers, the deadline and the cost reals. */
static char *
taken(const struct agent *a, int *ok)
{
	struct jf f[] = { JF_B("ok", 1),
	    JF_I("max_cells", (int)a->cfg.max_cells),
	    JF_R("deadline", a->cfg.deadline),
	    JF_I("max_tokens", a->cfg.max_tokens),
	    JF_R("max_cost", a->cfg.max_cost),
	    JF_I("max_same_failure", (int)a->cfg.max_same_failure), JF_END };

	*ok = 1;
	return jf_dumps(f, NULL);
}

/* Takes c's budgets; NULL, or why they cannot be kept. */
static const char *
take(struct agent *a, const struct agent_config *c, int nargs)
{
	if (nargs != 0)
		return "budgets takes options only (e.g. --max-cells 40)";
	if (c->max_cost > 0 && !a->priced)
		return "--max-cost needs the price of the run's model, which "
		    "it has none of (--price at its start)";
	a->cfg.max_cells = c->max_cells;
	a->cfg.deadline = c->deadline;
	a->cfg.max_tokens = c->max_tokens;
	a->cfg.max_cost = c->max_cost;
	a->cfg.max_same_failure = c->max_same_failure;
	a->cfg.max_parallel_calls = c->max_parallel_calls;
	agent_start_deadline(a);
	return NULL;
}

/* The reply's JSON text (malloc'ed, NULL when out of memory); *ok 1 when
 * the budgets were taken, 0 when refused (the reply says why). */
char *
agent_op_budgets(struct agent *a, const char *opts, size_t len, int *ok)
{
	char *buf = strndup(opts, len), *argv[WORDS_MAX];
	const char *no = NULL;
	struct agent_config c;
	int argc, nargs = 0;

	if (buf == NULL)
		return refuse("out of memory", ok);
	if ((argc = split(buf, argv, WORDS_MAX)) < 0) {
		free(buf);
		return refuse("too many words", ok);
	}
	/* a bad option is said on the run's stderr, by the usual parser */
	memset(&c, 0, sizeof c);
	if (a->cfg.reparse(argc, argv, &c, &nargs) != 0)
		no = "not options agentz takes (the run's log says which)";
	else
		no = take(a, &c, nargs);
	free(buf);
	if (no != NULL)
		return refuse(no, ok);
	log_info("budgets re-read: --max-cells %u --deadline %.0f "
	    "--max-tokens %lld --max-cost %g --max-same-failure %u (0: none)",
	    a->cfg.max_cells, a->cfg.deadline, a->cfg.max_tokens,
	    a->cfg.max_cost, a->cfg.max_same_failure);
	return taken(a, ok);
}
