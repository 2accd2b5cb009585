/*
 * chan.c - the worker's channel: leader/follower reading (see chan.h).
 *
 * Whoever waits reads. A thread that needs a frame (the main thread
 * between cells, a Python thread waiting for its reply) takes the reader
 * role if it is free, reads one frame and hands it to its owner; others
 * wait on one condition until the role is free or their frame came. So
 * the EXEC a main thread waits for wakes that very thread (no hand-off
 * through a reader thread), and nobody reads when nobody waits: frames
 * then wait in the socket, and the supervisor's writes are non-blocking.
 */
#include "worker/chan.h"
#include "proto/wexit.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct qmsg {
	struct msg m;
	struct qmsg *next;
};

struct waiter {
	uint64_t id;
	struct qmsg *head, *tail;
	struct waiter *next;
};

static int chan_fd = -1;
static size_t chan_max_frame;
static pthread_mutex_t chan_wlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chan_turn;	/* role freed or a frame delivered */
static int chan_reading;		/* a thread holds the reader role */
/* The main thread's slots: a PIPES, a SNAP and the EXEC they precede may
 * all be waiting (the supervisor need not wait for SNAPPED); they are
 * taken in that order, the order they were sent in. */
enum { SLOT_PIPES, SLOT_SNAP, SLOT_EXEC, SLOTS };
static struct msg chan_slot[SLOTS];	/* valid when chan_slot_full */
static int chan_slot_full[SLOTS];
static int chan_shutdown;
static struct waiter *chan_waiters;
static uint64_t chan_next_id = 1;

/* Request ids: the generation in the high 32 bits, n from 1 below. */
static uint64_t
first_id(uint32_t generation)
{
	return ((uint64_t)generation << 32) | 1u;
}

static void
init_turn(void)
{
	pthread_condattr_t ca;

	(void)pthread_condattr_init(&ca);
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	(void)pthread_cond_init(&chan_turn, &ca);
	(void)pthread_condattr_destroy(&ca);
}

void
chan_init(int fd, size_t max_frame, uint32_t generation)
{
	chan_fd = fd;
	chan_max_frame = max_frame;
	chan_next_id = first_id(generation);
	init_turn();
}

static void
waiter_drop(struct waiter *w)
{
	struct qmsg *q;

	while ((q = w->head) != NULL) {
		w->head = q->next;
		msg_clear(&q->m);
		free(q);
	}
	free(w);
}

void
chan_reset(uint32_t generation)
{
	struct waiter *w;
	int i;

	(void)pthread_mutex_init(&chan_wlock, NULL);
	(void)pthread_mutex_init(&chan_lock, NULL);
	init_turn();
	chan_reading = 0;
	for (i = 0; i < SLOTS; i++) {
		if (chan_slot_full[i])
			msg_clear(&chan_slot[i]);
		chan_slot_full[i] = 0;
	}
	chan_shutdown = 0;
	while ((w = chan_waiters) != NULL) {
		chan_waiters = w->next;
		waiter_drop(w);
	}
	chan_next_id = first_id(generation);
}

int
chan_send(const struct msg *m)
{
	int rc;

	(void)pthread_mutex_lock(&chan_wlock);
	rc = frame_write(chan_fd, m, chan_max_frame);
	(void)pthread_mutex_unlock(&chan_wlock);
	return rc;
}

static struct waiter *
waiter_find(uint64_t id)
{
	struct waiter *w;

	for (w = chan_waiters; w != NULL; w = w->next)
		if (w->id == id)
			return w;
	return NULL;
}

/* Under chan_lock: queues a REPLY/EVENT for its waiter (owns *m). */
static void
deliver(struct msg *m, uint64_t id)
{
	struct waiter *w = waiter_find(id);
	struct qmsg *q = w != NULL ? malloc(sizeof *q) : NULL;

	if (q == NULL) {
		msg_clear(m);	/* late reply for an abandoned request */
		return;
	}
	q->m = *m;
	q->next = NULL;
	if (w->tail != NULL)
		w->tail->next = q;
	else
		w->head = q;
	w->tail = q;
}

/* Under chan_lock: EXEC, SNAP or PIPES (m) or SHUTDOWN (NULL) for the
 * main thread. */
static void
post_exec(struct msg *m)
{
	int slot;

	if (m == NULL) {
		if (chan_slot_full[SLOT_EXEC])	/* before its DONE */
			_exit(WEXIT_PROTOCOL);
		chan_shutdown = 1;
		return;
	}
	slot = m->type == MSG_SNAP ? SLOT_SNAP : m->type == MSG_PIPES ?
	    SLOT_PIPES : SLOT_EXEC;
	if (chan_slot_full[slot])	/* the supervisor never sends two */
		_exit(WEXIT_PROTOCOL);
	chan_slot[slot] = *m;
	chan_slot_full[slot] = 1;
}

/* Under chan_lock: routes one frame read by the reader. */
static void
dispatch(struct msg *m)
{
	if (msg_direction(m->type) != MSG_S2W)
		_exit(WEXIT_PROTOCOL);
	switch (m->type) {
	case MSG_EXEC:
	case MSG_SNAP:
	case MSG_PIPES:
		post_exec(m);
		break;
	case MSG_SHUTDOWN:
		msg_clear(m);
		post_exec(NULL);
		break;
	case MSG_REPLY:
		deliver(m, m->u.reply.id);
		break;
	case MSG_EVENT:
		deliver(m, m->u.event.id);
		break;
	case MSG_READY:
	case MSG_DONE:
	case MSG_REQUEST:
	case MSG_SNAPPED:
	default:
		_exit(WEXIT_PROTOCOL);
	}
}

