/*
 * out.h - everything the supervisor shows goes out here: stdout, stderr
 * and the terminal's status bar, through bounded queues that never block
 * the event loop (SPEC section 9, issue 10).
 *
 * The inherited descriptors are shared with the shell and the pipe's
 * other end, so O_NONBLOCK is never set on them: a pipe, FIFO or terminal
 * is reopened through /proc/self/fd/N with O_NONBLOCK (a private open file
 * description), a socket (journald's stream) takes send(MSG_DONTWAIT), a
 * regular file is written directly. What cannot be written now waits in
 * the queue (OUT_QUEUE_MAX bytes) and goes out from the loop when the fd
 * is writable. When a reader stalls and the queue is full, live output is
 * dropped at a line boundary and counted; once it flows again one line
 * says "[agentz] N bytes of live output dropped (the reader was too
 * slow)". Records and the journal keep everything.
 *
 * stdout and stderr on the same file (a terminal, 2>&1) share one queue,
 * so their order is kept. Log lines (common/log.h) go through the stderr
 * queue once out_attach() ran. At exit what is queued is flushed until the
 * readers took nothing for OUT_EXIT_WAIT_MS.
 *
 * The gate: out_clean() is the one way model- or cell-written text reaches
 * a human, systemd or a log line: secrets redacted, controls made visible.
 */
#ifndef AGENTZ_OUT_H
#define AGENTZ_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/loop/loop.h"
#include "supervisor/text/redact.h"

#define OUT_QUEUE_MAX		(256u * 1024u)
#define OUT_EXIT_WAIT_MS	1000
/* Records queued beyond this (a reader that stopped) are dropped. */
#define OUT_RECORD_MAX		(64u * 1024u * 1024u)

/* Starts writing from l when a queue waits (and routes log lines here);
 * NULL detaches (before the loop is freed). */
void out_attach(struct loop *l);

/* The secrets out_clean() hides; NULL: none. Kept, not copied. */
void out_set_redact(const struct redact *r);

/* A whole message (a status or log line) to stream 1 or 2: queued whole,
 * or dropped whole when the queue is full. */
void out_msg(int stream, const char *p, size_t n);

/* A result record (exec --json): not dropped while it fits in
 * OUT_RECORD_MAX; the queue grows for it while the reader is slow. */
void out_record(int stream, const char *p, size_t n);

/*
 * Stream 1 or 2 carries lines that a reader parses one by one (the event
 * stream of agentz --json): on a pipe or FIFO (its size raised to 1 MiB
 * when allowed) a line is written only when it fits whole - never a cut
 * line, however long the reader stalls (a line longer than the empty pipe
 * excepted) - and OUT_FINAL_RESERVE bytes of the pipe are kept for the
 * final lines. "Fits" counts the pipe's pages (pipe_model below), not its
 * free bytes; while the model cannot know them (another writer, a pipe
 * not yet seen empty), free bytes. At exit, once the reader took nothing for OUT_EXIT_WAIT_MS,
 * the lines still queued are dropped whole, but for the final ones, which
 * then go into that reserve: a reader that stalled completely still finds
 * them at the end of what it reads.
 */
#define OUT_FINAL_RESERVE	(16u * 1024u)	/* at most a quarter of it */
void out_lines(int stream);
/* A final line (out_lines; at most 4, together within the reserve): as
 * out_record, and kept at exit when the lines before it are dropped. */
void out_final(int stream, const char *p, size_t n);

/* A line that may be lost (an event carrying live output): queued whole
 * while the queue holds at most OUT_QUEUE_MAX bytes, else dropped whole,
 * with no notice in the stream (the caller counts it). 0, or -1 dropped. */
int out_line(int stream, const char *p, size_t n);

/* Cell output to stream 1 or 2: filtered for a terminal (termout.h),
 * dropped at line boundaries while the reader stalls. */
void out_cell(int stream, const char *p, size_t n);
/* The cell ended: its filters are flushed. */
void out_cell_end(void);

/* The status bar's writes to stdout's terminal. force: control sequences
 * that must arrive (the scroll region); else a frame, skipped when the
 * terminal has not taken the last one yet. */
void out_term(const char *p, size_t n, int force);

/* Writes what is queued; gives up once the readers took nothing for ms
 * (a stalled reader costs ms, a reading one gets everything). */
void out_flush(int ms);

/* Bytes of live output dropped so far on stream 1 or 2 (tests, logs). */
uint64_t out_dropped(int stream);

/*
 * The gate: p[0..n) with the secrets of out_set_redact() replaced and
 * control characters made visible (termout_visible; multiline keeps \n
 * and \t). NUL-terminated, malloc'ed; NULL / ENOMEM. NULL p: "".
 */
char *out_clean(const char *p, size_t n, int multiline);

#endif
