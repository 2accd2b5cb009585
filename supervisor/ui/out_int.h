/*
 * out_int.h - private to the output gate's files (out.c: the queues,
 * outcell.c: live cell output): the queues' state and the functions they
 * share. Nothing else includes it; out.h is the gate's face.
 */
#ifndef AGENTZ_OUT_INT_H
#define AGENTZ_OUT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/redact.h"
#include "supervisor/text/termout.h"
#include "supervisor/ui/out.h"

struct pipe_model;

/* Room beyond OUT_QUEUE_MAX for what must not be cut: the drop notice, a
 * status bar control sequence, the rest of a frame begun. */
#define OUT_SLACK	8192
#define OUT_CAP		(OUT_QUEUE_MAX + OUT_SLACK)
/* The pipe size asked for the event stream, and how often a line that
 * does not fit yet is tried again. */
#define OUT_PIPE_SIZE	(1 << 20)
#define OUT_RETRY_MS	20
#define OUT_FINAL_MAX	4

enum out_mode {
	M_DIRECT,	/* a regular file: plain (blocking) writes */
	M_NONBLOCK,	/* our own O_NONBLOCK open of the pipe/tty */
	M_SEND,		/* a socket: send(MSG_DONTWAIT) */
	M_POLL,		/* no reopen: small writes when poll says so */
	M_BROKEN	/* closed, or a write failed: output is dropped */
};

struct outq {
	int fd, mode, tty, watched;
	struct buf b;		/* what waits: buf_rdata(), buf_rlen() (a
				 * partial write moves the read position) */
	int dropping;		/* live output is being dropped */
	int in_bol;		/* the next input byte starts a line */
	int tail_nl;		/* nothing queued yet, or it ended a line */
	uint64_t dropped;	/* since the last notice */
	uint64_t dropped_total;
	/* whole lines (out_lines): on a pipe (fifo) a line goes out only
	 * when it fits, OUT_FINAL_RESERVE kept for the final lines */
	int lines, fifo;
	int fd_bol;		/* what was written ends a line */
	int held;		/* the last write was held back by that rule */
	int final_room;		/* the reserve may be used now */
	uint64_t retry;		/* the timer trying a held line again */
	uint64_t written;	/* bytes written to fd, ever */
	struct pipe_model *pm;	/* its slots, when a pipe of lines */
	struct {		/* out_final's lines: where, and a copy */
		uint64_t off;
		char *p;
		size_t n;
	} fin[OUT_FINAL_MAX];
	size_t nfin;
};

struct out_state {
	int ready;
	struct outq q[2];
	struct outq *s[3];	/* stream 1, 2 -> its queue */
	struct termout tf[3];
	struct loop *loop;
	const struct redact *red;
};

extern struct out_state outs;

/* The bytes waiting in q. */
static inline size_t
outq_len(const struct outq *q)
{
	return buf_rlen(&q->b);
}

/* The queue of stream 1 or 2 (set up at the first use). */
struct outq *out_queue(int stream);
/* One write without blocking of what fits: the bytes written. */
size_t out_try_write(struct outq *q, const char *p, size_t n);
/* Queues p[0..n) after what waits. */
void out_append(struct outq *q, const char *p, size_t n);
/* Live output dropped so far: the notice, and live output again. */
void out_resume(struct outq *q);
/* Live output (outcell.c): whole while it fits, dropped a line at a
 * time while the reader stalls, counted. */
void out_put_live(struct outq *q, const char *p, size_t n);
/* Writes what waits, as much as the reader takes now. */
void out_pump(struct outq *q);

#endif
