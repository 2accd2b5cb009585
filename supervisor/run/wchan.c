/*
 * wchan.c - a worker's control channel (see workers_impl.h).
 *
 * Owns: the frames a worker may send in each state (READY, DONE,
 * REQUEST), the sliced and back-pressured reading of the channel, the
 * refusal of over-cap requests, and sending EXEC / REPLY / EVENT through
 * the bounded outgoing queue. A bad frame kills the worker.
 *
 * May include: workers_impl.h, capture.h, hostreq.h (request caps),
 * sandbox/contain.h, common/log.h.
 */
#include "supervisor/run/workers_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/cells/capture.h"
#include "supervisor/run/hostreq.h"

/* Frames and body bytes handled per loop turn: the rest waits for the
 * next turn, so timers (the cell's deadline) run between slices. */
#define SLICE_FRAMES 8
#define SLICE_BYTES ((size_t)1 << 20)
/* Replies queued to the worker above which its requests are not read
 * (the cell blocks, not the supervisor), and stream events above which
 * events are refused. */
#define OUTQ_PAUSE ((size_t)1 << 20)
#define OUTQ_EVENTS_MAX ((size_t)4 << 20)

static void
protocol_error(struct worker *w, const char *what, unsigned type)
{
	char why[160];

	(void)snprintf(why, sizeof why, "protocol error: %s (frame %s, "
	    "type %u)", what, msg_name(type), type);
	log_warnx("worker %ld: %s", (long)w->spawner_pid, why);
	if (w->kill_reason == NULL)
		w->kill_cause = DEATH_PROTOCOL;
	worker_kill(w, why);
}

/* The host pid of the namespace init's only child: the worker. */
static pid_t
ns_child(pid_t init)
{
	pid_t worker;

	return contain_children(init, &worker, 1) == 1 ? worker : init;
}

static void
on_ready(struct worker *w, struct msg *m)
{
	const struct msg_ready *r = &m->u.ready;

	if (r->version != PROTO_VERSION) {
		protocol_error(w, "protocol version mismatch", m->type);
		return;
	}
	/* a promoted snapshot answers as itself */
	if (w->adopted && (pid_t)r->pid != w->python_ns_pid) {
		protocol_error(w, "a promoted snapshot's READY names another "
		    "pid", m->type);
		return;
	}
	loop_timer_cancel(w->loop, w->ready_timer);
	w->ready_timer = 0;
	w->ready_us = loop_now_us();
	/* python_pid: from_worker took it when the READY's bytes came */
	w->python_ns_pid = (pid_t)r->pid;
	(void)snprintf(w->python_version, sizeof w->python_version, "%s",
	    r->python_version.ptr);
	(void)snprintf(w->sandbox, sizeof w->sandbox, "%s", r->sandbox.ptr);
	w->state = WORKER_IDLE;
	w->ops.ready(w, w->ctx);
}

/* A text of the DONE kept to the output limit, head and tail, whatever
 * the worker sent (the worker caps it too). */
static void
cap_text(const struct worker *w, struct bytes *b)
{
	struct capture c;
	size_t n;
	char *s;

	if (w->cfg.output_limit == 0 || b->len <= w->cfg.output_limit)
		return;
	capture_init(&c, w->cfg.output_limit);
	if (capture_append(&c, b->ptr, b->len) == 0 &&
	    (s = capture_text(&c, &n)) != NULL) {
		free(b->ptr);
		b->ptr = s;
		b->len = n;
	}
	capture_clear(&c);
}

static void
on_done(struct worker *w, struct msg *m)
{
	int snapped = w->snap.asked || w->snap.host_pid > 0;

	if (m->u.done.cell != w->cell) {
		protocol_error(w, "DONE for a cell that is not running",
		    m->type);
		return;
	}
	cap_text(w, &m->u.done.traceback);
	cap_text(w, &m->u.done.exception_type);
	wout_drain_all(w);
	w->state = WORKER_IDLE;
	wsnap_forget(w);	/* the worker discards it */
	/* this cell's pipes closed if it may have left a process: what it
	 * left running writes nowhere (a snapshot is one such, until the
	 * worker has discarded it) */
	wout_rotate(w, snapped);
	w->ops.done(w, &m->u.done, w->ctx);
}

/* Which frames a worker may send in which state. */
static int
frame_allowed(const struct worker *w, unsigned type)
{
	switch (w->state) {
	case WORKER_STARTING:
		return type == MSG_READY;
	case WORKER_BUSY:
		return type == MSG_DONE || type == MSG_REQUEST;
	case WORKER_IDLE:
		/* a cell's leftover thread; the answer to a SNAP */
		return type == MSG_REQUEST || type == MSG_SNAPPED;
	case WORKER_DOWN:
	case WORKER_DYING:
	default:
		return 0;
	}
}

