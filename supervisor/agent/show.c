/*
 * show.c - showing the run: cell output live, and with -v each cell's
 * summary and code; each cell's result line (see agent_int.h).
 */
#include "supervisor/agent/agent_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/front/events.h"
#include "supervisor/front/out.h"
#include "supervisor/run/runner.h"

void
agent_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	(void)ctx;
	/* a stalled reader loses only the live copy: the record keeps it */
	if (events_enabled())
		events_cell_output(c != NULL ? (long)c->n : -1, stream, p, n);
	else
		out_cell(stream, p, n);
}

/* One line to stderr through the gate's queue (never blocks). */
static void
show_line(const char *fmt, ...) LOG_PRINTF(1, 2);

static void
show_line(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n > 0)
		out_msg(2, s, (size_t)n);
	if (n >= 0)
		free(s);
}

/* -v: the model's summary and code (the task is in cell 0's), redacted,
 * control characters made visible. */
void
agent_show_code(const struct cell *c)
{
	char *sum = out_clean(c->summary, c->summary != NULL ?
	    strlen(c->summary) : 0, 0);
	char *code = out_clean(c->code, strlen(c->code), 1);
	const char *p, *nl;
	int line = 1;

	show_line("[agentz] cell %u: %s\n", c->n, sum != NULL ? sum : "");
	for (p = code != NULL ? code : ""; *p != '\0'; ) {
		nl = strchr(p, '\n');
		show_line("%4d | %.*s\n", line++,
		    (int)(nl != NULL ? nl - p : (long)strlen(p)), p);
		p = nl != NULL ? nl + 1 : p + strlen(p);
	}
	free(sum);
	free(code);
}

void
agent_show_result(const struct agent *a, const struct cell *c)
{
	const char *kind = cells_kind_name(c->kind);
	char cost[48], *tb = NULL, *detail;

	out_cell_end();		/* the cell's terminal filters */
	if (c->traceback != NULL && (a->cfg.verbose || c->status != CELL_OK))
		tb = out_clean(c->traceback, strlen(c->traceback), 1);
	if (tb != NULL)
		out_msg(2, tb, strlen(tb));
	detail = c->detail != NULL ? out_clean(c->detail, strlen(c->detail),
	    0) : NULL;
	show_line("[agentz] cell %u: %s%s%s%s%s (%.1f s, %lld tokens so "
	    "far%s)\n", c->n, cells_status_name(c->status),
	    kind != NULL ? " " : "", kind != NULL ? kind : "",
	    detail != NULL ? ": " : "", detail != NULL ? detail : "",
	    (double)c->duration_us / 1e6, agent_tokens(a),
	    agent_cost_note(a, cost, sizeof cost));
	free(tb);
	free(detail);
}
