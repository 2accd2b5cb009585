/*
 * wsguard.c - --workspace-size: the workspace measured while the run
 * lives, and the worker's whole tree killed when it grows past its size.
 *
 * No filesystem here can cap a folder for us (a quota needs a filesystem
 * mounted with project quotas, which the workspace's may not be, and
 * this kernel is built without them; a size-capped filesystem of its
 * own would move the files out of the folder the operator keeps), so
 * the supervisor measures: a walk of the workspace (dirsize.c) every
 * WS_EVERY_MS, or twenty times the last walk's cost (at most a
 * twentieth of a CPU), a slice of entries per turn of the event loop;
 * between walks, a walk at once when the workspace's filesystem has
 * lost more than its room. It is a measure, not a quota: what a cell
 * writes between two walks and until the kill lands goes past the size
 * (the page cache takes ~1.5 GB/s here: 35-65 MiB past it measured on
 * an idle machine, up to ~250 MiB with both cores busy).
 *
 * A walk that finds it holding more than it may kills the worker's
 * tree, in a cell or between cells (a thread or a child a cell left
 * behind writes as well as the cell), like a kill of the deadline's:
 * the running cell's record says why and its namespace is rolled back
 * where a snapshot was taken. What a walk cannot measure (a tree deeper
 * than WS_MAX_DEPTH, a folder that cannot be read) is judged by what
 * the filesystem lost since the last walk that could: it may not grow
 * either (a folder a cell made unreadable to its owner - the
 * supervisor, for a plain user - gets its owner's read and search bits
 * back, and is walked). Each file is capped at the size as well
 * (RLIMIT_FSIZE, set by the front end): one write cannot run past it.
 *
 * What it may hold is the size, or more when it held more as the run
 * started or as a kill left it (measured whole then: at the start, and
 * when the killed worker's death is handled, before another cell can
 * run): then it may not grow past that, and the bound comes down with
 * whatever a later cell deletes, as far as the next walk sees. A cell
 * can always make room.
 *
 * May include: runner_impl.h, dirsize.h, common/log.h, common/size.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/log.h"
#include "common/size.h"
#include "supervisor/run/dirsize.h"

#define WS_EVERY_MS 50		/* a tick: a walk, or statvfs */
#define WS_PACE 20		/* a walk's cost to the next walk */
#define WS_SLICE 2048		/* entries a turn of the event loop */
#define WS_MAX_DEPTH 256	/* folders deep (an open descriptor each) */

static void on_tick(struct loop *l, void *ctx);

/* b in MiB, one decimal rounded up: "4.1 MiB" for a byte over 4 MiB
 * (buf of MIB_TEXT). */
#define MIB_TEXT 48
static void
mib_text(uint64_t b, char *buf)
{
	char n[32];

	size_plain((double)((b * 10 + (1024 * 1024 - 1)) / (1024 * 1024)) /
	    10.0, n, sizeof n);
	(void)snprintf(buf, MIB_TEXT, "%s MiB", n);
}

static const char *
deep(int e)
{
	static char buf[48];

	if (e != ELOOP)
		return strerror(e);
	(void)snprintf(buf, sizeof buf, "more than %d folders deep",
	    WS_MAX_DEPTH);
	return buf;
}

static void
schedule(struct runner *r, uint64_t ms)
{
	loop_timer_cancel(r->loop, r->ws.timer);
	r->ws.timer = loop_timer(r->loop, ms, on_tick, r);
}

/* What the workspace's filesystem has free (root's reserve included), 0
 * when it cannot tell. */
static uint64_t
fs_free(const struct runner *r)
{
	struct statvfs sv;

	if (statvfs(r->ws.path, &sv) < 0)
		return 0;
	return (uint64_t)sv.f_bfree * sv.f_frsize;
}

/* A walk measured b bytes: the reference an estimate starts from. */
static void
measured(struct runner *r, uint64_t b)
{
	r->ws.bytes = b;
	r->ws.ref_free = fs_free(r);
}

