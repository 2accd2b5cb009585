/*
 * redact.c - secret redaction (see redact.h).
 *
 * Matching is an Aho-Corasick automaton over all secrets, compiled to a
 * dense transition table, so each input byte costs one table lookup
 * whatever the number and length of the secrets: O(n) for n bytes of
 * output. To keep the table small the alphabet is reduced to the bytes
 * that occur in some secret plus one class for all the others; typical
 * secrets (base64 or hex, 20 secrets of 200 bytes) give about 4,000 nodes
 * x 65 classes x 4 bytes, 1 MB. In general the table takes
 * (total secret bytes + 1) x (distinct secret bytes + 1) x 4 bytes.
 *
 * The secrets are kept in a trie whose node numbers never change; adding a
 * secret appends nodes and rebuilds the table from the trie. A stream's
 * state is a node number, so it stays meaningful across a rebuild: the
 * node's string is still a suffix of the stream, only maybe no longer the
 * longest one that is a trie node (see redact_add() in redact.h).
 *
 * Per node the build records cover, the length of the longest secret that
 * is a suffix of the node's string (0 if none), and hold, the length of
 * the longest suffix that is a proper prefix of some secret, i.e. the
 * deepest node with children on the failure chain. After byte pos - 1 the
 * hidden stretch [pos - cover, pos) is known, and no later occurrence can
 * start before pos - hold: every byte before that is final.
 *
 * A stream keeps the bytes [done, pos) not yet emitted, and a queue of
 * runs: disjoint, ordered hidden stretches, each to become one marker.
 * A new stretch always ends after every queued run; it swallows the runs
 * it overlaps from the back of the queue. Emission walks from done up to
 * pos - hold, showing clear bytes, writing a marker when it reaches a
 * run's start and skipping the run's bytes. redact_string() is a stream
 * fed once, so one-shot and streamed output cannot differ.
 */
#include "supervisor/text/redact.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "supervisor/text/secrets.h"

#define REDACT_NOCHILD	0	/* the root is nobody's child */
#define REDACT_RUNS_MIN	16
#define REDACT_COVERED	0x80000000u	/* delta: the target has cover */

/* A trie node; node 0 is the root. */
struct redact_node {
	uint32_t	 child;		/* first child, REDACT_NOCHILD if none */
	uint32_t	 sibling;	/* next child of the same parent */
	uint32_t	 depth;
	unsigned char	 byte;		/* the edge from the parent */
	unsigned char	 terminal;	/* a secret ends here */
};

/* The automaton, built from the trie by redact_build(). */
struct redact_auto {
	uint16_t	 cls[256];	/* byte -> class; 0: in no secret */
	size_t		 ncls;
	uint32_t	*delta;		/* see redact_encode() */
	uint32_t	*cover;		/* per node, see the top comment */
	uint32_t	*hold;
};

struct redact {
	struct redact_node	*nodes;
	size_t			 nnodes, capnodes;
	size_t			 count;		/* terminal nodes */
	struct redact_auto	 a;
};

/* One hidden stretch [start, end) of a stream, in stream positions. */
struct redact_run {
	uint64_t	 start, end;
};

/* What one feed or flush emits from: hold[0] is at position hbase, p[0]
 * (the bytes being fed, if any) at pbase. */
struct redact_feed {
	struct redact_stream	*st;
	const char		*p;
	uint64_t		 pbase, hbase;
	redact_emit_fn		*emit;
	void			*ctx;
};

static int
redact_new_node(struct redact *r, uint32_t parent, unsigned char byte,
    uint32_t *id)
{
	struct redact_node *n;

	if (r->nnodes >= UINT32_MAX) {
		errno = ENOMEM;
		return -1;
	}
	if (r->nnodes == r->capnodes) {
		size_t cap = r->capnodes * 2;

		if (cap > SIZE_MAX / sizeof *n) {
			errno = ENOMEM;
			return -1;
		}
		if ((n = realloc(r->nodes, cap * sizeof *n)) == NULL)
			return -1;
		r->nodes = n;
		r->capnodes = cap;
	}
	*id = (uint32_t)r->nnodes++;
	n = &r->nodes[*id];
	n->child = REDACT_NOCHILD;
	n->sibling = r->nodes[parent].child;
	n->depth = r->nodes[parent].depth + 1;
	n->byte = byte;
	n->terminal = 0;
	/* Linked only once complete, so a failure leaves the trie valid. */
	r->nodes[parent].child = *id;
	return 0;
}

static uint32_t
redact_find_child(const struct redact *r, uint32_t u, unsigned char byte)
{
	uint32_t v;

	for (v = r->nodes[u].child; v != REDACT_NOCHILD; v = r->nodes[v].sibling)
		if (r->nodes[v].byte == byte)
			return v;
	return REDACT_NOCHILD;
}

