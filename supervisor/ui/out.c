/*
 * out.c - bounded, non-blocking output queues and the gate (see out.h).
 */
#include "supervisor/ui/out.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/ui/out_int.h"
#include "supervisor/ui/pipemodel.h"
#include "supervisor/text/termout.h"

struct out_state outs;

static void out_exit(void);

static void
q_open(struct outq *q, int fd)
{
	struct stat st;
	char path[64];
	int nfd;

	q->fd = fd;
	q->tail_nl = 1;
	q->in_bol = 1;
	q->fd_bol = 1;
	if (fstat(fd, &st) < 0) {
		q->mode = M_BROKEN;
		return;
	}
	q->tty = isatty(fd);
	q->fifo = S_ISFIFO(st.st_mode);
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		q->mode = M_DIRECT;
		return;
	}
	if (S_ISSOCK(st.st_mode)) {
		q->mode = M_SEND;
		return;
	}
	/* a private open file description: O_NONBLOCK is ours alone */
	(void)snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (nfd >= 0) {
		q->fd = nfd;
		q->mode = M_NONBLOCK;
	} else {
		q->mode = M_POLL;
	}
}

static void
setup(void)
{
	struct stat a, b;

	if (outs.ready)
		return;
	outs.ready = 1;
	q_open(&outs.q[0], 1);
	outs.s[1] = &outs.q[0];
	if (fstat(1, &a) == 0 && fstat(2, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino && !S_ISREG(a.st_mode)) {
		outs.s[2] = &outs.q[0];	/* one file: one queue, one order */
		outs.q[1].mode = M_BROKEN;
		outs.q[1].fd = -1;
	} else {
		q_open(&outs.q[1], 2);
		outs.s[2] = &outs.q[1];
	}
	termout_init(&outs.tf[1]);
	termout_init(&outs.tf[2]);
	(void)atexit(out_exit);
}

struct outq *
out_queue(int stream)
{
	setup();
	return outs.s[stream == 1 ? 1 : 2];
}

/* One attempt to write p[0..n) without blocking: bytes, or -1 / errno. */
static ssize_t
raw(struct outq *q, const char *p, size_t n)
{
	struct pollfd pfd;

	switch (q->mode) {
	case M_NONBLOCK:
	case M_DIRECT:
		return write(q->fd, p, n);
	case M_SEND:
		return send(q->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	case M_POLL:
		pfd.fd = q->fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT)) {
			errno = EAGAIN;
			return -1;
		}
		return write(q->fd, p, n < 128 ? n : 128);
	default:
		errno = EBADF;
		return -1;
	}
}


/*
 * The same by the model of the pipe's slots: the whole lines that fit,
 * keep bytes left for the final lines; a line begun goes on to its end in
 * whole pages; a line the empty pipe cannot take goes in pieces.
 */
static size_t
slot_room(struct outq *q, const char *p, size_t n, size_t keep, int used)
{
	size_t k, most;
	const char *nl;

	if (!q->fd_bol) {
		nl = memchr(p, '\n', n);
		k = nl != NULL ? (size_t)(nl - p) + 1 : n;
		if (pipe_model_fits(q->pm, k, keep) == 1)
			return k;
		most = pipe_model_room(q->pm, keep);
		return k < most ? k : most;
	}
	if (pipe_model_fits(q->pm, n, keep) == 1)
		return n;
	/* no more than the free pages and a merge can take */
	most = pipe_model_room(q->pm, 0) + pipe_model_page(q->pm);
	for (k = n < most ? n : most; k > 0; k--)
		if (p[k - 1] == '\n' && pipe_model_fits(q->pm, k, keep) == 1)
			return k;
	if (used > 0)
		return 0;
	k = pipe_model_room(q->pm, keep);
	if (k == 0)
		k = pipe_model_room(q->pm, 0);
	return k < n ? k : n;
}

/*
 * How much of p[0..n) may go to a pipe of whole lines now (q->held says
 * when it is less than n): the whole lines that fit in its free room, less
 * the reserve for the final lines unless they are being written; a line
 * begun goes on to its end; a line longer than the empty pipe can take
 * goes in pieces (the one case a stalled reader can see a cut line). The
 * room is the model's (pages, not bytes) while it knows the pipe; else
 * free bytes, which a pipe of pages half used can overstate.
 */
