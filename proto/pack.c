/*
 * pack.c - message bodies to and from msgpack (the only <msgpack.h> user).
 *
 * Every message is described once, as data: a row per wire type giving its
 * name, direction and field list (kind, where it lives in struct msg, and
 * the largest value a uint may take). msg_encode and msg_decode are loops
 * over that list, so a field cannot be packed one way and unpacked another.
 *
 * Decoding is strict: the body is one array with exactly the listed count,
 * each field has exactly its wire type, and nothing follows the array.
 * The array header is read here rather than by msgpack-c, and a field that
 * starts with an array or map header is refused before msgpack-c sees it:
 * msgpack-c allocates count * sizeof(msgpack_object) as soon as it reads a
 * container header, before checking the elements exist, so six hostile
 * bytes could ask it for 100 GB. Scalars (uint, str, bin) reference the
 * input and allocate next to nothing, which keeps decoding memory bounded
 * by the body length.
 */
#include "proto/proto.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

enum field_kind {
	FIELD_END,	/* terminates a field list */
	FIELD_UINT,	/* msgpack positive integer, at most max */
	FIELD_STR,	/* msgpack str into a struct bytes */
	FIELD_BIN	/* msgpack bin into a struct bytes */
};

struct field {
	enum field_kind kind;
	size_t off;	/* of the member in struct msg */
	size_t width;	/* sizeof the member, for FIELD_UINT */
	uint64_t max;	/* for FIELD_UINT */
};

#define MEMBER(m, f)	offsetof(struct msg, u.m.f), \
			sizeof(((struct msg *)NULL)->u.m.f)
#define F_UINT(m, f, max) { FIELD_UINT, MEMBER(m, f), max }
#define F_STR(m, f)	{ FIELD_STR, MEMBER(m, f), 0 }
#define F_BIN(m, f)	{ FIELD_BIN, MEMBER(m, f), 0 }
#define F_END		{ FIELD_END, 0, 0, 0 }

/* Field lists in wire order; they must match the table in proto.h. */
static const struct field fields_READY[] = {
	F_UINT(ready, version, UINT32_MAX),
	F_UINT(ready, pid, UINT32_MAX),
	F_STR(ready, python_version),
	F_STR(ready, sandbox),
	F_END
};
static const struct field fields_EXEC[] = {
	F_UINT(exec, cell, UINT32_MAX),
	F_BIN(exec, code),
	F_END
};
static const struct field fields_DONE[] = {
	F_UINT(done, cell, UINT32_MAX),
	F_UINT(done, status, DONE_STATUS_MAX),
	F_STR(done, exception_type),
	F_STR(done, traceback),
	F_END
};
static const struct field fields_REQUEST[] = {
	F_UINT(request, id, UINT64_MAX),
	F_UINT(request, cell, UINT32_MAX),
	F_STR(request, method),
	F_BIN(request, body),
	F_END
};
static const struct field fields_REPLY[] = {
	F_UINT(reply, id, UINT64_MAX),
	F_UINT(reply, status, REPLY_STATUS_MAX),
	F_BIN(reply, body),
	F_END
};
static const struct field fields_EVENT[] = {
	F_UINT(event, id, UINT64_MAX),
	F_BIN(event, body),
	F_END
};
static const struct field fields_SHUTDOWN[] = {
	F_END
};
static const struct field fields_SNAP[] = {
	F_UINT(snap, cell, UINT32_MAX),
	F_END
};
static const struct field fields_PIPES[] = {
	F_END
};
static const struct field fields_SNAPPED[] = {
	F_UINT(snapped, cell, UINT32_MAX),
	F_UINT(snapped, pid, UINT32_MAX),
	F_STR(snapped, threads),
	F_STR(snapped, error),
	F_END
};

struct msg_desc {
	const char *name;
	int dir;
	const struct field *fields;
};

static const struct msg_desc msg_descs[] = {
#define X(name, num, dir) [num] = { #name, dir, fields_##name },
	MSG_LIST(X)
#undef X
};

#define NDESCS (sizeof(msg_descs) / sizeof(msg_descs[0]))

static const struct msg_desc *
desc_lookup(unsigned type)
{
	if (type >= NDESCS || msg_descs[type].name == NULL)
		return NULL;
	return &msg_descs[type];
}

static size_t
field_count(const struct field *f)
{
	size_t n = 0;

	while (f[n].kind != FIELD_END)
		n++;
	return n;
}

static uint64_t
uint_get(const struct msg *m, const struct field *f)
{
	const char *p = (const char *)m + f->off;
	uint32_t v32;
	uint64_t v64;

	if (f->width == sizeof(v32)) {
		memcpy(&v32, p, sizeof(v32));
		return v32;
	}
	memcpy(&v64, p, sizeof(v64));
	return v64;
}

