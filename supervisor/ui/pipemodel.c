/*
 * pipemodel.c - the model of a pipe's slots (see pipemodel.h). Runs in the
 * supervisor's loop; allocates only in pipe_model_new and on a resize.
 */
#include "supervisor/ui/pipemodel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/*
 * How it works. Linux keeps a pipe as a ring of
 * F_GETPIPE_SZ / page size slots, a page each (fs/pipe.c pipe_write): the
 * remainder of a write (its size modulo the page) first goes into the last
 * page when the pipe is not empty and it fits behind that page's end,
 * everything else into fresh pages, up to a page each; a non-blocking
 * write that runs out of slots takes less. A read advances the oldest
 * page; a page read to its end frees its slot. A slot's end within its
 * page does not move when it is read.
 *
 * What cannot be known: whether the reader emptied the pipe between our
 * look (FIONREAD) and a write that merged. Then both layouts are kept
 * (hypotheses) and a write must fit in each; too many of them, and the
 * model waits for an empty pipe, which is exact again.
 */
#define PM_HYP_MAX	4

struct pm_slot {
	uint32_t end;		/* where its bytes end within the page */
	uint32_t unread;
};

struct pm_hyp {
	struct pm_slot *s;	/* a ring of pm->alloc */
	unsigned head, n;
};

struct pipe_model {
	int fd;
	int state;		/* PM_ON, PM_WAIT (for an empty pipe), PM_OFF */
	size_t page;
	unsigned slots, alloc;
	uint64_t unread;	/* the bytes of ours unread, as last seen */
	int nh;
	struct pm_hyp h[PM_HYP_MAX];
};

enum { PM_ON, PM_WAIT, PM_OFF };

static struct pm_slot *
pm_last(const struct pipe_model *m, const struct pm_hyp *h)
{
	return &h->s[(h->head + h->n - 1) % m->alloc];
}

/* Does the remainder of a write of n bytes go into h's last page? */
static int
pm_merges(const struct pipe_model *m, const struct pm_hyp *h, size_t n)
{
	size_t c = n & (m->page - 1);

	return h->n > 0 && c > 0 && pm_last(m, h)->end + c <= m->page;
}

/* The slots a whole write of n bytes takes in h. */
static size_t
pm_need(const struct pipe_model *m, const struct pm_hyp *h, size_t n)
{
	if (pm_merges(m, h, n))
		return n / m->page;
	return (n + m->page - 1) / m->page;
}

/* The bytes a write of n bytes would take in h now. */
static size_t
pm_takes(const struct pipe_model *m, const struct pm_hyp *h, size_t n)
{
	size_t c = 0, fresh = (size_t)(m->slots - h->n) * m->page;

	if (pm_merges(m, h, n))
		c = n & (m->page - 1);
	return c + (n - c < fresh ? n - c : fresh);
}

/* A write of n bytes that took r: laid out by the kernel's rules, the
 * oldest pages read first when it took more than h had free (the reader
 * read them before it). The bytes so read; -1: it does not fit in h (h is
 * not what the pipe holds). */
static int64_t
pm_apply(struct pipe_model *m, struct pm_hyp *h, size_t n, size_t r)
{
	struct pm_slot *s;
	int64_t read = 0;
	size_t k;
	int merged = 0;

	if (r > 0 && pm_merges(m, h, n)) {
		merged = 1;
		k = n & (m->page - 1);
		if (k > r)
			return -1;
		s = pm_last(m, h);
		s->end += (uint32_t)k;
		s->unread += (uint32_t)k;
		r -= k;
	}
	for (; r > 0; r -= k) {
		if (h->n >= m->slots) {
			s = &h->s[h->head];
			read += s->unread;
			h->head = (h->head + 1) % m->alloc;
			h->n--;
			if (h->n == 0 && merged)
				return -1;	/* it was empty: not merged */
		}
		k = r < m->page ? r : m->page;
		s = &h->s[(h->head + h->n) % m->alloc];
		s->end = s->unread = (uint32_t)k;
		h->n++;
	}
	return read;
}

