/*
 * record_json.c - a cell record to JSON and back, and the journal's
 * records as JSON (see record_json.h): the one place that knows the
 * records' JSON form, for the journal, the spill file, exec --json, the
 * history and resume.
 */
#include "supervisor/cells/record_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "supervisor/cells/journal.h"
#include "supervisor/text/jsonf.h"
#include "supervisor/text/jsonf_tree.h"

/* --- a cell record from JSON ----------------------------------------------- */

static char *
restore_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? strdup(s) : NULL;
}

/* The output as it was kept, with its totals (older journals lack them). */
static void
restore_capture(struct cell *c, const json_t *text, const json_t *out)
{
	const json_t *total = json_object_get(out, "output_bytes");
	const json_t *dropped = json_object_get(out, "output_dropped");
	size_t len = json_string_length(text);

	(void)capture_restore(&c->out, json_string_value(text), len,
	    json_is_integer(total) ? (uint64_t)json_integer_value(total) : len,
	    json_is_integer(dropped) ? (uint64_t)json_integer_value(dropped) :
	    0);
}

static void
restore_output(struct cell *c, const json_t *out)
{
	const char *st = json_string_value(json_object_get(out, "status"));
	const char *kind = json_string_value(json_object_get(out, "kind"));
	const json_t *text = json_object_get(out, "output");
	int i;

	for (i = CELL_OK; i <= CELL_EXITED; i++)
		if (st != NULL && strcmp(st, cells_status_name(i)) == 0)
			c->status = (enum cell_status)i;
	for (i = KIND_EXCEPTION; i <= KIND_STOPPED; i++)
		if (kind != NULL && strcmp(kind, cells_kind_name(i)) == 0)
			c->kind = (enum cell_kind)i;
	if (c->status == CELL_RUNNING)	/* unknown name: say so */
		c->status = CELL_ERROR;
	c->exception_type = restore_str(out, "exception_type");
	c->traceback = restore_str(out, "traceback");
	c->detail = restore_str(out, "detail");
	if (json_is_string(text))
		restore_capture(c, text, out);
	c->finished_at = json_real_value(json_object_get(out, "finished_at"));
	c->duration_us = (uint64_t)json_integer_value(json_object_get(out,
	    "duration_us"));
	c->ns = NS_LOST;	/* whatever it was, that worker is gone */
	c->calls_cancelled = (unsigned)json_integer_value(json_object_get(out,
	    "model_calls_cancelled"));
}

struct cell *
cells_restore(struct cells *h, const json_t *in, const json_t *out)
{
	const json_t *code = json_object_get(in, "code");
	const json_t *by = json_object_get(in, "generated_by");
	struct cell *c;

	if (!json_is_string(code)) {
		errno = EINVAL;
		return NULL;
	}
	c = cells_begin(h, json_string_value(code), json_string_length(code),
	    json_string_value(json_object_get(in, "summary")), NULL,
	    json_is_integer(by) ? json_integer_value(by) : -1);
	if (c == NULL)
		return NULL;
	c->generated_at = json_real_value(json_object_get(in, "generated_at"));
	c->started_at = json_real_value(json_object_get(in, "started_at"));
	if (out != NULL) {
		restore_output(c, out);
		return c;
	}
	c->finished_at = c->started_at;
	cells_finish_dead(c, KIND_RESTART, "the supervisor restarted while "
	    "this cell ran: its worker and namespace are gone", -1, -1);
	return c;
}

/* --- a cell record as JSON ------------------------------------------------- */

/* A JSON string from arbitrary bytes; JSON null for NULL. */
static json_t *
jstr(const char *s, size_t n)
{
	json_t *j = jf_str_json(s, s != NULL ? n : 0);

	return j != NULL ? j : json_null();
}

static json_t *
jcstr(const char *s)
{
	return jstr(s, s != NULL ? strlen(s) : 0);
}

static json_t *
jint_or_null(long long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

static void
add_output(json_t *o, const struct cell *c)
{
	size_t len = 0;
	char *text = capture_text(&c->out, &len);

	(void)json_object_set_new(o, "output", jstr(text, len));
	free(text);
	(void)json_object_set_new(o, "output_bytes",
	    json_integer((json_int_t)c->out.total));
	(void)json_object_set_new(o, "output_dropped",
	    json_integer((json_int_t)capture_dropped(&c->out)));
}

json_t *
cells_inputs_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "code", jstr(c->code, c->code_len));
	(void)json_object_set_new(o, "summary", jcstr(c->summary));
	(void)json_object_set_new(o, "generated_at",
	    json_real(c->generated_at));
	(void)json_object_set_new(o, "started_at", json_real(c->started_at));
	(void)json_object_set_new(o, "generated_by",
	    jint_or_null(c->generated_by));
	return o;
}

