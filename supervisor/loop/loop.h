/*
 * loop.h - the supervisor's single event loop: fd watchers and monotonic
 * timers over poll(2). Signals arrive as a signalfd, libcurl through its
 * socket and timer callbacks: everything is a descriptor or a timer, and
 * nothing blocks.
 */
#ifndef AGENTZ_LOOP_H
#define AGENTZ_LOOP_H

#include <stdint.h>

struct loop;

/*
 * revents is poll's, masked by the watch's interest when called (its
 * events, plus POLLHUP/POLLERR/POLLNVAL). A callback never sees events
 * polled for an earlier watch of the same fd number: a watch removed and
 * added again within one turn waits for the next poll.
 */
typedef void loop_fd_fn(struct loop *l, int fd, short revents, void *ctx);
typedef void loop_timer_fn(struct loop *l, void *ctx);

struct loop *loop_new(void);
void loop_free(struct loop *l);

/* Watches fd for events (POLLIN/POLLOUT), replacing an earlier watch of
 * the same fd (a new registration: events already polled for the old one
 * are not delivered). events 0 keeps the fd registered but quiet (only
 * POLLHUP/POLLERR). 0 / -1 ENOMEM. */
int loop_watch(struct loop *l, int fd, short events, loop_fd_fn *fn,
    void *ctx);
/* Changes only the events of a watched fd. */
void loop_events(struct loop *l, int fd, short events);
/* Stops watching fd (safe from inside a callback). */
void loop_unwatch(struct loop *l, int fd);

/* Fires fn once after ms milliseconds; a timer armed from a timer
 * callback runs in the next turn at the earliest (after a poll), so a
 * 0 ms timer is a way to continue work after the loop's other business.
 * Returns an id > 0, or 0 / ENOMEM. */
uint64_t loop_timer(struct loop *l, uint64_t ms, loop_timer_fn *fn,
    void *ctx);
/* Cancels a pending timer; 0 and fired ids are ignored. */
void loop_timer_cancel(struct loop *l, uint64_t id);

/* Runs until loop_stop(). Returns the value given to loop_stop. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l, int rc);
/* 1 once loop_stop() was called (until the next loop_run): teardown. */
int loop_stopped(const struct loop *l);

/* Monotonic clock in microseconds, and wall clock in seconds. */
uint64_t loop_now_us(void);
double loop_wall(void);

#endif
