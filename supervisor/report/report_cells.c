/*
 * report_cells.c - the cells on the page (report_int.h): the timeline
 * (one bar a cell, its width by its duration, its colour by its status,
 * kills and rollbacks marked), the table of cells (duration, peak memory,
 * CPU, namespace) and each cell's details (code, output, traceback), read
 * again from the journal one record at a time.
 */
#include "supervisor/report/report_int.h"

#include <string.h>

/* The classes of a cell: its status and kind, and its marks. */
static void
cell_classes(FILE *f, const struct rcell *c)
{
	html_fmt(f, "st-%s", c->restarted ? "interrupted" :
	    c->out.lineno == 0 ? "running" : html_class(c->status));
	if (c->kind != NULL)
		html_fmt(f, " k-%s", html_class(c->kind));
	if (c->killed)
		html_raw(f, " killed");
	if (c->fate == NS_ROLLED_BACK)
		html_raw(f, " rollback");
	if (c->fate == NS_LOST)
		html_raw(f, " lost");
}

/* "error: timeout", "ok", or that no output was recorded. */
static void
cell_state(FILE *f, const struct rcell *c)
{
	if (c->restarted) {
		html_raw(f, "interrupted by a supervisor restart (no output "
		    "record)");
		return;
	}
	if (c->out.lineno == 0) {
		html_raw(f, "no output record (running, or the run was cut "
		    "off)");
		return;
	}
	html_str(f, c->status != NULL ? c->status : "?");
	if (c->kind != NULL) {
		html_raw(f, ": ");
		html_str(f, c->kind);
	}
	if (c->exc != NULL) {
		html_raw(f, " (");
		html_str(f, c->exc);
		html_raw(f, ")");
	}
}

static double
cell_secs(const struct rcell *c)
{
	if (c->duration >= 0)
		return c->duration;
	if (c->finished > 0 && c->started > 0 && c->finished >= c->started)
		return c->finished - c->started;
	return 0;
}

static void
marks(FILE *f, const struct rcell *c)
{
	if (c->killed)
		html_raw(f, "<span class=\"mark kill\" title=\"killed\">"
		    "&#x2715;</span>");
	if (c->fate == NS_ROLLED_BACK)
		html_raw(f, "<span class=\"mark rb\" title=\"rolled back\">"
		    "&#x21ba;</span>");
	if (c->fate == NS_LOST)
		html_raw(f, "<span class=\"mark lost\" title=\"namespace "
		    "lost\">&#x2205;</span>");
}

static void
bar(FILE *f, const struct rcell *c)
{
	double s = cell_secs(c);

	html_fmt(f, "<a class=\"bar ");
	cell_classes(f, c);
	html_fmt(f, "\" id=\"bar-%lld\" href=\"#cell-%lld\" data-cell=\"%lld\""
	    "%s%s style=\"flex:%.6f 0 10px\" title=\"cell %lld: ", c->n, c->n,
	    c->n, c->killed ? " data-killed=\"1\"" : "",
	    c->fate == NS_ROLLED_BACK ? " data-rollback=\"1\"" : "",
	    s > 1e7 ? 1e7 : s, c->n);
	cell_state(f, c);
	html_raw(f, ", ");
	html_dur(f, c->duration);
	if (c->ns != NULL) {
		html_raw(f, ", namespace ");
		html_str(f, c->ns);
	}
	html_fmt(f, "\"><span class=\"num\">%lld</span><span class=\"marks\">",
	    c->n);
	marks(f, c);
	html_raw(f, "</span></a>\n");
}

static const char legend[] =
    "<div class=\"legend\"><span class=\"sw st-ok\"></span>ok "
    "<span class=\"sw st-exited\"></span>exited (quit) "
    "<span class=\"sw st-error k-exception\"></span>exception "
    "<span class=\"sw st-error k-no_successor\"></span>no successor "
    "<span class=\"sw st-error k-timeout\"></span>timeout "
    "<span class=\"sw st-error k-memory\"></span>memory "
    "<span class=\"sw st-error k-crashed\"></span>crashed "
    "<span class=\"sw st-interrupted\"></span>interrupted "
    "<span class=\"sw st-error k-restart\"></span>cut (restart, stop) "
    "<span class=\"sw st-running\"></span>no output record "
    "<span class=\"sw st-other\"></span>other &#x2003; "
    "<span class=\"mark kill\">&#x2715;</span> killed "
    "<span class=\"mark rb\">&#x21ba;</span> namespace rolled back "
    "<span class=\"mark lost\">&#x2205;</span> namespace lost</div>\n";

