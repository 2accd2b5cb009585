/*
 * events.c - the event stream of `agentz --json "task"` (see events.h):
 * the envelope (v, type, seq, time), every string through the run's
 * redactor, one line each to stdout through out.h's queue; cell output
 * kept whole per UTF-8 character; cell_end and the rollback it implies.
 */
#include "supervisor/ui/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cells/cells.h"
#include "supervisor/ui/out.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/utf8.h"

/* The end of a cell's output not yet sent: a UTF-8 character begun. */
struct held {
	char b[4];
	size_t n;
	long cell;
};

static struct {
	int on;
	const struct redact *red;
	uint64_t seq;
	struct held held[2];		/* stdout, stderr */
	uint64_t dropped;		/* live output bytes lost this cell */
} ev;

void
events_start(const struct redact *red)
{
	ev.on = 1;
	ev.red = red;
	out_lines(1);
}

int
events_enabled(void)
{
	return ev.on;
}

/* --- strings: redacted, valid UTF-8 --------------------------------------- */

/* A JSON string of p[0..n), whatever the bytes (invalid UTF-8 becomes
 * U+FFFD); NULL on ENOMEM. */
static json_t *
text_json(const char *p, size_t n)
{
	size_t len;
	char *clean = utf8_sanitize(p, n, &len);
	json_t *j;

	if (clean == NULL)
		return NULL;
	j = json_stringn_nocheck(clean, len);
	free(clean);
	return j;
}

json_t *
events_strn(const char *p, size_t n)
{
	json_t *j = p != NULL ? text_json(p, n) : NULL;

	return j != NULL ? j : json_null();
}

json_t *
events_str(const char *s)
{
	return events_strn(s, s != NULL ? strlen(s) : 0);
}

/* s with the secrets replaced (s itself when none occur); NULL: ENOMEM. */
static json_t *
redact_str(json_t *s)
{
	const char *p = json_string_value(s);
	size_t n = json_string_length(s), rn;
	char *r;
	json_t *j;

	if (ev.red == NULL || redact_count(ev.red) == 0)
		return json_incref(s);
	r = redact_string(ev.red, p, n, &rn);
	if (r == NULL)
		return NULL;
	if (rn == n && memcmp(r, p, n) == 0) {
		free(r);
		return json_incref(s);
	}
	j = text_json(r, rn);
	free(r);
	return j;
}

static void redact_tree(json_t *j);

static void
redact_object(json_t *o)
{
	const char *k;
	json_t *v, *r;
	void *tmp;

	json_object_foreach_safe(o, tmp, k, v) {
		if (!json_is_string(v)) {
			redact_tree(v);
			continue;
		}
		r = redact_str(v);
		(void)json_object_set_new(o, k, r != NULL ? r : json_null());
	}
}

static void
redact_array(json_t *a)
{
	size_t i;
	json_t *v, *r;

	json_array_foreach(a, i, v) {
		if (!json_is_string(v)) {
			redact_tree(v);
			continue;
		}
		r = redact_str(v);
		(void)json_array_set_new(a, i, r != NULL ? r : json_null());
	}
}

/* Every string in j, at any depth, redacted in place. */
static void
redact_tree(json_t *j)
{
	if (json_is_object(j))
		redact_object(j);
	else if (json_is_array(j))
		redact_array(j);
}

/* --- one event -------------------------------------------------------------- */

/* U+2028 or U+2029 (E2 80 A8/A9) at p[i]: 0xa8 or 0xa9, else 0. */
static unsigned
line_sep(const char *p, size_t i, size_t n)
{
	const unsigned char *u = (const unsigned char *)p + i;

	return i + 2 < n && u[0] == 0xe2 && u[1] == 0x80 &&
	    (u[2] & 0xfe) == 0xa8 ? u[2] : 0;
}

