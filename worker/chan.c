/*
 * chan.c - reader thread, exec slot and request waiters (see chan.h).
 */
#include "worker/chan.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
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
	pthread_cond_t cond;
	struct waiter *next;
};

static int chan_fd = -1;
static size_t chan_max_frame;
static pthread_mutex_t chan_wlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chan_exec_cond = PTHREAD_COND_INITIALIZER;
static struct msg chan_exec;	/* valid when chan_exec_full */
static int chan_exec_full;
static int chan_shutdown;
static struct waiter *chan_waiters;
static uint64_t chan_next_id = 1;

void
chan_init(int fd, size_t max_frame)
{
	chan_fd = fd;
	chan_max_frame = max_frame;
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

/* Hands a REPLY/EVENT to its waiter; takes ownership of *m. */
static void
deliver(struct msg *m, uint64_t id)
{
	struct waiter *w;
	struct qmsg *q;

	(void)pthread_mutex_lock(&chan_lock);
	w = waiter_find(id);
	q = w != NULL ? malloc(sizeof *q) : NULL;
	if (q == NULL) {
		(void)pthread_mutex_unlock(&chan_lock);
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
	(void)pthread_cond_signal(&w->cond);
	(void)pthread_mutex_unlock(&chan_lock);
}

static void
post_exec(struct msg *m)
{
	(void)pthread_mutex_lock(&chan_lock);
	if (chan_exec_full) {
		/* The supervisor never sends EXEC while a cell runs. */
		(void)pthread_mutex_unlock(&chan_lock);
		_exit(WEXIT_PROTOCOL);
	}
	if (m == NULL) {
		chan_shutdown = 1;
	} else {
		chan_exec = *m;
		chan_exec_full = 1;
	}
	(void)pthread_cond_signal(&chan_exec_cond);
	(void)pthread_mutex_unlock(&chan_lock);
}

static void *
reader_main(void *arg)
{
	struct msg m;
	int rc;

	(void)arg;
	for (;;) {
		rc = frame_read(chan_fd, &m, chan_max_frame);
		if (rc == 0)
			_exit(WEXIT_OK);
		if (rc < 0)
			_exit(errno == EBADMSG || errno == EPROTO ||
			    errno == EMSGSIZE ? WEXIT_PROTOCOL : WEXIT_CHANNEL);
		if (msg_direction(m.type) != MSG_S2W)
			_exit(WEXIT_PROTOCOL);
		switch (m.type) {
		case MSG_EXEC:
			post_exec(&m);
			break;
		case MSG_SHUTDOWN:
			msg_clear(&m);
			post_exec(NULL);
			break;
		case MSG_REPLY:
			deliver(&m, m.u.reply.id);
			break;
		case MSG_EVENT:
			deliver(&m, m.u.event.id);
			break;
		case MSG_READY:
		case MSG_DONE:
		case MSG_REQUEST:
		default:
			_exit(WEXIT_PROTOCOL);
		}
	}
	return NULL;
}

int
chan_start(void)
{
	pthread_t t;
	sigset_t all, old;
	int rc;

	/* The reader must never take SIGINT: it belongs to the cell. */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&t, NULL, reader_main, NULL);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	(void)pthread_detach(t);
	return 0;
}

int
chan_wait_exec(struct msg *m)
{
	int got;

	(void)pthread_mutex_lock(&chan_lock);
	while (!chan_exec_full && !chan_shutdown)
		(void)pthread_cond_wait(&chan_exec_cond, &chan_lock);
	got = chan_exec_full;
	if (got) {
		*m = chan_exec;
		chan_exec_full = 0;
	}
	(void)pthread_mutex_unlock(&chan_lock);
	return got;
}

uint64_t
chan_waiter_new(void)
{
	struct waiter *w;
	pthread_condattr_t ca;

	w = calloc(1, sizeof *w);
	if (w == NULL)
		return 0;
	(void)pthread_condattr_init(&ca);
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	(void)pthread_cond_init(&w->cond, &ca);
	(void)pthread_condattr_destroy(&ca);
	(void)pthread_mutex_lock(&chan_lock);
	w->id = chan_next_id++;
	w->next = chan_waiters;
	chan_waiters = w;
	(void)pthread_mutex_unlock(&chan_lock);
	return w->id;
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

int
chan_waiter_wait(uint64_t id, int timeout_ms, struct msg *m)
{
	struct waiter *w;
	struct qmsg *q;
	struct timespec ts;
	int rc = 0;

	deadline_after(&ts, timeout_ms);
	(void)pthread_mutex_lock(&chan_lock);
	w = waiter_find(id);
	if (w == NULL) {
		(void)pthread_mutex_unlock(&chan_lock);
		errno = ENOENT;
		return -1;
	}
	while (w->head == NULL && rc == 0)
		rc = pthread_cond_timedwait(&w->cond, &chan_lock, &ts);
	q = w->head;
	if (q != NULL) {
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
	struct qmsg *q;

	(void)pthread_mutex_lock(&chan_lock);
	pw = &chan_waiters;
	while (*pw != NULL && (*pw)->id != id)
		pw = &(*pw)->next;
	w = *pw;
	if (w != NULL)
		*pw = w->next;
	(void)pthread_mutex_unlock(&chan_lock);
	if (w == NULL)
		return;
	while ((q = w->head) != NULL) {
		w->head = q->next;
		msg_clear(&q->m);
		free(q);
	}
	(void)pthread_cond_destroy(&w->cond);
	free(w);
}