void
report_timeline(const struct report *r)
{
	size_t i;

	html_raw(r->out, "<section id=\"timeline-section\"><h2>Timeline"
	    "</h2>\n");
	if (r->ncells == 0) {
		html_raw(r->out, "<p class=\"none\">No cell was recorded."
		    "</p><div id=\"timeline\"></div></section>\n");
		return;
	}
	html_raw(r->out, "<p class=\"hint\">One bar a cell, its width by "
	    "its duration; a bar leads to its cell.</p>\n<div id=\"timeline\" "
	    "class=\"timeline\">\n");
	for (i = 0; i < r->ncells; i++)
		bar(r->out, &r->cells[i]);
	html_raw(r->out, "</div>\n");
	html_raw(r->out, legend);
	html_raw(r->out, "</section>\n");
}

static void
cpu(FILE *f, long long us)
{
	if (us < 0)
		html_raw(f, "?");
	else
		html_dur(f, (double)us / 1e6);
}

/* Peak memory: the cgroup's peak when measured, else the peak RSS. */
static void
memory(FILE *f, const struct rcell *c)
{
	if (c->mem_peak >= 0) {
		html_kb(f, c->mem_peak / 1024);
		html_raw(f, " (cgroup)");
	} else
		html_kb(f, c->rss_kb);
}

static void
namespace(FILE *f, const struct rcell *c)
{
	html_str(f, c->ns != NULL ? c->ns : "");
	if (c->threads != NULL) {
		html_raw(f, "; threads lost: ");
		html_str(f, c->threads);
	}
}

static void
row(FILE *f, const struct rcell *c)
{
	html_fmt(f, "<tr><td><a href=\"#cell-%lld\">%lld</a>", c->n, c->n);
	marks(f, c);
	html_raw(f, "</td><td>");
	html_str(f, c->summary);
	if (c->repair_of >= 0)
		html_fmt(f, " <span class=\"tag\">repair of cell %lld</span>",
		    c->repair_of);
	html_raw(f, "</td><td><span class=\"badge ");
	cell_classes(f, c);
	html_raw(f, "\">");
	cell_state(f, c);
	html_raw(f, "</span></td><td class=\"n\">");
	html_dur(f, c->duration);
	html_raw(f, "</td><td class=\"n\">");
	memory(f, c);
	html_raw(f, "</td><td class=\"n\">");
	cpu(f, c->cpu_us);
	html_raw(f, "</td><td>");
	namespace(f, c);
	html_raw(f, "</td></tr>\n");
}

void
report_table(const struct report *r)
{
	size_t i;

	if (r->ncells == 0)
		return;
	html_raw(r->out, "<section><h2>Cells</h2>\n<table class=\"cells\">"
	    "<thead><tr><th>cell</th><th>summary</th><th>status</th>"
	    "<th>duration</th><th>peak memory</th><th>CPU</th>"
	    "<th>namespace</th></tr></thead><tbody>\n");
	for (i = 0; i < r->ncells; i++)
		row(r->out, &r->cells[i]);
	html_raw(r->out, "</tbody></table></section>\n");
}

/* --- each cell's details, its records read again ------------------------ */

static long long
num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* A text field of a record in a <pre>, head and tail when long. */
static void
text_field(const struct report *r, const json_t *rec, const char *key,
    const char *title)
{
	const json_t *v = json_object_get(rec, key);

	if (!json_is_string(v) || json_string_length(v) == 0)
		return;
	html_fmt(r->out, "<h4>%s</h4><pre class=\"%s\">", title, key);
	html_capped(r->out, json_string_value(v), json_string_length(v),
	    r->shown);
	html_raw(r->out, "</pre>\n");
}

static void
output_note(FILE *f, const json_t *out)
{
	long long total = num(out, "output_bytes");
	long long dropped = num(out, "output_dropped");

	if (dropped > 0)
		html_fmt(f, "<p class=\"cut\">The record kept the head and "
		    "tail of %lld bytes of output: %lld bytes were dropped "
		    "while the cell ran.</p>\n", total, dropped);
}

/* Who ended a cell before its deadline: the record's "timeout"
 * "ended_by", or (older journals) its detail's "was ended early by WHO:
 * ..." into buf; NULL: its own timeout. */
static const char *
ended_by(const json_t *out, const json_t *to, char *buf, size_t len)
{
	static const char mark[] = "was ended early by ";
	const char *who = report_jstr(to, "ended_by");
	const char *d = report_jstr(out, "detail"), *p, *end;

	if (who != NULL || d == NULL || (p = strstr(d, mark)) == NULL)
		return who;
	p += sizeof mark - 1;
	end = strstr(p, ": ");
	(void)snprintf(buf, len, "%.*s", (int)(end != NULL ? end - p :
	    (long)strlen(p)), p);
	return buf;
}