static size_t
line_room(struct outq *q, const char *p, size_t n)
{
	int cap, used;
	size_t room, k, keep;
	const char *nl;

	q->held = 0;
	if (!q->lines || !q->fifo || n == 0 ||
	    (cap = fcntl(q->fd, F_GETPIPE_SZ)) <= 0 ||
	    ioctl(q->fd, FIONREAD, &used) < 0 || used < 0)
		return n;
	/* a small pipe (one page) keeps a quarter */
	keep = (size_t)cap / 4 < OUT_FINAL_RESERVE ? (size_t)cap / 4 :
	    OUT_FINAL_RESERVE;
	if (q->final_room)
		keep = 0;
	if (q->pm != NULL && pipe_model_look(q->pm) == 0) {
		k = slot_room(q, p, n, keep, used);
		q->held = k < n;
		return k;
	}
	room = (size_t)cap > (size_t)used ? (size_t)cap - (size_t)used : 0;
	room = room > keep ? room - keep : 0;
	if (!q->fd_bol) {
		nl = memchr(p, '\n', n);
		k = nl != NULL ? (size_t)(nl - p) + 1 : n;
		if (k > room)
			k = room;
	} else if (n <= room) {
		k = n;
	} else {
		for (k = room; k > 0 && p[k - 1] != '\n'; k--)
			;
		if (k == 0 && used == 0)
			k = room;
	}
	q->held = k < n;
	return k;
}

/* Writes p[0..n) now as far as the fd takes it; returns the bytes taken.
 * A failure other than "full" breaks the queue (output is dropped). */
size_t
out_try_write(struct outq *q, const char *p, size_t n)
{
	size_t done = 0, lim = line_room(q, p, n);
	ssize_t r;

	while (done < lim && q->mode != M_BROKEN) {
		r = raw(q, p + done, lim - done);
		if (r > 0) {
			if (q->pm != NULL)	/* its pages; -1: not known */
				(void)pipe_model_wrote(q->pm, lim - done,
				    (size_t)r);
			done += (size_t)r;
			q->written += (uint64_t)r;
			q->fd_bol = p[done - 1] == '\n';
		} else if (r < 0 && errno == EINTR) {
			continue;
		} else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			q->mode = M_BROKEN;	/* EPIPE, EIO, ...: gone */
			buf_reset(&q->b);
		}
	}
	return q->mode == M_BROKEN ? n : done;
}

/* Queues p[0..n) (the callers keep it within OUT_CAP but for records;
 * the written prefix is dropped only when the room is needed). */
void
out_append(struct outq *q, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (buf_append(&q->b, p, n) < 0)
		return;	/* no memory: this piece is lost */
	q->tail_nl = p[n - 1] == '\n';
}

/* Writes p[0..n) directly when nothing waits, queues the rest whole (the
 * caller checked it fits). */
static void
put_whole(struct outq *q, const char *p, size_t n)
{
	size_t k = 0;

	if (outq_len(q) == 0) {
		k = out_try_write(q, p, n);
		if (k > 0)
			q->tail_nl = p[k - 1] == '\n';
	}
	if (q->mode != M_BROKEN)
		out_append(q, p + k, n - k);
	out_pump(q);
}

/* Output flows again: one line says how much was lost. */
void
out_resume(struct outq *q)
{
	char note[160];
	int n;

	q->dropping = 0;
	if (q->dropped == 0)
		return;
	/* on a terminal a colour the cut left on is reset first */
	n = snprintf(note, sizeof note, "%s%s[agentz] %" PRIu64 " bytes of "
	    "live output dropped (the reader was too slow)\n", q->tty ?
	    "\033[0m" : "", q->tail_nl ? "" : "\n", q->dropped);
	q->dropped_total += q->dropped;
	q->dropped = 0;
	if (outq_len(q) + (size_t)n <= OUT_CAP)
		out_append(q, note, (size_t)n);
}

static void
on_writable(struct loop *l, int fd, short revents, void *ctx)
{
	(void)l;
	(void)fd;
	(void)revents;
	out_pump(ctx);
}

static void
on_retry(struct loop *l, void *ctx)
{
	struct outq *q = ctx;

	(void)l;
	q->retry = 0;
	out_pump(q);
}