char *
events_line(const char *json, size_t n, size_t *len)
{
	size_t i, k = 0, seps = 0;
	char *line;

	for (i = 0; i < n; i++)
		seps += line_sep(json, i, n) != 0;
	if ((line = malloc(n + seps * 3 + 2)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (line_sep(json, i, n) != 0) {
			memcpy(line + k, line_sep(json, i, n) == 0xa8 ?
			    "\\u2028" : "\\u2029", 6);
			k += 6;
			i += 2;
		} else {
			line[k++] = json[i];
		}
	}
	line[k++] = '\n';
	line[k] = '\0';
	*len = k;
	return line;
}

/* The events a reader must see last, even one that stalled. */
static int
final_type(const char *type)
{
	return strcmp(type, "stop") == 0 || strcmp(type, "budget_stop") == 0 ||
	    strcmp(type, "run_end") == 0;
}

/* Writes type with fields (consumed) as one line; -1 when a droppable
 * event was dropped (the reader is slow) or could not be built. */
static int
emit(const char *type, json_t *fields, int droppable)
{
	json_t *o;
	char *s, *line;
	size_t len;
	int rc = 0;

	o = json_pack("{s:i, s:s, s:I, s:f}", "v", EVENTS_VERSION, "type",
	    type, "seq", (json_int_t)ev.seq++, "time", loop_wall());
	if (o != NULL && fields != NULL)
		(void)json_object_update(o, fields);
	json_decref(fields);
	redact_tree(o);
	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	line = s != NULL ? events_line(s, strlen(s), &len) : NULL;
	free(s);
	if (line == NULL)
		return -1;
	if (droppable)
		rc = out_line(1, line, len);
	else if (final_type(type))
		out_final(1, line, len);
	else
		out_record(1, line, len);
	free(line);
	return rc;
}

void
events_emit(const char *type, json_t *fields)
{
	if (!ev.on) {
		json_decref(fields);
		return;
	}
	(void)emit(type, fields, 0);
}

/* --- cell output ------------------------------------------------------------ */

/* How much of p[0..n) ends on a character boundary: a UTF-8 sequence
 * begun in the last 3 bytes and not complete is held back. */
static size_t
utf8_whole(const char *p, size_t n)
{
	size_t i, need;
	unsigned char b;

	for (i = n; i > 0 && n - i < 3; i--) {
		b = (unsigned char)p[i - 1];
		if ((b & 0xc0) == 0x80)
			continue;	/* a continuation: look further back */
		need = b >= 0xf0 && b < 0xf8 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ?
		    2 : 1;
		return n - (i - 1) < need && b < 0xf8 ? i - 1 : n;
	}
	return n;
}

static void
send_output(long cell, int stream, const char *p, size_t n)
{
	json_t *f;

	if (n == 0)
		return;
	f = json_pack("{s:o, s:s, s:o?}", "cell", cell >= 0 ?
	    json_integer(cell) : json_null(), "stream", stream == 2 ?
	    "stderr" : "stdout", "text", text_json(p, n));
	if (emit("cell_output", f, 1) < 0)
		ev.dropped += n;
}

/* The bytes held for stream s go out as they are. */
static void
flush_held(int s)
{
	struct held *h = &ev.held[s];

	send_output(h->cell, s + 1, h->b, h->n);
	h->n = 0;
}

void
events_cell_output(long cell, int stream, const char *p, size_t n)
{
	struct held *h;
	size_t k, all;
	char *buf;
	int s = stream == 2 ? 1 : 0;

	if (!ev.on || n == 0)
		return;
	h = &ev.held[s];
	if (h->n > 0 && h->cell != cell)
		flush_held(s);
	all = h->n + n;
	if ((buf = malloc(all)) == NULL) {
		ev.dropped += n;
		return;
	}
	memcpy(buf, h->b, h->n);
	memcpy(buf + h->n, p, n);
	k = utf8_whole(buf, all);
	send_output(cell, stream, buf, k);
	h->n = all - k;
	h->cell = cell;
	memcpy(h->b, buf + k, h->n);
	free(buf);
}

/* --- the end of a cell -------------------------------------------------------- */

json_t *
events_rollback_fields(const struct cell *c, const json_t *record)
{
	json_t *lost = json_object_get(record, "threads_lost");
	char buf[64];
	const char *ns = cells_ns_text(c, buf, sizeof buf);
	json_t *f;

	if (ns == NULL || c->ns != NS_ROLLED_BACK)
		return NULL;
	f = json_pack("{s:I, s:s, s:I}", "cell", (json_int_t)c->n,
	    "namespace", ns, "to_before_cell", (json_int_t)c->n);
	if (f != NULL && lost != NULL)
		(void)json_object_set(f, "threads_lost", lost);
	return f;
}

void
events_cell_end(const struct cell *c)
{
	json_t *f, *rb, *record;
	char *text;
	size_t len = 0;

	if (!ev.on)
		return;
	/* the record as cells_json_text writes it, parsed back: jansson's
	 * own dump, so the tree (and the event's line) is the one dumped */
	text = cells_json_text(c, NULL, NULL, &len);
	record = text != NULL ? json_loadb(text, len, JSON_ALLOW_NUL, NULL) :
	    NULL;
	free(text);
	flush_held(0);
	flush_held(1);
	rb = events_rollback_fields(c, record);
	f = json_pack("{s:O?, s:O?, s:O?, s:I, s:o?}", "cell",
	    json_object_get(record, "cell"), "status",
	    json_object_get(record, "status"), "kind",
	    json_object_get(record, "kind"), "live_output_dropped",
	    (json_int_t)ev.dropped, "record", record);
	ev.dropped = 0;
	(void)emit("cell_end", f, 0);
	if (rb != NULL)
		(void)emit("rollback", rb, 0);
}
