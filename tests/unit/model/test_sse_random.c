/*
 * test_sse_random.c - unit tests for supervisor/model/sse.c: a seeded
 * property test (random events, line endings, comments, BOM, random
 * chunking).
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
#include "tests/unit/model/sse_col.h"

/* Random stream generator for the property test. */
struct gen {
	uint64_t rng;
	FILE		*out;
	const char *last_end;	/* ending of the previous line */
	struct col want;
	char id[32];
};

static void
gen_line(struct gen *g, const char *text, size_t len)
{
	static const char *const endings[] = { "\n", "\r\n", "\r" };
	const char *e = endings[rng_next(&g->rng) % 3];

	/* "\r" then an empty "\n" line would read as one CRLF. */
	if (len == 0 && strcmp(g->last_end, "\r") == 0 && strcmp(e, "\n") == 0)
		e = "\r\n";
	(void)fwrite(text, 1, len, g->out);
	(void)fputs(e, g->out);
	g->last_end = e;
}

/* A random value: ASCII, spaces, colons, NUL and multi-byte UTF-8. */
static size_t
gen_value(struct gen *g, char *buf, int allow_nul)
{
	static const char *const atoms[] = { "a", "Z", " ", ":", "{", "\"",
	    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbb\xbf",
	    "\0" };
	size_t n = 0, i, j, k = rng_next(&g->rng) % 9;
	size_t natoms = NELEM(atoms) - (allow_nul ? 0 : 1);

	for (i = 0; i < k; i++) {
		const char *a = atoms[rng_next(&g->rng) % natoms];
		size_t alen = a[0] == '\0' ? 1 : strlen(a);

		for (j = 0; j < alen; j++)
			buf[n++] = a[j];
	}
	return n;
}

static void
gen_event(struct gen *g)
{
	char line[128], val[64], type[64] = "", data[512];
	size_t vlen, plen, dlen = 0, i, lines = 1 + rng_next(&g->rng) % 3;
	struct sse_event ev;

	if (rng_next(&g->rng) % 3 == 0)
		gen_line(g, ": note", 6);
	if (rng_next(&g->rng) % 2 == 0) {
		vlen = gen_value(g, val, 0);
		memcpy(type, val, vlen);
		type[vlen] = '\0';
		gen_line(g, line, (size_t)snprintf(line, sizeof(line),
		    "event: %s", type));
	}
	for (i = 0; i < lines; i++) {
		vlen = gen_value(g, val, 1);
		/* "data:" + value only when that is unambiguous. */
		plen = (vlen > 0 && val[0] == ' ') || rng_next(&g->rng) % 2 ?
		    6 : 5;
		memcpy(line, "data: ", plen);
		memcpy(line + plen, val, vlen);
		gen_line(g, line, plen + vlen);
		memcpy(data + dlen, val, vlen);
		dlen += vlen;
		if (i + 1 < lines)
			data[dlen++] = '\n';
	}
	if (rng_next(&g->rng) % 4 == 0) {
		(void)snprintf(g->id, sizeof(g->id), "%u",
		    (unsigned)(rng_next(&g->rng) % 1000));
		gen_line(g, line, (size_t)snprintf(line, sizeof(line),
		    "id: %s", g->id));
	}
	if (rng_next(&g->rng) % 5 == 0)
		gen_line(g, "x-extra: 1", 10);
	gen_line(g, "", 0);
	data[dlen] = '\0';
	ev.type = type[0] != '\0' ? type : "message";
	ev.data = data;
	ev.data_len = dlen;
	ev.id = g->id;
	(void)col_cb(&g->want, &ev);
}

static void
test_sse_random(void **state)
{
	struct gen g;
	struct col got = { 0 };
	struct sse *sse;
	char *buf, ctx[32];
	size_t len, off, k, i, nev;
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= 300; seed++) {
		memset(&g, 0, sizeof(g));
		g.rng = seed;
		g.last_end = "\n";
		assert_non_null(g.out = open_memstream(&buf, &len));
		if (rng_next(&g.rng) % 4 == 0)
			(void)fputs("\xef\xbb\xbf", g.out);
		nev = rng_next(&g.rng) % 8;
		for (i = 0; i < nev; i++)
			gen_event(&g);
		assert_int_equal(fclose(g.out), 0);

		assert_non_null(sse = sse_new(col_cb, &got, 0));
		for (off = 0; off < len; off += k) {
			k = 1 + rng_next(&g.rng) % (seed % 2 ? 3 : 40);
			k = k < len - off ? k : len - off;
			assert_int_equal(sse_feed(sse, buf + off, k), SSE_OK);
		}
		assert_int_equal(sse_finish(sse), SSE_OK);
		sse_free(sse);
		(void)snprintf(ctx, sizeof(ctx), "seed %llu",
		    (unsigned long long)seed);
		col_equal(&got, &g.want, ctx);
		col_clear(&got);
		col_clear(&g.want);
		free(buf);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sse_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
