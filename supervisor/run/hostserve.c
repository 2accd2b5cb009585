/*
 * hostserve.c - the host requests the runner answers itself: input(),
 * cells (the history) and runtime_info; call_me and the rest go to the
 * front end. Every request comes through hostreq's table.
 *
 * input() reads a line from the runner's input fd without blocking the
 * loop, with the front end's UI paused (runner_config.pause_ui) while it
 * waits.
 *
 * May include: runner_impl.h, hostreq.h, history.h, text/jsonf.h (input()'s
 * request body), common/log.h.
 */
#include "supervisor/run/runner_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/cells/history.h"
#include "supervisor/run/hostreq.h"
#include "supervisor/text/jsonf.h"

void
hostserve_input_stop(struct runner *r)
{
	if (r->input_id != 0 && r->cfg.pause_ui != NULL)
		r->cfg.pause_ui(0);
	r->input_id = 0;
	if (r->cfg.input_fd >= 0)
		loop_unwatch(r->loop, r->cfg.input_fd);
}

/* Answers the waiting input() if a whole line (or EOF) is buffered. */
static int
input_try_answer(struct runner *r)
{
	uint8_t *nl = r->inbuf.len > 0 ? memchr(r->inbuf.data, '\n',
	    r->inbuf.len) : NULL;
	size_t n;

	if (nl == NULL && !r->input_eof)
		return 0;
	if (nl == NULL && r->inbuf.len == 0) {
		runner_reply_error(r, r->input_id, "EOFError",
		    "EOF when reading a line");
	} else {
		n = nl != NULL ? (size_t)(nl - r->inbuf.data) : r->inbuf.len;
		(void)worker_reply(r->w, r->input_id, REPLY_OK,
		    (const char *)r->inbuf.data, n);
		buf_consume(&r->inbuf, nl != NULL ? n + 1 : n);
	}
	hostserve_input_stop(r);
	return 1;
}

static void
input_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct runner *r = ctx;
	char tmp[4096];
	ssize_t n;

	(void)l;
	(void)revents;
	n = read(fd, tmp, sizeof tmp);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		r->input_eof = 1;
	else if (buf_append(&r->inbuf, tmp, (size_t)n) < 0)
		r->input_eof = 1;
	(void)input_try_answer(r);
}

/* input()'s {"prompt": ...} (malloc'ed), or NULL: none, or a body that
 * is not an object, or a prompt that is not a string. */
static char *
input_prompt(const struct msg_request *q)
{
	char *prompt = NULL;
	struct jf_in in[] = {
		{ .key = "prompt", .kind = JF_KSTR, .dst = &prompt },
		{ .key = NULL }
	};

	if (jf_parse((const char *)q->body.ptr, q->body.len, in) < 0)
		return NULL;
	return prompt;
}

static void
serve_input(struct runner *r, const struct msg_request *q)
{
	char *prompt = input_prompt(q);

	if (r->input_id != 0) {
		runner_reply_error(r, q->id, "RuntimeError",
		    "input() is already waiting in another thread");
	} else if (r->cfg.input_fd < 0) {
		runner_reply_error(r, q->id, "EOFError",
		    "EOF when reading a line (no terminal)");
	} else {
		/* what the cell printed before input() comes first */
		worker_drain_output(r->w);
		if (prompt != NULL && *prompt != '\0')
			runner_feed_output(r, 1, prompt, strlen(prompt));
		r->input_id = q->id;
		if (r->cfg.pause_ui != NULL)
			r->cfg.pause_ui(1);
		if (!input_try_answer(r) && loop_watch(r->loop,
		    r->cfg.input_fd, POLLIN, input_event, r) < 0) {
			runner_reply_error(r, q->id, "EOFError",
			    "cannot read input");
			r->input_id = 0;
		}
	}
	free(prompt);
}

/* Replies with s (consumed), JSON text, or says it could not be built. */
static void
reply_text(struct runner *r, uint64_t id, char *s)
{
	if (s == NULL)
		runner_reply_error(r, id, "RuntimeError",
		    "cannot encode the reply");
	else
		(void)runner_reply(r, id, REPLY_OK, s, strlen(s));
	free(s);
}

static void
serve_cells(struct runner *r, const struct msg_request *q)
{
	const char *type;
	char *err;
	char *res = history_serve(&r->cells, q->body.ptr, q->body.len, &type,
	    &err);

	if (res == NULL)
		runner_reply_error(r, q->id, type, err != NULL ? err :
		    "cells: out of memory");
	else
		reply_text(r, q->id, res);
	free(err);
}

static void
h_input(void *ctx, struct cell *c, const struct msg_request *q)
{
	(void)c;
	serve_input(ctx, q);
}

static void
h_cells(void *ctx, struct cell *c, const struct msg_request *q)
{
	(void)c;
	serve_cells(ctx, q);
}

static void
h_runtime_info(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct runner *r = ctx;

	(void)c;
	/* the worker's world, and its workspace as the worker sees it */
	reply_text(r, q->id, history_runtime_info(runner_isolation(r),
	    runner_network_desc(r), jail_workspace(r->jail)));
}

/* call_me and whatever else the front end serves. */
static void
h_front(void *ctx, struct cell *c, const struct msg_request *q)
{
	struct runner *r = ctx;

	r->ops.request(r->ctx, c, q);
}

static void
h_error(void *ctx, uint64_t id, const char *type, const char *message)
{
	runner_reply_error(ctx, id, type, message);
}

/* Every host request goes through hostreq's table. */
void
hostserve_request(struct worker *w, const struct msg_request *q, void *ctx)
{
	struct runner *r = ctx;
	struct hostreq_handlers h;

	if (w != r->w)
		return;		/* a standby runs no cell: nothing to serve */
	memset(&h, 0, sizeof h);
	h.fn[HOSTREQ_INPUT] = h_input;
	h.fn[HOSTREQ_CELLS] = h_cells;
	h.fn[HOSTREQ_RUNTIME_INFO] = h_runtime_info;
	h.fn[HOSTREQ_CALL_ME] = h_front;
	h.ctx[HOSTREQ_INPUT] = h.ctx[HOSTREQ_CELLS] = r;
	h.ctx[HOSTREQ_RUNTIME_INFO] = h.ctx[HOSTREQ_CALL_ME] = r;
	h.error = h_error;
	h.error_ctx = r;
	h.max_frame = r->cfg.worker.max_frame;
	/* past its deadline a cell is being stopped: its requests get a
	 * quick refusal, so a backlog cannot hold up its DONE */
	hostreq_dispatch(&h, r->current != NULL &&
	    r->current->timeout_stage == TIMEOUT_NONE ? r->current : NULL, q);
}
