/*
 * twin.h - two response assemblers in lockstep, for the fast path tests.
 */
#ifndef AGENTZ_TEST_TWIN_H
#define AGENTZ_TEST_TWIN_H

/*
 * Two assemblers in lockstep, one with the fast path (the default), one
 * with every event going through json_loadb(). Whatever they are fed,
 * every observable must be identical: return values, status, messages,
 * counts, the last event and the assembled result, byte for byte.
 */
struct twin {
	struct response *r[2];	/* fast, jansson */
	size_t fed;
};

static void
twin_init(struct twin *t)
{
	assert_non_null(t->r[0] = response_new());
	assert_non_null(t->r[1] = response_new());
	response_set_fast(t->r[1], 0);
	t->fed = 0;
}

static void
twin_clear(struct twin *t)
{
	response_free(t->r[0]);
	response_free(t->r[1]);
}

static char *
dump_or_null(json_t *v)
{
	return v != NULL ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) :
	    strdup("(null)");
}

static void
twin_same_json(const char *ctx, const char *what, json_t *a, json_t *b)
{
	char *da = dump_or_null(a), *db = dump_or_null(b);

	assert_non_null(da);
	assert_non_null(db);
	if ((a == NULL) != (b == NULL) || (a != NULL && !json_equal(a, b)) ||
	    strcmp(da, db) != 0)
		fail_msg("%s: %s differs\nfast:    %.400s\njansson: %.400s", ctx,
		    what, da, db);
	free(da);
	free(db);
}

static void
twin_same_state(const char *ctx, struct twin *t)
{
	const struct response_usage *u0 = response_usage(t->r[0]);
	const struct response_usage *u1 = response_usage(t->r[1]);

	check_str(ctx, "status", response_status_name(response_status(
	    t->r[0])), response_status_name(response_status(t->r[1])));
	check_str(ctx, "error", response_error(t->r[0]),
	    response_error(t->r[1]));
	check_str(ctx, "code", response_error_code(t->r[0]),
	    response_error_code(t->r[1]));
	check_str(ctx, "id", response_id(t->r[0]), response_id(t->r[1]));
	check_str(ctx, "model", response_model(t->r[0]),
	    response_model(t->r[1]));
	check_num(ctx, "delta bytes", (long long)response_delta_bytes(t->r[0]),
	    (long long)response_delta_bytes(t->r[1]));
	check_num(ctx, "usage", u0 != NULL, u1 != NULL);
	if (u0 != NULL && u1 != NULL && memcmp(u0, u1, sizeof(*u0)) != 0)
		fail_msg("%s: usage differs", ctx);
}

/* Feed both; returns what they returned (the same, or the test fails). */
static int
twin_feed(struct twin *t, const char *ctx, const char *event,
    const char *data, size_t len)
{
	int k0, k1;

	k0 = response_feed(t->r[0], event, data, len);
	k1 = response_feed(t->r[1], event, data, len);
	t->fed++;
	if (k0 != k1)
		fail_msg("%s: feed returned %d (fast) and %d (jansson) for "
		    "%.*s", ctx, k0, k1, (int)(len < 300 ? len : 300), data);
	twin_same_state(ctx, t);
	twin_same_json(ctx, "last event", response_last_event(t->r[0]),
	    response_last_event(t->r[1]));
	return k0;
}

static void
twin_same_result(const char *ctx, struct twin *t)
{
	twin_same_json(ctx, "result", response_result(t->r[0]),
	    response_result(t->r[1]));
}

#endif