/* As the reader, without chan_lock: one whole frame. EOF or a bad frame
 * ends the process (there is nobody to report to). */
static void
read_one(struct msg *m)
{
	int rc = frame_read(chan_fd, m, chan_max_frame);

	if (rc == 0)
		_exit(WEXIT_OK);
	if (rc < 0)
		_exit(errno == EBADMSG || errno == EPROTO || errno == EMSGSIZE ?
		    WEXIT_PROTOCOL : WEXIT_CHANNEL);
}

static void
deadline_after(struct timespec *ts, int ms)
{
	(void)clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Milliseconds left until ts (0 when past), for poll. */
static int
ms_left(const struct timespec *ts)
{
	struct timespec now;
	long long ms;

	(void)clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (long long)(ts->tv_sec - now.tv_sec) * 1000 +
	    (ts->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : ms > 1000000 ? 1000000 : (int)ms;
}

/*
 * Under chan_lock: takes the reader role (it is free), waits up to the
 * deadline (NULL: none) for a frame, reads and routes it, gives the role
 * back and wakes the others. Returns 0 when the deadline passed.
 */
static int
lead(const struct timespec *deadline)
{
	struct pollfd pfd = { chan_fd, POLLIN, 0 };
	struct msg m;
	int rc;

	chan_reading = 1;
	(void)pthread_mutex_unlock(&chan_lock);
	do
		rc = poll(&pfd, 1, deadline != NULL ? ms_left(deadline) : -1);
	while (rc < 0 && errno == EINTR && deadline == NULL);
	if (rc > 0)
		read_one(&m);
	(void)pthread_mutex_lock(&chan_lock);
	if (rc > 0)
		dispatch(&m);
	chan_reading = 0;
	(void)pthread_cond_broadcast(&chan_turn);
	return rc != 0;
}

/* Under chan_lock: until ready(arg), leading or following. 1 when ready,
 * 0 when the deadline (NULL: none) passed first. */
static int
await(int (*ready)(const void *), const void *arg,
    const struct timespec *deadline)
{
	while (!ready(arg)) {
		if (!chan_reading) {
			if (!lead(deadline) && !ready(arg))
				return 0;
		} else if (deadline == NULL) {
			(void)pthread_cond_wait(&chan_turn, &chan_lock);
		} else if (pthread_cond_timedwait(&chan_turn, &chan_lock,
		    deadline) == ETIMEDOUT) {
			return ready(arg);
		}
	}
	return 1;
}

static int
exec_ready(const void *arg)
{
	(void)arg;
	return chan_slot_full[SLOT_PIPES] || chan_slot_full[SLOT_SNAP] ||
	    chan_slot_full[SLOT_EXEC] || chan_shutdown;
}

int
chan_wait_exec(struct msg *m)
{
	int slot;

	(void)pthread_mutex_lock(&chan_lock);
	(void)await(exec_ready, NULL, NULL);
	for (slot = 0; slot < SLOTS && !chan_slot_full[slot]; slot++)
		;
	if (slot < SLOTS) {
		*m = chan_slot[slot];
		chan_slot_full[slot] = 0;
	}
	(void)pthread_mutex_unlock(&chan_lock);
	return slot < SLOTS;
}

uint64_t
chan_waiter_new(void)
{
	struct waiter *w = calloc(1, sizeof *w);

	if (w == NULL)
		return 0;
	(void)pthread_mutex_lock(&chan_lock);
	w->id = chan_next_id++;
	w->next = chan_waiters;
	chan_waiters = w;
	(void)pthread_mutex_unlock(&chan_lock);
	return w->id;
}

static int
has_frame(const void *arg)
{
	return ((const struct waiter *)arg)->head != NULL;
}

int
chan_waiter_wait(uint64_t id, int timeout_ms, struct msg *m)
{
	struct waiter *w;
	struct qmsg *q = NULL;
	struct timespec ts;

	deadline_after(&ts, timeout_ms);
	(void)pthread_mutex_lock(&chan_lock);
	w = waiter_find(id);
	if (w == NULL) {
		(void)pthread_mutex_unlock(&chan_lock);
		errno = ENOENT;
		return -1;
	}
	if (await(has_frame, w, &ts)) {
		q = w->head;
		w->head = q->next;
		if (w->head == NULL)
			w->tail = NULL;
	}
	(void)pthread_mutex_unlock(&chan_lock);
	if (q == NULL)
		return 0;
	*m = q->m;
	free(q);
	return 1;
}

void
chan_waiter_free(uint64_t id)
{
	struct waiter **pw, *w;

	(void)pthread_mutex_lock(&chan_lock);
	pw = &chan_waiters;
	while (*pw != NULL && (*pw)->id != id)
		pw = &(*pw)->next;
	w = *pw;
	if (w != NULL)
		*pw = w->next;
	(void)pthread_mutex_unlock(&chan_lock);
	if (w != NULL)
		waiter_drop(w);
}
