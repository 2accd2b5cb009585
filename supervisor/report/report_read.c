/*
 * report_read.c - the journal read for a report (report_int.h): every
 * line in order, as hostile input. A line that is torn, not JSON, not an
 * object or without a type is kept as unreadable (with its first bytes
 * and why) and named on stderr; it never stops the reading. A cell's
 * records leave only short copies, numbers and their place; other
 * records are kept, their long strings cut. A file whose first line is
 * not a run record (an empty file, a README, JSON lines of something
 * else) is not a journal: refused, said, nothing read.
 */
#include "supervisor/report/report_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/text/termout.h"

/* Unreadable lines named on stderr one by one; the rest are counted. */
#define SAY_MAX 10

static void *
grow(void *p, size_t *cap, size_t n, size_t size)
{
	size_t want;

	if (n < *cap)
		return p;
	want = *cap != 0 ? *cap * 2 : 16;
	if (want > SIZE_MAX / size || (p = realloc(p, want * size)) == NULL)
		fatalx("report: out of memory (%zu records)", n);
	*cap = want;
	return p;
}

static char *
snip(const char *s)
{
	char *c;

	if (s == NULL)
		return NULL;
	if ((c = strndup(s, REPORT_SHORT)) == NULL)
		fatalx("report: out of memory");
	return c;
}

static void
resnip(char **dst, const char *s)
{
	free(*dst);
	*dst = snip(s);
}

const char *
report_jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static long long
jint(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ?
	    (long long)json_integer_value(v) : -1;
}

/* The names of a record's threads_lost (an array of strings), joined
 * and capped; NULL when there are none. */
static char *
thread_names(const json_t *a)
{
	char buf[512];
	size_t i, len = 0;
	const char *s;

	if (!json_is_array(a) || json_array_size(a) == 0)
		return NULL;
	buf[0] = '\0';
	for (i = 0; i < json_array_size(a) && len < sizeof buf - 1; i++) {
		s = json_string_value(json_array_get(a, i));
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s",
		    i > 0 ? ", " : "", s != NULL ? s : "?");
	}
	return strdup(buf);
}

/* A time of the run: a wall clock time from 1970 to 5138, else 0. */
static double
jtime(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	double t = json_is_number(v) ? json_number_value(v) : 0;

	return t > 0 && t < 1e11 ? t : 0;
}

static void
see_time(struct report *r, double t)
{
	if (t <= 0)
		return;
	if (r->t0 == 0 || t < r->t0)
		r->t0 = t;
	if (t > r->t1)
		r->t1 = t;
	r->last_t = t;
}

/* The cell numbered n, added in order when it is new. */
static struct rcell *
cell_get(struct report *r, long long n)
{
	size_t lo = 0, hi = r->ncells, mid;
	struct rcell *c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (r->cells[mid].n < n)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < r->ncells && r->cells[lo].n == n)
		return &r->cells[lo];
	r->cells = grow(r->cells, &r->capcells, r->ncells, sizeof *c);
	c = &r->cells[lo];
	memmove(c + 1, c, (r->ncells - lo) * sizeof *c);
	r->ncells++;
	memset(c, 0, sizeof *c);
	c->n = n;
	c->duration = -1;
	c->rss_kb = c->mem_peak = c->cpu_us = -1;
	c->repair_of = -1;
	return c;
}

static void
on_input(struct report *r, const json_t *rec, const struct rline *at)
{
	struct rcell *c = cell_get(r, jint(rec, "cell"));

	c->in = *at;
	r->last_in = c->n;
	resnip(&c->summary, report_jstr(rec, "summary"));
	c->started = jtime(rec, "started_at");
	see_time(r, jtime(rec, "generated_at"));
	see_time(r, c->started);
	if (r->pending_repair >= 0) {
		c->repair_of = r->pending_repair;
		r->pending_repair = -1;
	}
}

/* Killed: the deadline ladder's last stage, the memory ceiling, a death
 * (a timeout that only interrupted the cell kept its worker). */
static int
is_kill(const struct rcell *c, const json_t *rec)
{
	const char *k = c->kind != NULL ? c->kind : "";

	return strcmp(k, "memory") == 0 || strcmp(k, "crashed") == 0 ||
	    c->stage == TIMEOUT_KILLED ||
	    (strcmp(k, "timeout") == 0 && c->fate == NS_LOST) ||
	    json_is_integer(json_object_get(rec, "signal"));
}

