/*
 * test_events.c - the event stream of `agentz --json` (ui/events.h):
 * a cell record -> the rollback event it implies (which the runner cannot
 * produce yet: no record says "rolled back" before the snapshot work), and
 * the lines written: the envelope, seq, redaction of every string, a UTF-8
 * character split across output chunks kept whole, cell_end then rollback.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/ui/events.h"
#include "supervisor/ui/out.h"
#include "supervisor/text/redact.h"

#define SECRET	"sk-unit-events-SECRET-9931"

static json_t *
record(const char *ns, json_t *threads_lost)
{
	json_t *r = json_pack("{s:i, s:s, s:s?, s:s, s:s}", "cell", 4,
	    "status", "error", "kind", "timeout", "output", "x",
	    "code", "print(1)");

	assert_non_null(r);
	if (ns != NULL)
		assert_int_equal(json_object_set_new(r, "namespace",
		    json_string(ns)), 0);
	if (threads_lost != NULL)
		assert_int_equal(json_object_set_new(r, "threads_lost",
		    threads_lost), 0);
	return r;
}

static void
test_no_rollback(void **state)
{
	static const char *ns[] = { "kept", "lost", "rolled", "roll back",
	    "Rolled back to before cell 2", NULL };
	json_t *r, *f;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		r = record(ns[i], json_integer(2));
		f = events_rollback_fields(r);
		if (f != NULL)
			fail_msg("namespace '%s' gave a rollback", ns[i] ?
			    ns[i] : "(none)");
		json_decref(r);
	}
	r = json_pack("{s:i, s:n}", "cell", 1, "namespace");
	assert_null(events_rollback_fields(r));
	json_decref(r);
}

static void
test_rollback_fields(void **state)
{
	json_t *r = record("rolled back to before cell 3", json_integer(2));
	json_t *f = events_rollback_fields(r);

	(void)state;
	assert_non_null(f);
	assert_int_equal(json_object_size(f), 4);
	assert_int_equal(json_integer_value(json_object_get(f, "cell")), 4);
	assert_string_equal(json_string_value(json_object_get(f,
	    "namespace")), "rolled back to before cell 3");
	assert_int_equal(json_integer_value(json_object_get(f,
	    "to_before_cell")), 3);
	assert_int_equal(json_integer_value(json_object_get(f,
	    "threads_lost")), 2);
	json_decref(f);
	json_decref(r);
}

static void
test_rollback_partial(void **state)
{
	/* no cell named, no threads_lost: only what the record says */
	json_t *r = record("rolled back (the snapshot was older)", NULL);
	json_t *f = events_rollback_fields(r);

	(void)state;
	assert_non_null(f);
	assert_int_equal(json_object_size(f), 2);
	assert_null(json_object_get(f, "to_before_cell"));
	json_decref(f);
	json_decref(r);
	r = record("rolled back to before cell x", json_pack("[s]", "t1"));
	f = events_rollback_fields(r);
	assert_non_null(f);
	assert_null(json_object_get(f, "to_before_cell"));
	assert_true(json_is_array(json_object_get(f, "threads_lost")));
	json_decref(f);
	json_decref(r);
}

/* As test_output.c: out.c opens its own descriptor of fd 1 on first use,
 * so fd 1 is the pipe only for that moment. */
static int
stdout_pipe(void)
{
	int p[2], saved = dup(1);

	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[1], 1), 1);
	(void)out_dropped(1);
	assert_int_equal(dup2(saved, 1), 1);
	(void)close(saved);
	(void)close(p[1]);
	assert_int_equal(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) |
	    O_NONBLOCK), 0);
	return p[0];
}

