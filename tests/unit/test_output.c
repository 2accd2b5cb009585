/*
 * test_output.c - the terminal filter (SGR kept, every other escape
 * sequence and control dropped, the same however the stream is chunked),
 * model text made visible, the stream redaction of delta events (a secret
 * split across two deltas never comes out), the output queue's
 * line-boundary drops counted in one notice, and a stream of lines never
 * cut in its pipe.
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

#include "supervisor/front/out.h"
#include "supervisor/text/redact.h"
#include "supervisor/text/streamred.h"
#include "supervisor/text/termout.h"

/* The filter's output for in, fed in chunks of size step. */
static char *
filter(const char *in, size_t n, size_t step)
{
	struct termout t;
	char *out = malloc(n + 2 * TERMOUT_SLACK + n * TERMOUT_SLACK);
	size_t i, k, len = 0;

	termout_init(&t);
	for (i = 0; i < n; i += k) {
		k = n - i < step ? n - i : step;
		len += termout_feed(&t, in + i, k, out + len);
	}
	len += termout_flush(&t, out + len);
	out[len] = '\0';
	return out;
}

static void
check(const char *in, const char *want)
{
	size_t n = strlen(in), step;
	char *got;

	for (step = 1; step <= n + 1; step++) {
		got = filter(in, n, step);
		if (strcmp(got, want) != 0)
			fail_msg("chunks of %zu: %s -> \"%s\", want \"%s\"",
			    step, in, got, want);
		free(got);
	}
}

static void
test_filter(void **state)
{
	(void)state;
	check("plain text\n\ttab", "plain text\n\ttab");
	/* SGR kept; the reset at the end because colour was used */
	check("\033[1;31mred\033[0m\n", "\033[1;31mred\033[0m\n\033[0m");
	check("\033[38:5:196mx", "\033[38:5:196mx\033[0m");
	/* OSC title (BEL and ST), cursor motion, clear screen: dropped */
	check("a\033]0;title\007b", "ab");
	check("a\033]2;title\033\\b", "ab");
	check("a\033[2J\033[H\033[?1049hb", "ab");
	check("a\033[31;1Hb", "ab");
	check("a\033Pq#0;2;0;0;0\033\\b", "ab");
	check("a\033cb\033(Bc\0337d", "abcd");
	/* controls: BEL, backspace, DEL, NUL dropped */
	check("a\007\010\177b", "ab");
	/* a lone \r becomes a line break; \r\n stays */
	check("\r[agentz] cell 9: ok\n", "\n[agentz] cell 9: ok\n");
	check("50%\r100%\r\n", "50%\n100%\r\n");
	check("end\r", "end\n");
	/* C1 controls: CSI as U+009B, stray 8-bit bytes */
	check("a\xc2\x9b" "2Jb", "a2Jb");
	check("a\x9b" "b", "ab");
	check("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xc2\xa0", "\xc3\xa9t\xc3\xa9 "
	    "\xe2\x82\xac \xc2\xa0");
	/* an SGR too long to be real is dropped, the text goes on */
	check("\033[1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;"
	    "1;1;1;1mx", "x");
	/* an unfinished sequence at the end is dropped */
	check("ok\033[3", "ok");
}

static void
test_visible(void **state)
{
	char *v;

	(void)state;
	v = termout_visible("a\033[2Jb\r\nc\td\x7f\xc2\x9b", 14, 0);
	assert_string_equal(v, "a\\x1b[2Jb\\r\\nc\\td\\x7f\\u009b");
	free(v);
	v = termout_visible("line 1\n\tline 2\033]0;t\007", 20, 1);
	assert_string_equal(v, "line 1\n\tline 2\\x1b]0;t\\x07");
	free(v);
}

struct sink {
	char text[4096];	/* the deltas, joined */
	char all[16384];	/* every event */
};

static void
sink_event(void *ctx, const char *data, size_t len)
{
	struct sink *s = ctx;
	json_t *ev = json_loadb(data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));

	assert_non_null(type);
	(void)strncat(s->all, data, len);
	if (strcmp(type, "response.output_text.delta") == 0)
		(void)strcat(s->text, json_string_value(json_object_get(ev,
		    "delta")));
	json_decref(ev);
}

