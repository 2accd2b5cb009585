/*
 * fuzz_sse.c - libFuzzer target for the SSE parser (supervisor/model/sse.c).
 *
 * The first byte picks a chunk size and a cap on one event; the rest is
 * the stream. It is parsed three ways: fed whole, fed in chunks of that
 * size, and fed a byte at a time. All three must dispatch the same events
 * (type, data, last id) and end with the same result, however the stream
 * is split: the parser is a byte machine. Every event's data must be
 * NUL-terminated at data_len and within the cap. Any violation aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "supervisor/model/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_log {
	struct buf b;
	size_t max;
};

/* Abort, which libFuzzer reports, naming the check that failed. */
static void
fuzz_fail(int line, const char *what)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, line, what);
	abort();
}

#define check(ok) ((ok) ? (void)0 : fuzz_fail(__LINE__, #ok))

static void
fuzz_put(struct buf *b, const char *p, size_t n)
{
	check(buf_append(b, &n, sizeof(n)) == 0);
	check(buf_append(b, p, n) == 0);
}

/* Every event, serialised into the log, so runs compare with memcmp. */
static int
fuzz_event(void *ctx, const struct sse_event *ev)
{
	struct fuzz_log *log = ctx;

	check(ev->type != NULL && ev->data != NULL && ev->id != NULL);
	check(ev->data[ev->data_len] == '\0' && ev->data_len <= log->max);
	fuzz_put(&log->b, ev->type, strlen(ev->type));
	fuzz_put(&log->b, ev->data, ev->data_len);
	fuzz_put(&log->b, ev->id, strlen(ev->id));
	return 0;
}

/* Parse s in chunks of step bytes; the log gets the events and the
 * results of the last feed and of sse_finish(). */
static void
fuzz_run(const char *s, size_t len, size_t step, struct fuzz_log *log)
{
	struct sse *p;
	size_t off, n;
	int rc = SSE_OK, fin;

	check((p = sse_new(fuzz_event, log, log->max)) != NULL);
	for (off = 0; off < len && rc == SSE_OK; off += n) {
		n = len - off < step ? len - off : step;
		rc = sse_feed(p, s + off, n);
	}
	fin = sse_finish(p);
	check(rc == SSE_OK || fin == rc);
	check(buf_append(&log->b, &fin, sizeof(fin)) == 0);
	fuzz_put(&log->b, sse_last_id(p), strlen(sse_last_id(p)));
	sse_free(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_log log[3];
	size_t i, step;

	if (size == 0)
		return 0;
	step = (size_t)(data[0] & 0x1f) + 1;
	for (i = 0; i < 3; i++) {
		buf_init(&log[i].b);
		log[i].max = data[0] & 0x80 ? 64 : 0;
		if (log[i].max == 0)
			log[i].max = SSE_MAX_EVENT_DEFAULT;
	}
	fuzz_run((const char *)data + 1, size - 1, size, &log[0]);
	fuzz_run((const char *)data + 1, size - 1, step, &log[1]);
	fuzz_run((const char *)data + 1, size - 1, 1, &log[2]);
	for (i = 1; i < 3; i++)
		check(log[i].b.len == log[0].b.len &&
		    memcmp(log[i].b.data, log[0].b.data, log[0].b.len) == 0);
	for (i = 0; i < 3; i++)
		buf_clear(&log[i].b);
	return 0;
}
