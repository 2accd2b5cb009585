/*
 * buf.h - the one growable, length-carrying byte buffer (sds/ibuf style)
 * both binaries build frames, lines and bodies in.
 *
 * len is the truth: the bytes may hold NULs. Once a buffer has memory,
 * data[len] is always a NUL, so buf_str() can hand text to C string
 * functions without a copy. Capacity grows by doubling (appends are
 * amortised O(1)). An optional limit caps len: an append past it fails
 * with EMSGSIZE and leaves the buffer as it was, so a hostile peer is
 * refused before anything grows. A zeroed struct is an empty buffer with
 * no limit; buf_clear() frees and leaves it so.
 *
 * A reader may take bytes off the front without moving the rest (imsg's
 * ibuf rpos): buf_skip() advances the read position, buf_rdata() and
 * buf_rlen() are the bytes not read yet, and the read prefix is dropped
 * only when an append needs its room (one move per refill, not one per
 * partial write or popped frame). The limit counts the unread bytes.
 * Code that reads data/len directly must not mix in buf_skip().
 *
 * Never logs, never exits (proto/ is fuzzed through it).
 */
#ifndef AGENTZ_BUF_H
#define AGENTZ_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;		/* NULL until the first byte; then NUL at len */
	size_t len;
	size_t cap;		/* bytes allocated, the NUL's included */
	size_t max;		/* most unread bytes allowed; 0 for no limit */
	size_t rpos;		/* bytes at the front already read (buf_skip) */
};

void buf_init(struct buf *b);		/* empty, no limit */
void buf_clear(struct buf *b);		/* frees; the limit is kept */
/* Empties b, keeping its memory and limit. */
void buf_reset(struct buf *b);
/* Caps the unread bytes at max (0: no limit). Bytes already held stay. */
void buf_set_max(struct buf *b, size_t max);

/*
 * Makes room for n more bytes (and the NUL). Returns 0, or -1 with errno
 * ENOMEM, or EMSGSIZE when the unread bytes + n would pass the limit; b
 * holds the same unread bytes then. The old data pointer is invalid after
 * (the read prefix may have been dropped).
 */
int buf_reserve(struct buf *b, size_t n);
/* Appends n bytes from p (p may be NULL when n is 0); errors as above. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_append_str(struct buf *b, const char *s);
/* Removes the first n unread bytes (all when n >= that); the rest moves
 * down to data[0]. */
void buf_consume(struct buf *b, size_t n);
/* Marks the first n unread bytes read (all when n >= that), in O(1); a
 * buffer read to its end is emptied as buf_consume() empties it. */
void buf_skip(struct buf *b, size_t n);
/* The unread bytes: buf_rlen() of them at buf_rdata() (NULL when none
 * was ever appended). */
static inline const uint8_t *
buf_rdata(const struct buf *b)
{
	return b->data != NULL ? b->data + b->rpos : NULL;
}
static inline size_t
buf_rlen(const struct buf *b)
{
	return b->len - b->rpos;
}
/* Shortens b to len bytes (no-op when len >= b->len). */
void buf_truncate(struct buf *b, size_t len);

/* The bytes as a NUL-terminated string, borrowed; "" when empty. */
const char *buf_str(const struct buf *b);
/*
 * Hands the bytes over as a NUL-terminated string the caller frees, with
 * its length in *len when len is not NULL, and empties b (limit kept).
 * NULL with errno ENOMEM when an empty buffer cannot get its one byte.
 */
char *buf_detach(struct buf *b, size_t *len);

#endif