/* "kept", "lost" or "rolled back to before cell N"; null while it runs. */
static json_t *
namespace_json(const struct cell *c)
{
	char buf[64];

	return jcstr(cells_ns_text(c, buf, sizeof buf));
}

static json_t *
snapshot_json(const struct cell *c)
{
	char *s = cells_snapshot_text(c);
	json_t *j = jcstr(s);

	free(s);
	return j;
}

/* The names of the threads a rollback lost, as an array; null if none. */
static json_t *
threads_json(const struct cell *c)
{
	const char *p = c->threads_lost, *e;
	json_t *a;

	if (p == NULL || *p == '\0' || (a = json_array()) == NULL)
		return json_null();
	for (; *p != '\0'; p = *e == ',' ? e + 1 : e) {
		e = p + strcspn(p, ",");
		(void)json_array_append_new(a, json_stringn(p, (size_t)(e - p)));
	}
	return a;
}

static void
add_limits(json_t *o, const struct cell *c)
{
	(void)json_object_set_new(o, "exit_code", jint_or_null(c->exit_code));
	(void)json_object_set_new(o, "signal", jint_or_null(c->term_signal));
	(void)json_object_set_new(o, "peak_rss_kb",
	    jint_or_null(c->maxrss_kb > 0 ? c->maxrss_kb : -1));
	(void)json_object_set_new(o, "cpu_us", c->status == CELL_RUNNING ?
	    json_null() : json_integer((json_int_t)c->cpu_us));
	(void)json_object_set_new(o, "memory_peak", c->memory_peak > 0 ?
	    json_integer((json_int_t)c->memory_peak) : json_null());
	(void)json_object_set_new(o, "namespace", namespace_json(c));
	(void)json_object_set_new(o, "namespace_cells", jcstr(c->ns_cells));
	(void)json_object_set_new(o, "snapshot", snapshot_json(c));
	(void)json_object_set_new(o, "threads_lost", threads_json(c));
	(void)json_object_set_new(o, "recovered_by",
	    jcstr(cells_recovery_name(c->recovered_by)));
	(void)json_object_set_new(o, "stack", jcstr(c->stack));
	(void)json_object_set_new(o, "model_calls_cancelled",
	    json_integer((json_int_t)c->calls_cancelled));
	if (c->egress.allowed + c->egress.refused > 0)
		(void)json_object_set_new(o, "egress", json_pack("{s:i, s:i, "
		    "s:I, s:I, s:o}", "allowed", (int)c->egress.allowed,
		    "refused", (int)c->egress.refused, "bytes_up",
		    (json_int_t)c->egress.up, "bytes_down",
		    (json_int_t)c->egress.down, "last_refused",
		    jcstr(c->egress.last_refused)));
	if (c->timeout_stage != TIMEOUT_NONE)
		(void)json_object_set_new(o, "timeout", json_pack("{s:s, s:o, "
		    "s:f, s:o}", "stage", cells_timeout_name(c->timeout_stage),
		    "ended_by", jcstr(c->ended_by), "deadline_to_ready_ms",
		    c->deadline_to_ready_ms, "kill_to_ready_ms",
		    c->kill_to_ready_ms > 0 ? json_real(c->kill_to_ready_ms) :
		    json_null()));
}

json_t *
cells_outputs_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "status",
	    json_string(cells_status_name(c->status)));
	(void)json_object_set_new(o, "kind", jcstr(cells_kind_name(c->kind)));
	(void)json_object_set_new(o, "exception_type",
	    jcstr(c->exception_type));
	(void)json_object_set_new(o, "traceback", jcstr(c->traceback));
	(void)json_object_set_new(o, "detail", jcstr(c->detail));
	add_output(o, c);
	(void)json_object_set_new(o, "finished_at", c->status == CELL_RUNNING ?
	    json_null() : json_real(c->finished_at));
	(void)json_object_set_new(o, "duration_us",
	    json_integer((json_int_t)c->duration_us));
	(void)json_object_set_new(o, "worker_pid", c->worker_pid > 0 ?
	    json_integer(c->worker_pid) : json_null());
	add_limits(o, c);
	return o;
}

