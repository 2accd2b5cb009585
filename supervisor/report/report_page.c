/*
 * report_page.c - the page (report_int.h): its head (a Content-Security-
 * Policy that lets nothing load and only the page's own script run,
 * inline styles), the run's header (task, model, times, outcome), the
 * stops and their reasons, operator notes (each with its delivery to the
 * model), the budgets the operator set, the sections of the cells and
 * the chart, every other record in journal order (a type this version
 * does not know shown field by field) and every unreadable line.
 */
#include "supervisor/report/report_int.h"

#include <stdint.h>
#include <string.h>

#include "common/size.h"

/* Bytes of one field of a record shown in the list of records. */
#define FIELD_SHOWN 600

static const char style[] =
    "<style>\n"
    "body{font:14px/1.45 sans-serif;margin:0 auto;max-width:1200px;"
    "padding:0 16px 40px;color:#1d2330;background:#fbfbfd}\n"
    "h1{font-size:22px;margin:18px 0 6px}h2{font-size:17px;margin:26px 0 "
    "8px;border-bottom:1px solid #d5d9e2;padding-bottom:3px}\n"
    "h4{margin:10px 0 3px;font-size:13px;color:#4a5060}\n"
    "dl.run{display:grid;grid-template-columns:max-content 1fr;gap:3px "
    "14px;margin:8px 0}dl.run dt{color:#5a6070}dl.run dd{margin:0}\n"
    "pre{background:#f1f3f7;border:1px solid #dde1ea;padding:6px 8px;"
    "white-space:pre-wrap;word-break:break-all;margin:0;max-height:480px;"
    "overflow:auto;font:12px/1.4 monospace}\n"
    "pre.traceback{background:#fff3f1;border-color:#f0c8c0}\n"
    "pre.task{max-height:200px}\n"
    ".timeline{display:flex;gap:2px;align-items:stretch;height:42px;"
    "overflow-x:auto;padding:2px 0}\n"
    ".bar{position:relative;display:block;min-width:10px;border-radius:3px;"
    "color:#fff;font:11px/42px monospace;text-align:center;overflow:hidden;"
    "text-decoration:none}\n"
    ".bar .marks{position:absolute;top:1px;right:3px;font:bold 13px/14px "
    "sans-serif}\n"
    ".bar.rollback{outline:3px dashed #7b2cbf;outline-offset:-3px}\n"
    ".bar.killed{box-shadow:inset 0 -6px 0 #111}\n"
    ".st-ok{background:#2e9d57}.st-exited{background:#2f6fd0}"
    ".st-error{background:#d9572b}.st-interrupted{background:#8a8f99}"
    ".st-running{background:repeating-linear-gradient(45deg,#b9bec9 0 6px,"
    "#d6dae2 6px 12px)}.st-other{background:#a77b3d}\n"
    ".st-error.k-timeout{background:#8e44ad}.st-error.k-memory{background:"
    "#9c5b14}.st-error.k-crashed{background:#2b2b2b}.st-error.k-"
    "no_successor{background:#e39b28}.st-error.k-restart,.st-error.k-"
    "stopped{background:#6d7485}\n"
    ".badge{color:#fff;border-radius:3px;padding:0 5px;font-size:12px;"
    "display:inline-block}\n"
    ".legend{font-size:12px;color:#4a5060;margin-top:6px}.sw{display:"
    "inline-block;width:12px;height:12px;border-radius:2px;margin:0 3px 0 "
    "10px;vertical-align:-2px}\n"
    ".mark{font-weight:bold;margin-left:3px}.mark.kill{color:#c0392b}"
    ".mark.rb{color:#7b2cbf}.mark.lost{color:#6d7485}.bar .mark{color:#fff}"
    "\n"
    "table{border-collapse:collapse;width:100%;font-size:13px}td,th{"
    "border-bottom:1px solid #e3e6ee;padding:3px 6px;text-align:left;"
    "vertical-align:top}td.n{text-align:right;white-space:nowrap}\n"
    ".tag{background:#e6ecfa;color:#2f4f9a;border-radius:3px;padding:0 4px;"
    "font-size:11px}\n"
    "details.cell{border:1px solid #dde1ea;border-radius:4px;margin:4px 0;"
    "background:#fff}details.cell>summary{cursor:pointer;padding:5px 8px}"
    "details.cell .body{padding:0 10px 10px}\n"
    ".dim,.meta,.hint{color:#6a7080;font-size:12px}.cut{color:#b03a14;"
    "font-weight:bold}.warn{background:#fff4d6;border:1px solid #f0d48a;"
    "padding:6px 10px}.kill{color:#7a2391}\n"
    ".chart{width:100%;max-width:900px;background:#fff;border:1px solid "
    "#dde1ea}.chart text{font:11px sans-serif;fill:#4a5060}.chart .axis{"
    "stroke:#9aa0ad}.chart .tokens{fill:none;stroke:#2f6fd0;stroke-width:2}"
    ".chart circle{fill:#2f6fd0}\n"
    "tr.unreadable td{background:#fff0ee}.k{color:#5a6070}\n"
    "td.rec{font:12px/1.4 monospace;word-break:break-all}\n"
    "</style>\n";

