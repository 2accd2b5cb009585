/*
 * streamred.c - per-field stream redaction of model events (see
 * streamred.h).
 */
#include "supervisor/model/streamred.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buf.h"

struct field {
	char *key;		/* base type + location */
	json_t *synth;		/* a *.delta event of the field, delta "" */
	struct redact_stream st;
};

struct streamred {
	struct field *f;
	size_t n, cap;
};

/* What locates a streamed field inside a response. */
static const char *const loc_keys[] = {
	"item_id", "output_index", "content_index", "summary_index"
};

struct streamred *
streamred_new(void)
{
	return calloc(1, sizeof(struct streamred));
}

static void
field_clear(struct field *f)
{
	free(f->key);
	json_decref(f->synth);
	redact_stream_clear(&f->st);
}

void
streamred_reset(struct streamred *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		field_clear(&s->f[i]);
	s->n = 0;
}

void
streamred_free(struct streamred *s)
{
	streamred_reset(s);
	if (s != NULL)
		free(s->f);
	free(s);
}

/* Emits data[0..len) redacted as a whole. */
static void
whole(const struct redact *r, const char *data, size_t len,
    streamred_emit_fn *emit, void *ctx)
{
	char *clean;
	size_t n;

	clean = redact_string(r, data, len, &n);
	if (clean != NULL)	/* no memory: the event is not shown */
		emit(ctx, clean, n);
	free(clean);
}

/* Emits the event ev (consumed) redacted as a whole. */
static void
emit_json(json_t *ev, const struct redact *r, streamred_emit_fn *emit,
    void *ctx)
{
	char *s = json_dumps(ev, JSON_COMPACT);

	if (s != NULL)
		whole(r, s, strlen(s), emit, ctx);
	free(s);
	json_decref(ev);
}

/* "base\x1flocation..." of an event whose type is base + suffix. */
static char *
field_key(const json_t *ev, const char *type, size_t base_len)
{
	char *k, *v;
	size_t i;
	json_t *x;
	int rc;

	if (asprintf(&k, "%.*s", (int)base_len, type) < 0)
		return NULL;
	for (i = 0; i < sizeof loc_keys / sizeof loc_keys[0]; i++) {
		x = json_object_get(ev, loc_keys[i]);
		if (json_is_string(x))
			rc = asprintf(&v, "%s\x1f%s", k, json_string_value(x));
		else if (json_is_integer(x))
			rc = asprintf(&v, "%s\x1f%lld", k,
			    (long long)json_integer_value(x));
		else
			rc = asprintf(&v, "%s\x1f", k);
		free(k);
		if (rc < 0)
			return NULL;
		k = v;
	}
	return k;
}

static struct field *
find(struct streamred *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->f[i].key, key) == 0)
			return &s->f[i];
	return NULL;
}

/* The field of delta event ev, added if new (key consumed). */
static struct field *
add(struct streamred *s, char *key, const json_t *ev, const char *type,
    size_t base_len)
{
	struct field *f = find(s, key), *nf;
	size_t i;
	json_t *x;
	char *t;

	if (f != NULL) {
		free(key);
		return f;
	}
	if (s->n == s->cap) {
		nf = realloc(s->f, (s->cap * 2 + 4) * sizeof *nf);
		if (nf == NULL) {
			free(key);
			return NULL;
		}
		s->f = nf;
		s->cap = s->cap * 2 + 4;
	}
	f = &s->f[s->n++];
	memset(f, 0, sizeof *f);
	f->key = key;
	redact_stream_init(&f->st);
	f->synth = json_object();
	if (asprintf(&t, "%.*s.delta", (int)base_len, type) >= 0) {
		(void)json_object_set_new(f->synth, "type", json_string(t));
		free(t);
	}
	for (i = 0; i < sizeof loc_keys / sizeof loc_keys[0]; i++)
		if ((x = json_object_get(ev, loc_keys[i])) != NULL)
			(void)json_object_set(f->synth, loc_keys[i], x);
	return f;
}

/* Releases what field f holds as one more delta event; f is removed. */
static void
release(struct streamred *s, struct field *f, const struct redact *r,
    streamred_emit_fn *emit, void *ctx)
{
	struct buf b;
	json_t *ev;

	buf_init(&b);
	(void)redact_stream_flush(&f->st, redact_emit_buf, &b);
	if (b.len > 0 && f->synth != NULL) {
		ev = json_deep_copy(f->synth);
		if (ev != NULL && json_object_set_new(ev, "delta",
		    json_stringn(buf_str(&b), b.len)) == 0)
			emit_json(ev, r, emit, ctx);
		else
			json_decref(ev);
	}
	buf_clear(&b);
	field_clear(f);
	*f = s->f[--s->n];
}

static int
ends_with(const char *s, size_t n, const char *suf, size_t *base)
{
	size_t k = strlen(suf);

	if (n < k || strcmp(s + n - k, suf) != 0)
		return 0;
	*base = n - k;
	return 1;
}

static void
on_delta(struct streamred *s, const struct redact *r, json_t *ev,
    const char *type, size_t base, streamred_emit_fn *emit, void *ctx)
{
	json_t *d = json_object_get(ev, "delta");
	struct buf b;
	struct field *f;
	char *key = field_key(ev, type, base);

	buf_init(&b);
	f = key != NULL ? add(s, key, ev, type, base) : NULL;
	if (f == NULL || redact_stream_feed(r, &f->st, json_string_value(d),
	    json_string_length(d), redact_emit_buf, &b) < 0) {
		buf_clear(&b);
		json_decref(ev);	/* no memory: not shown */
		return;
	}
	/* what may begin a secret stays behind: the cut is where a secret
	 * could start, so valid UTF-8 stays valid ("" if not) */
	if (json_object_set_new(ev, "delta",
	    json_stringn(buf_str(&b), b.len)) < 0)
		(void)json_object_set_new(ev, "delta", json_string(""));
	buf_clear(&b);
	emit_json(ev, r, emit, ctx);
}

void
streamred_event(struct streamred *s, const struct redact *r,
    const char *data, size_t len, streamred_emit_fn *emit, void *ctx)
{
	json_t *ev = json_loadb(data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	struct field *f;
	size_t n, base;
	char *key;

	if (s == NULL || type == NULL || redact_count(r) == 0) {
		json_decref(ev);
		whole(r, data, len, emit, ctx);
		return;
	}
	n = strlen(type);
	if (ends_with(type, n, ".delta", &base) &&
	    json_is_string(json_object_get(ev, "delta"))) {
		on_delta(s, r, ev, type, base, emit, ctx);
		return;
	}
	if (ends_with(type, n, ".done", &base)) {
		key = field_key(ev, type, base);
		if (key != NULL && (f = find(s, key)) != NULL)
			release(s, f, r, emit, ctx);
		free(key);
	}
	if (strcmp(type, "response.output_item.done") == 0)
		streamred_flush(s, r, emit, ctx);
	json_decref(ev);
	whole(r, data, len, emit, ctx);
}

void
streamred_flush(struct streamred *s, const struct redact *r,
    streamred_emit_fn *emit, void *ctx)
{
	if (s == NULL)
		return;
	while (s->n > 0)
		release(s, &s->f[s->n - 1], r, emit, ctx);
}