/* Put value in the trie; *added = 1 if it was not there. 0 or -1/ENOMEM. */
static int
redact_insert(struct redact *r, const char *value, size_t len, int *added)
{
	const unsigned char *v = (const unsigned char *)value;
	uint32_t u = 0, c;
	size_t i;

	for (i = 0; i < len; i++) {
		c = redact_find_child(r, u, v[i]);
		if (c == REDACT_NOCHILD && redact_new_node(r, u, v[i], &c) == -1)
			return -1;
		u = c;
	}
	*added = !r->nodes[u].terminal;
	if (*added) {
		r->nodes[u].terminal = 1;
		r->count++;
	}
	return 0;
}

/* The byte classes of the current trie into a->cls and a->ncls. */
static void
redact_classes(const struct redact *r, struct redact_auto *a)
{
	unsigned char used[256] = { 0 };
	size_t i;

	for (i = 1; i < r->nnodes; i++)
		used[r->nodes[i].byte] = 1;
	a->ncls = 1;
	for (i = 0; i < 256; i++)
		a->cls[i] = used[i] ? (uint16_t)a->ncls++ : 0;
}

/*
 * Breadth-first over the trie, so that a node's failure target (which is
 * shallower) has its row, cover and hold done before the node itself.
 * Each row starts as a copy of the failure target's row, then the node's
 * own children override it. fail and queue have room for every node.
 */
static void
redact_fill(const struct redact *r, struct redact_auto *a, uint32_t *fail,
    uint32_t *queue)
{
	size_t head = 0, tail = 1;

	queue[0] = 0;
	fail[0] = 0;
	while (head < tail) {
		uint32_t u = queue[head++], v;
		const struct redact_node *n = &r->nodes[u];
		uint32_t *row = a->delta + (size_t)u * a->ncls;

		if (u == 0) {		/* its own failure target */
			memset(row, 0, a->ncls * sizeof *row);
			a->cover[u] = a->hold[u] = 0;
		} else {
			memcpy(row, a->delta + (size_t)fail[u] * a->ncls,
			    a->ncls * sizeof *row);
			a->cover[u] = n->terminal ? n->depth :
			    a->cover[fail[u]];
			a->hold[u] = n->child != REDACT_NOCHILD ? n->depth :
			    a->hold[fail[u]];
		}
		for (v = n->child; v != REDACT_NOCHILD; v = r->nodes[v].sibling) {
			size_t c = a->cls[r->nodes[v].byte];

			/* row[c] is still the failure target's move. */
			fail[v] = u == 0 ? 0 : row[c];
			row[c] = v;
			queue[tail++] = v;
		}
	}
}

/*
 * Turn delta's node numbers into what the hot loop wants: the target's
 * row offset (node * ncls), saving a multiplication per byte, with
 * REDACT_COVERED set if some secret ends there, saving a load per byte.
 */
static void
redact_encode(struct redact_auto *a, size_t nnodes)
{
	size_t i;

	for (i = 0; i < nnodes * a->ncls; i++) {
		uint32_t v = a->delta[i];

		a->delta[i] = (uint32_t)(v * a->ncls) |
		    (a->cover[v] != 0 ? REDACT_COVERED : 0);
	}
}

static void
redact_auto_free(struct redact_auto *a)
{
	free(a->delta);
	free(a->cover);
	free(a->hold);
}

/* Rebuild the automaton from the trie. 0, or -1/ENOMEM leaving the old
 * automaton in place. */
static int
redact_build(struct redact *r)
{
	struct redact_auto a;
	uint32_t *fail, *queue;
	size_t n = r->nnodes;

	redact_classes(r, &a);
	/* Every row offset must fit below REDACT_COVERED. */
	if (n > REDACT_COVERED / a.ncls || n > SIZE_MAX / sizeof *a.delta /
	    a.ncls) {
		errno = ENOMEM;
		return -1;
	}
	a.delta = malloc(n * a.ncls * sizeof *a.delta);
	a.cover = malloc(n * sizeof *a.cover);
	a.hold = malloc(n * sizeof *a.hold);
	fail = malloc(n * sizeof *fail);
	queue = malloc(n * sizeof *queue);
	if (a.delta == NULL || a.cover == NULL || a.hold == NULL ||
	    fail == NULL || queue == NULL) {
		redact_auto_free(&a);
		free(fail);
		free(queue);
		errno = ENOMEM;
		return -1;
	}
	redact_fill(r, &a, fail, queue);
	redact_encode(&a, n);
	free(fail);
	free(queue);
	redact_auto_free(&r->a);
	r->a = a;
	return 0;
}

struct redact *
redact_new(void)
{
	struct redact *r;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return NULL;
	r->capnodes = 64;
	if ((r->nodes = malloc(r->capnodes * sizeof *r->nodes)) == NULL) {
		free(r);
		return NULL;
	}
	memset(&r->nodes[0], 0, sizeof r->nodes[0]);
	r->nnodes = 1;
	if (redact_build(r) == -1) {
		redact_free(r);
		return NULL;
	}
	return r;
}

