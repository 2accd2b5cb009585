/*
 * exec.c - the `agentz exec` front end (see exec.h).
 *
 * Reads every cell before starting anything, so a missing or unreadable
 * file is a usage error that has run nothing. Then runs them in order in
 * one worker: live output to our stdout/stderr and a one-line status per
 * cell on stderr, or with --json only one JSON record per cell on stdout.
 * A cell that kills its worker is recorded as such and the next cell runs
 * in a fresh worker.
 */
#include "supervisor/front/exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "supervisor/egress/egress.h"
#include "supervisor/front/config.h"
#include "supervisor/ui/out.h"
#include "supervisor/text/jsonf.h"
#include "supervisor/text/redact.h"
#include "supervisor/run/runner.h"
#include "supervisor/agent/runstop.h"
#include "supervisor/world/view.h"

struct src_cell {
	char *code;
	size_t len;
	const char *source;
};

struct exec_run {
	struct config cfg;
	struct view view;
	struct loop *loop;
	struct runner *runner;
	struct redact *red;	/* the same secrets an agent run hides */
	struct runstop stops;	/* signals */
	struct src_cell *cells;
	size_t ncells, next;
	int failed;
};

static int
add_cell(struct exec_run *x, const char *p, size_t n, const char *source)
{
	struct src_cell *v = realloc(x->cells, (x->ncells + 1) * sizeof *v);

	if (v == NULL)
		return -1;
	x->cells = v;
	v[x->ncells].code = malloc(n + 1);
	if (v[x->ncells].code == NULL)
		return -1;
	memcpy(v[x->ncells].code, p, n);
	v[x->ncells].code[n] = '\0';
	v[x->ncells].len = n;
	v[x->ncells].source = source;
	x->ncells++;
	return 0;
}

/* The whole of f as a NUL-terminated string the caller frees; NULL on error. */
static char *
slurp(FILE *f, size_t *len)
{
	struct buf b;
	char chunk[16384];
	size_t got;

	buf_init(&b);
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (buf_append(&b, chunk, got) == -1)
			break;
	if (got > 0 || ferror(f)) {
		buf_clear(&b);
		return NULL;
	}
	return buf_detach(&b, len);
}

/* Is the line at p (up to n bytes, no newline) a "# %%" separator? */
static int
is_separator(const char *p, size_t n)
{
	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' ||
	    p[n - 1] == '\t'))
		n--;
	return n >= 4 && memcmp(p, "# %%", 4) == 0 && (n == 4 || p[4] == ' ');
}

/* Adds a cell unless it is only whitespace (e.g. before the first "# %%"). */
static int
add_nonblank(struct exec_run *x, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
			return add_cell(x, p, n, "-");
	return 0;
}

static int
split_stdin(struct exec_run *x, const char *p, size_t n)
{
	size_t start = 0, line = 0, eol;

	while (line < n) {
		eol = line;
		while (eol < n && p[eol] != '\n')
			eol++;
		if (is_separator(p + line, eol - line)) {
			if (add_nonblank(x, p + start, line - start) < 0)
				return -1;
			start = eol < n ? eol + 1 : n;
		}
		line = eol + 1;
	}
	return add_nonblank(x, p + start, n - start);
}

