/*
 * record_json.c - a cell record to JSON and back (see record_json.h): the
 * one place that knows the record's JSON form, for the journal, the
 * spill file, exec --json, the history and resume.
 */
#include "supervisor/cells/record_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/text/utf8.h"

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
	for (i = KIND_EXCEPTION; i <= KIND_RESTART; i++)
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
	c->namespace_lost = 1;	/* whatever it was, that worker is gone */
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

/* A JSON string from arbitrary bytes; JSON null for NULL. */
static json_t *
jstr(const char *s, size_t n)
{
	size_t len;
	char *clean;
	json_t *j;

	if (s == NULL)
		return json_null();
	clean = utf8_sanitize(s, n, &len);
	if (clean == NULL)
		return json_null();
	j = json_stringn_nocheck(clean, len);
	free(clean);
	return j;
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
	(void)json_object_set_new(o, "namespace", c->status == CELL_RUNNING ?
	    json_null() : json_string(c->namespace_lost ? "lost" : "kept"));
	(void)json_object_set_new(o, "stack", jcstr(c->stack));
	(void)json_object_set_new(o, "model_calls_cancelled",
	    json_integer((json_int_t)c->calls_cancelled));
	if (c->timeout_stage != NULL)
		(void)json_object_set_new(o, "timeout", json_pack("{s:s, s:f, "
		    "s:o}", "stage", c->timeout_stage, "deadline_to_ready_ms",
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