static void
uint_put(struct msg *m, const struct field *f, uint64_t v)
{
	char *p = (char *)m + f->off;
	uint32_t v32;

	if (f->width == sizeof(v32)) {
		v32 = (uint32_t)v;	/* v <= f->max <= UINT32_MAX */
		memcpy(p, &v32, sizeof(v32));
	} else
		memcpy(p, &v, sizeof(v));
}

static const struct bytes *
bytes_get(const struct msg *m, const struct field *f)
{
	return (const struct bytes *)(const void *)((const char *)m + f->off);
}

static struct bytes *
bytes_ref(struct msg *m, const struct field *f)
{
	return (struct bytes *)(void *)((char *)m + f->off);
}

/*
 * Returns "READY", "EXEC", ... for a wire number in MSG_LIST, "?" for any
 * other. The string is static.
 */
const char *
msg_name(unsigned type)
{
	const struct msg_desc *d = desc_lookup(type);

	return d != NULL ? d->name : "?";
}

/* Returns MSG_W2S or MSG_S2W for a known wire number, 0 for any other. */
int
msg_direction(unsigned type)
{
	const struct msg_desc *d = desc_lookup(type);

	return d != NULL ? d->dir : 0;
}

/*
 * Frees every byte string m owns and zeroes m. Accepts a zeroed msg, and a
 * msg whose byte strings are all NULL.
 */