static int
load_cells(struct exec_run *x)
{
	FILE *f;
	char *p;
	size_t n;
	int i, rc;

	for (i = 0; i < x->cfg.nargs; i++) {
		const char *path = x->cfg.args[i];
		int is_stdin = strcmp(path, "-") == 0;

		f = is_stdin ? stdin : fopen(path, "rb");
		p = f != NULL ? slurp(f, &n) : NULL;
		if (p == NULL) {
			(void)fprintf(stderr, "agentz exec: cannot read %s: "
			    "%s\n", is_stdin ? "stdin" : path,
			    errno ? strerror(errno) : "read error");
			if (f != NULL && !is_stdin)
				(void)fclose(f);
			return -1;
		}
		if (!is_stdin)
			(void)fclose(f);
		rc = is_stdin ? split_stdin(x, p, n) : add_cell(x, p, n, path);
		free(p);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* --- running ---------------------------------------------------------------- */

static void
x_output(void *ctx, const struct cell *c, int stream, const char *p,
    size_t n)
{
	struct exec_run *x = ctx;

	(void)c;
	if (!x->cfg.json)
		out_cell(stream, p, n);	/* never blocks the loop */
}

static void
print_json(struct exec_run *x, const struct cell *c)
{
	const struct worker *w = runner_worker(x->runner);
	struct jf wf[] = { JF_I("pid", (int)c->worker_pid),
	    JF_I("generation", (int)c->worker_gen),
	    JF_I("spawn_ready_us", worker_spawn_ready_us(w)),
	    JF_S("python", worker_python_version(w)),
	    JF_S("sandbox", worker_sandbox(w)),
	    JF_S("containment", runner_containment(x->runner)),
	    JF_S("isolation", runner_isolation(x->runner)),
	    JF_S("network", runner_network(x->runner)),
	    JF_S("limits", runner_limits(x->runner)), JF_END };
	struct jf after[] = { JF_O("worker", wf), JF_END };
	char *s, *clean;
	size_t n;

	s = cells_json_text(c, NULL, after, &n);
	/* the record's texts are redacted; the code and the rest too */
	clean = s != NULL ? redact_string(x->red, s, n, &n) : NULL;
	if (clean != NULL) {
		clean[n] = '\n';	/* the terminator's place */
		out_record(1, clean, n + 1);
	}
	free(clean);
	free(s);
}

static void
print_status(const struct cell *c)
{
	char *line = NULL, *tb, *type, *detail;
	int n;
	const char *what = c->kind == KIND_CRASHED ? "crashed" :
	    c->kind == KIND_PROTOCOL ? "protocol error" :
	    cells_status_name(c->status);

	/* written by the cell: through the gate (redacted, no controls) */
	if (c->traceback != NULL) {
		tb = out_clean(c->traceback, strlen(c->traceback), 1);
		if (tb != NULL)
			out_msg(2, tb, strlen(tb));
		free(tb);
	}
	type = c->exception_type != NULL ? out_clean(c->exception_type,
	    strlen(c->exception_type), 0) : NULL;
	detail = c->detail != NULL ? out_clean(c->detail, strlen(c->detail),
	    0) : NULL;
	n = asprintf(&line, "[agentz] cell %u (%s): %s%s%s%s%s in %.1f ms\n",
	    c->n, c->source, what, type ? " " : "", type ? type : "",
	    detail ? ": " : "", detail ? detail : "",
	    (double)c->duration_us / 1000.0);
	if (n > 0)
		out_msg(2, line, (size_t)n);
	free(line);
	free(type);
	free(detail);
}

static void
run_next(struct exec_run *x)
{
	const struct src_cell *s;

	if (x->next == x->ncells) {
		loop_stop(x->loop, x->failed ? EXIT_FAILED : EXIT_OK);
		return;
	}
	s = &x->cells[x->next++];
	if (x->next == x->ncells)	/* every cell is read before any runs */
		runner_last_cell(x->runner);
	if (runner_run(x->runner, s->code, s->len, NULL, s->source, -1) ==
	    NULL) {
		log_warn("cannot run cell %zu", x->next - 1);
		loop_stop(x->loop, EXIT_FAILED);
	}
}

static void
x_finished(void *ctx, struct cell *c)
{
	struct exec_run *x = ctx;

	if (c->status != CELL_OK)
		x->failed = 1;
	out_cell_end();
	if (x->cfg.json)
		print_json(x, c);
	else
		print_status(c);
	run_next(x);
}

static void
x_request(void *ctx, struct cell *c, const struct msg_request *r)
{
	struct exec_run *x = ctx;
	char body[256];
	int n;

	(void)c;
	n = snprintf(body, sizeof body, "{\"type\":\"RuntimeError\","
	    "\"message\":\"%s is not available in agentz exec (no model)\"}",
	    strcmp(r->method.ptr, "call_me") == 0 ? "call_me" :
	    "this host function");
	(void)runner_reply(x->runner, r->id, REPLY_ERROR, body, (size_t)n);
}

static void
x_fatal(void *ctx, const char *why)
{
	struct exec_run *x = ctx;
	char buf[512];

	log_warnx("exec: %s", runstop_fatal_why(buf, sizeof buf, why));
	loop_stop(x->loop, EXIT_WORKER);
}

/* --network proxy: a refusal is said (the cell sees a connection
 * error); the rest with -v. */
static void
x_net(void *ctx, const struct egress_event *ev)
{
	(void)ctx;
	if (ev->what == EGRESS_REFUSED)
		log_info("network: refused %s %s:%u: %s", ev->method[0] ?
		    ev->method : "a connection", ev->host[0] ? ev->host : "-",
		    ev->port, ev->reason);
	else
		log_debug("network: %s %s:%u%s%s%s%s",
		    ev->what == EGRESS_ALLOWED ? "allowed" : "closed",
		    ev->host, ev->port, ev->addr[0] ? " at " : "", ev->addr,
		    ev->reason != NULL ? ": " : "",
		    ev->reason != NULL ? ev->reason : "");
}

static const struct runner_ops exec_ops = {
	x_output, x_finished, x_request, x_fatal, NULL, x_net
};

static int
uses_stdin(const struct config *c)
{
	int i;

	for (i = 0; i < c->nargs; i++)
		if (strcmp(c->args[i], "-") == 0)
			return 1;
	return 0;
}

static void
exec_free(struct exec_run *x)
{
	size_t i;

	runner_free(x->runner);
	view_clear(&x->view);
	out_attach(NULL);
	out_set_redact(NULL);
	redact_free(x->red);
	loop_free(x->loop);
	for (i = 0; i < x->ncells; i++)
		free(x->cells[i].code);
	free(x->cells);
	config_clear(&x->cfg);
}

static int
exec_go(struct exec_run *x, const char *wpath)
{
	struct runner_config rc;

	config_runner(&rc, &x->cfg, wpath, uses_stdin(&x->cfg) ? -1 : 0);
	rc.jail = &x->view.jc;
	x->loop = loop_new();
	x->red = redact_new_from_environ(environ);
	if (x->loop == NULL || x->red == NULL ||
	    runstop_setup(&x->stops, x->loop) < 0)
		fatal("exec: event loop set-up");
	rc.red = x->red;
	out_set_redact(x->red);
	out_attach(x->loop);
	x->runner = runner_new(x->loop, &rc, &exec_ops, x);
	x->stops.runner = x->runner;
	if (x->runner == NULL)
		return EXIT_WORKER;	/* said why */
	log_debug("isolation: %s; network: %s; limits: %s",
	    runner_isolation(x->runner), runner_network_desc(x->runner),
	    runner_limits(x->runner));
	if (runner_start(x->runner) < 0) {
		log_warn("exec: cannot start %s", wpath);
		return EXIT_WORKER;
	}
	run_next(x);
	return loop_run(x->loop);
}

int
exec_main(int argc, char **argv)
{
	struct exec_run x;
	struct view_options vo;
	char *wpath;
	int rc;

	memset(&x, 0, sizeof x);
	rc = config_parse(&x.cfg, argc, argv, "agentz exec");
	if (rc != 0) {
		config_clear(&x.cfg);
		return rc > 0 ? EXIT_OK : EXIT_USAGE;
	}
	log_init("agentz", x.cfg.verbose);
	if (x.cfg.nargs == 0) {
		(void)fprintf(stderr, "agentz exec: no cells given (FILE... "
		    "or - for stdin); see agentz exec --help\n");
		config_clear(&x.cfg);
		return EXIT_USAGE;
	}
	if (load_cells(&x) < 0) {
		exec_free(&x);
		return EXIT_USAGE;
	}
	wpath = config_worker_path(&x.cfg);
	if (wpath == NULL)
		fatal("exec: worker path");
	config_view(&vo, &x.cfg);
	if (config_check(&x.cfg, "agentz exec", wpath) < 0 ||
	    view_init(&x.view, &vo, wpath, "agentz exec") < 0) {
		exec_free(&x);
		free(wpath);
		return EXIT_USAGE;
	}
	rc = x.ncells == 0 ? EXIT_OK : exec_go(&x, wpath);
	exec_free(&x);
	free(wpath);
	return rc;
}
