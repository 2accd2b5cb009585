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
	size_t max;		/* longest len allowed; 0 for no limit */
};

void buf_init(struct buf *b);		/* empty, no limit */
void buf_clear(struct buf *b);		/* frees; the limit is kept */
/* Empties b, keeping its memory and limit. */
void buf_reset(struct buf *b);
/* Caps len at max bytes (0: no limit). Bytes already held stay. */
void buf_set_max(struct buf *b, size_t max);

/*
 * Makes room for n more bytes (and the NUL). Returns 0, or -1 with errno
 * ENOMEM, or EMSGSIZE when len + n would pass the limit; b is unchanged
 * then. The old data pointer is invalid after.
 */
int buf_reserve(struct buf *b, size_t n);
/* Appends n bytes from p (p may be NULL when n is 0); errors as above. */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_append_str(struct buf *b, const char *s);
/* Removes the first n bytes (all when n >= len); the rest moves down. */
void buf_consume(struct buf *b, size_t n);
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
