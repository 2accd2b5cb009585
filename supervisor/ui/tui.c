/*
 * tui.c - status bar under a scroll region (see tui.h).
 *
 * Redraws save the cursor, draw the bar on the last row and restore the
 * cursor, so output above keeps scrolling where it was. SIGWINCH is
 * noticed by comparing the window size on every frame (0.1 s), which
 * needs no signal handling at all.
 */
#include "supervisor/ui/tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "supervisor/ui/listen.h"
#include "supervisor/ui/out.h"
#include "supervisor/agent/price.h"

#define FRAME_MS 100

static struct {
	struct loop *loop;
	int fd, active, paused;
	unsigned rows, cols;
	unsigned tick;
	unsigned cell;
	char summary[160];
	char waiting[160];	/* a model outage being waited out, or "" */
	size_t streaming;	/* delta bytes of the current request */
	long long total;
	double cost;		/* USD; < 0 unknown */
	int op_paused;		/* the operator paused the run */
	unsigned op_notes;	/* operator notes not yet delivered */
} tui = { .cost = -1 };

/*
 * Through stdout's queue, never blocking: a frame is skipped while the
 * terminal has not taken what came before; the scroll region (force)
 * always goes out whole.
 */
static void
put(const char *s, size_t n, int force)
{
	out_term(s, n, force);
}

static int
window(unsigned *rows, unsigned *cols)
{
	struct winsize ws;

	if (ioctl(tui.fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row < 3)
		return -1;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return 0;
}

/* The scroll region is every row but the last. */
static void
set_region(void)
{
	char b[64];
	int n = snprintf(b, sizeof b, "\0337\033[1;%ur\0338", tui.rows - 1);

	put(b, (size_t)n, 1);
}

static void
draw(void)
{
	static const char spin[] = "|/-\\";
	char bar[512], frame[700], tokens[64], cost[48], money[32], op[64];
	int n;

	if (tui.streaming > 0)
		(void)snprintf(tokens, sizeof tokens, "request ~%zu tokens, ",
		    tui.streaming / 4);
	else
		tokens[0] = '\0';
	cost[0] = '\0';
	if (tui.cost >= 0)
		(void)snprintf(cost, sizeof cost, ", %s", price_format(tui.cost,
		    money, sizeof money));
	(void)snprintf(op, sizeof op, "%s%s", tui.op_paused ? "PAUSED | " : "",
	    tui.op_notes > 0 ? "operator note pending | " : "");
	(void)snprintf(bar, sizeof bar, " %c %scell %u: %s | %s%s%stotal %lld "
	    "tokens%s", spin[tui.tick % 4], op, tui.cell, tui.summary,
	    tui.waiting, tui.waiting[0] != '\0' ? " | " : "", tokens,
	    tui.total, cost);
	if (strlen(bar) > tui.cols)
		bar[tui.cols] = '\0';
	n = snprintf(frame, sizeof frame, "\0337\033[%u;1H\033[2K\033[7m%s"
	    "\033[0m\0338", tui.rows, bar);
	put(frame, (size_t)n, 0);
}

static void
frame_tick(struct loop *l, void *ctx)
{
	unsigned rows, cols;

	(void)ctx;
	if (!tui.active)
		return;
	tui.tick++;
	if (window(&rows, &cols) == 0 && (rows != tui.rows ||
	    cols != tui.cols)) {
		tui.rows = rows;
		tui.cols = cols;
		set_region();
	}
	if (!tui.paused)
		draw();
	(void)loop_timer(l, FRAME_MS, frame_tick, NULL);
}

int
tui_init(struct loop *l, int fd)
{
	const char *term = getenv("TERM");

	tui.fd = fd;
	if (!isatty(fd) || term == NULL || strcmp(term, "dumb") == 0 ||
	    window(&tui.rows, &tui.cols) < 0)
		return 0;
	tui.loop = l;
	tui.active = 1;
	put("\n", 1, 1);	/* room for the bar below the cursor */
	set_region();
	draw();
	(void)loop_timer(l, FRAME_MS, frame_tick, NULL);
	return 1;
}

void
tui_end(void)
{
	char b[64];
	int n;

	if (!tui.active)
		return;
	tui.active = 0;
	/* drop the region, clear the bar, cursor back above it */
	n = snprintf(b, sizeof b, "\0337\033[r\033[%u;1H\033[2K\0338",
	    tui.rows);
	put(b, (size_t)n, 1);
}

/* Text for the bar through the gate: redacted, controls visible. */
static void
set_text(char *dst, size_t len, const char *src)
{
	char *c = out_clean(src, src != NULL ? strlen(src) : 0, 0);

	(void)snprintf(dst, len, "%s", c != NULL ? c : "");
	free(c);
}

void
tui_set_cell(unsigned n, const char *summary)
{
	tui.cell = n;
	/* the model wrote it: no escape sequence reaches the terminal */
	set_text(tui.summary, sizeof tui.summary, summary);
}

void
tui_set_waiting(const char *what)
{
	set_text(tui.waiting, sizeof tui.waiting, what);
}

void
tui_set_streaming(size_t delta_bytes)
{
	tui.streaming = delta_bytes;
}

void
tui_set_total(long long tokens)
{
	tui.total = tokens;
	tui.streaming = 0;
}

void
tui_set_cost(double usd)
{
	tui.cost = usd;
}

void
tui_set_operator(int paused, unsigned notes)
{
	tui.op_paused = paused;
	tui.op_notes = notes;
	if (tui.active && !tui.paused)
		draw();
}

void
tui_pause(int paused)
{
	tui.paused = paused;
	if (tui.active && !paused)
		draw();
}

/* --- the agent run's observer (listen.h) ---------------------------------- */

static void
bar_live(void *ctx, struct loop *l, int (*alive)(void *), void *actx)
{
	(void)ctx;
	(void)alive;
	(void)actx;
	if (tui_init(l, 1))
		(void)atexit(tui_end);
}

static void
bar_cell(void *ctx, const struct cell *c)
{
	(void)ctx;
	tui_set_cell(c->n, c->summary);
}

static void
bar_streaming(void *ctx, size_t delta_bytes)
{
	(void)ctx;
	tui_set_streaming(delta_bytes);
}

static void
bar_totals(void *ctx, long long tokens, double cost)
{
	(void)ctx;
	tui_set_total(tokens);
	if (cost >= 0)
		tui_set_cost(cost);
}

static void
bar_outage(void *ctx, const struct model_outage *o, const struct agent_req *q,
    const char *what)
{
	(void)ctx;
	(void)o;
	(void)q;
	tui_set_waiting(what);
}

static void
bar_operator(void *ctx, int paused, unsigned notes)
{
	(void)ctx;
	tui_set_operator(paused, notes);
}

static void
bar_over(void *ctx)
{
	(void)ctx;
	tui_end();
}

void
ui_tui_observer(struct agent_observer *o)
{
	memset(o, 0, sizeof *o);
	o->live = bar_live;
	o->cell_start = bar_cell;
	o->streaming = bar_streaming;
	o->totals = bar_totals;
	o->outage = bar_outage;
	o->operator = bar_operator;
	o->run_over = bar_over;
}
