/*
 * sse.c - incremental Server-Sent Events parser (see sse.h).
 *
 * The machine keeps one partial line and the fields of the event being
 * built. sse_feed() cuts its input at line terminators; whatever precedes
 * a terminator is appended to the line, and the terminator processes it.
 * A CR is a terminator on its own, so a CRLF pair split across two chunks
 * is handled by remembering that the last byte was a CR and swallowing
 * one LF at the start of the next chunk. Comment lines are recognised by
 * their first byte and never buffered, so a long comment costs nothing.
 * A line that lies whole within one chunk is processed in place; only a
 * line split across chunks is gathered in the line buffer. Terminators
 * are found with memchr(), which is much faster than a byte loop on the
 * long data lines of a streamed response.
 *
 * Limits: the data buffer never exceeds max_event + 1 bytes (the joined
 * data plus its trailing "\n"), and a line never exceeds max_event plus a
 * little room for its field name, so a hostile stream is refused, not
 * buffered.
 */
#include "supervisor/model/sse.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

#define SSE_LINE_SLACK	16		/* "data: " and friends */
#define SSE_BOM_LEN	3
#define SSE_BOM_DONE	(SSE_BOM_LEN + 1)

static const char sse_bom[SSE_BOM_LEN] = { '\xef', '\xbb', '\xbf' };

struct sse {
	sse_event_fn *fn;
	void *ctx;
	size_t max_event;
	size_t max_line;
	int error;		/* sticky enum sse_result, 0 if none */
	unsigned bom;		/* BOM bytes matched; SSE_BOM_DONE after */
	int after_cr;		/* last byte was CR: swallow one LF */
	int comment;		/* the current line is a comment */
	int pending;		/* data/event field since the last blank */
	long long retry;	/* -1 until a valid retry field */
	struct buf line;	/* limited to max_line */
	struct buf data;
	struct buf type;
	struct buf id;
};

typedef int sse_field_fn(struct sse *, const char *, size_t);

static int sse_set_data(struct sse *, const char *, size_t);
static int sse_set_event(struct sse *, const char *, size_t);
static int sse_set_id(struct sse *, const char *, size_t);
static int sse_set_retry(struct sse *, const char *, size_t);

/* The fields the standard defines; every other field name is ignored. */
static const struct sse_field {
	const char *name;
	size_t len;
	sse_field_fn *set;
} sse_fields[] = {
	{ "data",	4,	sse_set_data },
	{ "event",	5,	sse_set_event },
	{ "id",		2,	sse_set_id },
	{ "retry",	5,	sse_set_retry },
};

/* Replaces b's bytes with p[0..n). */
static int
sse_buf_set(struct buf *b, const char *p, size_t n)
{
	buf_reset(b);
	return buf_append(b, p, n);
}

static int
sse_set_data(struct sse *sse, const char *v, size_t n)
{
	/* The joined data is data.len - 1 bytes once the final "\n" goes. */
	if (sse->data.len + n > sse->max_event)
		return SSE_ETOOBIG;
	if (buf_append(&sse->data, v, n) == -1 ||
	    buf_append(&sse->data, "\n", 1) == -1)
		return SSE_ENOMEM;
	sse->pending = 1;
	return SSE_OK;
}

static int
sse_set_event(struct sse *sse, const char *v, size_t n)
{
	sse->pending = 1;
	return sse_buf_set(&sse->type, v, n) == -1 ? SSE_ENOMEM : SSE_OK;
}

static int
sse_set_id(struct sse *sse, const char *v, size_t n)
{
	/* The standard ignores an id containing NUL. */
	if (memchr(v, '\0', n) != NULL)
		return SSE_OK;
	return sse_buf_set(&sse->id, v, n) == -1 ? SSE_ENOMEM : SSE_OK;
}

