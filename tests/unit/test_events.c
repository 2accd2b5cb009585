/*
 * test_events.c - the event stream of `agentz --json` (ui/events.h):
 * a cell -> the rollback event it implies (from the cell's state, its
 * threads lost as its record has them), and
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

#include "supervisor/cells/cells.h"
#include "supervisor/cells/record_json.h"
#include "supervisor/ui/events.h"
#include "supervisor/ui/out.h"
#include "supervisor/text/redact.h"

#define SECRET	"sk-unit-events-SECRET-9931"

/* Cell 4 of h, ended by its deadline, its namespace's fate ns (the
 * names of the threads a rollback lost: threads, or NULL). */
static struct cell *
dead_cell(struct cells *h, enum cell_ns ns, const char *threads)
{
	struct cell *c;

	cells_init(h, 1 << 20);
	c = cells_begin(h, "print(1)", 8, NULL, NULL, -1);
	assert_non_null(c);
	cells_finish_dead(c, KIND_TIMEOUT, "x", -1, 9);
	c->n = 4;
	c->ns = ns;
	if (threads != NULL)
		assert_non_null(c->threads_lost = strdup(threads));
	return c;
}

static void
test_no_rollback(void **state)
{
	static const enum cell_ns ns[] = { NS_KEPT, NS_LOST };
	struct cells h;
	struct cell *c;
	json_t *r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		c = dead_cell(&h, ns[i], "t1,t2");
		r = cells_json(c);
		if (events_rollback_fields(c, r) != NULL)
			fail_msg("namespace %d gave a rollback", (int)ns[i]);
		json_decref(r);
		cells_clear(&h);
	}
	/* a cell still running has no fate yet */
	c = dead_cell(&h, NS_ROLLED_BACK, NULL);
	c->status = CELL_RUNNING;
	r = cells_json(c);
	assert_null(events_rollback_fields(c, r));
	json_decref(r);
	cells_clear(&h);
}

static void
test_rollback_fields(void **state)
{
	struct cells h;
	struct cell *c = dead_cell(&h, NS_ROLLED_BACK, "t1,t2");
	json_t *r = cells_json(c);
	json_t *f = events_rollback_fields(c, r);

	(void)state;
	assert_non_null(f);
	assert_int_equal(json_object_size(f), 4);
	assert_int_equal(json_integer_value(json_object_get(f, "cell")), 4);
	assert_string_equal(json_string_value(json_object_get(f,
	    "namespace")), "rolled back to before cell 4");
	assert_int_equal(json_integer_value(json_object_get(f,
	    "to_before_cell")), 4);
	assert_true(json_equal(json_object_get(f, "threads_lost"),
	    json_object_get(r, "threads_lost")));
	assert_int_equal(json_array_size(json_object_get(f, "threads_lost")),
	    2);
	json_decref(f);
	json_decref(r);
	cells_clear(&h);
}

static void
test_rollback_partial(void **state)
{
	/* no threads lost: null as in the record; a record without the
	 * member: no member */
	struct cells h;
	struct cell *c = dead_cell(&h, NS_ROLLED_BACK, NULL);
	json_t *r = cells_json(c);
	json_t *f = events_rollback_fields(c, r);

	(void)state;
	assert_non_null(f);
	assert_int_equal(json_object_size(f), 4);
	assert_true(json_is_null(json_object_get(f, "threads_lost")));
	json_decref(f);
	assert_int_equal(json_object_del(r, "threads_lost"), 0);
	f = events_rollback_fields(c, r);
	assert_non_null(f);
	assert_int_equal(json_object_size(f), 3);
	assert_null(json_object_get(f, "threads_lost"));
	json_decref(f);
	json_decref(r);
	cells_clear(&h);
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
	struct cells h;
	struct cell *c;
	json_t *all, *ev;
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
	c = dead_cell(&h, NS_ROLLED_BACK, NULL);
	/* the record's strings pass the redactor too */
	cells_set_detail(c, "d " SECRET);
	events_cell_end(c);
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
	    "record"), "namespace"), "rolled back to before cell 4");
	assert_string_equal(str(json_object_get(json_array_get(all, 4),
	    "record"), "detail"), "d [REDACTED]");
	assert_string_equal(str(json_array_get(all, 5), "type"), "rollback");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(all,
	    5), "to_before_cell")), 4);
	json_decref(all);
	cells_clear(&h);
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
