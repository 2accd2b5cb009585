/*
 * wout.c - a worker's output pipes (stdout, stderr) and its stack-dump
 * pipe (see workers_impl.h).
 *
 * Owns: reading the pipes in bounded rounds (a flood must not starve the
 * channel), draining them whole before a DONE or a death, and the
 * faulthandler dump kept to STACK_MAX bytes.
 *
 * May include: workers_impl.h, common/log.h.
 */
#include "supervisor/run/workers_impl.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define STACK_MAX 65536

/*
 * Reads what a pipe holds now, at most `rounds` reads (a flood must not
 * starve the channel; unbounded when draining before a DONE or a death).
 * Returns 0 at EOF, 1 otherwise.
 */
static int
drain_pipe(struct worker *w, int fd, unsigned rounds)
{
	char buf[READ_CHUNK];
	ssize_t n;

	while (rounds-- > 0) {
		n = read(fd, buf, sizeof buf);
		if (n > 0)
			w->ops.output(w, fd == w->out ? 1 : 2, buf, (size_t)n,
			    w->ctx);
		else if (n == 0)
			return 0;
		else if (errno != EINTR)
			return 1;
	}
	return 1;
}

/* 16 reads of READ_CHUNK: 1 MiB, the most an unprivileged worker can
 * make a pipe hold (F_SETPIPE_SZ up to pipe-max-size). */
void
worker_drain_output(struct worker *w)
{
	if (w->out >= 0)
		(void)drain_pipe(w, w->out, 16);
	if (w->err >= 0)
		(void)drain_pipe(w, w->err, 16);
}

/* Everything written to the pipes before now (a DONE or a death). */
void
wout_drain_all(struct worker *w)
{
	if (w->out >= 0)
		(void)drain_pipe(w, w->out, UINT_MAX);
	if (w->err >= 0)
		(void)drain_pipe(w, w->err, UINT_MAX);
}

void
wout_pipe_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)revents;
	if (drain_pipe(w, fd, 16) == 0) {
		loop_unwatch(l, fd);
		(void)close(fd);
		if (fd == w->out)
			w->out = -1;
		else
			w->err = -1;
	}
}

/* --- stack dumps ------------------------------------------------------- */

/* Reads what the dump pipe holds, keeping at most STACK_MAX bytes. */
void
wout_read_dump(struct worker *w)
{
	char buf[4096];
	ssize_t n;

	while (w->dump >= 0 && ((n = read(w->dump, buf, sizeof buf)) > 0 ||
	    (n < 0 && errno == EINTR)))
		if (n > 0 && w->stack.len + (size_t)n <= STACK_MAX)
			(void)buf_append(&w->stack, buf, (size_t)n);
}

void
wout_dump_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	size_t before = w->stack.len;

	wout_read_dump(w);
	if (w->stack.len > before && w->ops.stack != NULL)
		w->ops.stack(w, w->ctx);
	if (revents & POLLHUP) {
		loop_unwatch(l, fd);
		(void)close(fd);
		w->dump = -1;
	}
}

int
worker_dump_stacks(struct worker *w)
{
	if (w->state == WORKER_DOWN || w->spawner_pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(w->python_pid, SIGRTMIN + WORKER_DUMP_SIGNAL_OFFSET);
}