static void
on_output(struct report *r, const json_t *rec, const struct rline *at)
{
	struct rcell *c = cell_get(r, jint(rec, "cell"));
	const json_t *to = json_object_get(rec, "timeout");
	const json_t *us = json_object_get(rec, "duration_us");

	c->out = *at;
	c->restarted = 0;	/* resume records the interrupted cell too */
	resnip(&c->status, report_jstr(rec, "status"));
	resnip(&c->kind, report_jstr(rec, "kind"));
	resnip(&c->exc, report_jstr(rec, "exception_type"));
	resnip(&c->ns, report_jstr(rec, "namespace"));
	c->stage = cells_timeout_parse(report_jstr(to, "stage"));
	c->finished = jtime(rec, "finished_at");
	see_time(r, c->finished);
	c->duration = json_is_integer(us) && json_integer_value(us) >= 0 &&
	    json_integer_value(us) < (json_int_t)1e15 ?
	    (double)json_integer_value(us) / 1e6 : -1;
	c->rss_kb = jint(rec, "peak_rss_kb");
	c->mem_peak = jint(rec, "memory_peak");
	c->cpu_us = jint(rec, "cpu_us");
	free(c->threads);
	c->threads = thread_names(json_object_get(rec, "threads_lost"));
	c->fate = cells_ns_parse(c->ns);
	c->killed = is_kill(c, rec);
}

static void
on_usage(struct report *r, const json_t *rec)
{
	const json_t *cost = json_object_get(rec, "cost");
	struct rpoint *p;

	if (jint(rec, "tokens") < 0)
		return;
	r->pts = grow(r->pts, &r->cappts, r->npts, sizeof *p);
	p = &r->pts[r->npts++];
	p->t = r->last_t;
	p->tokens = jint(rec, "tokens");
	p->est = jint(rec, "estimated");
	p->cost = json_is_number(cost) ? json_number_value(cost) : -1;
}

/* Long strings of a record kept for the page are cut (it shows less). */
static void
cut_long(json_t *rec)
{
	const char *key;
	json_t *v;
	size_t n;
	char note[64], head[REPORT_KEEP + sizeof note];

	json_object_foreach(rec, key, v) {
		if (!json_is_string(v) || (n = json_string_length(v)) <=
		    REPORT_KEEP)
			continue;
		(void)snprintf(note, sizeof note, " [%zu bytes not shown]",
		    n - REPORT_KEEP);
		memcpy(head, json_string_value(v), REPORT_KEEP);
		memcpy(head + REPORT_KEEP, note, strlen(note));
		(void)json_string_setn_nocheck(v, head, REPORT_KEEP +
		    strlen(note));
	}
}

static struct rentry *
new_entry(struct report *r, long lineno)
{
	struct rentry *e;

	r->ents = grow(r->ents, &r->capents, r->nents, sizeof *e);
	e = &r->ents[r->nents++];
	memset(e, 0, sizeof *e);
	e->lineno = lineno;
	return e;
}

static void
on_other(struct report *r, json_t *rec, const struct rline *at)
{
	const char *type = report_jstr(rec, "type");
	json_t *code = json_object_get(rec, "code");

	if (strcmp(type, "successor") == 0 && json_is_string(code)) {
		(void)json_object_set_new(rec, "code_bytes",
		    json_integer((json_int_t)json_string_length(code)));
		(void)json_object_del(rec, "code");
		if (json_is_true(json_object_get(rec, "repair")))
			r->pending_repair = jint(rec, "cell");
	}
	/* the cell running when the supervisor died never gets an output */
	if (strcmp(type, "resume") == 0 && r->last_in >= 0 &&
	    cell_get(r, r->last_in)->out.lineno == 0)
		cell_get(r, r->last_in)->restarted = 1;
	if (strcmp(type, "run") == 0 && r->task == NULL) {
		r->task = report_jstr(rec, "task") != NULL ?
		    strdup(report_jstr(rec, "task")) : NULL;
		r->model = snip(report_jstr(rec, "model"));
	}
	see_time(r, jtime(rec, "at"));
	see_time(r, jtime(rec, "since"));
	cut_long(rec);
	new_entry(r, at->lineno)->rec = json_incref(rec);
}

static void
unreadable(struct report *r, const char *line, size_t n, const char *why)
{
	struct rentry *e = new_entry(r, r->lines);
	char *vis;

	/* why may quote the line's bytes: made safe for a terminal */
	if (++r->unreadable <= SAY_MAX) {
		vis = termout_visible(why, strlen(why), 0);
		log_warnx("%s:%ld: unreadable journal line (%s): shown as "
		    "unreadable in the report", r->path, r->lines,
		    vis != NULL ? vis : "?");
		free(vis);
	}
	e->rawlen = n < REPORT_SHORT ? n : REPORT_SHORT;
	if ((e->raw = malloc(e->rawlen + 1)) == NULL ||
	    (e->why = strdup(why)) == NULL)
		fatalx("report: out of memory");
	memcpy(e->raw, line, e->rawlen);
	e->raw[e->rawlen] = '\0';
}

/* Why a parsed line is not a record this report can place, or NULL. */
static const char *
not_a_record(const json_t *rec, const char *type)
{
	int cell = strcmp(type, "input") == 0 || strcmp(type, "output") == 0;

	if (cell && jint(rec, "cell") < 0)
		return "a cell's record without a cell number";
	if (cell && strcmp(type, "input") == 0 &&
	    !json_is_string(json_object_get(rec, "code")))
		return "a cell's input record without its code";
	return NULL;
}