/* The lines readable from r, each parsed. */
static json_t *
read_events(int r)
{
	static char buf[1 << 20];
	json_t *all = json_array(), *ev;
	ssize_t n;
	size_t len = 0;
	char *p, *nl;

	out_flush(0);
	while ((n = read(r, buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)n;
	assert_true(n < 0 && errno == EAGAIN);
	buf[len] = '\0';
	for (p = buf; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		ev = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, NULL);
		if (ev == NULL)
			fail_msg("not a JSON line: %.*s", (int)(nl - p), p);
		(void)json_array_append_new(all, ev);
	}
	assert_int_equal(*p, '\0');	/* whole lines only */
	return all;
}

static const char *
str(const json_t *ev, const char *key)
{
	return json_string_value(json_object_get(ev, key));
}

static void
test_stream(void **state)
{
	struct redact *red = redact_new();
	int r = stdout_pipe();
	json_t *all, *ev, *rec;
	char *text;
	size_t i;

	(void)state;
	assert_int_equal(redact_add(red, SECRET, strlen(SECRET)), 0);
	events_cell_output(1, 1, "off", 3);	/* not started: nothing */
	events_start(red);
	/* e-acute split across chunks; the secret inside one */
	events_cell_output(1, 1, "h\xc3", 2);
	events_cell_output(1, 1, "\xa9 " SECRET "\n", strlen(SECRET) + 3);
	events_cell_output(1, 2, "\xe2\x82", 2);	/* held, then flushed */
	events_emit("stop", json_pack("{s:i, s:s}", "exit", 0, "reason",
	    "quit() " SECRET));
	rec = record("rolled back to before cell 3", NULL);
	/* the record's strings are redacted too; a NUL in one survives */
	assert_int_equal(json_object_set_new(rec, "output",
	    json_string("x " SECRET)), 0);
	assert_int_equal(json_object_set_new(rec, "traceback",
	    json_stringn("a\0b", 3)), 0);
	text = json_dumps(rec, JSON_COMPACT);
	assert_non_null(text);
	events_cell_end(text, strlen(text));
	free(text);
	json_decref(rec);
	all = read_events(r);
	assert_int_equal(json_array_size(all), 6);
	json_array_foreach(all, i, ev) {
		assert_int_equal(json_integer_value(json_object_get(ev, "v")),
		    EVENTS_VERSION);
		assert_int_equal(json_integer_value(json_object_get(ev,
		    "seq")), (json_int_t)i);
		assert_true(json_is_real(json_object_get(ev, "time")));
	}
	assert_string_equal(str(json_array_get(all, 0), "text"), "h");
	assert_string_equal(str(json_array_get(all, 1), "text"),
	    "\xc3\xa9 [REDACTED]\n");
	assert_string_equal(str(json_array_get(all, 2), "reason"),
	    "quit() [REDACTED]");
	/* the held bytes of stderr, cut off: U+FFFD each */
	assert_string_equal(str(json_array_get(all, 3), "stream"), "stderr");
	assert_string_equal(str(json_array_get(all, 3), "text"),
	    "\xef\xbf\xbd\xef\xbf\xbd");
	assert_string_equal(str(json_array_get(all, 4), "type"), "cell_end");
	assert_string_equal(str(json_object_get(json_array_get(all, 4),
	    "record"), "namespace"), "rolled back to before cell 3");
	assert_string_equal(str(json_object_get(json_array_get(all, 4),
	    "record"), "output"), "x [REDACTED]");
	assert_int_equal(json_string_length(json_object_get(json_object_get(
	    json_array_get(all, 4), "record"), "traceback")), 3);
	assert_string_equal(str(json_array_get(all, 5), "type"), "rollback");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(all,
	    5), "to_before_cell")), 3);
	json_decref(all);
	redact_free(red);
	(void)close(r);
}

/* U+2028 and U+2029 become escapes: a line splitter sees one line. */
static void
test_line_separators(void **state)
{
	static const char in[] = "{\"t\":\"a\xe2\x80\xa8" "b\xe2\x80\xa9"
	    "c\xe2\x80\xaa\"}";
	size_t len;
	char *line = events_line(in, sizeof in - 1, &len);
	json_t *j;

	(void)state;
	assert_non_null(line);
	assert_string_equal(line, "{\"t\":\"a\\u2028b\\u2029c"
	    "\xe2\x80\xaa\"}\n");
	assert_int_equal(len, strlen(line));
	j = json_loads(line, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "t")),
	    "a\xe2\x80\xa8" "b\xe2\x80\xa9" "c\xe2\x80\xaa");
	json_decref(j);
	free(line);
	line = events_line("", 0, &len);
	assert_non_null(line);
	assert_string_equal(line, "\n");
	free(line);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_rollback),
		cmocka_unit_test(test_rollback_fields),
		cmocka_unit_test(test_rollback_partial),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_line_separators),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