void
redact_free(struct redact *r)
{
	if (r == NULL)
		return;
	free(r->nodes);
	redact_auto_free(&r->a);
	free(r);
}

int
redact_add(struct redact *r, const char *value, size_t len)
{
	int added;

	if (len < REDACT_MIN_LEN)
		return 0;
	if (redact_insert(r, value, len, &added) == -1)
		return -1;
	return added ? redact_build(r) : 0;
}

int
redact_add_from_environ(struct redact *r, char **envp)
{
	size_t len;
	int added, any = 0, rc = 0;

	/* Insert all, then build once rather than once per secret. */
	for (; rc == 0 && envp != NULL && *envp != NULL; envp++) {
		const char *eq = strchr(*envp, '=');

		if (eq == NULL)
			continue;
		if (!secrets_is_secret_name(*envp, (size_t)(eq - *envp)))
			continue;
		if ((len = strlen(eq + 1)) < REDACT_MIN_LEN)
			continue;
		rc = redact_insert(r, eq + 1, len, &added);
		any |= rc == 0 && added;
	}
	/* After a failure, still build what was inserted. */
	if (any && redact_build(r) == -1)
		return -1;
	if (rc == -1)
		errno = ENOMEM;
	return rc;
}

struct redact *
redact_new_from_environ(char **envp)
{
	struct redact *r = redact_new();

	if (r != NULL && redact_add_from_environ(r, envp) < 0) {
		redact_free(r);
		return NULL;
	}
	return r;
}

size_t
redact_count(const struct redact *r)
{
	return r->count;
}

/* Hand p[0..n) to the emitter, recording its failure in the stream. */
static int
redact_out(struct redact_feed *f, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	if (f->emit(f->ctx, p, n) == -1) {
		f->st->err = errno != 0 ? errno : EIO;
		return -1;
	}
	return 0;
}

/* Emit the clear stream bytes [x, y), which lie in hold and/or p. */
static int
redact_out_clear(struct redact_feed *f, uint64_t x, uint64_t y)
{
	if (x < f->pbase) {
		uint64_t e = y < f->pbase ? y : f->pbase;

		if (redact_out(f, buf_str(&f->st->hold) + (x - f->hbase),
		    e - x) == -1)
			return -1;
		x = e;
	}
	if (x < y)
		return redact_out(f, f->p + (x - f->pbase), y - x);
	return 0;
}

/*
 * Emit up to stream position t, which must be final: no stretch found
 * later can start before t. A run reaching past t keeps its place at the
 * front of the queue; as it starts before done, its marker is out.
 */
static int
redact_emit_upto(struct redact_feed *f, uint64_t t)
{
	struct redact_stream *st = f->st;
	struct redact_run *run;
	uint64_t next;

	while (st->done < t) {
		run = st->runs_len > 0 ? &st->runs[st->runs_head] : NULL;
		if (run == NULL || run->start > st->done) {
			next = run != NULL && run->start < t ? run->start : t;
			if (redact_out_clear(f, st->done, next) == -1)
				return -1;
			st->done = next;
			continue;
		}
		if (run->start == st->done &&
		    redact_out(f, REDACT_MARKER, REDACT_MARKER_LEN) == -1)
			return -1;
		if (run->end > t) {
			st->done = t;
			continue;
		}
		st->done = run->end;
		st->runs_head++;
		if (--st->runs_len == 0)
			st->runs_head = 0;
	}
	return 0;
}

/* Make room for one more run; safe is the current final position. */
static int
redact_runs_room(struct redact_feed *f, uint64_t safe)
{
	struct redact_stream *st = f->st;
	struct redact_run *runs;
	size_t cap;

	if (st->runs_head + st->runs_len < st->runs_cap)
		return 0;
	if (st->runs_len > 0 && redact_emit_upto(f, safe) == -1)
		return -1;
	if (st->runs_head > 0) {
		memmove(st->runs, st->runs + st->runs_head,
		    st->runs_len * sizeof *st->runs);
		st->runs_head = 0;
	}
	if (st->runs_len < st->runs_cap / 2)
		return 0;
	cap = st->runs_cap < REDACT_RUNS_MIN ? REDACT_RUNS_MIN :
	    st->runs_cap * 2;
	if (cap > SIZE_MAX / sizeof *runs ||
	    (runs = realloc(st->runs, cap * sizeof *runs)) == NULL) {
		st->err = ENOMEM;
		return -1;
	}
	st->runs = runs;
	st->runs_cap = cap;
	return 0;
}