/* The reader took d bytes from h: the oldest first. */
static void
pm_consume(struct pipe_model *m, struct pm_hyp *h, uint64_t d)
{
	struct pm_slot *s;
	uint32_t k;

	while (d > 0 && h->n > 0) {
		s = &h->s[h->head];
		k = d < s->unread ? (uint32_t)d : s->unread;
		s->unread -= k;
		d -= k;
		if (s->unread == 0) {
			h->head = (h->head + 1) % m->alloc;
			h->n--;
		}
	}
}

static int
pm_same(const struct pipe_model *m, const struct pm_hyp *a,
    const struct pm_hyp *b)
{
	const struct pm_slot *x, *y;
	unsigned i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++) {
		x = &a->s[(a->head + i) % m->alloc];
		y = &b->s[(b->head + i) % m->alloc];
		if (x->end != y->end || x->unread != y->unread)
			return 0;
	}
	return 1;
}

static void
pm_drop_hyp(struct pipe_model *m, int i)
{
	struct pm_hyp t = m->h[i];

	m->h[i] = m->h[m->nh - 1];
	m->h[m->nh - 1] = t;		/* its ring stays allocated */
	m->nh--;
}

/* The pipe is empty: one layout, no slot used. */
static void
pm_reset(struct pipe_model *m)
{
	m->nh = 1;
	m->h[0].head = m->h[0].n = 0;
	m->unread = 0;
	if (m->state == PM_WAIT)
		m->state = PM_ON;
}

/* The pipe's size changed (F_SETPIPE_SZ by anyone): the rings follow. */
static int
pm_resize(struct pipe_model *m, unsigned slots)
{
	struct pm_slot *ns;
	unsigned i, j;
	int k;

	if (slots > m->alloc) {
		for (k = 0; k < PM_HYP_MAX; k++) {
			ns = calloc(slots, sizeof *ns);
			if (ns == NULL)
				return -1;
			for (i = 0, j = m->h[k].head; i < m->h[k].n; i++,
			    j = (j + 1) % m->alloc)
				ns[i] = m->h[k].s[j];
			free(m->h[k].s);
			m->h[k].s = ns;
			m->h[k].head = 0;
		}
		m->alloc = slots;
	}
	m->slots = slots;
	return 0;
}

struct pipe_model *
pipe_model_new(int fd)
{
	struct pipe_model *m;
	long pg = sysconf(_SC_PAGESIZE);
	int cap, fl, k;

	if (pg <= 0 || (pg & (pg - 1)) != 0 ||
	    (cap = fcntl(fd, F_GETPIPE_SZ)) < pg ||
	    (fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_DIRECT) ||
	    (m = calloc(1, sizeof *m)) == NULL)
		return NULL;	/* no pipe, or packets: no pages to model */
	m->fd = fd;
	m->page = (size_t)pg;
	m->state = PM_WAIT;	/* what is in the pipe now is unknown */
	for (k = 0; k < PM_HYP_MAX; k++)
		m->h[k].s = NULL;
	if (pm_resize(m, (unsigned)((size_t)cap / m->page)) < 0) {
		pipe_model_free(m);
		return NULL;
	}
	m->nh = 1;
	(void)pipe_model_look(m);
	return m;
}

void
pipe_model_free(struct pipe_model *m)
{
	int k;

	if (m == NULL)
		return;
	for (k = 0; k < PM_HYP_MAX; k++)
		free(m->h[k].s);
	free(m);
}

int
pipe_model_look(struct pipe_model *m)
{
	int cap, u, k;

	if (m->state == PM_OFF)
		return -1;
	if ((cap = fcntl(m->fd, F_GETPIPE_SZ)) < (int)m->page ||
	    ioctl(m->fd, FIONREAD, &u) < 0 || u < 0 ||
	    pm_resize(m, (unsigned)((size_t)cap / m->page)) < 0) {
		m->state = PM_OFF;
		return -1;
	}
	if (u == 0) {
		pm_reset(m);
		return 0;
	}
	if (m->state != PM_ON)
		return -1;
	for (k = 0; k < m->nh; k++)
		if (m->h[k].n > m->slots) {	/* cannot be: not known */
			m->state = PM_WAIT;
			return -1;
		}
	if ((uint64_t)u > m->unread) {	/* bytes not ours: another writer */
		m->state = PM_OFF;
		return -1;
	}
	for (k = 0; k < m->nh; k++)
		pm_consume(m, &m->h[k], m->unread - (uint64_t)u);
	m->unread = (uint64_t)u;
	return 0;
}