json_t *
cells_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "cell", json_integer(c->n));
	(void)json_object_set_new(o, "source", jcstr(c->source));
	(void)json_object_update_new(o, cells_inputs_json(c));
	(void)json_object_update_new(o, cells_outputs_json(c));
	return o;
}

char *
cells_json_text(const struct cell *c, const struct jf *before,
    const struct jf *after, size_t *len)
{
	json_t *o = before != NULL ? jf_json(before) : json_object();
	json_t *rec = cells_json(c);
	json_t *tail = after != NULL ? jf_json(after) : json_object();
	char *s = NULL;

	if (o != NULL && rec != NULL && tail != NULL &&
	    json_object_update(o, rec) == 0 && json_object_update(o, tail) == 0)
		s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(rec);
	json_decref(tail);
	if (s == NULL)
		errno = ENOMEM;
	else if (len != NULL)
		*len = strlen(s);
	return s;
}

json_t *
cells_journal_json(const struct cell *c, int outputs)
{
	json_t *o = json_pack("{s:i}", "cell", (int)c->n);

	(void)json_object_update_new(o, outputs ? cells_outputs_json(c) :
	    cells_inputs_json(c));
	return o;
}

/* --- the journal's records as JSON ---------------------------------------- */

int
journal_append(struct journal *j, const char *type, json_t *rec)
{
	char *line;
	int rc;

	(void)json_object_set_new(rec, "v", json_integer(JOURNAL_VERSION));
	(void)json_object_set_new(rec, "type", json_string(type));
	line = json_dumps(rec, JSON_COMPACT);
	if (line == NULL) {
		errno = ENOMEM;
		return -1;
	}
	rc = journal_write(j, line, strlen(line));
	free(line);
	return rc;
}

int
journal_append_f(struct journal *j, const char *type, const struct jf *f)
{
	json_t *rec = jf_json(f);
	int rc;

	if (rec == NULL)
		return -1;
	rc = journal_append(j, type, rec);
	json_decref(rec);
	return rc;
}

int
journal_append_cell(struct journal *j, const struct cell *c, int outputs)
{
	json_t *rec = cells_journal_json(c, outputs);
	int rc;

	if (rec == NULL) {
		errno = ENOMEM;
		return -1;
	}
	rc = journal_append(j, outputs ? "output" : "input", rec);
	json_decref(rec);
	return rc;
}

json_t *
journal_read(const struct journal *j, uint64_t off, size_t len)
{
	char *line = journal_read_line(j, off, len);
	json_t *rec;

	if (line == NULL)
		return NULL;
	rec = json_loadb(line, len - 1, 0, NULL);
	free(line);
	if (rec == NULL)
		errno = EIO;
	return rec;
}

enum ftype { F_STR, F_NUM, F_INT, F_CELL, F_BOOL };

struct field {
	const char *name;
	enum ftype type;
	int optional;		/* may be absent or null */
};

/* What each record type must hold (journal.h). */
static const struct schema {
	const char *type;
	struct field f[4];
} schemas[] = {
	{ "run", { { "task", F_STR, 0 }, { "model", F_STR, 0 },
	    { "at", F_NUM, 0 } } },
	{ "resume", { { "task", F_STR, 0 }, { "model", F_STR, 0 },
	    { "at", F_NUM, 0 } } },
	{ "isolation", { { "isolation", F_STR, 0 },
	    { "containment", F_STR, 0 }, { "network", F_STR, 1 } } },
	{ "input", { { "cell", F_CELL, 0 }, { "code", F_STR, 0 },
	    { "summary", F_STR, 1 }, { "generated_by", F_INT, 1 } } },
	{ "successor", { { "cell", F_CELL, 0 }, { "code", F_STR, 0 },
	    { "summary", F_STR, 0 }, { "repair", F_BOOL, 1 } } },
	{ "usage", { { "tokens", F_INT, 0 }, { "estimated", F_INT, 1 },
	    { "cost", F_NUM, 1 } } },
	{ "output", { { "cell", F_CELL, 0 }, { "status", F_STR, 0 },
	    { "kind", F_STR, 1 } } },
	{ "stop", { { "exit", F_INT, 0 }, { "reason", F_STR, 1 },
	    { "at", F_NUM, 1 } } },
	{ "call", { { "id", F_CELL, 0 }, { "estimated", F_INT, 0 } } },
	{ "budgets", { { "max_cells", F_INT, 0 }, { "deadline", F_NUM, 0 },
	    { "max_tokens", F_INT, 0 }, { "max_cost", F_NUM, 0 } } },
};