static void
dispatch(struct worker *w, struct msg *m)
{
	/* not the answer to our SNAP: this one or the first is forged */
	if (m->type == MSG_SNAPPED && !wsnap_expected(w)) {
		protocol_error(w, "SNAPPED without a SNAP", m->type);
		return;
	}
	if (!frame_allowed(w, m->type)) {
		protocol_error(w, "unexpected frame in this state", m->type);
		return;
	}
	if (m->type == MSG_READY)
		on_ready(w, m);
	else if (m->type == MSG_DONE)
		on_done(w, m);
	else if (m->type == MSG_SNAPPED)
		wsnap_on_snapped(w, &m->u.snapped);
	else
		w->ops.request(w, &m->u.request, w->ctx);
}

/*
 * Reading is sliced and back-pressured. The channel is read (one chunk a
 * turn) only when rx holds no frame we could handle and the replies queued
 * to the worker are under OUTQ_PAUSE; buffered frames are handled at most
 * a slice a turn, the rest from a 0 ms timer on the next turn. So rx holds
 * at most one frame and a chunk, outq at most OUTQ_PAUSE and the replies
 * of one slice, and a flood of requests never holds up the loop's timers.
 */
static void chan_more(struct loop *l, void *ctx);

static int
outq_full(const struct worker *w)
{
	return w->outq.len > OUTQ_PAUSE;
}

/* Sets the channel's interest, and arms the continuation when there is
 * buffered work and room for its replies. */
static void
chan_interest(struct worker *w)
{
	short ev = 0;

	if (w->chan < 0)
		return;
	if (w->starved && !outq_full(w))
		ev |= POLLIN;
	if (w->outq.len > 0)
		ev |= POLLOUT;
	loop_events(w->loop, w->chan, ev);
	if (!w->starved && !outq_full(w) && w->more_timer == 0)
		w->more_timer = loop_timer(w->loop, 0, chan_more, w);
}

static void
malformed(struct worker *w)
{
	char why[96];

	(void)snprintf(why, sizeof why, "malformed frame: %s",
	    strerror(errno));
	protocol_error(w, why, 0);
}

/*
 * A REQUEST whose body is over its method's cap: dropped unread (its
 * bytes are skipped as they arrive), reported as a request with no body.
 * Returns 1 when refused (m filled), 0 when not over its cap or more bytes
 * are needed for its head (*wait set then), -1 on a malformed head.
 */
static int
refuse_big(struct worker *w, const uint8_t *body, size_t have, size_t len,
    struct msg *m, int *wait)
{
	int rc;

	if (len <= HOSTREQ_SMALL_CAP)
		return 0;
	rc = msg_request_head(body, have, m);
	if (rc <= 0) {
		*wait = rc == 0;
		return rc;
	}
	if (len <= hostreq_cap(m->u.request.method.ptr, w->cfg.max_frame)) {
		msg_clear(m);
		return 0;
	}
	frame_rx_skip(&w->rx);	/* body.len says how big it was */
	return 1;
}

/* The next frame to handle: 1 with m (*len its body size), 0 when more
 * bytes are needed, -1 when the worker was killed for a bad frame. */
static int
next_frame(struct worker *w, struct msg *m, size_t *len)
{
	const uint8_t *body;
	size_t have;
	unsigned type;
	int rc, wait = 0;

	rc = frame_rx_peek(&w->rx, &type, len, &body, &have);
	if (rc == 1 && type == MSG_REQUEST &&
	    (rc = refuse_big(w, body, have, *len, m, &wait)) != 0) {
		if (rc < 0)
			malformed(w);
		return rc;
	}
	if (rc < 0 || wait) {
		if (rc < 0)
			malformed(w);
		return wait ? 0 : -1;
	}
	if ((rc = frame_rx_pop(&w->rx, m)) < 0)
		malformed(w);
	return rc;
}

/* Handles at most a slice of the buffered frames. */
void
wchan_process(struct worker *w)
{
	size_t bytes = 0, len = 0;
	unsigned frames = 0;
	struct msg m;
	int rc = 1;

	while (w->chan >= 0 && !outq_full(w) && frames < SLICE_FRAMES &&
	    bytes < SLICE_BYTES) {
		if ((rc = next_frame(w, &m, &len)) <= 0)
			break;
		dispatch(w, &m);
		msg_clear(&m);
		frames++;
		bytes += len;
	}
	w->starved = rc == 0;
	chan_interest(w);
}

static void
chan_more(struct loop *l, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	w->more_timer = 0;
	wchan_process(w);
}

/* Stops reading the channel: its EOF, or bytes that are not the worker's. */
static void
chan_close(struct worker *w)
{
	loop_unwatch(w->loop, w->chan);
	(void)close(w->chan);
	w->chan = -1;
}

/*
 * Bytes on the channel count only when the worker itself wrote them (any
 * of its threads): a process that shares its descriptors without being
 * it (a raw clone, which runs no at-fork handler) could otherwise write
 * frames as the worker, a DONE or a SNAPPED of its choosing. The kernel
 * says who wrote them (SO_PASSCRED); anything else is a protocol error
 * that ends the worker. Before READY the worker is the namespace init's
 * child, or the spawner itself.
 */
