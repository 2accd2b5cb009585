/*
 * loop.c - poll(2)-based event loop (see loop.h).
 *
 * Watchers live in a flat array rebuilt into a pollfd array each turn; the
 * handful of descriptors we have (worker channel and pipes, signalfd,
 * terminal, curl sockets) makes that cheaper than epoll bookkeeping.
 * Timers are a small unsorted array: the earliest is found by a scan.
 * Callbacks may add and remove watchers and timers freely: removal marks
 * the slot dead and the array is compacted between turns.
 *
 * Within one turn a callback only ever sees events for the watch that
 * was polled (as Redis ae.c re-checks fe->mask): every registration gets
 * a generation, and revents of a slot whose watch was removed and
 * re-added (the fd number reused by a new owner) are dropped; revents
 * are masked by the watch's interest at the moment of the call (plus
 * POLLHUP/POLLERR/POLLNVAL, which poll reports regardless). Timers
 * armed during a turn's timer pass run in the next pass, so a callback
 * that re-arms a 0 ms timer yields to poll and to the other timers.
 */
#include "supervisor/loop/loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct watch {
	int fd;		/* -1 = dead slot */
	short events;
	uint64_t gen;	/* this registration, unique in the loop */
	loop_fd_fn *fn;
	void *ctx;
};

struct timer {
	uint64_t id;	/* 0 = dead slot */
	uint64_t due_us;
	loop_timer_fn *fn;
	void *ctx;
};

struct loop {
	struct watch *w;
	size_t nw, capw;
	struct timer *t;
	size_t nt, capt;
	struct pollfd *pfd;
	uint64_t *pgen;	/* the generation polled in pfd[i] */
	size_t cappfd, cappgen;
	uint64_t next_id, next_gen;
	int stopped, rc;
};

uint64_t
loop_now_us(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

double
loop_wall(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct loop *
loop_new(void)
{
	struct loop *l = calloc(1, sizeof *l);

	if (l != NULL)
		l->next_id = l->next_gen = 1;
	return l;
}

void
loop_free(struct loop *l)
{
	if (l == NULL)
		return;
	free(l->w);
	free(l->t);
	free(l->pfd);
	free(l->pgen);
	free(l);
}

static int
grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * size);
	if (np == NULL)
		return -1;
	*p = np;
	*cap = ncap;
	return 0;
}

static struct watch *
watch_find(struct loop *l, int fd)
{
	size_t i;

	for (i = 0; i < l->nw; i++)
		if (l->w[i].fd == fd)
			return &l->w[i];
	return NULL;
}

int
loop_watch(struct loop *l, int fd, short events, loop_fd_fn *fn, void *ctx)
{
	struct watch *w = watch_find(l, fd);

	if (w == NULL) {
		if (grow((void **)&l->w, &l->capw, l->nw + 1, sizeof *l->w) < 0)
			return -1;
		w = &l->w[l->nw++];
	}
	*w = (struct watch){ fd, events, l->next_gen++, fn, ctx };
	return 0;
}

void
loop_events(struct loop *l, int fd, short events)
{
	struct watch *w = watch_find(l, fd);

	if (w != NULL)
		w->events = events;
}

void
loop_unwatch(struct loop *l, int fd)
{
	struct watch *w = watch_find(l, fd);

	if (w != NULL)
		w->fd = -1;
}

uint64_t
loop_timer(struct loop *l, uint64_t ms, loop_timer_fn *fn, void *ctx)
{
	size_t i;

	for (i = 0; i < l->nt && l->t[i].id != 0; i++)
		;
	if (i == l->nt) {
		if (grow((void **)&l->t, &l->capt, l->nt + 1, sizeof *l->t) < 0)
			return 0;
		l->nt++;
	}
	l->t[i] = (struct timer){ l->next_id++, loop_now_us() + ms * 1000u,
	    fn, ctx };
	return l->t[i].id;
}

void
loop_timer_cancel(struct loop *l, uint64_t id)
{
	size_t i;

	for (i = 0; id != 0 && i < l->nt; i++)
		if (l->t[i].id == id)
			l->t[i].id = 0;
}

void
loop_stop(struct loop *l, int rc)
{
	l->stopped = 1;
	l->rc = rc;
}

int
loop_stopped(const struct loop *l)
{
	return l->stopped;
}

/* Milliseconds until the earliest timer, -1 when there is none. */
static int
next_timeout(const struct loop *l, uint64_t now)
{
	uint64_t best = UINT64_MAX;
	size_t i;

	for (i = 0; i < l->nt; i++)
		if (l->t[i].id != 0 && l->t[i].due_us < best)
			best = l->t[i].due_us;
	if (best == UINT64_MAX)
		return -1;
	if (best <= now)
		return 0;
	best = (best - now + 999) / 1000;
	return best > 60000 ? 60000 : (int)best;
}

static void
run_timers(struct loop *l)
{
	uint64_t now = loop_now_us(), first_new = l->next_id;
	size_t i;
	struct timer t;

	for (i = 0; i < l->nt && !l->stopped; i++) {
		if (l->t[i].id == 0 || l->t[i].id >= first_new ||
		    l->t[i].due_us > now)
			continue;
		t = l->t[i];
		l->t[i].id = 0;
		t.fn(l, t.ctx);
	}
}

static void
compact(struct loop *l)
{
	size_t i, j = 0;

	for (i = 0; i < l->nw; i++)
		if (l->w[i].fd >= 0)
			l->w[j++] = l->w[i];
	l->nw = j;
}

/*
 * Calls the owner of pfd[i] if it is still the registration that was
 * polled, with revents narrowed to what it asks for now.
 */
static void
dispatch(struct loop *l, size_t i)
{
	struct watch *w = watch_find(l, l->pfd[i].fd);
	short ev;

	if (w == NULL || w->fn == NULL || w->gen != l->pgen[i])
		return;
	ev = l->pfd[i].revents & (w->events | POLLHUP | POLLERR | POLLNVAL);
	if (ev != 0)
		w->fn(l, w->fd, ev, w->ctx);
}

static int
poll_once(struct loop *l)
{
	size_t i, n;
	int rc;

	compact(l);
	if (grow((void **)&l->pfd, &l->cappfd, l->nw + 1, sizeof *l->pfd) < 0 ||
	    grow((void **)&l->pgen, &l->cappgen, l->nw + 1,
	    sizeof *l->pgen) < 0)
		return -1;
	for (i = 0; i < l->nw; i++) {
		l->pfd[i] = (struct pollfd){ l->w[i].fd, l->w[i].events, 0 };
		l->pgen[i] = l->w[i].gen;
	}
	n = l->nw;
	rc = poll(l->pfd, n, next_timeout(l, loop_now_us()));
	if (rc < 0)
		return errno == EINTR ? 0 : -1;
	for (i = 0; i < n && !l->stopped; i++)
		if (l->pfd[i].revents != 0)
			dispatch(l, i);
	return 0;
}

int
loop_run(struct loop *l)
{
	l->stopped = 0;
	while (!l->stopped) {
		run_timers(l);
		if (l->stopped || poll_once(l) < 0)
			break;
	}
	return l->rc;
}