static int
sse_set_retry(struct sse *sse, const char *v, size_t n)
{
	long long ms = 0;
	size_t i;

	if (n == 0)
		return SSE_OK;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return SSE_OK;
		if (ms > (LLONG_MAX - 9) / 10)
			return SSE_OK;
		ms = ms * 10 + (v[i] - '0');
	}
	sse->retry = ms;
	return SSE_OK;
}

/* Process one complete, non-empty, non-comment line. */
static int
sse_field(struct sse *sse, const char *line, size_t len)
{
	const char *colon, *v;
	size_t i, nlen, vlen;

	colon = memchr(line, ':', len);
	nlen = colon != NULL ? (size_t)(colon - line) : len;
	v = colon != NULL ? colon + 1 : line + len;
	vlen = len - (size_t)(v - line);
	if (vlen > 0 && *v == ' ') {
		v++;
		vlen--;
	}
	for (i = 0; i < sizeof(sse_fields) / sizeof(sse_fields[0]); i++) {
		if (sse_fields[i].len == nlen &&
		    memcmp(sse_fields[i].name, line, nlen) == 0)
			return sse_fields[i].set(sse, v, vlen);
	}
	return SSE_OK;
}

/* A blank line: dispatch the event if it has data, then start afresh. */
static int
sse_dispatch(struct sse *sse)
{
	struct sse_event ev;
	int rc = 0;

	if (sse->data.len > 0) {
		buf_truncate(&sse->data, sse->data.len - 1); /* the final "\n" */
		ev.type = sse->type.len > 0 ? buf_str(&sse->type) : "message";
		ev.data = buf_str(&sse->data);
		ev.data_len = sse->data.len;
		ev.id = buf_str(&sse->id);
		rc = sse->fn(sse->ctx, &ev);
	}
	buf_reset(&sse->data);
	buf_reset(&sse->type);
	sse->pending = 0;
	return rc != 0 ? SSE_ESTOPPED : SSE_OK;
}

static int
sse_line_end(struct sse *sse)
{
	int rc;

	if (sse->comment) {
		sse->comment = 0;
		return SSE_OK;
	}
	if (sse->line.len == 0)
		return sse_dispatch(sse);
	rc = sse_field(sse, buf_str(&sse->line), sse->line.len);
	buf_reset(&sse->line);
	return rc;
}

/* Append n bytes without a line terminator to the current line. */
static int
sse_line_add(struct sse *sse, const char *p, size_t n)
{
	if (n == 0 || sse->comment)
		return SSE_OK;
	if (sse->line.len == 0 && p[0] == ':') {
		sse->comment = 1;
		return SSE_OK;
	}
	if (buf_append(&sse->line, p, n) == -1)
		return errno == EMSGSIZE ? SSE_ETOOBIG : SSE_ENOMEM;
	return SSE_OK;
}

/* The offset of the first CR or LF in p[0..n), or n if there is none. */
static size_t
sse_eol(const char *p, size_t n)
{
	const char *lf = memchr(p, '\n', n), *cr;

	if (lf != NULL)
		n = (size_t)(lf - p);
	cr = memchr(p, '\r', n);
	return cr != NULL ? (size_t)(cr - p) : n;
}

/* A line p[0..k) found whole in the chunk, nothing buffered before it:
 * what sse_line_add() then sse_line_end() do, without the copy. */
static int
sse_line_whole(struct sse *sse, const char *p, size_t k)
{
	if (k == 0)
		return sse_dispatch(sse);
	if (p[0] == ':')
		return SSE_OK;
	if (k > sse->max_line)
		return SSE_ETOOBIG;
	return sse_field(sse, p, k);
}

/*
 * Consume bytes up to and including the first line terminator in p[0..n).
 * Returns the number of bytes consumed (at least 1); errors go to
 * sse->error.
 */