static int
field_ok(const json_t *v, const struct field *f)
{
	if (v == NULL || json_is_null(v))
		return f->optional;
	switch (f->type) {
	case F_STR:
		return json_is_string(v);
	case F_NUM:
		return json_is_number(v);
	case F_INT:
		return json_is_integer(v);
	case F_CELL:
		return json_is_integer(v) && json_integer_value(v) >= 0;
	case F_BOOL:
		return json_is_boolean(v);
	}
	return 0;
}

/* NULL when rec is a valid record, else what is wrong with it. */
static const char *
check_record(const json_t *rec, char *buf, size_t size)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	const json_t *v = json_object_get(rec, "v");
	size_t i, k;

	if (!json_is_object(rec))
		return "not a JSON object";
	if (type == NULL)
		return "no \"type\" string";
	if (!json_is_integer(v) || json_integer_value(v) != JOURNAL_VERSION) {
		(void)snprintf(buf, size, "record version is not %d",
		    JOURNAL_VERSION);
		return buf;
	}
	for (i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
		if (strcmp(schemas[i].type, type) != 0)
			continue;
		for (k = 0; k < 4 && schemas[i].f[k].name != NULL; k++) {
			if (field_ok(json_object_get(rec, schemas[i].f[k].name),
			    &schemas[i].f[k]))
				continue;
			(void)snprintf(buf, size, "a \"%s\" record with a missing "
			    "or mistyped \"%s\"", type, schemas[i].f[k].name);
			return buf;
		}
		break;
	}
	return NULL;
}

/* The cell records journal_load keeps only the place of. */
static int
kept_by_place(const json_t *rec)
{
	const char *type = json_string_value(json_object_get(rec, "type"));

	return strcmp(type, "input") == 0 || strcmp(type, "output") == 0;
}

static json_t *
place_of(json_t *rec, off_t off, size_t len)
{
	json_t *stub = json_pack("{s:O, s:O, s:O, s:[I, I]}", "v",
	    json_object_get(rec, "v"), "type", json_object_get(rec, "type"),
	    "cell", json_object_get(rec, "cell"), "@at", (json_int_t)off,
	    (json_int_t)len);

	json_decref(rec);
	return stub;
}

int
journal_where(const json_t *rec, uint64_t *off, size_t *len)
{
	const json_t *at = json_object_get(rec, "@at");

	if (json_array_size(at) != 2)
		return -1;
	*off = (uint64_t)json_integer_value(json_array_get(at, 0));
	*len = (size_t)json_integer_value(json_array_get(at, 1));
	return 0;
}

json_t *
journal_full(const struct journal *j, const json_t *rec)
{
	uint64_t off;
	size_t len;

	if (journal_where(rec, &off, &len) < 0)
		return json_incref((json_t *)(uintptr_t)rec);
	return journal_read(j, off, len);
}

/*
 * What a run's journal can hold in order, beyond each record's shape:
 * cells numbered from 0 without a gap, one input and one output each,
 * an output, a successor only for a cell that has its input, spending
 * that is neither negative nor absurd.
 */
struct consistency {
	json_int_t next;	/* the cell the next input must be */
	unsigned char *out;	/* per cell: has its output */
	size_t cap;
};

/* Tokens or USD no run spends: a record saying so is not to be trusted. */
#define ABSURD_TOKENS	((json_int_t)1000000000000LL)	/* 10^12 */
#define ABSURD_USD	1e9

static const char *
check_usage(const json_t *rec, char *buf, size_t size)
{
	json_int_t tok = json_integer_value(json_object_get(rec, "tokens"));
	const json_t *est = json_object_get(rec, "estimated");
	const json_t *cost = json_object_get(rec, "cost");
	double usd = json_number_value(cost);

	if (tok < 0 || tok > ABSURD_TOKENS)
		(void)snprintf(buf, size, "a usage of %lld tokens",
		    (long long)tok);
	else if (json_is_integer(est) && (json_integer_value(est) < 0 ||
	    json_integer_value(est) > tok))
		(void)snprintf(buf, size, "%lld tokens estimated of %lld",
		    (long long)json_integer_value(est), (long long)tok);
	else if (json_is_number(cost) && !(usd >= 0 && usd <= ABSURD_USD))
		(void)snprintf(buf, size, "a cost of %g USD", usd);
	else
		return NULL;
	return buf;
}

