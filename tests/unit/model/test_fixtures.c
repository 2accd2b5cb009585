/*
 * test_fixtures.c - every file of the recorded fixtures ($AGENTZ_FIXTURES,
 * default ../shared/fixtures/responses) replayed through
 * supervisor/model/sse.c and response.c in random chunk sizes (1-byte
 * chunks included), as recorded and rewritten (CRLF, CR, BOM; final output
 * stripped; every *.done event dropped; cut short), checked against values
 * taken from the recordings. A fixture file without an entry in fx_expects
 * (sse_helpers.h) fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/model/response.h"
#include "supervisor/model/sse.h"
#include "tests/unit/model/sse_helpers.h"
#include "tests/unit/model/fx_expects.h"

static int
is_terminal_type(const char *t)
{
	return t != NULL && (strcmp(t, "response.completed") == 0 ||
	    strcmp(t, "response.incomplete") == 0 ||
	    strcmp(t, "response.failed") == 0);
}

/* The data of block b after transform t; NULL to drop the block. */
static char *
fx_data(json_t *b, enum fx_transform t)
{
	const char *data = json_string_value(json_object_get(b, "data"));
	json_t *ev;
	const char *type;
	char *out;
	size_t n;

	if (t == T_NONE || strcmp(data, "[DONE]") == 0)
		return strdup(data);
	assert_non_null(ev = json_loads(data, 0, NULL));
	type = json_string_value(json_object_get(ev, "type"));
	n = strlen(type);
	if ((t == T_DELTAS && n > 5 && strcmp(type + n - 5, ".done") == 0) ||
	    (t == T_PARTS && strcmp(type, "response.output_item.done") == 0)) {
		json_decref(ev);
		return NULL;
	}
	if (is_terminal_type(type))
		json_object_set_new(json_object_get(ev, "response"), "output",
		    json_array());
	out = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return out;
}

