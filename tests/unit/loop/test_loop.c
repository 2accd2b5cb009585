/*
 * test_loop.c - the event loop's promises to its callbacks: revents are
 * masked by the watch's current interest, a watch removed and re-added
 * within one poll turn (the fd number reused) never gets its
 * predecessor's events, and a timer armed during the timer pass waits for
 * the next turn (so work continued through 0 ms timers yields to poll).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/loop/loop.h"

struct fx {
	struct loop *l;
	int trig[2];		/* readable pipe: fires first in the turn */
	int a[2];		/* the watch under test */
	short new_events;	/* what the trigger sets a's interest to */
	int reuse;		/* the trigger replaces a's read end */
	int calls;
	short seen;
	int new_calls;
	short new_seen;
};

static void
on_stop(struct loop *l, void *ctx)
{
	(void)ctx;
	loop_stop(l, 0);
}

static void
on_a(struct loop *l, int fd, short revents, void *ctx)
{
	struct fx *f = ctx;

	(void)l;
	(void)fd;
	f->calls++;
	f->seen |= revents;
}

static void
on_new(struct loop *l, int fd, short revents, void *ctx)
{
	struct fx *f = ctx;

	(void)l;
	(void)fd;
	f->new_calls++;
	f->new_seen |= revents;
}

/* Runs first in the turn (registered first): changes a's watch. */
static void
on_trig(struct loop *l, int fd, short revents, void *ctx)
{
	struct fx *f = ctx;
	int p[2];

	(void)revents;
	loop_unwatch(l, fd);
	if (!f->reuse) {
		loop_events(l, f->a[0], f->new_events);
		return;
	}
	/* the old owner goes; a new pipe takes its fd number */
	loop_unwatch(l, f->a[0]);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[0], f->a[0]), f->a[0]);
	(void)close(p[0]);
	f->a[1] = p[1];		/* kept open: the new pipe is quiet */
	assert_int_equal(loop_watch(l, f->a[0], POLLIN, on_new, f), 0);
}

static void
fx_run(struct fx *f, short a_events)
{
	f->l = loop_new();
	assert_non_null(f->l);
	assert_int_equal(pipe(f->trig), 0);
	assert_int_equal(write(f->trig[1], "x", 1), 1);
	assert_int_equal(loop_watch(f->l, f->trig[0], POLLIN, on_trig, f), 0);
	assert_int_equal(loop_watch(f->l, f->a[0], a_events, on_a, f), 0);
	assert_true(loop_timer(f->l, 100, on_stop, f) != 0);
	(void)loop_run(f->l);
	loop_free(f->l);
	(void)close(f->trig[0]);
	(void)close(f->trig[1]);
	(void)close(f->a[0]);
	if (f->a[1] >= 0)
		(void)close(f->a[1]);
}

/* Interest narrowed to POLLOUT earlier in the turn: POLLIN is not passed
 * on although poll reported it. */
static void
test_revents_masked_by_current_interest(void **state)
{
	struct fx f;
	(void)state;
	memset(&f, 0, sizeof f);
	/* a pipe end is readable or writable, not both: a socketpair is */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, f.a), 0);
	assert_int_equal(write(f.a[1], "y", 1), 1);
	f.new_events = POLLOUT;
	fx_run(&f, POLLIN | POLLOUT);
	assert_true(f.calls > 0);
	assert_int_equal(f.seen & POLLIN, 0);
	assert_true(f.seen & POLLOUT);
}

/* Interest dropped to 0: no call at all for an fd that only has data. */
static void
test_quiet_watch_gets_nothing(void **state)
{
	struct fx f;

	(void)state;
	memset(&f, 0, sizeof f);
	assert_int_equal(pipe(f.a), 0);
	assert_int_equal(write(f.a[1], "y", 1), 1);
	f.new_events = 0;
	fx_run(&f, POLLIN);
	assert_int_equal(f.calls, 0);
}

/* The old read end had POLLHUP (writer closed); its number is reused by a
 * quiet pipe within the same turn: the new owner hears nothing. */
static void
test_reused_fd_does_not_inherit_revents(void **state)
{
	struct fx f;

	(void)state;
	memset(&f, 0, sizeof f);
	assert_int_equal(pipe(f.a), 0);
	(void)close(f.a[1]);
	f.a[1] = -1;
	f.reuse = 1;
	fx_run(&f, POLLIN);
	assert_int_equal(f.calls, 0);
	assert_int_equal(f.new_calls, 0);
	assert_int_equal(f.new_seen, 0);
}

/* --- timers armed during the timer pass --------------------------------- */

struct tfx {
	struct loop *l;
	int polls;		/* fd callbacks so far */
	int armed_at;		/* polls when the follow-up was armed */
	int same_turn;		/* follow-ups run before any poll */
	int pending;		/* a follow-up is armed */
	int rounds;
};

static void on_tick(struct loop *l, void *ctx);

static void
on_follow(struct loop *l, void *ctx)
{
	struct tfx *t = ctx;

	(void)l;
	if (t->polls == t->armed_at)
		t->same_turn++;
	t->pending = 0;
}

/* Arms two 0 ms timers: itself again (its own freed slot) and a
 * follow-up (a new slot at the end of the array). */
static void
on_tick(struct loop *l, void *ctx)
{
	struct tfx *t = ctx;

	if (++t->rounds == 50) {
		loop_stop(l, 0);
		return;
	}
	assert_true(loop_timer(l, 0, on_tick, t) != 0);
	if (!t->pending) {
		t->pending = 1;
		t->armed_at = t->polls;
		assert_true(loop_timer(l, 0, on_follow, t) != 0);
	}
}

static void
on_ready(struct loop *l, int fd, short revents, void *ctx)
{
	struct tfx *t = ctx;

	(void)l;
	(void)fd;
	(void)revents;
	t->polls++;
}

static void
test_timer_armed_in_pass_waits_for_poll(void **state)
{
	struct tfx t;
	int p[2];

	(void)state;
	memset(&t, 0, sizeof t);
	t.l = loop_new();
	assert_non_null(t.l);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x", 1), 1);	/* always readable */
	assert_int_equal(loop_watch(t.l, p[0], POLLIN, on_ready, &t), 0);
	assert_true(loop_timer(t.l, 0, on_tick, &t) != 0);
	(void)loop_run(t.l);
	assert_int_equal(t.rounds, 50);
	assert_int_equal(t.same_turn, 0);
	assert_true(t.polls >= 49);
	loop_free(t.l);
	(void)close(p[0]);
	(void)close(p[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_revents_masked_by_current_interest),
		cmocka_unit_test(test_quiet_watch_gets_nothing),
		cmocka_unit_test(test_reused_fd_does_not_inherit_revents),
		cmocka_unit_test(test_timer_armed_in_pass_waits_for_poll),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