int
pipe_model_fits(const struct pipe_model *m, size_t n, size_t keep)
{
	const struct pm_hyp *h;
	size_t need, left, end, c = n & (m->page - 1);
	int k;

	if (m->state != PM_ON)
		return -1;
	for (k = 0; k < m->nh; k++) {
		h = &m->h[k];
		need = pm_need(m, h, n);
		if (need > m->slots - h->n)
			return 0;
		left = m->slots - h->n - need;
		if (keep == 0 || n == 0 || left >= (keep + m->page - 1) /
		    m->page)
			continue;
		/* a small pipe: the final lines go behind the last page */
		if (pm_merges(m, h, n))
			end = n < m->page ? pm_last(m, h)->end + c : m->page;
		else
			end = c > 0 ? c : m->page;
		if (keep >= m->page || end + keep > m->page)
			return 0;
	}
	return 1;
}

size_t
pipe_model_room(const struct pipe_model *m, size_t keep)
{
	size_t best = SIZE_MAX, free_, rs = (keep + m->page - 1) / m->page;
	int k;

	if (m->state != PM_ON)
		return 0;
	for (k = 0; k < m->nh; k++) {
		free_ = m->slots - m->h[k].n;
		free_ = free_ > rs ? free_ - rs : 0;
		if (free_ * m->page < best)
			best = free_ * m->page;
	}
	return best;
}

int
pipe_model_wrote(struct pipe_model *m, size_t n, size_t r)
{
	uint64_t before = m->unread, d;
	struct pm_hyp *b;
	size_t least = SIZE_MAX, t;
	int64_t got;
	int k, merged = 0, u;

	if (m->state != PM_ON || r == 0)
		return m->state == PM_OFF ? -1 : 0;
	for (k = 0; k < m->nh; k++) {
		t = pm_takes(m, &m->h[k], n);
		least = t < least ? t : least;
		merged |= before > 0 && pm_merges(m, &m->h[k], n);
	}
	/* less than every layout would take: bytes not ours in the pipe */
	if (r < least || ioctl(m->fd, FIONREAD, &u) < 0 || u < 0 ||
	    (uint64_t)u > before + r) {
		m->state = PM_OFF;
		return -1;
	}
	d = before + r - (uint64_t)u;	/* read since the look before */
	for (k = m->nh - 1; k >= 0; k--) {
		if (d == 0 && pm_takes(m, &m->h[k], n) != r) {
			pm_drop_hyp(m, k);	/* not what the pipe holds */
			continue;
		}
		got = pm_apply(m, &m->h[k], n, r);
		if (got < 0 || (uint64_t)got > d)
			pm_drop_hyp(m, k);
		else
			pm_consume(m, &m->h[k], d - (uint64_t)got);
	}
	/* the reader may have emptied the pipe before the write: then its
	 * remainder went into a fresh page */
	if (merged && d >= before) {
		if (m->nh == PM_HYP_MAX) {
			m->state = PM_WAIT;
			m->unread = (uint64_t)u;
			if (u == 0)
				pm_reset(m);
			return 0;
		}
		b = &m->h[m->nh++];
		b->head = b->n = 0;
		if (pm_apply(m, b, n, r) != 0)
			m->nh--;
		else
			pm_consume(m, b, d - before);
		for (k = 0; k < m->nh - 1; k++)
			if (pm_same(m, &m->h[k], &m->h[m->nh - 1])) {
				m->nh--;	/* that layout was known */
				break;
			}
	}
	m->unread = (uint64_t)u;
	if (m->nh == 0) {
		m->state = PM_OFF;
		return -1;
	}
	if (u == 0)
		pm_reset(m);
	return 0;
}

unsigned
pipe_model_used(const struct pipe_model *m)
{
	unsigned most = 0;
	int k;

	if (m->state != PM_ON)
		return UINT_MAX;
	for (k = 0; k < m->nh; k++)
		most = m->h[k].n > most ? m->h[k].n : most;
	return most;
}

unsigned
pipe_model_slots(const struct pipe_model *m)
{
	return m->slots;
}

size_t
pipe_model_page(const struct pipe_model *m)
{
	return m->page;
}