static const char script[] =
    "(function () {\n"
    "  'use strict';\n"
    "  var d = document, root = d.documentElement;\n"
    "  var cells = Number(root.getAttribute('data-cells'));\n"
    "  var bars = d.querySelectorAll('#timeline .bar').length;\n"
    "  var details = d.querySelectorAll('details.cell').length;\n"
    "  function all(open) {\n"
    "    d.querySelectorAll('details.cell').forEach(function (e) {\n"
    "      e.open = open;\n"
    "    });\n"
    "  }\n"
    "  var o = d.getElementById('open-all'), c = d.getElementById("
    "'close-all');\n"
    "  if (o) o.addEventListener('click', function () { all(true); });\n"
    "  if (c) c.addEventListener('click', function () { all(false); });\n"
    "  function show() {\n"
    "    var e = null;\n"
    "    try {\n"
    "      e = d.getElementById(decodeURIComponent(location.hash.slice(1)));\n"
    "    } catch (err) {\n"
    "      return;\n"
    "    }\n"
    "    if (e && e.tagName === 'DETAILS') e.open = true;\n"
    "  }\n"
    "  window.addEventListener('hashchange', show);\n"
    "  show();\n"
    "  root.setAttribute('data-report-check', bars === cells && details "
    "=== cells ? 'ok' : 'bars ' + bars + ', details ' + details + "
    "', cells ' + cells);\n"
    "})();\n";

const char *
report_exit_meaning(long long rc)
{
	switch (rc) {
	case 0: return "the model ended the run (quit())";
	case 1: return "failed: three consecutive failures";
	case 2: return "a usage error, or a journal corrupt or in use";
	case 3: return "the worker could not be started";
	case 4: return "a hard stop (a budget, the deadline, a repeated "
	    "failure)";
	case 5: return "the journal could not be written";
	case 6: return "the operator stopped the run (agentz ctl stop)";
	case 130: return "interrupted (Ctrl-C, SIGTERM, or a cell's "
	    "KeyboardInterrupt)";
	default: return "an exit status this version does not know";
	}
}

static void
head(const struct report *r, const char *nonce)
{
	FILE *f = r->out;
	size_t n = r->task != NULL ? strnlen(r->task, 80) : 0;

	html_fmt(f, "<!DOCTYPE html>\n<html lang=\"en\" data-cells=\"%zu\" "
	    "data-unreadable=\"%ld\">\n<head>\n<meta charset=\"utf-8\">\n"
	    "<meta http-equiv=\"Content-Security-Policy\" content=\""
	    "default-src 'none'; style-src 'unsafe-inline'; script-src "
	    "'nonce-%s'; img-src data:; base-uri 'none'; form-action 'none'\">"
	    "\n<meta name=\"viewport\" content=\"width=device-width\">\n"
	    "<title>agentz run: ", r->ncells, r->unreadable, nonce);
	while (n > 0 && ((unsigned char)r->task[n] & 0xc0) == 0x80 &&
	    r->task[n] != '\0')
		n--;
	html_text(f, r->task, n);
	html_raw(f, "</title>\n");
	html_raw(f, style);
	html_raw(f, "</head>\n<body>\n");
}

