/*
 * report_net.c - the report's network section (--network proxy): every
 * connection a cell asked the egress proxy for, one row each (its
 * decision and who made it, the address connected to, the bytes each
 * way once closed), and the operator's changes of the policy.
 */
#include "supervisor/report/report_int.h"

#include <string.h>

/* Rows shown; a longer run says how many more there were. */
#define NET_ROWS 2000

static int
is(const json_t *rec, const char *type)
{
	const char *t = report_jstr(rec, "type");

	return t != NULL && strcmp(t, type) == 0;
}

static long long
num(const json_t *rec, const char *key)
{
	const json_t *v = json_object_get(rec, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* The "closed" record of connection conn after entry i, or NULL. */
static const json_t *
closed_of(const struct report *r, size_t i, long long conn)
{
	const json_t *rec;
	const char *w;

	for (i++; i < r->nents; i++) {
		rec = r->ents[i].rec;
		if (rec == NULL || !is(rec, "egress") || num(rec, "conn") != conn)
			continue;
		w = report_jstr(rec, "what");
		if (w != NULL && strcmp(w, "closed") == 0)
			return rec;
		if (num(rec, "conn") == conn && w != NULL &&
		    strcmp(w, "held") != 0)
			return NULL;	/* a later run's number */
	}
	return NULL;
}

static void
cell_text(FILE *f, const char *s)
{
	html_raw(f, "<td>");
	html_str(f, s != NULL ? s : "");
	html_raw(f, "</td>");
}

static void
row(const struct report *r, size_t i)
{
	const json_t *rec = r->ents[i].rec, *c;
	const char *what = report_jstr(rec, "what"), *reason;
	long long conn = num(rec, "conn"), cell = num(rec, "cell");

	c = strcmp(what, "allowed") == 0 ? closed_of(r, i, conn) : NULL;
	reason = report_jstr(c != NULL ? c : rec, "reason");
	html_fmt(r->out, "<tr class=\"%s\"><td>%ld</td><td>", strcmp(what,
	    "allowed") == 0 ? "ok" : "error", r->ents[i].lineno);
	if (cell >= 0)
		html_fmt(r->out, "%lld", cell);
	html_raw(r->out, "</td>");
	cell_text(r->out, report_jstr(rec, "method"));
	html_raw(r->out, "<td>");
	html_str(r->out, report_jstr(rec, "host"));
	html_fmt(r->out, ":%lld</td>", num(rec, "port"));
	cell_text(r->out, report_jstr(rec, "addr"));
	html_raw(r->out, "<td>");
	html_str(r->out, what);
	if (report_jstr(rec, "by") != NULL) {
		html_raw(r->out, " by ");
		html_str(r->out, report_jstr(rec, "by"));
	}
	html_raw(r->out, "</td>");
	if (c != NULL)
		html_fmt(r->out, "<td>%lld</td><td>%lld</td>", num(c, "up"),
		    num(c, "down"));
	else
		html_raw(r->out, "<td></td><td></td>");
	cell_text(r->out, reason);
	html_raw(r->out, "</tr>\n");
}

static void
policy_changes(const struct report *r)
{
	size_t i, n = 0;

	for (i = 0; i < r->nents; i++) {
		if (r->ents[i].rec == NULL || !is(r->ents[i].rec,
		    "egress_policy"))
			continue;
		if (n++ == 0)
			html_raw(r->out, "<p>The operator changed the policy:"
			    "</p>\n<ul>\n");
		html_fmt(r->out, "<li>line %ld: ", r->ents[i].lineno);
		html_str(r->out, report_jstr(r->ents[i].rec, "command"));
		html_raw(r->out, " ");
		html_str(r->out, report_jstr(r->ents[i].rec, "entry"));
		html_raw(r->out, " &rarr; ");
		html_str(r->out, report_jstr(r->ents[i].rec, "policy"));
		html_raw(r->out, "</li>\n");
	}
	if (n > 0)
		html_raw(r->out, "</ul>\n");
}

void
report_network(const struct report *r)
{
	size_t i, shown = 0, allowed = 0, refused = 0;
	const char *w;

	for (i = 0; i < r->nents; i++) {
		if (r->ents[i].rec == NULL || !is(r->ents[i].rec, "egress") ||
		    (w = report_jstr(r->ents[i].rec, "what")) == NULL)
			continue;
		allowed += strcmp(w, "allowed") == 0;
		refused += strcmp(w, "refused") == 0;
	}
	if (allowed + refused == 0)
		return;
	html_fmt(r->out, "<section id=\"network\"><h2>Network</h2>\n<p>%zu "
	    "connection%s through the egress proxy allowed, %zu refused.</p>"
	    "\n", allowed, allowed == 1 ? "" : "s", refused);
	policy_changes(r);
	html_raw(r->out, "<table><thead><tr><th>line</th><th>cell</th>"
	    "<th>method</th><th>host</th><th>address</th><th>decision</th>"
	    "<th>bytes up</th><th>bytes down</th><th>reason</th></tr>"
	    "</thead><tbody>\n");
	for (i = 0; i < r->nents; i++) {
		if (r->ents[i].rec == NULL || !is(r->ents[i].rec, "egress") ||
		    (w = report_jstr(r->ents[i].rec, "what")) == NULL ||
		    (strcmp(w, "allowed") != 0 && strcmp(w, "refused") != 0))
			continue;
		if (shown++ < NET_ROWS)
			row(r, i);
	}
	html_raw(r->out, "</tbody></table>\n");
	if (shown > NET_ROWS)
		html_fmt(r->out, "<p class=\"hint\">%zu more not shown (the "
		    "journal's egress records have them).</p>\n",
		    shown - NET_ROWS);
	html_raw(r->out, "</section>\n");
}
