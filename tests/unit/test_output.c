/*
 * test_output.c - the terminal filter (SGR kept, every other escape
 * sequence and control dropped, the same however the stream is chunked),
 * model text made visible, the stream redaction of delta events (a secret
 * split across two deltas never comes out), the output queue's
 * line-boundary drops counted in one notice, a stream of lines never
 * cut in its pipe, and the model of a pipe's page slots that decides it.
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
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/ui/out.h"
#include "supervisor/ui/pipemodel.h"
#include "supervisor/text/redact.h"
#include "supervisor/model/streamred.h"
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

/* The slots a pipe has free now, counted the kernel's way: whole pages
 * written until it takes no more (each recorded in the model). */
static unsigned
free_slots(int w, struct pipe_model *m, size_t page)
{
	static char buf[65536];
	unsigned k = 0;

	memset(buf, 'f', page);
	assert_int_equal(pipe_model_look(m), 0);
	while (write(w, buf, page) == (ssize_t)page) {
		assert_int_equal(pipe_model_wrote(m, page, page), 0);
		assert_int_equal(pipe_model_look(m), 0);
		k++;
	}
	assert_int_equal(errno, EAGAIN);
	return k;
}

/* The reader takes some bytes (or all): 1 in 4 steps. */
static void
maybe_read(int r, size_t page)
{
	static char buf[1 << 20];
	size_t want;

	if (rand() % 4 != 0)
		return;
	want = rand() % 8 == 0 ? sizeof buf : 1 + (size_t)rand() % (3 * page);
	(void)read(r, buf, want);
}

/*
 * One random run on a pipe of size bytes: the model says a write fits
 * exactly when the kernel takes it whole, and counts the used slots the
 * kernel has. race: the reader sometimes empties the pipe between the
 * model's look and the write (what a reader in another process can do):
 * then it never says fits for a write the kernel would cut, and never
 * counts fewer slots than the kernel uses; or, when it cannot tell the
 * layouts apart any more, says so until it sees the pipe empty.
 */
static void
model_run(int size, int race, unsigned seed)
{
	static const size_t sizes[] = { 1, 7, 100, 1000, 2049, 2049, 2049,
	    3000, 4095, 4096, 4097, 5000, 8193, 15000 };
	static char buf[1 << 20], sink[1 << 20];
	struct pipe_model *m;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n;
	unsigned slots, used, kfree;
	int p[2], i, f, cut = 0, known, waits = 0;
	ssize_t w;

	srand(seed);
	memset(buf, 'x', sizeof buf);
	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	assert_true(fcntl(p[1], F_SETPIPE_SZ, size) >= size);
	m = pipe_model_new(p[1]);
	assert_non_null(m);
	slots = pipe_model_slots(m);
	assert_int_equal(slots, (unsigned)fcntl(p[1], F_GETPIPE_SZ) / page);
	for (i = 0; i < 20000; i++) {
		maybe_read(p[0], page);
		known = pipe_model_look(m) == 0;
		if (!known && !race)
			fail_msg("run %d step %d: the model is lost", size, i);
		waits += !known;
		if (known && rand() % 50 == 0) {  /* the kernel's slots */
			used = pipe_model_used(m);
			kfree = free_slots(p[1], m, page);
			if (race)
				assert_true(used >= slots - kfree);
			else
				assert_int_equal(used, slots - kfree);
			continue;
		}
		n = rand() % 6 == 0 ? 3 * 5000 : sizes[rand() %
		    (int)(sizeof sizes / sizeof sizes[0])];
		f = pipe_model_fits(m, n, 0);
		assert_true(f == 0 || f == 1 || (f == -1 && !known));
		if (race && rand() % 5 == 0)
			while (read(p[0], sink, sizeof sink) > 0)
				;
		w = write(p[1], buf, n);
		assert_true(w > 0 || (w < 0 && errno == EAGAIN));
		if (f == 1)
			assert_int_equal(w, (ssize_t)n);
		else if (!race && w == (ssize_t)n)
			fail_msg("step %d: %zu bytes taken whole, the model "
			    "said no (%u of %u slots used)", i, n,
			    pipe_model_used(m), slots);
		cut += w > 0 && w < (ssize_t)n;
		if (w > 0 && pipe_model_wrote(m, n, (size_t)w) != 0)
			fail_msg("run %d/%d step %d: %zu bytes took %zd, the "
			    "model is lost", size, race, i, n, w);
	}
	assert_true(cut > 0);	/* the full pipe was reached */
	assert_true(waits < 20000 / 2);
	pipe_model_free(m);
	(void)close(p[0]);
	(void)close(p[1]);
}

