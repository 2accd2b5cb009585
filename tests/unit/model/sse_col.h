/*
 * sse_col.h - the SSE tests' event collector: every event the parser
 * delivers, copied, and two collections compared.
 */
#ifndef AGENTZ_TEST_SSE_COL_H
#define AGENTZ_TEST_SSE_COL_H

struct rec {
	char *type;
	char *data;
	size_t len;
	char *id;
};

struct col {
	struct rec *ev;
	size_t n;
	size_t stop_at;		/* stop from this event on (1-based) */
};

static int
col_cb(void *ctx, const struct sse_event *ev)
{
	struct col *c = ctx;
	struct rec *r;

	assert_int_equal(ev->data[ev->data_len], '\0');
	assert_non_null(c->ev = realloc(c->ev, (c->n + 1) * sizeof(*c->ev)));
	r = &c->ev[c->n++];
	assert_non_null(r->type = strdup(ev->type));
	assert_non_null(r->id = strdup(ev->id));
	assert_non_null(r->data = malloc(ev->data_len + 1));
	memcpy(r->data, ev->data, ev->data_len + 1);
	r->len = ev->data_len;
	return c->stop_at != 0 && c->n >= c->stop_at;
}

static void
col_clear(struct col *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		free(c->ev[i].type);
		free(c->ev[i].data);
		free(c->ev[i].id);
	}
	free(c->ev);
	c->ev = NULL;
	c->n = 0;
}

static void
col_equal(const struct col *a, const struct col *b, const char *ctx)
{
	size_t i;

	check_num(ctx, "event count", (long long)a->n, (long long)b->n);
	for (i = 0; i < a->n; i++) {
		check_str(ctx, "type", a->ev[i].type, b->ev[i].type);
		check_str(ctx, "id", a->ev[i].id, b->ev[i].id);
		check_num(ctx, "data length", (long long)a->ev[i].len,
		    (long long)b->ev[i].len);
		if (memcmp(a->ev[i].data, b->ev[i].data, a->ev[i].len) != 0)
			fail_msg("%s: data of event %zu differs", ctx, i);
	}
}

#endif
