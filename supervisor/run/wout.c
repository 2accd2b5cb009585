/*
 * wout.c - a worker's output pipes (stdout, stderr), fresh after each
 * cell that may have left a process holding them, and its stack-dump pipe
 * (see workers_impl.h).
 *
 * Owns: reading the pipes in bounded rounds (a flood must not starve the
 * channel), draining what they hold at a DONE or a death, the pipes of
 * the next cell waiting on the output socket (proto.h WORKER_OUT_FD) and
 * the swap at a DONE (PIPES), and the faulthandler dump kept to STACK_MAX
 * bytes.
 *
 * May include: workers_impl.h, sandbox/contain.h (through workers.h),
 * common/log.h, common/fdio.h.
 */
#include "supervisor/run/workers_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"

#define READ_CHUNK 65536
#define STACK_MAX 65536

/*
 * Reads what a pipe holds now, at most `rounds` reads and `max` bytes (a
 * flood must not starve the channel, nor hold up a DONE or a death).
 * Returns 0 at EOF, 1 otherwise.
 */
static int
drain_pipe(struct worker *w, int fd, unsigned rounds, size_t max)
{
	char buf[READ_CHUNK];
	ssize_t n;

	while (rounds-- > 0 && max > 0) {
		n = read(fd, buf, max < sizeof buf ? max : sizeof buf);
		if (n > 0) {
			w->ops.output(w, fd == w->out ? 1 : 2, buf, (size_t)n,
			    w->ctx);
			max -= (size_t)n;
		} else if (n == 0) {
			return 0;
		} else if (errno != EINTR) {
			return 1;
		}
	}
	return 1;
}

/* The bytes a pipe holds now, read whole; nothing written later (a
 * process the cell left running writes on). */
static void
drain_held(struct worker *w, int fd)
{
	int held = 0;

	if (fd >= 0 && ioctl(fd, FIONREAD, &held) == 0 && held > 0)
		(void)drain_pipe(w, fd, UINT_MAX, (size_t)held);
}

/* 16 reads of READ_CHUNK: 1 MiB, the most an unprivileged worker can
 * make a pipe hold (F_SETPIPE_SZ up to pipe-max-size). */
void
worker_drain_output(struct worker *w)
{
	if (w->out >= 0)
		(void)drain_pipe(w, w->out, 16, SIZE_MAX);
	if (w->err >= 0)
		(void)drain_pipe(w, w->err, 16, SIZE_MAX);
}

/* Everything written to the pipes before now (a DONE or a death). */
void
wout_drain_all(struct worker *w)
{
	drain_held(w, w->out);
	drain_held(w, w->err);
}

void
wout_pipe_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)revents;
	if (drain_pipe(w, fd, 16, SIZE_MAX) == 0) {
		loop_unwatch(l, fd);
		(void)close(fd);
		if (fd == w->out)
			w->out = -1;
		else
			w->err = -1;
	}
}

/* --- the next cell's pipes -------------------------------------------- */

/* A pipe: *rd ours (non-blocking), *wr the worker's (blocking). */
static int
new_pipe(int *rd, int *wr)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
		wspawn_close_fds(p, 2);
		return -1;
	}
	*rd = p[0];
	*wr = p[1];
	return 0;
}

/* One datagram: struct outpipes_msg and the pipes' write ends. */
static int
send_pipes(int sock, const int *fds)
{
	struct outpipes_msg om = { OUTPIPES_MAGIC };

	return fd_send_fds(sock, &om, sizeof om, fds, OUTPIPES_NFDS);
}

void
wout_close_socket(struct worker *w)
{
	int fds[3] = { w->outsock, w->next_out, w->next_err };

	wspawn_close_fds(fds, 3);
	w->outsock = w->next_out = w->next_err = -1;
}

/*
 * One datagram waits at a time (the worker takes it after its next DONE).
 * When one cannot be sent the socket is closed: the worker keeps its
 * pipes from then on (as both sides agree), never a datagram off by one.
 */
int
wout_send_next(struct worker *w)
{
	int rd[2] = { -1, -1 }, wr[2] = { -1, -1 }, rc = -1;

	if (w->outsock < 0 || w->next_out >= 0)
		return w->next_out >= 0 ? 0 : -1;
	if (new_pipe(&rd[0], &wr[0]) == 0 && new_pipe(&rd[1], &wr[1]) == 0 &&
	    send_pipes(w->outsock, wr) == 0) {
		w->next_out = rd[0];
		w->next_err = rd[1];
		rd[0] = rd[1] = -1;
		rc = 0;
	} else {
		log_warn("worker %ld: cannot send the next cell's output pipes; "
		    "later cells share these", (long)w->spawner_pid);
		wout_close_socket(w);
	}
	wspawn_close_fds(wr, 2);
	wspawn_close_fds(rd, 2);
	return rc;
}

/* Closes and forgets *fd (-1 after). */
static void
close_pipe(struct worker *w, int *fd)
{
	if (*fd < 0)
		return;
	loop_unwatch(w->loop, *fd);
	(void)close(*fd);
	*fd = -1;
}

/*
 * May a process other than the worker (and its spawner) hold the pipes?
 * Only the worker's cgroup can tell (a process the cell left keeps it,
 * wherever it was reparented); without one, always.
 */
static int
others_may_hold(const struct worker *w)
{
	pid_t known[2] = { w->spawner_pid, w->python_pid };

	return w->cg == NULL || contain_group_others(w->cg, known, 2) != 0;
}

/*
 * At a DONE, once the cell's pipes are drained. When the cell may have
 * left a process holding them (surely: the caller knows one exists, a
 * snapshot, and the cgroup need not be read), they are closed (it gets
 * EPIPE from now on), PIPES tells the worker to take the waiting ones,
 * which are read instead, and the next ones are sent; otherwise they
 * stay, as they do when nothing is waiting (the worker keeps its pipes,
 * and so do we).
 */
void
wout_rotate(struct worker *w, int surely)
{
	struct msg m;

	if (w->next_out < 0 || (!surely && !others_may_hold(w)))
		return;
	memset(&m, 0, sizeof m);
	m.type = MSG_PIPES;
	if (wchan_send(w, &m) < 0) {
		worker_kill(w, "cannot send PIPES on the channel");
		return;
	}
	close_pipe(w, &w->out);
	close_pipe(w, &w->err);
	w->out = w->next_out;
	w->err = w->next_err;
	w->next_out = w->next_err = -1;
	if (loop_watch(w->loop, w->out, POLLIN, wout_pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->err, POLLIN, wout_pipe_event, w) < 0) {
		worker_kill(w, "cannot watch the output pipes");
		return;
	}
	(void)wout_send_next(w);
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
