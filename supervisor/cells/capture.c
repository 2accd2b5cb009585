/*
 * capture.c - head + tail output capture (see capture.h).
 */
#include "supervisor/cells/capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
capture_init(struct capture *c, size_t limit)
{
	memset(c, 0, sizeof *c);
	c->limit = limit;
}

void
capture_clear(struct capture *c)
{
	free(c->head);
	free(c->tail);
	capture_init(c, c->limit);
}

static size_t
head_max(const struct capture *c)
{
	return c->limit / 2;
}

static size_t
tail_max(const struct capture *c)
{
	return c->limit - c->limit / 2;
}

static void
tail_put(struct capture *c, const char *p, size_t n)
{
	size_t cap = tail_max(c), pos, chunk;

	if (n >= cap) {		/* only the last cap bytes survive */
		memcpy(c->tail, p + n - cap, cap);
		c->tail_start = 0;
		c->tail_len = cap;
		return;
	}
	while (n > 0) {
		pos = (c->tail_start + c->tail_len) % cap;
		chunk = cap - pos < n ? cap - pos : n;
		memcpy(c->tail + pos, p, chunk);
		if (c->tail_len + chunk > cap) {
			c->tail_start = (c->tail_start + c->tail_len + chunk -
			    cap) % cap;
			c->tail_len = cap;
		} else {
			c->tail_len += chunk;
		}
		p += chunk;
		n -= chunk;
	}
}

int
capture_append(struct capture *c, const char *p, size_t n)
{
	size_t room;

	c->total += n;
	if (c->frozen) {
		c->dropped += n;
		return 0;
	}
	if (c->head == NULL && head_max(c) > 0) {
		c->head = malloc(head_max(c));
		if (c->head == NULL)
			return -1;
	}
	room = head_max(c) - c->head_len;
	if (room > n)
		room = n;
	if (room > 0) {
		/* room > 0: head_max(c) > 0, so head was allocated above */
		/* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
		memcpy(c->head + c->head_len, p, room);
		c->head_len += room;
		p += room;
		n -= room;
	}
	if (n == 0 || tail_max(c) == 0)
		return 0;
	if (c->tail == NULL && (c->tail = malloc(tail_max(c))) == NULL)
		return -1;
	tail_put(c, p, n);
	return 0;
}

uint64_t
capture_dropped(const struct capture *c)
{
	if (c->frozen)
		return c->dropped;
	return c->total - c->head_len - c->tail_len;
}

char *
capture_text(const struct capture *c, size_t *len)
{
	char marker[64];
	size_t mlen = 0, cap = tail_max(c), first, n;
	char *s;

	if (c->frozen) {
		s = malloc(c->head_len + 1);
		if (s == NULL)
			return NULL;
		if (c->head_len > 0)
			memcpy(s, c->head, c->head_len);
		s[c->head_len] = '\0';
		*len = c->head_len;
		return s;
	}
	if (capture_dropped(c) > 0)
		mlen = (size_t)snprintf(marker, sizeof marker,
		    "\n[... %llu bytes dropped ...]\n",
		    (unsigned long long)capture_dropped(c));
	n = c->head_len + mlen + c->tail_len;
	s = malloc(n + 1);
	if (s == NULL)
		return NULL;
	if (c->head_len > 0)
		memcpy(s, c->head, c->head_len);
	memcpy(s + c->head_len, marker, mlen);
	if (c->tail_len > 0) {
		first = cap - c->tail_start < c->tail_len ?
		    cap - c->tail_start : c->tail_len;
		memcpy(s + c->head_len + mlen, c->tail + c->tail_start, first);
		memcpy(s + c->head_len + mlen + first, c->tail,
		    c->tail_len - first);
	}
	s[n] = '\0';
	*len = n;
	return s;
}

int
capture_freeze(struct capture *c)
{
	uint64_t dropped;
	size_t len;
	char *text;

	if (c->frozen)
		return 0;
	dropped = capture_dropped(c);
	if ((text = capture_text(c, &len)) == NULL)
		return -1;
	free(c->head);
	free(c->tail);
	c->head = text;
	c->head_len = len;
	c->tail = NULL;
	c->tail_start = c->tail_len = 0;
	c->dropped = dropped;
	c->frozen = 1;
	return 0;
}

int
capture_restore(struct capture *c, const char *text, size_t len,
    uint64_t total, uint64_t dropped)
{
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return -1;
	memcpy(copy, text, len);
	copy[len] = '\0';
	capture_clear(c);
	c->head = copy;
	c->head_len = len;
	c->total = total;
	c->dropped = dropped;
	c->frozen = 1;
	return 0;
}

size_t
capture_bytes(const struct capture *c)
{
	if (c->frozen)
		return c->head != NULL ? c->head_len + 1 : 0;
	return (c->head != NULL ? c->limit / 2 : 0) +
	    (c->tail != NULL ? c->limit - c->limit / 2 : 0);
}