/* When a walk cannot finish: what the last walk that could found, plus
 * what the filesystem has lost since (anything else writing there
 * counts too; that is the price of a workspace that cannot be walked). */
static uint64_t
estimate(const struct runner *r)
{
	uint64_t now = fs_free(r);

	if (now == 0)
		return UINT64_MAX;	/* nothing to tell by */
	if (now >= r->ws.ref_free)
		return r->ws.bytes;
	return r->ws.bytes + (r->ws.ref_free - now);
}

/* b bytes held: the bound from now on (the size, or what it holds over
 * it). */
static void
rebase(struct runner *r, uint64_t b)
{
	r->ws.bound = b > r->cfg.workspace_size ? b : r->cfg.workspace_size;
}

/* The whole workspace walked now (blocking the loop: at the start, and
 * once after a kill): 0 and *b, or -1 with errno and *where. */
static int
walk_now(struct runner *r, uint64_t *b, char *where, size_t len)
{
	struct dirsize *d = dirsize_start(r->ws.path, WS_MAX_DEPTH,
	    DIRSIZE_READABLE);
	int rc, e;

	if (d == NULL) {
		(void)snprintf(where, len, ".");
		return -1;
	}
	while ((rc = dirsize_step(d, UINT_MAX)) == 0)
		;
	e = errno;
	*b = dirsize_bytes(d);
	(void)snprintf(where, len, "%s", dirsize_where(d));
	dirsize_free(d);
	errno = e;
	return rc < 0 ? -1 : 0;
}

/*
 * The worker's tree killed, why in one line. Until its death is handled
 * walks judge nothing (a writer being killed may still add a page); then
 * the workspace is measured whole, before any cell can run, and what it
 * holds is the bound from then on.
 */
static void
kill_for(struct runner *r, const char *why)
{
	r->ws.ran = 0;
	log_warnx("%s: the worker's processes are killed", why);
	if (r->w == NULL || worker_state(r->w) == WORKER_DOWN) {
		wsguard_death(r);	/* nothing to wait for */
		return;
	}
	r->ws.killing = 1;
	worker_kill(r->w, why);
}

void
wsguard_death(struct runner *r)
{
	char where[256];
	uint64_t b;

	if (!r->ws.killing)
		return;
	r->ws.killing = 0;
	/* the next timed walk starts afresh */
	dirsize_free(r->ws.walk);
	r->ws.walk = NULL;
	if (walk_now(r, &b, where, sizeof where) == 0) {
		measured(r, b);
		rebase(r, b);
	} else if ((b = estimate(r)) != UINT64_MAX) {
		rebase(r, b);
	}
	schedule(r, WS_EVERY_MS);
}

/* The workspace holds b bytes: measured by a walk (unmeasured NULL), or
 * estimated because a walk cannot measure it (unmeasured says why). Only
 * a walk lowers the bound. */
static void
judge(struct runner *r, uint64_t b, const char *unmeasured)
{
	char held[MIB_TEXT], size[MIB_TEXT], bound[MIB_TEXT], how[400];
	char why[640];
	uint64_t size_b = r->cfg.workspace_size;

	if (r->ws.killing)
		return;
	if (unmeasured == NULL)
		measured(r, b);
	if (b <= r->ws.bound) {
		if (b < r->ws.bound && unmeasured == NULL)
			rebase(r, b);	/* room made */
		return;
	}
	if (b == UINT64_MAX)
		(void)snprintf(held, sizeof held, "an unknown size");
	else
		mib_text(b, held);
	mib_text(size_b, size);
	how[0] = '\0';
	if (unmeasured != NULL)
		(void)snprintf(how, sizeof how, " (by what its filesystem "
		    "lost since the last walk: a walk cannot measure it, "
		    "%s)", unmeasured);
	if (r->ws.bound > size_b) {
		mib_text(r->ws.bound, bound);
		(void)snprintf(why, sizeof why, "the workspace grew to %s%s, "
		    "past the %s it already held over its size (%s, "
		    "--workspace-size): only deleting makes room", held, how,
		    bound, size);
	} else {
		(void)snprintf(why, sizeof why, "the workspace grew to %s%s, "
		    "over its size (%s, --workspace-size)", held, how, size);
	}
	kill_for(r, why);
}