/* The last stop record, or NULL. */
static const json_t *
last_of(const struct report *r, const char *type)
{
	const char *t;
	size_t i = r->nents;

	while (i-- > 0) {
		t = report_jstr(r->ents[i].rec, "type");
		if (t != NULL && strcmp(t, type) == 0)
			return r->ents[i].rec;
	}
	return NULL;
}

static void
outcome(FILE *f, const json_t *stop)
{
	const json_t *rc = json_object_get(stop, "exit");

	if (stop == NULL) {
		html_raw(f, "no stop record: the run is still going, or its "
		    "supervisor was killed (a resume goes on from here)");
		return;
	}
	if (json_is_integer(rc))
		html_fmt(f, "exit %lld: %s", (long long)json_integer_value(rc),
		    report_exit_meaning(json_integer_value(rc)));
	else
		html_raw(f, "a stop record without its exit status");
	if (report_jstr(stop, "reason") != NULL) {
		html_raw(f, " &#x2014; ");
		html_str(f, report_jstr(stop, "reason"));
	}
}

static void
header(const struct report *r)
{
	FILE *f = r->out;

	html_raw(f, "<header><h1>agentz run report</h1>\n<dl class=\"run\">"
	    "<dt>task</dt><dd><pre class=\"task\">");
	if (r->task != NULL)
		html_capped(f, r->task, strlen(r->task), r->shown);
	else
		html_raw(f, "(no run record)");
	html_raw(f, "</pre></dd><dt>model</dt><dd>");
	html_str(f, r->model != NULL ? r->model : "?");
	html_raw(f, "</dd><dt>journal</dt><dd>");
	html_str(f, r->path);
	html_fmt(f, " (%ld lines)</dd><dt>started</dt><dd>", r->lines);
	html_time(f, r->t0);
	html_raw(f, "</dd><dt>last record</dt><dd>");
	html_time(f, r->t1);
	html_raw(f, " (");
	html_dur(f, r->t1 > 0 ? r->t1 - r->t0 : -1);
	html_fmt(f, " after the start)</dd><dt>cells</dt><dd>%zu</dd>"
	    "<dt>outcome</dt><dd id=\"outcome\">", r->ncells);
	outcome(f, last_of(r, "stop"));
	html_raw(f, "</dd></dl></header>\n");
}

static void
warnings(const struct report *r)
{
	size_t i;
	long shown = 0;

	if (r->lines == 0)
		html_raw(r->out, "<p class=\"warn\" id=\"empty\">The journal "
		    "is empty: no record was written.</p>\n");
	if (r->unreadable == 0)
		return;
	html_fmt(r->out, "<p class=\"warn\" id=\"unreadable\">%ld journal "
	    "lines cannot be read:", r->unreadable);
	for (i = 0; i < r->nents && shown < 50; i++)
		if (r->ents[i].rec == NULL && ++shown)
			html_fmt(r->out, " <a href=\"#line-%ld\">line %ld</a>",
			    r->ents[i].lineno, r->ents[i].lineno);
	if (r->unreadable > shown)
		html_fmt(r->out, " and %ld more", r->unreadable - shown);
	html_raw(r->out, " (listed under Journal records below).</p>\n");
}

static int
type_has(const json_t *rec, const char *word)
{
	const char *t = report_jstr(rec, "type");

	return t != NULL && strstr(t, word) != NULL;
}

