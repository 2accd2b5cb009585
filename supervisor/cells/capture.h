/*
 * capture.h - bounded capture of a cell's output: the first half of the
 * limit is kept as the head, the last half as a ring-buffered tail, and the
 * bytes in between are only counted. Memory stays at most `limit` bytes
 * however much the cell prints.
 */
#ifndef AGENTZ_CAPTURE_H
#define AGENTZ_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

struct capture {
	size_t limit;		/* head + tail bytes kept */
	char *head;
	size_t head_len;
	char *tail;		/* ring of limit - limit/2 bytes */
	size_t tail_start, tail_len;
	uint64_t total;		/* bytes ever appended */
	/* frozen (capture_freeze): head holds the whole text, marker
	 * included, exactly sized; dropped is kept here */
	int frozen;
	uint64_t dropped;
};

void capture_init(struct capture *c, size_t limit);
void capture_clear(struct capture *c);
/* 0, or -1/ENOMEM (the bytes are then counted as dropped). */
int capture_append(struct capture *c, const char *p, size_t n);
/* Bytes appended but not kept. */
uint64_t capture_dropped(const struct capture *c);
/*
 * The kept text as one malloc'ed, NUL-terminated string: head, then a
 * marker line "[... N bytes dropped ...]" when bytes were dropped, then
 * tail. *len gets its length. NULL / ENOMEM.
 */
char *capture_text(const struct capture *c, size_t *len);
/*
 * Once the cell is over: replaces the buffers by capture_text's string,
 * exactly sized (a finished record keeps what it printed, not the limit's
 * room). Later appends are only counted as dropped. 0, or -1/ENOMEM
 * (left as it was).
 */
int capture_freeze(struct capture *c);
/*
 * A frozen capture from a record read back: text (copied) as kept, with
 * the totals it had. 0, or -1/ENOMEM.
 */
int capture_restore(struct capture *c, const char *text, size_t len,
    uint64_t total, uint64_t dropped);
/* Heap bytes the capture holds. */
size_t capture_bytes(const struct capture *c);

#endif