static void
test_pipe_model(void **state)
{
	(void)state;
	model_run(65536, 0, 18);
	model_run(16384, 0, 5);
	model_run(4096, 0, 7);
	model_run(1 << 20, 0, 1805);
	model_run(65536, 1, 2);
	model_run(16384, 1, 3);
}

/* Another writer on the same pipe: the model says it does not know. */
static void
test_pipe_model_other_writer(void **state)
{
	struct pipe_model *m;
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	m = pipe_model_new(p[1]);
	assert_non_null(m);
	assert_int_equal(write(p[1], "ab\n", 3), 3);
	assert_int_equal(pipe_model_wrote(m, 3, 3), 0);
	assert_int_equal(write(p[1], "not ours\n", 9), 9);
	assert_int_equal(pipe_model_look(m), -1);
	assert_int_equal(pipe_model_fits(m, 1, 0), -1);
	pipe_model_free(m);
	(void)close(p[0]);
	(void)close(p[1]);
}

static const size_t line_sizes[] = { 2049, 1000, 5000, 3000, 100, 2049,
    4097, 15000 };

/*
 * A child writes a stream of lines (lengths that waste up to half a page
 * each) and its final lines to a pipe nobody reads, then exits: the pipe
 * holds the first lines, whole and in order, then the final lines.
 */
static void
test_stalled_reader_gets_final_lines(void **state)
{
	static char line[16384];
	char *got, *q, *e;
	size_t len, i, k;
	int p[2], st;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	(void)fflush(stdout);
	(void)fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		(void)dup2(p[1], 1);
		(void)close(p[0]);
		(void)close(p[1]);
		out_lines(1);
		for (i = 0; i < 1000; i++) {	/* 4 MB */
			k = line_sizes[i % (sizeof line_sizes /
			    sizeof line_sizes[0])];
			memset(line, 'a' + (int)(i % 26), k - 1);
			line[k - 1] = '\n';
			out_line(1, line, k);
		}
		out_final(1, "FINAL stop\n", 11);
		out_final(1, "FINAL run_end\n", 14);
		exit(0);
	}
	(void)close(p[1]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	got = in_pipe(p[0], &len);
	(void)close(p[0]);
	assert_true(len > 25);
	assert_string_equal(got + len - 25, "FINAL stop\nFINAL run_end\n");
	for (q = got, i = 0; q < got + len - 25; q = e + 1, i++) {
		e = memchr(q, '\n', (size_t)(got + len - 25 - q));
		if (e == NULL)
			fail_msg("line %zu is cut: %zu bytes", i,
			    (size_t)(got + len - 25 - q));
		k = line_sizes[i % (sizeof line_sizes / sizeof line_sizes[0])];
		assert_int_equal((size_t)(e - q) + 1, k);
		assert_int_equal(q[0], 'a' + (int)(i % 26));
		assert_int_equal(e[-1], 'a' + (int)(i % 26));
	}
	assert_true(i > 10);
	free(got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_visible),
		cmocka_unit_test(test_stream_deltas),
		cmocka_unit_test(test_pipe_model),
		cmocka_unit_test(test_pipe_model_other_writer),
		/* before stdout's queue is set up here: the child's own */
		cmocka_unit_test(test_stalled_reader_gets_final_lines),
		cmocka_unit_test(test_queue_drops_lines),
		cmocka_unit_test(test_queue_cuts_long_line_safely),
		cmocka_unit_test(test_lines_are_never_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
