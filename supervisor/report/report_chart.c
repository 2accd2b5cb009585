/*
 * report_chart.c - tokens over time as an inline SVG step chart
 * (report_int.h). A usage record has no time of its own: it is placed at
 * the last time the journal had said before it (a cell's start, a cell's
 * end), which is when the model call it counts was running.
 */
#include "supervisor/report/report_int.h"

#define W	900.0
#define H	200.0
#define L	70.0		/* margins: left for the token axis */
#define R	20.0
#define T	12.0
#define B	28.0

struct scale {
	double t0, span;
	long long max;
};

static double
xat(const struct scale *s, double t)
{
	double x = t > s->t0 ? (t - s->t0) / s->span : 0;

	return L + (x > 1 ? 1 : x) * (W - L - R);
}

static double
yat(const struct scale *s, long long tokens)
{
	return H - B - (double)tokens / (double)s->max * (H - T - B);
}

static void
axes(FILE *f, const struct scale *s)
{
	html_fmt(f, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
	    "y2=\"%.1f\"/><line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" "
	    "x2=\"%.1f\" y2=\"%.1f\"/>\n", L, T, L, H - B, L, H - B, W - R,
	    H - B);
	html_fmt(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%lld"
	    "</text><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">0</text>\n",
	    L - 6, T + 10, s->max, L - 6, H - B);
	html_fmt(f, "<text x=\"%.1f\" y=\"%.1f\">0 s</text><text x=\"%.1f\" "
	    "y=\"%.1f\" text-anchor=\"end\">", L, H - 8, W - R, H - 8);
	html_dur(f, s->span);
	html_raw(f, "</text>\n");
}

static void
steps(FILE *f, const struct report *r, const struct scale *s)
{
	double y = yat(s, 0), x;
	size_t i;

	html_fmt(f, "<polyline class=\"tokens\" points=\"%.1f,%.1f", L, y);
	for (i = 0; i < r->npts; i++) {
		x = xat(s, r->pts[i].t);
		html_fmt(f, " %.1f,%.1f", x, y);
		y = yat(s, r->pts[i].tokens);
		html_fmt(f, " %.1f,%.1f", x, y);
	}
	html_fmt(f, " %.1f,%.1f\"/>\n", xat(s, r->t1), y);
	for (i = 0; i < r->npts; i++) {
		html_fmt(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>"
		    "%lld tokens at ", xat(s, r->pts[i].t),
		    yat(s, r->pts[i].tokens), r->pts[i].tokens);
		html_time(f, r->pts[i].t);
		html_raw(f, "</title></circle>\n");
	}
}

static void
totals(FILE *f, const struct rpoint *last)
{
	html_fmt(f, "<p>%lld tokens in all", last->tokens);
	if (last->est > 0)
		html_fmt(f, " (%lld of them estimated: calls cut off without "
		    "a usage report)", last->est);
	if (last->cost >= 0)
		html_fmt(f, ", costing $%.4f", last->cost);
	html_raw(f, ".</p>\n");
}

void
report_chart(const struct report *r)
{
	struct scale s = { r->t0, r->t1 - r->t0, 1 };
	size_t i;

	html_raw(r->out, "<section id=\"tokens\"><h2>Tokens over time</h2>\n");
	if (r->npts == 0) {
		html_raw(r->out, "<p class=\"none\">No model usage was "
		    "recorded.</p></section>\n");
		return;
	}
	if (s.span <= 0)
		s.span = 1;
	for (i = 0; i < r->npts; i++)
		if (r->pts[i].tokens > s.max)
			s.max = r->pts[i].tokens;
	totals(r->out, &r->pts[r->npts - 1]);
	html_fmt(r->out, "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" "
	    "role=\"img\" aria-label=\"tokens used over the run's time\">\n",
	    W, H);
	axes(r->out, &s);
	steps(r->out, r, &s);
	html_raw(r->out, "</svg></section>\n");
}