/* How the deadline ladder ended the cell: the operator's early end, or
 * its own timeout (interrupted, or killed after the grace period). */
static void
timeout_note(FILE *f, const json_t *out)
{
	const json_t *to = json_object_get(out, "timeout");
	const json_t *ms = json_object_get(to, "deadline_to_ready_ms");
	const char *stage = report_jstr(to, "stage"), *who;
	char buf[REPORT_SHORT];

	if (!json_is_object(to))
		return;
	who = ended_by(out, to, buf, sizeof buf);
	if (who != NULL) {
		html_raw(f, "<p class=\"kill\">Ended early by ");
		html_str(f, who);
		html_raw(f, " (not its timeout): stage ");
	} else {
		html_fmt(f, "<p class=\"kill\">%s at its deadline: stage ",
		    stage != NULL && strcmp(stage, "interrupted") == 0 ?
		    "Interrupted" : "Killed");
	}
	html_str(f, stage);
	if (json_is_number(ms))
		html_fmt(f, ", the worker ready again %.0f ms after the "
		    "%s", json_number_value(ms), who != NULL ? "interrupt" :
		    "deadline");
	html_raw(f, ".</p>\n");
}

static void
meta(FILE *f, const struct rcell *c, const json_t *out)
{
	html_raw(f, "<p class=\"meta\">started ");
	html_time(f, c->started);
	html_raw(f, ", finished ");
	html_time(f, c->finished);
	if (num(out, "worker_pid") > 0)
		html_fmt(f, "; worker pid %lld", num(out, "worker_pid"));
	if (num(out, "exit_code") >= 0)
		html_fmt(f, ", exit code %lld", num(out, "exit_code"));
	if (num(out, "signal") >= 0)
		html_fmt(f, ", signal %lld", num(out, "signal"));
	if (num(out, "model_calls_cancelled") > 0)
		html_fmt(f, "; %lld model calls cancelled",
		    num(out, "model_calls_cancelled"));
	html_fmt(f, "; journal lines %ld (input) and %ld (output)</p>\n",
	    c->in.lineno, c->out.lineno);
}

static void
summary_line(FILE *f, const struct rcell *c)
{
	html_raw(f, "<summary><span class=\"badge ");
	cell_classes(f, c);
	html_raw(f, "\">");
	cell_state(f, c);
	html_fmt(f, "</span> <b>cell %lld</b> ", c->n);
	html_str(f, c->summary);
	html_raw(f, " <span class=\"dim\">(");
	html_dur(f, c->duration);
	html_raw(f, ")</span>");
	marks(f, c);
	html_raw(f, "</summary>\n");
}

static int
failed(const struct rcell *c)
{
	return c->out.lineno == 0 || c->status == NULL ||
	    (strcmp(c->status, "ok") != 0 && strcmp(c->status, "exited") != 0);
}

static void
detail(const struct report *r, const struct rcell *c)
{
	json_t *in = report_reread(r, &c->in);
	json_t *out = report_reread(r, &c->out);

	/* a failed cell is what the reader looks for: open */
	html_fmt(r->out, "<details class=\"cell\" id=\"cell-%lld\" "
	    "data-cell=\"%lld\"%s>", c->n, c->n, failed(c) ? " open" : "");
	summary_line(r->out, c);
	html_raw(r->out, "<div class=\"body\">");
	meta(r->out, c, out);
	if (c->ns != NULL) {
		html_raw(r->out, "<p class=\"meta\">namespace: ");
		namespace(r->out, c);
		html_raw(r->out, "</p>\n");
	}
	timeout_note(r->out, out);
	if (in == NULL)
		html_raw(r->out, "<p class=\"warn\">The cell's input record "
		    "(its code) is missing or cannot be read again.</p>\n");
	text_field(r, in, "code", "Code");
	text_field(r, out, "output", "Output");
	output_note(r->out, out);
	text_field(r, out, "traceback", "Traceback");
	text_field(r, out, "detail", "Detail");
	text_field(r, out, "stack", "Stack");
	html_raw(r->out, "</div></details>\n");
	json_decref(in);
	json_decref(out);
}

void
report_details(const struct report *r)
{
	size_t i;

	if (r->ncells == 0)
		return;
	html_raw(r->out, "<section id=\"details\"><h2>Each cell</h2>\n"
	    "<p><button type=\"button\" id=\"open-all\">open all</button> "
	    "<button type=\"button\" id=\"close-all\">close all</button></p>"
	    "\n");
	for (i = 0; i < r->ncells; i++)
		detail(r, &r->cells[i]);
	html_raw(r->out, "</section>\n");
}
