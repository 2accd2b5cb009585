/*
 * redact.h - replace secret values with "[REDACTED]" in every string the
 * supervisor shows, records or returns to the model.
 *
 * A struct redact is a set of secret values (byte strings, NUL allowed).
 * Text is redacted either in one shot (redact_string) or as a stream fed
 * in chunks of any size (struct redact_stream), for a cell's stdout and
 * stderr and for streamed model text. Both give byte-identical results for
 * the same input however the stream is chunked.
 *
 * What is replaced: every byte that lies inside some occurrence of some
 * secret is hidden. Occurrences that overlap (share at least one byte),
 * such as a secret and a longer secret it is a prefix of, or two
 * occurrences of "abab" in "ababab", become one marker, so no piece of any
 * occurrence survives. Occurrences that merely touch ("KEY1KEY2") give one
 * marker each. Wherever occurrences do not overlap this is the same as
 * replacing the longest match first, left to right.
 *
 * A stream holds back only the longest suffix of what it was fed that is a
 * proper prefix of some secret (at most longest-secret - 1 bytes) and emits
 * the rest at once, redacted; so a secret split across any number of
 * chunks is never emitted in clear.
 */
#ifndef AGENTZ_REDACT_H
#define AGENTZ_REDACT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* What each hidden stretch is replaced by. */
#define REDACT_MARKER		"[REDACTED]"
#define REDACT_MARKER_LEN	(sizeof(REDACT_MARKER) - 1)

/*
 * Values shorter than this are ignored by redact_add(). A 1-3 byte value
 * ("1", "yes", "dev") is no credential, and it occurs by chance all over
 * any output: hiding every "1" would destroy the output, and the pattern
 * of markers would itself reveal the value.
 */
#define REDACT_MIN_LEN		4

/*
 * Receives redacted output. p[0..n) is borrowed for the call only; n is
 * never 0. Return 0 to go on, or -1 with errno set to stop: the feed or
 * flush that called it then fails with that errno, and so does every
 * later call on the same stream (the error is sticky).
 */
typedef int redact_emit_fn(void *ctx, const char *p, size_t n);

/* A redact_emit_fn appending to the struct buf ctx (see common/buf.h). */
int redact_emit_buf(void *ctx, const char *p, size_t n);

struct redact;
struct redact_run;

/*
 * Per-stream state, embedded by the owner; the fields are private. It
 * refers to no particular struct redact, but must be fed with the same one
 * from redact_stream_init() to redact_stream_flush().
 */
struct redact_stream {
	uint32_t		 state;		/* automaton node */
	int			 err;		/* sticky errno, 0 if none */
	uint64_t		 pos;		/* bytes fed since init/flush */
	uint64_t		 done;		/* bytes emitted or hidden */
	struct buf		 hold;		/* bytes [done, pos) */
	struct redact_run	*runs;		/* hidden stretches not done */
	size_t			 runs_head, runs_len, runs_cap;
};

/* An empty set. NULL / ENOMEM. */
struct redact *redact_new(void);

/* Free the set; NULL is allowed. No stream may use it afterwards. */
void redact_free(struct redact *r);

/*
 * Add the secret value[0..len) (need not be NUL-terminated, may contain
 * NUL bytes). Values shorter than REDACT_MIN_LEN are ignored and adding a
 * value twice is harmless; both return 0. -1 / ENOMEM, after which the
 * value may not be redacted (the rest of the set still is); treat it as
 * fatal.
 *
 * The set may grow while streams are in use: every secret added before
 * is still redacted in them; the new one is redacted from the stream's
 * next bytes, but one occurrence that began before the add may be missed.
 * Add secrets before any output flows.
 */
int redact_add(struct redact *r, const char *value, size_t len);

/*
 * Add the value of every "NAME=value" entry of the NULL-terminated array
 * envp (e.g. environ) whose NAME secrets_is_secret_name() calls a secret.
 * Entries without '=' are skipped; envp may be NULL. 0, or -1 / ENOMEM as
 * for redact_add().
 */
int redact_add_from_environ(struct redact *r, char **envp);

/*
 * The secret set of a run, the same for an agent run and `agentz exec`:
 * every secret variable of envp (after ./.env and the systemd credential
 * were loaded into it). NULL / ENOMEM.
 */
struct redact *redact_new_from_environ(char **envp);

/* The number of distinct secrets held (ignored short values not counted). */
size_t redact_count(const struct redact *r);

/*
 * A redacted copy of p[0..n) (p may be NULL when n is 0). The result is
 * malloc'ed and owned by the caller, NUL-terminated for convenience, but
 * *outlen (if outlen is not NULL) is authoritative: the text may contain
 * NUL bytes. NULL / ENOMEM.
 */
char *redact_string(const struct redact *r, const char *p, size_t n,
    size_t *outlen);

/* Initialise an empty stream. Cannot fail; allocates nothing. */
void redact_stream_init(struct redact_stream *st);

/* Free the stream's buffers, dropping anything held back unseen (call
 * redact_stream_flush() first to get it), and re-initialise it. */
void redact_stream_clear(struct redact_stream *st);

/*
 * Feed n more bytes of the stream (p may be NULL when n is 0). Calls emit
 * zero or more times with the redacted output that is now certain, in
 * order, before returning. 0, or -1 with errno: ENOMEM, or the errno of a
 * failed emit. Errors are sticky: the stream then only fails, until
 * redact_stream_clear().
 */
int redact_stream_feed(const struct redact *r, struct redact_stream *st,
    const char *p, size_t n, redact_emit_fn *emit, void *ctx);

/*
 * End of stream: emit everything held back, redacted (no more bytes can
 * come to complete a secret it begins). The stream is then ready for a new
 * stream, keeping its buffers. 0, or -1 with the sticky errno.
 */
int redact_stream_flush(struct redact_stream *st, redact_emit_fn *emit,
    void *ctx);

#endif
