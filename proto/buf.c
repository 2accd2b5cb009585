/*
 * buf.c - the growable, length-carrying byte buffer frames are built in
 * and read into. Wire bytes never rely on a terminating NUL; len is the
 * truth. Capacity grows by doubling so appends are amortised O(1).
 */
#include "proto/proto.h"

#include <errno.h>
#include <stdint.h>
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
}

void
buf_clear(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

/* Makes room for n more bytes. The old data pointer is invalid after. */
static int
buf_grow(struct buf *b, size_t n)
{
	size_t need, cap;
	uint8_t *p;

	if (n > SIZE_MAX - b->len) {
		errno = ENOMEM;
		return -1;
	}
	need = b->len + n;
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
	return 0;
}

/*
 * Appends n bytes from p (p may be NULL when n is 0). Returns 0, or -1 with
 * errno ENOMEM, leaving b unchanged. The old data pointer is invalid after.
 */
int
buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (buf_grow(b, n) == -1)
		return -1;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/*
 * Removes the first n bytes (n <= len) and moves the rest to the front.
 * When that empties a large buffer its memory is freed, so one big frame
 * does not pin its size for the life of the channel.
 */
void
buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		if (b->cap > BUF_KEEP_CAP)
			buf_clear(b);
		else
			b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}
