/*
 * buf.c - the growable, length-carrying byte buffer (see buf.h). Frames,
 * SSE lines, redacted text and HTTP error bodies are built in it.
 */
#include "common/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN_CAP	256
/* An emptied buffer larger than this gives its memory back. */
#define BUF_KEEP_CAP	((size_t)1 << 20)

void
buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = 0;
	b->rpos = 0;
}

void
buf_clear(struct buf *b)
{
	size_t max = b->max;

	free(b->data);
	buf_init(b);
	b->max = max;
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	b->rpos = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

void
buf_set_max(struct buf *b, size_t max)
{
	b->max = max;
}

/* Drops the read prefix: the unread bytes move down to data[0]. */
static void
buf_compact(struct buf *b)
{
	if (b->rpos == 0)
		return;
	memmove(b->data, b->data + b->rpos, b->len - b->rpos);
	b->len -= b->rpos;
	b->rpos = 0;
	b->data[b->len] = '\0';
}

int
buf_reserve(struct buf *b, size_t n)
{
	size_t need, cap;
	uint8_t *p;

	if (n > SIZE_MAX - 1 - b->len) {
		errno = ENOMEM;
		return -1;
	}
	if (b->max != 0 && buf_rlen(b) + n > b->max) {
		errno = EMSGSIZE;
		return -1;
	}
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	buf_compact(b);		/* the read prefix's room first */
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap > 0 ? b->cap : BUF_MIN_CAP;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if ((p = realloc(b->data, cap)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (buf_reserve(b, n) == -1)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
buf_append_str(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

/*
 * When emptying a large buffer its memory is freed, so one big frame does
 * not pin its size for the life of the channel.
 */
void
buf_consume(struct buf *b, size_t n)
{
	buf_skip(b, n);
	buf_compact(b);
}

void
buf_skip(struct buf *b, size_t n)
{
	if (n >= buf_rlen(b)) {
		if (b->cap > BUF_KEEP_CAP)
			buf_clear(b);
		else
			buf_reset(b);
		return;
	}
	b->rpos += n;
}

void
buf_truncate(struct buf *b, size_t len)
{
	if (len >= b->len)
		return;
	if (b->rpos > len)
		b->rpos = len;
	b->len = len;
	b->data[len] = '\0';
}

const char *
buf_str(const struct buf *b)
{
	return b->data != NULL ? (const char *)b->data : "";
}

char *
buf_detach(struct buf *b, size_t *len)
{
	char *s;

	if (b->data == NULL && (b->data = malloc(1)) != NULL)
		b->data[0] = '\0';
	if (b->data == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	buf_compact(b);
	s = (char *)b->data;
	if (len != NULL)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = b->rpos = 0;
	return s;
}