static int
block_kind(const char *data)
{
	json_t *ev = json_loads(data, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	int k = is_terminal_type(type) ? 2 :
	    type != NULL && strcmp(type, "error") == 0 ? 3 : 1;

	json_decref(ev);
	return k;
}

static void
wire_build(json_t *blocks, const char *eol, int bom, enum fx_transform t,
    struct wire *w)
{
	FILE *f;
	json_t *b;
	size_t i;
	char *data;

	assert_non_null(f = open_memstream(&w->p, &w->len));
	w->nblocks = 0;
	if (bom)
		(void)fputs("\xef\xbb\xbf", f);
	for (i = 0; (b = json_array_get(blocks, i)) != NULL; i++) {
		if (json_object_get(b, "comment") != NULL) {
			(void)fprintf(f, ":%s%s%s", path_str(b, "comment"), eol,
			    eol);
			w->kinds[w->nblocks] = 0;
		} else {
			if ((data = fx_data(b, t)) == NULL)
				continue;
			if (json_object_get(b, "event") != NULL)
				(void)fprintf(f, "event: %s%s",
				    path_str(b, "event"), eol);
			(void)fprintf(f, "data: %s%s%s", data, eol, eol);
			w->kinds[w->nblocks] = block_kind(data);
			free(data);
		}
		assert_int_equal(fflush(f), 0);
		assert_true(w->nblocks < NELEM(w->ends));
		w->ends[w->nblocks++] = (size_t)ftell(f);
	}
	assert_int_equal(fclose(f), 0);
}

struct sink {
	struct response *r;
	int kinds[6];
	int failed;	/* response_feed() returned -1 */
	int mismatch;	/* SSE event name != data type */
};

static int
sink_cb(void *ctx, const struct sse_event *ev)
{
	struct sink *s = ctx;
	const char *type;
	int k;

	k = response_feed(s->r, ev->type, ev->data, ev->data_len);
	if (k < 0 || k >= 6) {
		s->failed++;
		return 0;
	}
	s->kinds[k]++;
	type = json_string_value(json_object_get(response_last_event(s->r),
	    "type"));
	if (strcmp(ev->type, "message") != 0 &&
	    (type == NULL || strcmp(type, ev->type) != 0))
		s->mismatch++;
	return 0;
}

/* Replay len bytes of wire in chunks drawn from seed (0: 1-byte). */
static struct response *
replay(const char *p, size_t len, uint64_t seed, size_t max_event,
    struct sink *s, int *sse_rc)
{
	static const size_t maxchunks[] = { 1, 7, 300, 70000 };
	struct sse *sse;
	size_t off = 0, k, maxchunk;
	uint64_t rng = seed;
	int rc = SSE_OK;

	memset(s, 0, sizeof(*s));
	assert_non_null(s->r = response_new());
	assert_non_null(sse = sse_new(sink_cb, s, max_event));
	maxchunk = seed == 0 ? 1 : maxchunks[seed % NELEM(maxchunks)];
	while (off < len && rc == SSE_OK) {
		k = 1 + rng_next(&rng) % maxchunk;
		k = k < len - off ? k : len - off;
		rc = sse_feed(sse, p + off, k);
		off += k;
	}
	if (rc == SSE_OK)
		rc = sse_finish(sse);
	sse_free(sse);
	*sse_rc = rc;
	(void)response_finish(s->r, rc == SSE_PARTIAL);
	return s->r;
}

/* obj[key][i], or NULL. */
static json_t *
nth(json_t *obj, const char *key, size_t i)
{
	return json_array_get(json_object_get(obj, key), i);
}

/* All text of the message items, as much as fits; returns its length. */
static size_t
output_text(json_t *out, char *text, size_t size)
{
	size_t i, j, n, len = 0;
	json_t *item, *part;
	const char *s;

	text[0] = '\0';
	for (i = 0; (item = json_array_get(out, i)) != NULL; i++) {
		if (strcmp(path_str(item, "type"), "message") != 0)
			continue;
		for (j = 0; (part = nth(item, "content", j)) != NULL; j++) {
			if ((s = path_str(part, "text")) == NULL)
				continue;
			n = strlen(s);
			if (len + n < size) {
				memcpy(text + len, s, n);
				text[len + n] = '\0';
			}
			len += n;
		}
	}
	return len;
}

/* Type list, first function call and message text of an output array. */
static void
check_output(const char *ctx, const struct fx_expect *e, json_t *out,
    int have_done)
{
	char types[256] = "", text[4096];
	size_t i, tlen;
	json_t *item, *fn = NULL;

	for (i = 0; (item = json_array_get(out, i)) != NULL; i++) {
		const char *t = path_str(item, "type");

		assert_non_null(t);
		(void)snprintf(types + strlen(types), sizeof(types) -
		    strlen(types), "%s%s", i > 0 ? "," : "", t);
		if (fn == NULL && strcmp(t, "function_call") == 0)
			fn = item;
	}
	tlen = output_text(out, text, sizeof(text));
	check_str(ctx, "output types", types, e->types);
	check_str(ctx, "function name", path_str(fn, "name"), e->fn_name);
	check_str(ctx, "call_id", path_str(fn, "call_id"), e->call_id);
	check_str(ctx, "arguments", path_str(fn, "arguments"), e->fn_args);
	check_num(ctx, "text bytes", (long long)tlen, (long long)e->text_len);
	if (e->text != NULL)
		check_prefix(ctx, "text", text, e->text);
	if (e->path != NULL && (have_done || e->path_streamed))
		check_prefix(ctx, e->path, path_str(out, e->path),
		    e->path_value);
}

static const char *
or_dash(const char *s)
{
	return s != NULL ? s : "-";
}

/* The fields of an item that streaming must reproduce, as one string. */
static void
item_digest(FILE *f, json_t *item)
{
	static const char *const keys[] = { "type", "call_id", "name",
	    "arguments", "input", "operation/type", "operation/path",
	    "operation/diff" };
	json_t *part;
	size_t i;

	for (i = 0; i < NELEM(keys); i++)
		(void)fprintf(f, "%s=%s|", keys[i], or_dash(path_str(item,
		    keys[i])));
	for (i = 0; (part = nth(item, "content", i)) != NULL; i++)
		(void)fprintf(f, "C%s:%s%s|", or_dash(path_str(part, "type")),
		    or_dash(path_str(part, "text")),
		    or_dash(path_str(part, "refusal")));
	for (i = 0; (part = nth(item, "summary", i)) != NULL; i++)
		(void)fprintf(f, "S%s:%s|", or_dash(path_str(part, "type")),
		    or_dash(path_str(part, "text")));
	(void)fputc('\n', f);
}

static void
check_digest(const char *ctx, json_t *got, json_t *want)
{
	char *a, *b;
	size_t alen, blen, i;
	FILE *fa, *fb;
	json_t *item;

	assert_non_null(fa = open_memstream(&a, &alen));
	assert_non_null(fb = open_memstream(&b, &blen));
	for (i = 0; (item = json_array_get(got, i)) != NULL; i++)
		item_digest(fa, item);
	for (i = 0; (item = json_array_get(want, i)) != NULL; i++)
		item_digest(fb, item);
	assert_int_equal(fclose(fa), 0);
	assert_int_equal(fclose(fb), 0);
	if (strcmp(a, b) != 0)
		fail_msg("%s: assembled items differ\n got: %s\nwant: %s", ctx,
		    a, b);
	free(a);
	free(b);
}

static void
check_response(const char *ctx, const struct fx_expect *e,
    struct response *r)
{
	const struct response_usage *u = response_usage(r);

	check_str(ctx, "status", response_status_name(response_status(r)),
	    response_status_name(e->status));
	check_str(ctx, "id", response_id(r), e->id);
	check_str(ctx, "model", response_model(r), e->model);
	check_str(ctx, "error", response_error(r), e->error);
	check_str(ctx, "error code", response_error_code(r), e->code);
	check_num(ctx, "has usage", u != NULL, e->has_usage);
	if (u != NULL) {
		check_num(ctx, "input_tokens", u->input_tokens, e->usage[0]);
		check_num(ctx, "cached_tokens", u->cached_tokens, e->usage[1]);
		check_num(ctx, "output_tokens", u->output_tokens, e->usage[2]);
		check_num(ctx, "reasoning_tokens", u->reasoning_tokens,
		    e->usage[3]);
		check_num(ctx, "total_tokens", u->total_tokens, e->usage[4]);
	}
}

/* The terminal event's output array in the recording (new ref) or []. */
static json_t *
fx_final_output(json_t *blocks)
{
	json_t *b, *ev, *out = NULL;
	size_t i;

	for (i = 0; (b = json_array_get(blocks, i)) != NULL; i++) {
		const char *d = json_string_value(json_object_get(b, "data"));

		if (d == NULL || (ev = json_loads(d, 0, NULL)) == NULL)
			continue;
		if (is_terminal_type(json_string_value(json_object_get(ev,
		    "type")))) {
			json_decref(out);
			out = json_incref(path_get(ev, "response/output"));
		}
		json_decref(ev);
	}
	return out != NULL ? out : json_array();
}

/* One replay of a fixture, checked. */
static void
fx_run(const struct fx_expect *e, struct wire *w, uint64_t seed,
    enum fx_transform t, json_t *want, const char *ctx)
{
	struct sink s;
	struct response *r;
	json_t *res;
	int rc;

	r = replay(w->p, w->len, seed, 0, &s, &rc);
	check_num(ctx, "sse result", rc, SSE_OK);
	check_num(ctx, "feed failures", s.failed, 0);
	check_num(ctx, "event name mismatches", s.mismatch, 0);
	check_num(ctx, "terminal events", s.kinds[RESPONSE_EV_TERMINAL],
	    strcmp(e->file, "error_event_server_error_null_code.jsonl") != 0);
	check_num(ctx, "error events", s.kinds[RESPONSE_EV_ERROR],
	    e->error != NULL);
	check_response(ctx, e, r);
	check_num(ctx, "delta bytes", (long long)response_delta_bytes(r),
	    (long long)e->delta_bytes);
	assert_non_null(res = response_result(r));
	check_output(ctx, e, json_object_get(res, "output"),
	    t == T_NONE || t == T_STRIP);
	check_digest(ctx, json_object_get(res, "output"), want);
	if (t == T_NONE && !json_equal(json_object_get(res, "output"), want))
		fail_msg("%s: output differs from the recorded final output",
		    ctx);
	check_num(ctx, "finish", response_finish(r, 0),
	    e->status == RESPONSE_COMPLETED ? 0 : -1);
	response_free(r);
}

/*
 * The recording cut after `cut` bytes: the outcome must follow from the
 * blocks complete before the cut.
 */
static void
fx_cut(const struct fx_expect *e, const struct wire *w, size_t cut,
    uint64_t seed, const char *name)
{
	struct sink s;
	struct response *r;
	char ctx[256], msg[128];
	size_t i;
	int rc, term = 0, err = 0, any = 0, at_end = cut == 0, in_comment = 0;

	for (i = 0; i < w->nblocks; i++) {
		if (w->ends[i] <= cut) {
			term |= w->kinds[i] == 2;
			err |= w->kinds[i] == 3;
			any |= w->kinds[i] != 0;
			at_end |= w->ends[i] == cut;
		} else if (i == 0 || w->ends[i - 1] <= cut) {
			in_comment = w->kinds[i] == 0;
		}
	}
	(void)snprintf(ctx, sizeof(ctx), "%s cut at %zu", name, cut);
	r = replay(w->p, cut, seed, 0, &s, &rc);
	check_num(ctx, "sse result", rc, at_end || in_comment ? SSE_OK :
	    SSE_PARTIAL);
	if (term || err) {
		check_str(ctx, "status", response_status_name(
		    response_status(r)), response_status_name(e->status));
		check_str(ctx, "error", response_error(r), e->error);
	} else {
		check_str(ctx, "status", response_status_name(
		    response_status(r)), "error");
		(void)snprintf(msg, sizeof(msg), "stream ended %s%s",
		    rc == SSE_PARTIAL ? "mid-event " : "",
		    any ? "without a terminal event" : "before any event");
		check_prefix(ctx, "error", response_error(r), msg);
	}
	response_free(r);
}

static const char *const fx_eols[] = { "\n", "\r\n", "\r" };

/* As recorded (and with other line ends, a BOM), then transformed. */
static void
fx_replays(const struct fx_expect *e, json_t *blocks, json_t *want,
    const char *raw, size_t rawlen)
{
	static const enum fx_transform ts[] = { T_STRIP, T_PARTS, T_DELTAS };
	static const char *const tnames[] = { "stripped",
	    "no output_item.done", "deltas only" };
	const char *const *eols = fx_eols;
	struct wire w;
	char ctx[256];
	uint64_t seed;

	for (seed = 0; seed < 24; seed++) {
		wire_build(blocks, eols[seed % 3], seed % 4 == 3, T_NONE, &w);
		(void)snprintf(ctx, sizeof(ctx), "%s seed %llu", e->file,
		    (unsigned long long)seed);
		if (seed == 1 && strstr(e->file, ".sse") != NULL) {
			free(w.p);		/* the file itself */
			assert_non_null(w.p = malloc(rawlen));
			memcpy(w.p, raw, rawlen);
			w.len = rawlen;
		}
		fx_run(e, &w, seed, T_NONE, want, ctx);
		free(w.p);
	}
	for (seed = 0; seed < 9; seed++) {
		wire_build(blocks, eols[seed / 3], 0, ts[seed % 3], &w);
		(void)snprintf(ctx, sizeof(ctx), "%s seed %llu %s", e->file,
		    (unsigned long long)seed, tnames[seed % 3]);
		fx_run(e, &w, seed + 100, ts[seed % 3], want, ctx);
		free(w.p);
	}
}

/* Cut short: at block boundaries near both ends, and anywhere. */
static void
fx_cuts(const struct fx_expect *e, json_t *blocks)
{
	struct wire w;
	struct sink s;
	struct response *r;
	uint64_t seed, rng;
	size_t i;
	int rc;

	wire_build(blocks, "\n", 0, T_NONE, &w);
	for (i = 0; i < w.nblocks; i++) {
		if (i < 12 || i + 12 > w.nblocks) {
			fx_cut(e, &w, w.ends[i], i, e->file);
			fx_cut(e, &w, w.ends[i] - 1, i + 1, e->file);
		}
	}
	for (seed = 1; seed <= 24; seed++) {
		rng = seed * 7919;
		fx_cut(e, &w, (size_t)(rng_next(&rng) % w.len), seed, e->file);
	}
	fx_cut(e, &w, 0, 0, e->file);

	/* A cap below the size of response.created is an SSE error. */
	r = replay(w.p, w.len, 5, 512, &s, &rc);
	if (w.len > (size_t)2048) {
		check_num(e->file, "capped sse", rc, SSE_ETOOBIG);
		check_str(e->file, "capped status", response_status_name(
		    response_status(r)), e->status == RESPONSE_FAILED &&
		    s.kinds[RESPONSE_EV_ERROR] ? "failed" : "error");
	}
	response_free(r);
	free(w.p);
}

static void
fx_stream(struct fx_expect *e, const char *raw, size_t rawlen)
{
	json_t *blocks = fx_blocks(e->file, raw), *want;
	struct wire w;

	want = fx_final_output(blocks);
	/* The harness reads .sse files right: rebuilt byte for byte. */
	wire_build(blocks, "\n", 0, T_NONE, &w);
	if (strstr(e->file, ".sse") != NULL && (w.len != rawlen ||
	    memcmp(w.p, raw, rawlen) != 0))
		fail_msg("%s: rebuilt wire differs from the file", e->file);
	free(w.p);
	fx_replays(e, blocks, want, raw, rawlen);
	fx_cuts(e, blocks);
	json_decref(want);
	json_decref(blocks);
}

static void
fx_body(struct fx_expect *e, const char *raw, size_t rawlen)
{
	struct response *r;
	json_t *res, *doc;

	assert_non_null(r = response_new());
	check_num(e->file, "feed_body", response_feed_body(r, raw, rawlen), 0);
	check_response(e->file, e, r);
	assert_non_null(res = response_result(r));
	check_output(e->file, e, json_object_get(res, "output"), 1);
	assert_non_null(doc = json_loadb(raw, rawlen, 0, NULL));
	if (!json_equal(res, doc))
		fail_msg("%s: result differs from the body", e->file);
	json_decref(doc);
	response_free(r);
}

static void
fx_error_body(struct fx_expect *e, const char *raw, size_t rawlen)
{
	struct response *r;
	char *line, *code;

	assert_non_null(line = response_parse_error_body(e->http_status, raw,
	    rawlen, &code));
	check_str(e->file, "error line", line, e->error);
	check_str(e->file, "error code", code, e->code);
	free(line);
	free(code);

	/* Given as a body, it is a failed response with the same code. */
	assert_non_null(r = response_new());
	check_num(e->file, "feed_body", response_feed_body(r, raw, rawlen), -1);
	check_str(e->file, "status", response_status_name(response_status(r)),
	    "failed");
	check_str(e->file, "code", response_error_code(r), e->code);
	check_prefix(e->file, "error", response_error(r), "response failed: ");
	response_free(r);
}

/* Items assembled from a stream, transformed (new reference). */
static json_t *
fx_assembled(const char *file, enum fx_transform t)
{
	char *raw;
	size_t len;
	json_t *blocks, *out;
	struct wire w;
	struct sink s;
	struct response *r;
	int rc;

	raw = fx_read(file, &len);
	blocks = fx_blocks(file, raw);
	wire_build(blocks, "\n", 0, t, &w);
	r = replay(w.p, w.len, 3, 0, &s, &rc);
	assert_int_equal(response_status(r), RESPONSE_COMPLETED);
	out = json_incref(json_object_get(response_result(r), "output"));
	response_free(r);
	free(w.p);
	json_decref(blocks);
	free(raw);
	return out;
}

/*
 * The follow-up request replays the items of the agent turn: they must be
 * exactly what the assembler kept from output_item.done, in particular
 * the reasoning item's encrypted_content (the .added copy is shorter).
 * Not the message text: the recorded request has ASCII quotes where the
 * recorded stream has typographic ones.
 */
static void
fx_request(struct fx_expect *e, const char *raw, size_t rawlen)
{
	static const char *const keys[][2] = {
		{ "0/id", "1/id" },
		{ "0/encrypted_content", "1/encrypted_content" },
		{ "1/id", "2/id" },
		{ "1/phase", "2/phase" },
		{ "1/content/0/type", "2/content/0/type" },
		{ "2/id", "3/id" },
		{ "2/call_id", "3/call_id" },
		{ "2/name", "3/name" },
		{ "2/arguments", "3/arguments" },
		{ "2/call_id", "4/call_id" },
	};
	json_t *req, *input, *done, *added;
	size_t i;

	assert_non_null(req = json_loadb(raw, rawlen, 0, NULL));
	input = json_object_get(req, "input");
	check_num(e->file, "input items", (long long)json_array_size(input), 5);
	done = fx_assembled(e->pair, T_STRIP);
	added = fx_assembled(e->pair, T_DELTAS);
	for (i = 0; i < NELEM(keys); i++) {
		check_str(e->file, keys[i][1], path_str(input, keys[i][1]),
		    path_str(done, keys[i][0]));
	}
	check_num(e->file, "encrypted_content length",
	    (long long)strlen(path_str(done, "0/encrypted_content")), 1080);
	check_num(e->file, ".added encrypted_content length",
	    (long long)strlen(path_str(added, "0/encrypted_content")), 932);
	json_decref(added);
	json_decref(done);
	json_decref(req);
}

static void
test_fixtures(void **state)
{
	DIR *d;
	struct dirent *de;
	struct fx_expect *e;
	char *raw;
	size_t len, i, n = 0;

	(void)state;
	if ((d = opendir(fx_dir())) == NULL) {
		fail_msg("fixtures directory %s: %s (set AGENTZ_FIXTURES)",
		    fx_dir(), strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    strcmp(de->d_name, "README.md") == 0)
			continue;
		if ((e = fx_find(de->d_name)) == NULL) {
			fail_msg("fixture %s has no expectations here",
			    de->d_name);
			break;
		}
		raw = fx_read(e->file, &len);
		print_message("fixture %s\n", e->file);
		switch (e->kind) {
		case FX_STREAM:
			fx_stream(e, raw, len);
			break;
		case FX_BODY:
			fx_body(e, raw, len);
			break;
		case FX_ERROR_BODY:
			fx_error_body(e, raw, len);
			break;
		case FX_REQUEST:
			fx_request(e, raw, len);
			break;
		}
		free(raw);
		e->found = 1;
		n++;
	}
	assert_int_equal(closedir(d), 0);
	for (i = 0; i < NELEM(fx_expects); i++) {
		if (!fx_expects[i].found)
			fail_msg("fixture %s is missing", fx_expects[i].file);
	}
	assert_int_equal(n, NELEM(fx_expects));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