/* Writes what is queued; watches the fd while something waits. */
void
out_pump(struct outq *q)
{
	size_t k;
	int want;

	if (outq_len(q) > 0) {
		k = out_try_write(q, (const char *)buf_rdata(&q->b),
		    outq_len(q));
		if (q->mode == M_BROKEN)
			k = outq_len(q);
		/* emptied, a big record's memory goes back (buf.h) */
		buf_skip(&q->b, k);
	}
	if (outq_len(q) == 0 && q->dropping && q->in_bol &&
	    q->mode != M_BROKEN) {
		out_resume(q);
		if (outq_len(q) > 0) {
			out_pump(q);
			return;
		}
	}
	want = outq_len(q) > 0 && q->mode != M_BROKEN && q->mode != M_DIRECT &&
	    outs.loop != NULL;
	/* a pipe with room, but not for the next whole line: it says it is
	 * writable all the time, so it is tried again later instead */
	if (want && q->held) {
		want = 0;
		if (q->retry == 0)
			q->retry = loop_timer(outs.loop, OUT_RETRY_MS, on_retry,
			    q);
	}
	if (want && !q->watched) {
		if (loop_watch(outs.loop, q->fd, POLLOUT, on_writable, q) == 0)
			q->watched = 1;
	} else if (!want && q->watched) {
		if (outs.loop != NULL)
			loop_unwatch(outs.loop, q->fd);
		q->watched = 0;
	}
}

/* Log lines through the gate into the stderr queue. */
static void
out_log_sink(const char *line, size_t n)
{
	char *c = out_clean(line, n, 0);
	size_t len;

	if (c == NULL)
		return;
	len = strlen(c);
	c[len] = '\n';		/* the terminator's place */
	out_msg(2, c, len + 1);
	free(c);
}

void
out_attach(struct loop *l)
{
	int i;

	setup();
	for (i = 0; i < 2; i++) {
		if (outs.q[i].watched && outs.loop != NULL) {
			loop_unwatch(outs.loop, outs.q[i].fd);
			outs.q[i].watched = 0;
		}
		if (outs.q[i].retry != 0 && outs.loop != NULL)
			loop_timer_cancel(outs.loop, outs.q[i].retry);
		outs.q[i].retry = 0;
	}
	outs.loop = l;
	if (l != NULL) {
		log_set_sink(out_log_sink);
		out_pump(&outs.q[0]);
		out_pump(&outs.q[1]);
	}
}

void
out_set_redact(const struct redact *r)
{
	outs.red = r;
}

/* Nothing to queue: empty, a broken stream, or a regular file written
 * directly. 1 when p was dealt with. */
static int
written_now(struct outq *q, const char *p, size_t n)
{
	if (n == 0 || q->mode == M_BROKEN)
		return 1;
	if (q->mode != M_DIRECT)
		return 0;
	(void)out_try_write(q, p, n);
	return 1;
}

void
out_msg(int stream, const char *p, size_t n)
{
	struct outq *q = out_queue(stream);

	if (written_now(q, p, n))
		return;
	if (!q->dropping && outq_len(q) + n <= OUT_QUEUE_MAX)
		put_whole(q, p, n);
	else
		out_put_live(q, p, n);
}

void
out_record(int stream, const char *p, size_t n)
{
	struct outq *q = out_queue(stream);

	if (written_now(q, p, n))
		return;
	if (outq_len(q) + n > OUT_RECORD_MAX) {	/* the reader is gone */
		log_warnx("a result record of %zu bytes was dropped: %zu bytes "
		    "wait for a stalled reader", n, outq_len(q));
		return;
	}
	put_whole(q, p, n);
}

void
out_lines(int stream)
{
	struct outq *q = out_queue(stream);

	q->lines = 1;
	if (q->fifo) {	/* more room for a slow reader; refused: as it is */
		(void)fcntl(q->fd, F_SETPIPE_SZ, OUT_PIPE_SIZE);
		/* its pages, when each write is ours to size (not M_POLL's
		 * small pieces) */
		if (q->pm == NULL && q->mode == M_NONBLOCK)
			q->pm = pipe_model_new(q->fd);
	}
}

void
out_final(int stream, const char *p, size_t n)
{
	struct outq *q = out_queue(stream);
	char *copy;

	if (q->lines && q->nfin < OUT_FINAL_MAX && n > 0 &&
	    (copy = malloc(n)) != NULL) {
		memcpy(copy, p, n);
		q->fin[q->nfin].off = q->written + outq_len(q);
		q->fin[q->nfin].p = copy;
		q->fin[q->nfin].n = n;
		q->nfin++;
	}
	out_record(stream, p, n);
}

int
out_line(int stream, const char *p, size_t n)
{
	struct outq *q = out_queue(stream);

	if (written_now(q, p, n))
		return q->mode == M_BROKEN ? -1 : 0;
	if (outq_len(q) + n > OUT_QUEUE_MAX)
		return -1;
	put_whole(q, p, n);
	return 0;
}