/* A record's fields other than "v" and "type", each escaped and capped. */
static void
fields(FILE *f, const json_t *rec)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)(uintptr_t)rec, key, v) {
		if (strcmp(key, "v") == 0 || strcmp(key, "type") == 0)
			continue;
		html_raw(f, "<span class=\"k\">");
		html_str(f, key);
		html_raw(f, "</span>=");
		if (strcmp(key, "at") == 0 || strcmp(key, "since") == 0) {
			html_time(f, json_number_value(v));
			html_raw(f, " ");
		} else {
			html_json(f, v, FIELD_SHOWN);
			html_raw(f, " ");
		}
	}
}

static void
record_row(FILE *f, const struct rentry *e)
{
	if (e->rec == NULL) {
		html_fmt(f, "<tr class=\"unreadable\" id=\"line-%ld\"><td>%ld"
		    "</td><td>unreadable</td><td class=\"rec\"><b>", e->lineno,
		    e->lineno);
		html_str(f, e->why);
		html_raw(f, "</b><br>");
		html_text(f, e->raw, e->rawlen);
		html_raw(f, "</td></tr>\n");
		return;
	}
	html_fmt(f, "<tr class=\"rec\" id=\"line-%ld\"><td>%ld</td><td>",
	    e->lineno, e->lineno);
	html_str(f, report_jstr(e->rec, "type"));
	html_raw(f, "</td><td class=\"rec\">");
	fields(f, e->rec);
	html_raw(f, "</td></tr>\n");
}

static void
stops(const struct report *r)
{
	FILE *f = r->out;
	const json_t *rec;
	size_t i, n = 0;

	html_raw(f, "<section id=\"stops\"><h2>Stops</h2>\n<ul>\n");
	for (i = 0; i < r->nents; i++) {
		rec = r->ents[i].rec;
		if (!type_has(rec, "stop"))
			continue;
		n++;
		html_fmt(f, "<li class=\"stop\">line %ld, ", r->ents[i].lineno);
		html_time(f, json_number_value(json_object_get(rec, "at")));
		html_raw(f, ": ");
		if (strcmp(report_jstr(rec, "type"), "stop") == 0)
			outcome(f, rec);
		else
			fields(f, rec);
		html_raw(f, "</li>\n");
	}
	if (n == 0) {
		html_raw(f, "<li>");
		outcome(f, NULL);
		html_raw(f, "</li>\n");
	}
	html_raw(f, "</ul></section>\n");
}

static int
type_is(const json_t *rec, const char *type)
{
	const char *t = report_jstr(rec, "type");

	return t != NULL && strcmp(t, type) == 0;
}

/* The record that delivered the note at i: the first "note_delivered"
 * after it, or NULL. */
static const struct rentry *
delivery_of(const struct report *r, size_t i)
{
	for (i++; i < r->nents; i++)
		if (type_is(r->ents[i].rec, "note_delivered"))
			return &r->ents[i];
	return NULL;
}

/* When (and with which request) the model got a note. */
static void
delivery(FILE *f, const struct rentry *d)
{
	const json_t *cell = json_object_get(d != NULL ? d->rec : NULL,
	    "cell");
	const char *purpose = d != NULL ? report_jstr(d->rec, "purpose") :
	    NULL;

	if (d == NULL) {
		html_raw(f, " <span class=\"undelivered\">(not delivered: no "
		    "model request carried it)</span>");
		return;
	}
	html_raw(f, " <span class=\"delivered\">(delivered to the model ");
	html_time(f, json_number_value(json_object_get(d->rec, "at")));
	if (json_is_integer(cell))
		html_fmt(f, purpose != NULL && strcmp(purpose, "repair") == 0 ?
		    " with the repair request after cell %lld" :
		    " with a model request of cell %lld",
		    (long long)json_integer_value(cell));
	html_fmt(f, ", line %ld)</span>", d->lineno);
}

/* The operator's notes ("note" records), each with its delivery (the
 * "note_delivered" record after it). */
