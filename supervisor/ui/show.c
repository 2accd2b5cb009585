/*
 * show.c - the agent run's observer that shows it in plain lines: cell
 * output live, with -v each cell's summary and code, each cell's result
 * line; and the one that attaches the run's output gate (out.h). See
 * listen.h.
 */
#include "supervisor/ui/listen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/ui/out.h"

static void
show_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	const struct ui_opts *u = ctx;

	(void)c;
	if (!u->json)	/* else the event stream has it (agentev.c) */
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
static void
show_code(void *ctx, const struct cell *c)
{
	const struct ui_opts *u = ctx;
	char *sum, *code;
	const char *p, *nl;
	int line = 1;

	if (!u->verbose)
		return;
	sum = out_clean(c->summary, c->summary != NULL ? strlen(c->summary) :
	    0, 0);
	code = out_clean(c->code, strlen(c->code), 1);
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

static void
show_result(void *ctx, const struct cell *c, const struct agent_totals *t)
{
	const struct ui_opts *u = ctx;
	const char *kind = cells_kind_name(c->kind);
	char *tb = NULL, *detail;

	out_cell_end();		/* the cell's terminal filters */
	if (c->traceback != NULL && (u->verbose || c->status != CELL_OK))
		tb = out_clean(c->traceback, strlen(c->traceback), 1);
	if (tb != NULL)
		out_msg(2, tb, strlen(tb));
	detail = c->detail != NULL ? out_clean(c->detail, strlen(c->detail),
	    0) : NULL;
	show_line("[agentz] cell %u: %s%s%s%s%s (%.1f s, %lld tokens so "
	    "far%s)\n", c->n, cells_status_name(c->status),
	    kind != NULL ? " " : "", kind != NULL ? kind : "",
	    detail != NULL ? ": " : "", detail != NULL ? detail : "",
	    (double)c->duration_us / 1e6, t->tokens, t->cost_note);
	free(tb);
	free(detail);
}

static void
show_attach(void *ctx, struct loop *l, const struct redact *red)
{
	(void)ctx;
	out_set_redact(red);	/* the gate for everything shown */
	out_attach(l);
}

static void
show_detach(void *ctx)
{
	(void)ctx;
	out_attach(NULL);
	out_set_redact(NULL);
}

void
ui_show_observer(struct agent_observer *o, const struct ui_opts *u)
{
	memset(o, 0, sizeof *o);
	o->ctx = (void *)(uintptr_t)u;
	o->cell_start = show_code;
	o->output = show_output;
	o->cell_end = show_result;
}

void
ui_gate_observer(struct agent_observer *o)
{
	memset(o, 0, sizeof *o);
	o->attach = show_attach;
	o->detach = show_detach;
}