void
out_term(const char *p, size_t n, int force)
{
	struct outq *q = out_queue(1);
	size_t k = 0;

	if (q->mode == M_BROKEN || n == 0)
		return;
	if (outq_len(q) == 0) {
		k = out_try_write(q, p, n);
	} else if (!force) {
		return;		/* the terminal lags: skip this frame */
	}
	if (q->mode != M_BROKEN && outq_len(q) + (n - k) <= OUT_CAP)
		out_append(q, p + k, n - k);
	out_pump(q);
}

uint64_t
out_dropped(int stream)
{
	struct outq *q = out_queue(stream);

	return q->dropped_total + q->dropped;
}

void
out_flush(int ms)
{
	uint64_t end = loop_now_us() + (uint64_t)ms * 1000u;
	struct pollfd pfd[2];
	size_t before;
	uint64_t now;
	int i, n, held, wait;

	if (!outs.ready)
		return;
	for (i = 0; i < 2; i++)
		if (outs.q[i].dropping || outs.q[i].dropped > 0) {
			outs.q[i].dropping = 1;
			out_resume(&outs.q[i]);
		}
	for (;;) {
		n = held = 0;
		for (i = 0; i < 2; i++) {
			before = outq_len(&outs.q[i]);
			out_pump(&outs.q[i]);
			/* the reader reads */
			if (outq_len(&outs.q[i]) < before)
				end = loop_now_us() + (uint64_t)ms * 1000u;
			if (outq_len(&outs.q[i]) > 0 &&
			    outs.q[i].mode != M_BROKEN && outs.q[i].held) {
				held++;
			} else if (outq_len(&outs.q[i]) > 0 &&
			    outs.q[i].mode != M_BROKEN) {
				pfd[n].fd = outs.q[i].fd;
				pfd[n].events = POLLOUT;
				n++;
			}
		}
		now = loop_now_us();
		if ((n == 0 && held == 0) || now >= end)
			return;
		wait = (int)((end - now + 999) / 1000);
		if (held > 0 && wait > OUT_RETRY_MS)
			wait = OUT_RETRY_MS;
		(void)poll(pfd, (nfds_t)n, wait);
	}
}

/*
 * The reader of a stream of lines took nothing for the last wait: what
 * still waits is dropped, whole lines, but for the final ones (out_final)
 * not written yet, which may now use the room kept for them. Nothing when
 * a line is half written (nothing could follow it whole).
 */
static void
keep_final(struct outq *q)
{
	size_t i;

	if (!q->lines || outq_len(q) == 0 || !q->fd_bol ||
	    q->mode == M_BROKEN)
		return;
	buf_reset(&q->b);
	for (i = 0; i < q->nfin; i++)
		if (q->fin[i].off >= q->written)
			out_append(q, q->fin[i].p, q->fin[i].n);
	q->final_room = 1;
	out_pump(q);
}

static void
out_exit(void)
{
	size_t i;

	outs.loop = NULL;	/* freed by now, or about to be */
	outs.q[0].watched = outs.q[1].watched = 0;
	outs.q[0].retry = outs.q[1].retry = 0;
	out_flush(OUT_EXIT_WAIT_MS);
	if (outq_len(&outs.q[0]) > 0 || outq_len(&outs.q[1]) > 0) {
		keep_final(&outs.q[0]);
		keep_final(&outs.q[1]);
		out_flush(OUT_EXIT_WAIT_MS);
	}
	for (i = 0; i < outs.q[0].nfin; i++)
		free(outs.q[0].fin[i].p);
	for (i = 0; i < outs.q[1].nfin; i++)
		free(outs.q[1].fin[i].p);
	outs.q[0].nfin = outs.q[1].nfin = 0;
	pipe_model_free(outs.q[0].pm);
	pipe_model_free(outs.q[1].pm);
	outs.q[0].pm = outs.q[1].pm = NULL;
	log_set_sink(NULL);
}

char *
out_clean(const char *p, size_t n, int multiline)
{
	char *r = NULL, *v;
	size_t rn = n;

	if (p == NULL)
		return termout_visible("", 0, multiline);
	if (outs.red != NULL && redact_count(outs.red) > 0) {
		r = redact_string(outs.red, p, n, &rn);
		if (r == NULL)
			return NULL;
		p = r;
	}
	v = termout_visible(p, rn, multiline);
	free(r);
	return v;
}