static void
notes(const struct report *r)
{
	const char *text;
	size_t i, n = 0;

	for (i = 0; i < r->nents; i++) {
		if (!type_is(r->ents[i].rec, "note"))
			continue;
		if (n++ == 0)
			html_raw(r->out, "<section id=\"notes\"><h2>Operator "
			    "notes</h2>\n<ul>\n");
		text = report_jstr(r->ents[i].rec, "text");
		html_fmt(r->out, "<li class=\"note\">line %ld, ",
		    r->ents[i].lineno);
		html_time(r->out, json_number_value(json_object_get(
		    r->ents[i].rec, "at")));
		html_raw(r->out, ", from ");
		html_str(r->out, report_jstr(r->ents[i].rec, "from") != NULL ?
		    report_jstr(r->ents[i].rec, "from") : "?");
		html_raw(r->out, ": ");
		if (text != NULL)
			html_capped(r->out, text, strlen(text), FIELD_SHOWN);
		else
			fields(r->out, r->ents[i].rec);
		delivery(r->out, delivery_of(r, i));
		html_raw(r->out, "</li>\n");
	}
	if (n > 0)
		html_raw(r->out, "</ul></section>\n");
}

/* One budget of a "budgets" record: its value, "none" for 0. */
static void
budget_value(FILE *f, const json_t *rec, const char *key, const char *unit)
{
	const json_t *v = json_object_get(rec, key);
	char num[32];

	html_fmt(f, "<span class=\"k\">%s</span>=", key);
	if (!json_is_number(v)) {
		html_raw(f, "? ");
		return;
	}
	if (json_number_value(v) <= 0) {
		html_raw(f, "none ");
		return;
	}
	size_plain(json_number_value(v), num, sizeof num);
	html_fmt(f, "%s%s ", num, unit);
}

/* The budgets set while the run went on (agentz ctl budgets). */
static void
budgets(const struct report *r)
{
	const json_t *rec;
	size_t i, n = 0;

	for (i = 0; i < r->nents; i++) {
		rec = r->ents[i].rec;
		if (!type_is(rec, "budgets"))
			continue;
		if (n++ == 0)
			html_raw(r->out, "<section id=\"budgets\"><h2>Budgets "
			    "set during the run</h2>\n<ul>\n");
		html_fmt(r->out, "<li class=\"budgets\">line %ld, ",
		    r->ents[i].lineno);
		html_time(r->out, json_number_value(json_object_get(rec,
		    "at")));
		html_raw(r->out, ", set by ");
		html_str(r->out, report_jstr(rec, "by") != NULL ?
		    report_jstr(rec, "by") : "?");
		html_raw(r->out, ": ");
		budget_value(r->out, rec, "max_cells", "");
		budget_value(r->out, rec, "deadline", " s");
		budget_value(r->out, rec, "max_tokens", "");
		budget_value(r->out, rec, "max_cost", " USD");
		budget_value(r->out, rec, "max_same_failure", "");
		budget_value(r->out, rec, "max_parallel_calls", "");
		if (json_object_get(rec, "max_egress_bytes") != NULL)
			budget_value(r->out, rec, "max_egress_bytes", " bytes");
		html_raw(r->out, "</li>\n");
	}
	if (n > 0)
		html_raw(r->out, "</ul></section>\n");
}

static void
records(const struct report *r)
{
	size_t i;

	html_raw(r->out, "<section id=\"records\"><h2>Journal records</h2>\n"
	    "<p class=\"hint\">Every record but the cells' own and the token "
	    "counts, in order; unreadable lines with their first bytes.</p>\n"
	    "<table><thead><tr><th>line</th><th>type</th><th>fields</th></tr>"
	    "</thead><tbody>\n");
	for (i = 0; i < r->nents; i++)
		record_row(r->out, &r->ents[i]);
	html_raw(r->out, "</tbody></table></section>\n");
}

void
report_page(const struct report *r, const char *nonce)
{
	head(r, nonce);
	header(r);
	warnings(r);
	stops(r);
	notes(r);
	budgets(r);
	report_timeline(r);
	report_chart(r);
	report_table(r);
	report_details(r);
	report_network(r);
	records(r);
	html_fmt(r->out, "<script nonce=\"%s\">\n", nonce);
	html_raw(r->out, script);
	html_raw(r->out, "</script>\n</body>\n</html>\n");
}