/* Marks cell n as having its output; -1 when out of memory. */
static int
mark_output(struct consistency *c, json_int_t n)
{
	size_t want = (size_t)n + 1;
	unsigned char *nv;

	if (want > c->cap) {
		want = want < 2 * c->cap ? 2 * c->cap : want + 64;
		if ((nv = realloc(c->out, want)) == NULL)
			return -1;
		memset(nv + c->cap, 0, want - c->cap);
		c->out = nv;
		c->cap = want;
	}
	/* n >= 0 (check_record: F_CELL), so want > 0 and out is allocated */
	c->out[n] = 1;	/* NOLINT(clang-analyzer-core.NullDereference) */
	return 0;
}

/* NULL when rec may follow the records before it, else what is wrong. */
static const char *
check_consistent(struct consistency *c, const json_t *rec, char *buf,
    size_t size)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	json_int_t n = json_integer_value(json_object_get(rec, "cell"));

	if (strcmp(type, "usage") == 0)
		return check_usage(rec, buf, size);
	if (strcmp(type, "call") == 0) {
		n = json_integer_value(json_object_get(rec, "estimated"));
		if (n >= 0 && n <= ABSURD_TOKENS)
			return NULL;
		(void)snprintf(buf, size, "a model call estimated at %lld "
		    "tokens", (long long)n);
		return buf;
	}
	if (strcmp(type, "input") == 0) {
		if (n == c->next) {
			c->next++;
			return NULL;
		}
		if (n < c->next)
			(void)snprintf(buf, size, "a second input for cell %lld",
			    (long long)n);
		else
			(void)snprintf(buf, size, "an input for cell %lld where "
			    "cell %lld comes next", (long long)n,
			    (long long)c->next);
		return buf;
	}
	if (strcmp(type, "output") != 0 && strcmp(type, "successor") != 0)
		return NULL;
	/* a successor is keyed by the cell it follows (or, for a repair
	 * with no failed cell, by the one it becomes: the next) */
	if (n > c->next || (n == c->next && strcmp(type, "output") == 0)) {
		(void)snprintf(buf, size, "a %s for cell %lld, which has no "
		    "input", type, (long long)n);
		return buf;
	}
	if (strcmp(type, "successor") == 0)
		return NULL;
	if ((size_t)n < c->cap && c->out[n]) {
		(void)snprintf(buf, size, "a second output for cell %lld",
		    (long long)n);
		return buf;
	}
	return mark_output(c, n) < 0 ? "out of memory" : NULL;
}

/* A stream reading the journal from its start through the locked file. */
static FILE *
journal_stream(const struct journal *j)
{
	int fd = fcntl(journal_fd(j), F_DUPFD_CLOEXEC, 0);
	FILE *f;

	if (fd < 0)
		return NULL;
	if (lseek(fd, 0, SEEK_SET) < 0 || (f = fdopen(fd, "r")) == NULL) {
		(void)close(fd);
		return NULL;
	}
	return f;
}

json_t *
journal_load(const struct journal *j, const char *path, char **err)
{
	FILE *f = journal_stream(j);
	struct consistency cons = { 0, NULL, 0 };
	json_t *all, *rec;
	json_error_t je;
	char *line = NULL, buf[160];
	const char *bad = NULL;
	size_t cap = 0;
	ssize_t n;
	off_t at = 0;
	int lineno = 0;

	*err = NULL;
	if (f == NULL) {
		if (asprintf(err, "cannot read %s: %s", path,
		    strerror(errno)) < 0)
			*err = NULL;
		return NULL;
	}
	all = json_array();
	while (bad == NULL && (n = getline(&line, &cap, f)) > 0) {
		lineno++;
		rec = NULL;
		if (line[n - 1] != '\n')
			bad = "a last line without its newline";
		else if ((rec = json_loadb(line, (size_t)n, 0, &je)) == NULL)
			bad = je.text;
		else if ((bad = check_record(rec, buf, sizeof buf)) == NULL)
			bad = check_consistent(&cons, rec, buf, sizeof buf);
		if (bad == NULL && kept_by_place(rec))
			rec = place_of(rec, at, (size_t)n);
		if (bad == NULL && rec == NULL)
			bad = "out of memory";
		if (bad == NULL)
			(void)json_array_append_new(all, rec);
		else
			json_decref(rec);
		at += n;
	}
	if (bad == NULL && ferror(f))
		bad = strerror(errno);
	if (bad != NULL) {
		if (asprintf(err, "%s:%d: corrupt journal record (%s): the "
		    "journal cannot be trusted past it; fix or move it",
		    path, lineno, bad) < 0)
			*err = NULL;
		json_decref(all);
		all = NULL;
	}
	free(cons.out);
	free(line);
	(void)fclose(f);
	return all;
}