static void
feed_ev(struct streamred *sr, const struct redact *r, struct sink *s,
    const char *type, const char *delta)
{
	char *d;

	if (delta != NULL)
		assert_true(asprintf(&d, "{\"type\":\"%s\",\"item_id\":"
		    "\"msg_1\",\"output_index\":0,\"content_index\":0,"
		    "\"delta\":\"%s\"}", type, delta) > 0);
	else
		assert_true(asprintf(&d, "{\"type\":\"%s\",\"item_id\":"
		    "\"msg_1\",\"output_index\":0,\"content_index\":0}",
		    type) > 0);
	streamred_event(sr, r, d, strlen(d), sink_event, s);
	free(d);
}

static void
test_stream_deltas(void **state)
{
	struct redact *r = redact_new();
	struct streamred *sr = streamred_new();
	struct sink s;

	(void)state;
	memset(&s, 0, sizeof s);
	assert_int_equal(redact_add(r, "sk-SPLITSECRET42", 16), 0);
	feed_ev(sr, r, &s, "response.output_text.delta", "key: sk-SPL");
	feed_ev(sr, r, &s, "response.output_text.delta", "ITSEC");
	feed_ev(sr, r, &s, "response.output_text.delta", "RET42 and sk-");
	assert_null(strstr(s.all, "SPLIT"));
	feed_ev(sr, r, &s, "response.output_text.done", NULL);
	assert_string_equal(s.text, "key: [REDACTED] and sk-");
	assert_null(strstr(s.all, "SPLITSEC"));
	/* what is held at the end of the response comes out */
	feed_ev(sr, r, &s, "response.output_text.delta", " tail sk-SP");
	streamred_flush(sr, r, sink_event, &s);
	assert_string_equal(s.text, "key: [REDACTED] and sk- tail sk-SP");
	streamred_free(sr);
	redact_free(r);
}

/* Everything readable from fd r, out_flush()ing until nothing comes. */
static char *
drain(int r, size_t *len)
{
	char buf[65536], *got = malloc(1);
	ssize_t n;

	*len = 0;
	for (;;) {
		n = read(r, buf, sizeof buf);
		if (n <= 0) {
			assert_true(n < 0 && errno == EAGAIN);
			out_flush(0);
			n = read(r, buf, sizeof buf);
			if (n <= 0)
				break;
		}
		got = realloc(got, *len + (size_t)n + 1);
		memcpy(got + *len, buf, (size_t)n);
		*len += (size_t)n;
	}
	got[*len] = '\0';
	return got;
}

/*
 * The read end of a pipe the output module takes for stdout: the module
 * opens its own descriptor of fd 1 on first use, so fd 1 is the pipe only
 * for that moment (cmocka's own output goes on to the real stdout).
 */
static int
stdout_pipe(void)
{
	static int r = -1;
	int p[2], saved;

	if (r >= 0)
		return r;
	saved = dup(1);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[1], 1), 1);
	(void)out_dropped(1);		/* set up now, on the pipe */
	assert_int_equal(dup2(saved, 1), 1);
	(void)close(saved);
	(void)close(p[1]);
	assert_int_equal(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) |
	    O_NONBLOCK), 0);
	r = p[0];
	return r;
}

/*
 * stdout a pipe nobody reads while 4 MiB of lines arrive: the queue stays
 * bounded, whole lines are dropped, and once the reader drains the pipe
 * one notice counts exactly the bytes that did not arrive.
 */