void
msg_clear(struct msg *m)
{
	const struct msg_desc *d = desc_lookup(m->type);

	if (d != NULL) {
		const struct field *f;

		for (f = d->fields; f->kind != FIELD_END; f++)
			if (f->kind != FIELD_UINT)
				free(bytes_ref(m, f)->ptr);
	}
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- encode */

struct pack_ctx {
	struct buf *out;
	size_t body;	/* offset of the body in out */
	size_t limit;	/* largest body allowed */
	int err;
};

/* msgpack_packer callback: bounded append, so EMSGSIZE comes before the
 * allocation that would have held the oversized body. */
static int
pack_write(void *data, const char *p, size_t n)
{
	struct pack_ctx *c = data;

	if (n > c->limit - (c->out->len - c->body)) {
		c->err = EMSGSIZE;
		return -1;
	}
	if (buf_append(c->out, p, n) == -1) {
		c->err = ENOMEM;
		return -1;
	}
	return 0;
}

/* Refuses what the wire cannot carry: statuses out of range, a byte
 * string with no bytes behind it, or longer than a msgpack str32/bin32. */
static int
check_fields(const struct msg *m, const struct field *f)
{
	const struct bytes *b;

	for (; f->kind != FIELD_END; f++) {
		if (f->kind == FIELD_UINT) {
			if (uint_get(m, f) > f->max)
				return EINVAL;
			continue;
		}
		b = bytes_get(m, f);
		if (b->ptr == NULL && b->len > 0)
			return EINVAL;
		if (b->len > UINT32_MAX)
			return EMSGSIZE;
	}
	return 0;
}

static int
pack_fields(msgpack_packer *pk, const struct msg *m, const struct field *f)
{
	const struct bytes *b;
	int rc = 0;

	if (msgpack_pack_array(pk, field_count(f)) != 0)
		return -1;
	for (; rc == 0 && f->kind != FIELD_END; f++) {
		switch (f->kind) {
		case FIELD_UINT:
			rc = msgpack_pack_uint64(pk, uint_get(m, f));
			break;
		case FIELD_STR:
			b = bytes_get(m, f);
			rc = msgpack_pack_str(pk, b->len);
			if (rc == 0 && b->len > 0)
				rc = msgpack_pack_str_body(pk, b->ptr, b->len);
			break;
		case FIELD_BIN:
			b = bytes_get(m, f);
			rc = msgpack_pack_bin(pk, b->len);
			if (rc == 0 && b->len > 0)
				rc = msgpack_pack_bin_body(pk, b->ptr, b->len);
			break;
		case FIELD_END:
			break;
		}
	}
	return rc == 0 ? 0 : -1;
}

/*
 * The frame header: { u32 body_len, u16 type, u16 zero }, big-endian.
 * frame.c reads what this writes.
 */
static void
put_header(uint8_t *p, uint32_t len, unsigned type)
{
	p[0] = (uint8_t)(len >> 24);
	p[1] = (uint8_t)(len >> 16);
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	p[4] = (uint8_t)(type >> 8);
	p[5] = (uint8_t)type;
	p[6] = 0;
	p[7] = 0;
}

/*
 * Appends one complete frame (header + body) for m to out. Returns 0, or -1
 * with errno EINVAL (unknown type, status out of range, NULL ptr with a
 * non-zero len), EMSGSIZE (body larger than max_frame) or ENOMEM; out's
 * length is then unchanged. The old out->data pointer is invalid after.
 */
int
msg_encode(const struct msg *m, struct buf *out, size_t max_frame)
{
	static const uint8_t zero[PROTO_HEADER_SIZE];
	const struct msg_desc *d;
	struct pack_ctx c;
	msgpack_packer pk;
	size_t start = out->len;

	if ((d = desc_lookup(m->type)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((c.err = check_fields(m, d->fields)) != 0) {
		errno = c.err;
		return -1;
	}
	if (buf_append(out, zero, sizeof(zero)) == -1)
		return -1;
	c.out = out;
	c.body = out->len;
	c.limit = max_frame < UINT32_MAX ? max_frame : UINT32_MAX;
	msgpack_packer_init(&pk, &c, pack_write);
	if (pack_fields(&pk, m, d->fields) == -1) {
		out->len = start;
		errno = c.err != 0 ? c.err : ENOMEM;
		return -1;
	}
	put_header(out->data + start, (uint32_t)(out->len - c.body), m->type);
	return 0;
}

/* ---------------------------------------------------------------- decode */

/*
 * Reads the array header at p: its element count and length. -1 if p does
 * not start with a complete array header.
 */
static int
array_header(const uint8_t *p, size_t len, uint32_t *count, size_t *hdrlen)
{
	if (len >= 1 && (p[0] & 0xf0) == 0x90) {		/* fixarray */
		*count = p[0] & 0x0f;
		*hdrlen = 1;
	} else if (len >= 3 && p[0] == 0xdc) {			/* array 16 */
		*count = (uint32_t)p[1] << 8 | p[2];
		*hdrlen = 3;
	} else if (len >= 5 && p[0] == 0xdd) {			/* array 32 */
		*count = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
		    (uint32_t)p[3] << 8 | p[4];
		*hdrlen = 5;
	} else
		return -1;
	return 0;
}

/* fixmap, fixarray, array 16/32, map 16/32: see the top of the file. */
static int
is_container(uint8_t b)
{
	return (b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf);
}

/* Copies a str/bin payload into b, NUL-terminated. 0 or -1/ENOMEM. */
static int
bytes_copy(struct bytes *b, const char *p, uint32_t len)
{
	if ((b->ptr = malloc((size_t)len + 1)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (len > 0)
		memcpy(b->ptr, p, len);
	b->ptr[len] = '\0';
	b->len = len;
	return 0;
}

/* Stores one decoded object into its field. 0, or -1 EBADMSG / ENOMEM. */
static int
put_field(struct msg *m, const struct field *f, const msgpack_object *o)
{
	switch (f->kind) {
	case FIELD_UINT:
		if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    o->via.u64 > f->max)
			break;
		uint_put(m, f, o->via.u64);
		return 0;
	case FIELD_STR:
		if (o->type != MSGPACK_OBJECT_STR)
			break;
		return bytes_copy(bytes_ref(m, f), o->via.str.ptr,
		    o->via.str.size);
	case FIELD_BIN:
		if (o->type != MSGPACK_OBJECT_BIN)
			break;
		return bytes_copy(bytes_ref(m, f), o->via.bin.ptr,
		    o->via.bin.size);
	case FIELD_END:
		break;
	}
	errno = EBADMSG;
	return -1;
}

/* Decodes each field in turn, starting at *off; see the top of the file
 * for why one msgpack_unpack_next per field. */
static int
unpack_fields(struct msg *m, const struct field *f, const uint8_t *p,
    size_t len, size_t *off)
{
	msgpack_unpacked u;
	int rc = 0;

	msgpack_unpacked_init(&u);
	for (; rc == 0 && f->kind != FIELD_END; f++) {
		if (*off >= len || is_container(p[*off]) ||
		    msgpack_unpack_next(&u, (const char *)p, len, off) !=
		    MSGPACK_UNPACK_SUCCESS) {
			errno = EBADMSG;
			rc = -1;
		} else
			rc = put_field(m, f, &u.data);
	}
	msgpack_unpacked_destroy(&u);
	return rc;
}

/*
 * Decodes one frame body of wire type `type' into m, which the caller owns
 * after success and must msg_clear. Returns 0, or -1 with errno EPROTO
 * (unknown type), EBADMSG (not one array of exactly the listed fields with
 * exactly their types and ranges, or bytes after it) or ENOMEM; m is then
 * left cleared. Byte strings are malloc'ed copies, NUL-terminated.
 */
int
msg_decode(unsigned type, const void *body, size_t len, struct msg *m)
{
	const struct msg_desc *d;
	const uint8_t *p = body;
	uint32_t count;
	size_t off;
	int saved;

	memset(m, 0, sizeof(*m));
	if ((d = desc_lookup(type)) == NULL) {
		errno = EPROTO;
		return -1;
	}
	if (array_header(p, len, &count, &off) == -1 ||
	    count != field_count(d->fields)) {
		errno = EBADMSG;
		return -1;
	}
	m->type = (enum msg_type)type;
	if (unpack_fields(m, d->fields, p, len, &off) == -1)
		goto fail;
	if (off != len) {
		errno = EBADMSG;
		goto fail;
	}
	return 0;
fail:
	saved = errno;
	msg_clear(m);
	errno = saved;
	return -1;
}

/* --- the head of a REQUEST, from a prefix of its body ------------------- */

/*
 * One msgpack unsigned integer at p[*off]. 1 with *v, 0 when the prefix
 * ends first, -1 when the byte is no unsigned integer.
 */
static int
head_uint(const uint8_t *p, size_t have, size_t *off, uint64_t *v)
{
	size_t n, i;
	uint8_t b;

	if (*off >= have)
		return 0;
	b = p[*off];
	if (b <= 0x7f) {
		*v = b;
		(*off)++;
		return 1;
	}
	/* uint 8-64, and int 8-64 holding a value >= 0 (msgpack-c reads
	 * those as positive integers too) */
	if (b >= 0xcc && b <= 0xcf)
		n = (size_t)1 << (b - 0xcc);
	else if (b >= 0xd0 && b <= 0xd3)
		n = (size_t)1 << (b - 0xd0);
	else
		return -1;
	if (have - *off < 1 + n)
		return 0;
	if (b >= 0xd0 && (p[*off + 1] & 0x80) != 0)
		return -1;
	for (*v = 0, i = 1; i <= n; i++)
		*v = *v << 8 | p[*off + i];
	*off += 1 + n;
	return 1;
}

/* A length of n big-endian bytes at p[*off + 1] after a type byte: 1 with
 * *len, 0 when the prefix ends first. */
static int
head_len(const uint8_t *p, size_t have, size_t *off, size_t n, size_t *len)
{
	size_t i;

	if (have - *off < 1 + n)
		return 0;
	for (*len = 0, i = 1; i <= n; i++)
		*len = *len << 8 | p[*off + i];
	*off += 1 + n;
	return 1;
}

/* A msgpack bin header at p[*off]: 1 with *len, 0 / -1 as head_uint. */
static int
head_bin(const uint8_t *p, size_t have, size_t *off, size_t *len)
{
	if (*off >= have)
		return 0;
	if (p[*off] < 0xc4 || p[*off] > 0xc6)
		return -1;
	return head_len(p, have, off, (size_t)1 << (p[*off] - 0xc4), len);
}

/* A msgpack str header at p[*off]: 1 with *len, 0 / -1 as head_uint. */
static int
head_str(const uint8_t *p, size_t have, size_t *off, size_t *len)
{
	if (*off >= have)
		return 0;
	if ((p[*off] & 0xe0) == 0xa0) {
		*len = p[*off] & 0x1f;
		(*off)++;
		return 1;
	}
	if (p[*off] < 0xd9 || p[*off] > 0xdb)
		return -1;
	return head_len(p, have, off, (size_t)1 << (p[*off] - 0xd9), len);
}

/* See proto.h. Accepts exactly the encodings msg_decode accepts. */
int
msg_request_head(const uint8_t *p, size_t have, struct msg *m)
{
	uint64_t id, cell;
	size_t off, len, mstart, blen;
	uint32_t count;
	int rc;

	memset(m, 0, sizeof(*m));
	if (have < 1 || (p[0] == 0xdc && have < 3) || (p[0] == 0xdd &&
	    have < 5))
		return 0;
	if (array_header(p, have, &count, &off) == -1 || count != 4)
		goto bad;
	if ((rc = head_uint(p, have, &off, &id)) <= 0 ||
	    (rc = head_uint(p, have, &off, &cell)) <= 0 ||
	    (rc = head_str(p, have, &off, &len)) <= 0)
		goto out;
	if (cell > UINT32_MAX || len > UINT32_MAX)
		goto bad;
	if (have - off < len)
		return 0;
	mstart = off;
	off += len;
	if ((rc = head_bin(p, have, &off, &blen)) <= 0)
		goto out;
	m->type = MSG_REQUEST;
	m->u.request.id = id;
	m->u.request.cell = (uint32_t)cell;
	if (bytes_copy(&m->u.request.method, (const char *)p + mstart,
	    (uint32_t)len) < 0)
		return -1;
	m->u.request.body = (struct bytes){ NULL, blen };
	return 1;
out:
	if (rc == 0)
		return 0;
bad:
	errno = EBADMSG;
	return -1;
}