static size_t
sse_scan(struct sse *sse, const char *p, size_t n)
{
	size_t k;
	int rc;

	if (sse->after_cr) {
		sse->after_cr = 0;
		if (p[0] == '\n')
			return 1;
	}
	k = sse_eol(p, n);
	if (k < n && sse->line.len == 0 && !sse->comment) {
		sse->after_cr = p[k] == '\r';
		if ((rc = sse_line_whole(sse, p, k)) != SSE_OK)
			sse->error = rc;
		return k + 1;
	}
	if ((rc = sse_line_add(sse, p, k)) != SSE_OK) {
		sse->error = rc;
		return n;
	}
	if (k == n)
		return n;
	sse->after_cr = p[k] == '\r';
	if ((rc = sse_line_end(sse)) != SSE_OK)
		sse->error = rc;
	return k + 1;
}

/*
 * Match a BOM at stream start, across chunks. Returns how many bytes of
 * p were consumed by the match; on a mismatch the bytes matched so far
 * are ordinary line bytes and are fed back.
 */
static size_t
sse_skip_bom(struct sse *sse, const char *p, size_t n)
{
	size_t i = 0;
	unsigned matched;

	while (i < n && sse->bom < SSE_BOM_LEN && p[i] == sse_bom[sse->bom]) {
		sse->bom++;
		i++;
	}
	if (sse->bom == SSE_BOM_LEN) {
		sse->bom = SSE_BOM_DONE;
	} else if (i < n) {
		matched = sse->bom;
		sse->bom = SSE_BOM_DONE;
		if (matched > 0)
			sse->error = sse_line_add(sse, sse_bom, matched);
	}
	return i;
}

struct sse *
sse_new(sse_event_fn *fn, void *ctx, size_t max_event)
{
	struct sse *sse;

	if (fn == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((sse = calloc(1, sizeof(*sse))) == NULL)
		return NULL;
	if (max_event == 0)
		max_event = SSE_MAX_EVENT_DEFAULT;
	if (max_event > SIZE_MAX / 4)
		max_event = SIZE_MAX / 4;
	sse->fn = fn;
	sse->ctx = ctx;
	sse->max_event = max_event;
	sse->max_line = max_event + SSE_LINE_SLACK;
	buf_set_max(&sse->line, sse->max_line);
	sse->retry = -1;
	return sse;
}

void
sse_free(struct sse *sse)
{
	if (sse == NULL)
		return;
	buf_clear(&sse->line);
	buf_clear(&sse->data);
	buf_clear(&sse->type);
	buf_clear(&sse->id);
	free(sse);
}

int
sse_feed(struct sse *sse, const char *p, size_t n)
{
	size_t i = 0;

	if (sse->error != SSE_OK)
		return sse->error;
	if (sse->bom != SSE_BOM_DONE)
		i = sse_skip_bom(sse, p, n);
	while (i < n && sse->error == SSE_OK)
		i += sse_scan(sse, p + i, n - i);
	return sse->error;
}

int
sse_finish(struct sse *sse)
{
	int rc;

	if (sse->error != SSE_OK)
		return sse->error;
	/* A partly matched BOM is the start of an unterminated line. */
	rc = (sse->pending || sse->line.len > 0 ||
	    (sse->bom > 0 && sse->bom < SSE_BOM_LEN)) ? SSE_PARTIAL : SSE_OK;
	buf_reset(&sse->line);
	buf_reset(&sse->data);
	buf_reset(&sse->type);
	sse->pending = 0;
	sse->comment = 0;
	sse->after_cr = 0;
	sse->bom = 0;
	return rc;
}

const char *
sse_last_id(const struct sse *sse)
{
	return buf_str(&sse->id);
}

long long
sse_retry_ms(const struct sse *sse)
{
	return sse->retry;
}

const char *
sse_strerror(int result)
{
	switch (result) {
	case SSE_OK:
		return "ok";
	case SSE_PARTIAL:
		return "stream ended mid-event";
	case SSE_ETOOBIG:
		return "event exceeds the size limit";
	case SSE_ENOMEM:
		return "out of memory";
	case SSE_ESTOPPED:
		return "stopped by the event handler";
	default:
		return "unknown SSE result";
	}
}