static void
test_queue_drops_lines(void **state)
{
	int r = stdout_pipe();
	char line[101], *got, *note;
	size_t total = 0, len, i, payload;
	unsigned long long dropped;

	(void)state;
	memset(line, 'x', 99);
	line[99] = '\n';
	line[100] = '\0';
	for (i = 0; i < 40000; i++) {		/* 4 MB, never blocks */
		out_cell(1, line, 100);
		total += 100;
	}
	assert_true(out_dropped(1) > 0);
	got = drain(r, &len);
	note = strstr(got, "[agentz] ");
	assert_non_null(note);
	assert_int_equal(sscanf(note, "[agentz] %llu bytes of live output "
	    "dropped (the reader was too slow)\n", &dropped), 1);
	payload = (size_t)(note - got);
	/* whole lines before the notice, nothing after it */
	assert_int_equal(payload % 100, 0);
	assert_int_equal(got[payload - 1], '\n');
	assert_int_equal(strchr(note, '\n')[1], '\0');
	assert_int_equal(payload + dropped, total);
	assert_true(payload <= OUT_QUEUE_MAX + 1024 * 1024);
	free(got);
}

/*
 * One line longer than pipe and queue, begun mid-line: the cut keeps
 * escape sequences and UTF-8 characters whole.
 */
static void
test_queue_cuts_long_line_safely(void **state)
{
	/* 11 bytes: no power of two (pipe pages, the queue) is a multiple */
	static const char unit[] = "\033[31m\xc3\xa9\xe2\x82\xacz";
	int r = stdout_pipe();
	char *got, *note, *q, *big = malloc(1100000);
	size_t len, i, payload;

	(void)state;
	for (i = 0; i < 100000; i++)		/* 1.1 MB, no newline */
		memcpy(big + i * 11, unit, 11);
	out_cell(1, "ab", 2);
	out_cell(1, big, 1100000);		/* cut inside, not at 0 */
	out_cell(1, "\n", 1);
	free(big);
	got = drain(r, &len);
	note = strstr(got, "\n[agentz] ");
	assert_non_null(note);
	payload = (size_t)(note - got);
	assert_true(payload > 2 && (payload - 2) % 11 == 0);
	assert_memory_equal(got, "ab", 2);
	for (q = got + 2; q < note; q += 11)
		assert_memory_equal(q, unit, 11);
	assert_non_null(strstr(note, "bytes of live output dropped"));
	free(got);
}

/* Everything in the pipe now, without writing more. */
static char *
in_pipe(int r, size_t *len)
{
	char buf[65536], *got = malloc(1);
	ssize_t n;

	*len = 0;
	while ((n = read(r, buf, sizeof buf)) > 0) {
		got = realloc(got, *len + (size_t)n + 1);
		memcpy(got + *len, buf, (size_t)n);
		*len += (size_t)n;
	}
	got[*len] = '\0';
	return got;
}

/*
 * A stream of lines (out_lines) on a pipe nobody reads: what the pipe
 * holds is whole lines only, with room left for the final lines; what
 * did not fit waits in the queue, whole, and arrives once read. (Last:
 * the mode stays on for the shared stdout.)
 */
static void
test_lines_are_never_cut(void **state)
{
	int r = stdout_pipe(), cap;
	char line[1000], *got;
	size_t len, i, n = 3000;

	(void)state;
	memset(line, 'y', sizeof line - 1);
	line[sizeof line - 1] = '\n';
	out_lines(1);
	cap = fcntl(r, F_GETPIPE_SZ);
	assert_true(cap > 0);
	for (i = 0; i < n; i++)		/* 3 MB: more than any pipe here */
		out_record(1, line, sizeof line);
	got = in_pipe(r, &len);
	assert_true(len > 0 && len % sizeof line == 0);
	assert_int_equal(got[len - 1], '\n');
	assert_true(len + ((size_t)cap / 4 < OUT_FINAL_RESERVE ?
	    (size_t)cap / 4 : OUT_FINAL_RESERVE) <= (size_t)cap);
	free(got);
	got = drain(r, &i);		/* the rest, now that it is read */
	assert_int_equal((len + i) % sizeof line, 0);
	assert_int_equal(len + i, n * sizeof line);
	free(got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_visible),
		cmocka_unit_test(test_stream_deltas),
		cmocka_unit_test(test_queue_drops_lines),
		cmocka_unit_test(test_queue_cuts_long_line_safely),
		cmocka_unit_test(test_lines_are_never_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
