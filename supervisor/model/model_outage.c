/*
 * model_outage.c - what a failed round becomes. A round that fails
 * retryably after http.c's quick retries is posted again from
 * c->wait_timer while the outage patience lasts (see model.h); the outage
 * is a property of the call (c->out_*), so concurrent calls each keep
 * their own schedule, and the observer hears when it starts, goes on and
 * ends. Anything else finishes the call with one line saying what failed.
 */
#include "supervisor/model/model.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/model/model_int.h"
#include "supervisor/model/response.h"

/* What failed, one line: the API's error or the transport's. */
static void
failure_text(const struct call *c, const struct http_result *r, char *buf,
    size_t size)
{
	char *msg = NULL, *code = NULL;

	if (r->status != 0 && r->status / 100 != 2) {
		msg = response_parse_error_body(r->status, r->body, r->body_len,
		    &code);
		(void)snprintf(buf, size, "%s%s", msg != NULL ? msg :
		    "HTTP error", r->attempts > 1 ? " (after retries)" : "");
	} else {
		(void)snprintf(buf, size, "model request to %s failed "
		    "after %u attempt%s: %s", c->m->shown, r->attempts,
		    r->attempts == 1 ? "" : "s", r->error ? r->error : "?");
	}
	free(msg);
	free(code);
}

static double
outage_waited(const struct call *c)
{
	return (double)(loop_now_us() - c->out_t0_us) / 1e6;
}

/*
 * Tells the observer about c's outage. Returns 1 when the observer
 * cancelled c (c is freed then), else 0.
 */
int
call_outage_report(struct call *c, double next_in, int over, const char *reason,
    const char *hint)
{
	struct model *m = c->m;
	struct model_outage o;
	uint64_t id = c->id;
	struct call *k;

	if (m->outage_fn == NULL)
		return 0;
	memset(&o, 0, sizeof o);
	o.call = id;
	o.since = c->out_since;
	o.waited = outage_waited(c);
	o.patience = (double)m->patience_ms / 1000.0;
	o.next_try_in = next_in;
	o.tries = c->out_tries;
	o.over = over;
	o.reason = reason;
	o.hint = hint;
	m->outage_fn(m->outage_ctx, &o);
	for (k = m->calls; k != NULL && k->id != id; k = k->next)
		;
	return k == NULL;
}

static void
outage_retry(struct loop *l, void *ctx)
{
	struct call *c = ctx;

	(void)l;
	c->wait_timer = 0;
	call_round(c);
}

/*
 * Schedules the next try of c's round when r is an outage and the
 * patience lasts. Returns 1 when c is taken care of (waiting, or
 * cancelled by the observer), 0 when the caller reports r.
 */
static int
outage_wait(struct call *c, const struct http_result *r, const char *why)
{
	struct model *m = c->m;
	uint64_t delay, waited_ms, left;
	const char *hint;
	char said[512];

	if (!r->retryable || r->partial || r->timed_out || r->aborted ||
	    m->patience_ms <= 0)
		return 0;
	if (c->out_tries == 0) {
		c->out_t0_us = loop_now_us();
		c->out_since = loop_wall();
	}
	waited_ms = (loop_now_us() - c->out_t0_us) / 1000;
	left = waited_ms < (uint64_t)m->patience_ms ?
	    (uint64_t)m->patience_ms - waited_ms : 0;
	delay = http_outage_delay_ms(c->out_tries, r->retry_after_ms);
	/* The server's "not before" outlasts the patience: give up now. */
	if (left == 0 || r->retry_after_ms > left)
		return 0;
	if (delay > left)
		delay = left;
	if ((c->wait_timer = loop_timer(m->loop, delay, outage_retry, c)) == 0)
		return 0;
	c->out_tries++;
	log_warnx("waiting for the model: %s; next try in %.1f s (down for "
	    "%.0f s, patience %.0f s)", why, (double)delay / 1000.0,
	    outage_waited(c), (double)m->patience_ms / 1000.0);
	if ((hint = model_no_answer_hint(m, r, said, sizeof said)) != NULL)
		log_warnx("%s", hint);
	(void)call_outage_report(c, (double)delay / 1000.0, 0, why, hint);
	return 1;
}

void
call_failed(struct call *c, const struct http_result *r)
{
	char buf[512], out[640];
	double waited;

	failure_text(c, r, buf, sizeof buf);
	if (outage_wait(c, r, buf))
		return;
	call_setup_error(c, r, buf);	/* a wrong key, URL or model */
	/* answered, with an error no wait fixes: the outage is over */
	if (!r->retryable && call_outage_over(c))
		return;
	if (c->out_tries == 0) {
		call_finish(c, NULL, "ModelError", buf);
		return;
	}
	waited = outage_waited(c);
	log_warnx("stopped waiting for the model after %.0f s: %s", waited,
	    buf);
	if (call_outage_report(c, 0, -1, buf, NULL))
		return;
	(void)snprintf(out, sizeof out, "%s (the model was unavailable for "
	    "%.0f s)", buf, waited);
	call_finish(c, NULL, "ModelError", out);
}

/* The model answered: the outage of c, if any, is over. 1 if the observer
 * cancelled c. */
int
call_outage_over(struct call *c)
{
	if (c->out_tries == 0)
		return 0;
	log_warnx("the model answers again after %.0f s", outage_waited(c));
	if (call_outage_report(c, 0, 1, "the model answers again", NULL))
		return 1;
	c->out_tries = 0;
	return 0;
}