/* The record on a line, or NULL with *bad saying why it is unreadable. */
static json_t *
parse_line(const char *line, size_t n, const char **bad, char *why,
    size_t size)
{
	json_error_t je;
	json_t *rec = NULL;
	const char *type;

	if (line[n - 1] != '\n')
		*bad = "a last line without its newline: cut off while it "
		    "was written, or being written now";
	else if ((rec = json_loadb(line, n, JSON_ALLOW_NUL, &je)) == NULL) {
		(void)snprintf(why, size, "not JSON: %s, at column %d",
		    je.text, je.column);
		*bad = why;
	} else if (!json_is_object(rec))
		*bad = "not a JSON object";
	else if ((type = report_jstr(rec, "type")) == NULL)
		*bad = "no \"type\" string";
	else
		*bad = not_a_record(rec, type);
	if (*bad == NULL)
		return rec;
	json_decref(rec);
	return NULL;
}

static void
read_line(struct report *r, const char *line, size_t n, off_t off)
{
	struct rline at = { off, n, r->lines };
	const char *type, *bad = NULL;
	char why[256];
	json_t *rec = parse_line(line, n, &bad, why, sizeof why);

	if (rec == NULL) {
		unreadable(r, line, n, bad != NULL ? bad : "?");
		return;
	}
	type = report_jstr(rec, "type");
	if (strcmp(type, "input") == 0)
		on_input(r, rec, &at);
	else if (strcmp(type, "output") == 0)
		on_output(r, rec, &at);
	else if (strcmp(type, "usage") == 0)
		on_usage(r, rec);
	else
		on_other(r, rec, &at);
	json_decref(rec);
}

/* Why the first line (n bytes, 0: none) is not a journal's, said; 0
 * when it is its run record. */
static int
not_a_journal(const struct report *r, const char *line, size_t n)
{
	const char *bad = NULL, *type;
	char why[256], *vis;
	json_t *rec;

	if (n == 0) {
		log_warnx("report: %s is not a journal: it is empty (a journal "
		    "starts with its run record)", r->path);
		return -1;
	}
	rec = parse_line(line, n, &bad, why, sizeof why);
	type = rec != NULL ? report_jstr(rec, "type") : NULL;
	if (type != NULL && strcmp(type, "run") == 0) {
		json_decref(rec);
		return 0;
	}
	/* the line's bytes may be quoted: made safe for a terminal */
	vis = type != NULL ? termout_visible(type, strlen(type), 0) :
	    termout_visible(bad != NULL ? bad : "?", strlen(bad != NULL ?
	    bad : "?"), 0);
	log_warnx("report: %s is not a journal: its first line is %s%s%s "
	    "(a journal starts with its run record)", r->path, type != NULL ?
	    "a \"" : "not a run record: ", vis != NULL ? vis : "?",
	    type != NULL ? "\" record" : "");
	free(vis);
	json_decref(rec);
	return -1;
}

int
report_read(struct report *r)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	off_t off = 0;
	int rc;

	r->pending_repair = r->last_in = -1;
	n = getline(&line, &cap, r->f);
	if (!ferror(r->f) && not_a_journal(r, line, n > 0 ? (size_t)n : 0) <
	    0) {
		free(line);
		return -2;
	}
	for (; n > 0; n = getline(&line, &cap, r->f)) {
		r->lines++;
		read_line(r, line, (size_t)n, off);
		off += n;
	}
	rc = ferror(r->f) ? -1 : 0;
	free(line);
	if (r->unreadable > SAY_MAX)
		log_warnx("%s: %ld more unreadable lines (%ld in all), shown "
		    "in the report", r->path, r->unreadable - SAY_MAX,
		    r->unreadable);
	return rc;
}

json_t *
report_reread(const struct report *r, const struct rline *where)
{
	char *line;
	json_t *rec = NULL;

	if (where->lineno == 0 || where->len == 0 ||
	    (line = malloc(where->len)) == NULL)
		return NULL;
	if (fseeko(r->f, where->off, SEEK_SET) == 0 &&
	    fread(line, 1, where->len, r->f) == where->len)
		rec = json_loadb(line, where->len, JSON_ALLOW_NUL, NULL);
	free(line);
	if (rec != NULL && !json_is_object(rec)) {
		json_decref(rec);
		rec = NULL;
	}
	return rec;
}

static void
cell_clear(struct rcell *c)
{
	free(c->status);
	free(c->kind);
	free(c->exc);
	free(c->ns);
	free(c->threads);
	free(c->summary);
}

void
report_clear(struct report *r)
{
	size_t i;

	for (i = 0; i < r->ncells; i++)
		cell_clear(&r->cells[i]);
	for (i = 0; i < r->nents; i++) {
		json_decref(r->ents[i].rec);
		free(r->ents[i].why);
		free(r->ents[i].raw);
	}
	free(r->cells);
	free(r->ents);
	free(r->pts);
	free(r->task);
	free(r->model);
}