static int
from_worker(struct worker *w, pid_t sender, int reaping)
{
	char why[160];

	if (w->state == WORKER_STARTING && w->pidns_state > 0 &&
	    !w->adopted && w->python_pid == w->spawner_pid)
		w->python_pid = ns_child(w->spawner_pid);
	if (sender == w->python_pid)
		return 1;
	(void)snprintf(why, sizeof why, "protocol error: channel bytes from "
	    "pid %ld, not the worker (%ld)", (long)sender, (long)w->python_pid);
	log_warnx("worker %ld: %s", (long)w->spawner_pid, why);
	/* nothing buffered is handled any more, not even at the death */
	frame_rx_clear(&w->rx);
	frame_rx_init(&w->rx, w->cfg.max_frame);
	chan_close(w);
	if (w->kill_reason == NULL)
		w->kill_cause = DEATH_PROTOCOL;
	if (!reaping)
		worker_kill(w, why);
	else if (w->kill_reason == NULL)
		w->kill_reason = strdup(why);
	return 0;
}

/* One read of the channel into rx, the writer checked: as read(2), and -2
 * for bytes the worker did not write (they are dropped, the channel
 * closed and, unless it is being reaped, the worker killed). */
static ssize_t
chan_fill(struct worker *w, int reaping)
{
	pid_t sender;
	ssize_t n = frame_rx_fill_cred(&w->rx, w->chan, &sender);

	if (n > 0 && !from_worker(w, sender, reaping))
		return -2;
	return n;
}

static void
chan_read(struct worker *w)
{
	ssize_t n;

	n = chan_fill(w, 0);
	if (n == -2)
		return;
	/* EOF: the process is going; pidfd tells. ECONNRESET says the same:
	 * the worker's end went with frames of ours still unread in it (a
	 * PIPES or a reply sent as it died), not that the channel failed */
	if (n == 0 || (n < 0 && errno == ECONNRESET)) {
		chan_close(w);
		return;
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		worker_kill(w, "control channel read failed");
		return;
	}
	wchan_process(w);
}

static void
chan_flush(struct worker *w)
{
	ssize_t n;

	while (w->outq.len > 0) {
		n = write(w->chan, w->outq.data, w->outq.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			worker_kill(w, "control channel write failed");
			return;
		}
		buf_consume(&w->outq, (size_t)n);
	}
	chan_interest(w);
}

/*
 * At a death: what the worker sent before it died (its DONE, its
 * SNAPPED) still counts, also when the pidfd was seen before the
 * channel's bytes: the buffered frames and what the socket holds are
 * handled now, bounded (a cell's leftover child could hold the channel).
 */
void
wchan_drain(struct worker *w)
{
	unsigned rounds;

	loop_timer_cancel(w->loop, w->more_timer);
	w->more_timer = 0;
	for (rounds = 0; rounds < 64 && w->chan >= 0; rounds++) {
		if (w->starved && !outq_full(w)) {
			ssize_t n = chan_fill(w, 1);

			if (n <= 0)
				break;
		}
		wchan_process(w);
		loop_timer_cancel(w->loop, w->more_timer);
		w->more_timer = 0;
	}
}

void
wchan_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	(void)fd;
	if ((revents & POLLOUT) && w->chan >= 0)
		chan_flush(w);
	/* Read only with no whole frame buffered: EOF then loses nothing.
	 * While paused a hang-up is left to the pending write (EPIPE kills
	 * the worker) or to the pidfd. */
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && w->chan >= 0 &&
	    w->starved && !outq_full(w))
		chan_read(w);
}

int
wchan_send(struct worker *w, const struct msg *m)
{
	if (w->chan < 0 || w->state == WORKER_DYING ||
	    w->state == WORKER_DOWN) {
		errno = EPIPE;
		return -1;
	}
	if (msg_encode(m, &w->outq, w->cfg.max_frame) < 0)
		return -1;
	chan_flush(w);
	return 0;
}

int
worker_exec(struct worker *w, uint32_t cell, const char *code, size_t len)
{
	struct msg m;

	if (w->state != WORKER_IDLE) {
		errno = EBUSY;
		return -1;
	}
	memset(&m, 0, sizeof m);
	m.type = MSG_EXEC;
	m.u.exec.cell = cell;
	m.u.exec.code = (struct bytes){ (char *)(uintptr_t)code, len };
	if (wchan_send(w, &m) < 0)
		return -1;
	w->cell = cell;
	w->state = WORKER_BUSY;
	return 0;
}

int
worker_reply(struct worker *w, uint64_t id, uint32_t status,
    const char *body, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	m.type = MSG_REPLY;
	m.u.reply.id = id;
	m.u.reply.status = status;
	m.u.reply.body = (struct bytes){ (char *)(uintptr_t)body, len };
	return wchan_send(w, &m);
}

int
worker_event(struct worker *w, uint64_t id, const char *body, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	if (w->outq.len > OUTQ_EVENTS_MAX) {
		errno = ENOBUFS;	/* the cell does not read its stream */
		return -1;
	}
	m.type = MSG_EVENT;
	m.u.event.id = id;
	m.u.event.body = (struct bytes){ (char *)(uintptr_t)body, len };
	return wchan_send(w, &m);
}