/* A walk that cannot go on (a tree too deep, a folder that cannot be
 * read): what cannot be measured is estimated by what the filesystem
 * lost, and may not grow either. A worker that has run no cell since
 * the last kill writes nothing: it is never killed for it (a host's
 * writes elsewhere on that filesystem would otherwise end the run as a
 * worker that cannot start). */
static void
walk_failed(struct runner *r, const char *where, int e)
{
	char why[320];

	if (r->ws.killing || !r->ws.ran)
		return;
	(void)snprintf(why, sizeof why, "'%s' in it: %s", where, deep(e));
	judge(r, estimate(r), why);
}

/*
 * Every WS_EVERY_MS: a walk when one is due (WS_PACE times the last
 * one's cost after its end), or at once when the filesystem has lost
 * more than the workspace had room for since the last walk (statvfs:
 * cheap however much the workspace holds), so that a workspace made slow
 * to walk buys a fast writer no longer period. A walk goes a slice at a
 * time; its cost is its slices' time, not what the loop did between.
 */
static void
on_tick(struct loop *l, void *ctx)
{
	struct runner *r = ctx;
	uint64_t t0 = loop_now_us(), pace;
	int rc;

	(void)l;
	r->ws.timer = 0;
	if (r->ws.walk == NULL) {
		if (t0 < r->ws.due_us && (r->ws.killing ||
		    estimate(r) <= r->ws.bound)) {
			schedule(r, WS_EVERY_MS);
			return;
		}
		r->ws.cost_us = 0;
		r->ws.walk = dirsize_start(r->ws.path, WS_MAX_DEPTH,
		    DIRSIZE_READABLE);
		if (r->ws.walk == NULL) {
			walk_failed(r, ".", errno);
			r->ws.due_us = t0;
			schedule(r, WS_EVERY_MS);
			return;
		}
	}
	rc = dirsize_step(r->ws.walk, WS_SLICE);
	r->ws.cost_us += loop_now_us() - t0;
	if (rc == 0) {
		schedule(r, 0);		/* more: after what else is due */
		return;
	}
	if (rc < 0)
		walk_failed(r, dirsize_where(r->ws.walk), errno);
	else
		judge(r, dirsize_bytes(r->ws.walk), NULL);
	if (r->ws.walk == NULL)
		return;		/* a kill's death came at once, and walked */
	dirsize_free(r->ws.walk);
	r->ws.walk = NULL;
	pace = r->ws.cost_us * WS_PACE;
	r->ws.due_us = loop_now_us() + (pace > WS_EVERY_MS * 1000u ? pace :
	    WS_EVERY_MS * 1000u);
	schedule(r, WS_EVERY_MS);
}

int
wsguard_start(struct runner *r)
{
	const char *ws = r->cfg.jail != NULL && r->cfg.jail->workspace !=
	    NULL ? r->cfg.jail->workspace : ".";
	char where[256];
	uint64_t b;

	if (r->cfg.workspace_size == 0)
		return 0;
	if ((r->ws.path = realpath(ws, NULL)) == NULL) {
		log_warnx("--workspace-size: the workspace %s: %s", ws,
		    strerror(errno));
		return -1;
	}
	/* the first walk whole, before any cell: what it holds now */
	if (walk_now(r, &b, where, sizeof where) < 0) {
		log_warnx("--workspace-size: cannot measure the workspace "
		    "%s: '%s' in it: %s", r->ws.path, where, deep(errno));
		return -1;
	}
	measured(r, b);
	rebase(r, b);
	schedule(r, WS_EVERY_MS);
	return 0;
}

void
wsguard_free(struct runner *r)
{
	loop_timer_cancel(r->loop, r->ws.timer);
	r->ws.timer = 0;
	dirsize_free(r->ws.walk);
	r->ws.walk = NULL;
	free(r->ws.path);
	r->ws.path = NULL;
}
