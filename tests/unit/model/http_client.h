/*
 * http_client.h - the HTTP tests' client side: a loop and a client per
 * test (fx_setup/fx_teardown), callbacks that only record what they saw,
 * and posting a request and running the loop until it is done.
 */
#ifndef AGENTZ_TEST_HTTP_CLIENT_H
#define AGENTZ_TEST_HTTP_CLIENT_H

/* ==== the client side ==== */

struct fx {
	struct loop *l;
	struct http *h;
	int pending;		/* done callbacks until loop_stop */
};

/* What the callbacks saw for one request. */
struct got {
	struct fx *fx;
	uint64_t id;
	int done, status_calls, data_calls, data_before_status;
	long status_code;
	char data[8192];
	size_t data_len;
	struct http_result r;	/* pointers below are our copies */
	char error[512], request_id[128];
	char *body;
	uint64_t t0, t_done;
	/* behaviour */
	int abort_on_data;
	int cancel_self_on_data;
	uint64_t cancel_later;	/* cancel from a loop timer on first data */
	const char *repost;	/* done posts this path once more */
	struct got *next_got;
};

static int
fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	if (f == NULL || (f->l = loop_new()) == NULL ||
	    (f->h = http_new(f->l)) == NULL) {
		if (f != NULL)
			loop_free(f->l);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	struct fx *f = *state;

	http_free(f->h);
	loop_free(f->l);
	free(f);
	return 0;
}

static void
on_guard(struct loop *l, void *ctx)
{
	(void)ctx;
	loop_stop(l, 1);
}

/* Runs the loop until every expected done arrived (0) or ms passed (1). */
static int
run(struct fx *f, int pending, uint64_t ms)
{
	uint64_t t = loop_timer(f->l, ms, on_guard, f);
	int rc;

	f->pending = pending;
	rc = loop_run(f->l);
	loop_timer_cancel(f->l, t);
	return rc;
}

static void
cb_status(void *ctx, long code)
{
	struct got *g = ctx;

	g->status_calls++;
	g->status_code = code;
}

static void
cancel_later(struct loop *l, void *ctx)
{
	struct got *g = ctx;

	(void)l;
	http_cancel(g->fx->h, g->id);
}

static uint64_t post(struct fx *f, const char *path,
    struct http_request_opts o, struct got *g);

static int
cb_data(void *ctx, const char *p, size_t n)
{
	struct got *g = ctx;

	if (g->status_calls == 0)
		g->data_before_status = 1;
	g->data_calls++;
	if (n > sizeof g->data - g->data_len)
		n = sizeof g->data - g->data_len;
	memcpy(g->data + g->data_len, p, n);
	g->data_len += n;
	if (g->cancel_self_on_data)
		http_cancel(g->fx->h, g->id);
	if (g->cancel_later == 1)
		g->cancel_later = loop_timer(g->fx->l, 0, cancel_later, g);
	return g->abort_on_data ? -1 : 0;
}

static void
cb_done(void *ctx, const struct http_result *r)
{
	struct got *g = ctx;

	g->done++;
	g->t_done = loop_now_us();
	g->r = *r;
	(void)snprintf(g->error, sizeof g->error, "%s",
	    r->error != NULL ? r->error : "");
	(void)snprintf(g->request_id, sizeof g->request_id, "%s",
	    r->request_id != NULL ? r->request_id : "");
	if (r->body != NULL) {
		g->body = malloc(r->body_len + 1);
		if (g->body != NULL) {
			memcpy(g->body, r->body, r->body_len + 1);
		}
	}
	g->r.error = g->error;
	g->r.request_id = g->request_id;
	g->r.body = g->body;
	if (g->repost != NULL && g->next_got != NULL) {
		struct http_request_opts o = { .base_backoff_ms = 1 };

		g->next_got->id = post(g->fx, g->repost, o, g->next_got);
		g->fx->pending++;
	}
	if (--g->fx->pending == 0)
		loop_stop(g->fx->l, 0);
}

static const struct http_callbacks cbs = { cb_status, cb_data, cb_done };

static uint64_t
post(struct fx *f, const char *path, struct http_request_opts o,
    struct got *g)
{
	char url[256];

	(void)snprintf(url, sizeof url, "http://127.0.0.1:%d%s", srv_port,
	    path);
	o.url = url;
	if (o.body == NULL) {
		o.body = "{}";
		o.body_len = 2;
	}
	g->fx = f;
	g->t0 = loop_now_us();
	g->id = http_post(f->h, &o, &cbs, g);
	return g->id;
}

static uint64_t
elapsed_ms(const struct got *g)
{
	return MS(g->t_done - g->t0);
}

/* Posts one request with o and runs it to its end. */
static void
run_one(struct fx *f, const char *path, struct http_request_opts o,
    struct got *g)
{
	assert_true(post(f, path, o, g) > 0);
	assert_int_equal(run(f, 1, 5000), 0);
	assert_int_equal(g->done, 1);
}

static void
got_clear(struct got *g)
{
	free(g->body);
	g->body = NULL;
}

#endif