/* Queue the hidden stretch [start, end); end is past every queued run. */
static void
redact_runs_push(struct redact_stream *st, uint64_t start, uint64_t end)
{
	struct redact_run *last;

	while (st->runs_len > 0) {
		last = &st->runs[st->runs_head + st->runs_len - 1];
		if (last->end <= start)		/* no shared byte */
			break;
		if (last->start < start)
			start = last->start;
		st->runs_len--;
	}
	last = &st->runs[st->runs_head + st->runs_len++];
	last->start = start;
	last->end = end;
}

/*
 * Keep the bytes [done, pos) of this feed's hold and p in hold: the hold's
 * last old bytes, then the fresh ones of p. At most the longest secret's
 * length, so growth stops early.
 */
static int
redact_keep(struct redact_feed *f)
{
	struct redact_stream *st = f->st;
	uint64_t from = st->done > f->pbase ? st->done : f->pbase;
	size_t old = st->done < f->pbase ? (size_t)(f->pbase - st->done) : 0;
	size_t fresh = (size_t)(st->pos - from);

	buf_consume(&st->hold, st->hold.len - old);
	if (fresh > 0 &&
	    buf_append(&st->hold, f->p + (from - f->pbase), fresh) == -1) {
		st->err = ENOMEM;
		return -1;
	}
	return 0;
}

static int
redact_fail(const struct redact_stream *st)
{
	errno = st->err;
	return -1;
}

void
redact_stream_init(struct redact_stream *st)
{
	memset(st, 0, sizeof *st);
}

void
redact_stream_clear(struct redact_stream *st)
{
	buf_clear(&st->hold);
	free(st->runs);
	redact_stream_init(st);
}

/*
 * Run the automaton over n bytes of f->p, queueing every hidden stretch,
 * and leave the final node in st->state. The hot loop: one lookup per
 * byte, and the tables in locals since the stores to the queue could
 * alias them for the compiler.
 */
static int
redact_scan(const struct redact_auto *a, struct redact_feed *f, size_t n)
{
	const unsigned char *u = (const unsigned char *)f->p;
	const uint32_t *delta = a->delta;
	const uint16_t *cls = a->cls;
	size_t i, ncls = a->ncls;
	uint32_t off = f->st->state * (uint32_t)ncls, s, cover, hold;
	uint64_t end;

	for (i = 0; i < n; i++) {
		uint32_t e = delta[off + cls[u[i]]];

		off = e & ~REDACT_COVERED;
		if ((e & REDACT_COVERED) == 0)
			continue;
		s = off / (uint32_t)ncls;
		cover = a->cover[s];
		hold = a->hold[s];
		end = f->pbase + i + 1;
		/* Final: before this stretch and before any later one. */
		if (redact_runs_room(f, end - (cover > hold ? cover : hold)) ==
		    -1)
			return -1;
		redact_runs_push(f->st, end - cover, end);
	}
	f->st->state = off / (uint32_t)ncls;
	return 0;
}

int
redact_stream_feed(const struct redact *r, struct redact_stream *st,
    const char *p, size_t n, redact_emit_fn *emit, void *ctx)
{
	struct redact_feed f = { st, p, st->pos, st->pos - st->hold.len,
	    emit, ctx };

	if (st->err != 0)
		return redact_fail(st);
	if (redact_scan(&r->a, &f, n) == -1)
		return redact_fail(st);
	st->pos += n;
	if (redact_emit_upto(&f, st->pos - r->a.hold[st->state]) == -1 ||
	    redact_keep(&f) == -1)
		return redact_fail(st);
	return 0;
}

int
redact_stream_flush(struct redact_stream *st, redact_emit_fn *emit,
    void *ctx)
{
	struct redact_feed f = { st, NULL, st->pos, st->pos - st->hold.len,
	    emit, ctx };

	if (st->err != 0)
		return redact_fail(st);
	if (redact_emit_upto(&f, st->pos) == -1)
		return redact_fail(st);
	st->state = 0;
	st->pos = st->done = 0;
	buf_reset(&st->hold);
	st->runs_head = st->runs_len = 0;
	return 0;
}

int
redact_emit_buf(void *ctx, const char *p, size_t n)
{
	return buf_append(ctx, p, n);
}

char *
redact_string(const struct redact *r, const char *p, size_t n,
    size_t *outlen)
{
	struct redact_stream st;
	struct buf b;

	buf_init(&b);
	redact_stream_init(&st);
	if (buf_reserve(&b, n < SIZE_MAX - 16 ? n + 16 : n) == -1 ||
	    redact_stream_feed(r, &st, p, n, redact_emit_buf, &b) == -1 ||
	    redact_stream_flush(&st, redact_emit_buf, &b) == -1) {
		redact_stream_clear(&st);
		buf_clear(&b);
		errno = ENOMEM;
		return NULL;
	}
	redact_stream_clear(&st);
	return buf_detach(&b, outlen);
}
