/*
 * hostreq.h - the host requests a cell may make, in one table: method,
 * when it is allowed, the cap on its body, and who serves it (the way
 * OpenSSH's monitor dispatches its requests from one table).
 *
 * The cap is checked before anything parses the body; a request over its
 * cap is refused by size alone (the channel reader asks hostreq_cap()
 * from the frame header and never buffers the body: see wchan.c), and
 * so is an unknown method. Every refusal is an error reply to the cell
 * naming what was wrong, never a fault of the supervisor's.
 */
#ifndef AGENTZ_HOSTREQ_H
#define AGENTZ_HOSTREQ_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

struct cell;

/* Small methods' bodies (input, cells, runtime_info). */
#define HOSTREQ_SMALL_CAP ((size_t)64 << 10)

/* Who serves a method: one handler slot each. */
enum hostreq_slot {
	HOSTREQ_INPUT,
	HOSTREQ_CELLS,
	HOSTREQ_RUNTIME_INFO,
	HOSTREQ_CALL_ME,
	HOSTREQ_NSLOTS
};

/* q->body is whole and within the method's cap; c is the active cell. */
typedef void hostreq_fn(void *ctx, struct cell *c, const struct msg_request *q);
/* Sends an error reply {type, message} for request id. */
typedef void hostreq_error_fn(void *ctx, uint64_t id, const char *type,
    const char *message);

struct hostreq_handlers {
	hostreq_fn *fn[HOSTREQ_NSLOTS];	/* NULL: not served here */
	void *ctx[HOSTREQ_NSLOTS];
	hostreq_error_fn *error;
	void *error_ctx;
	size_t max_frame;		/* call_me's cap */
};

/*
 * The body cap of method in bytes, for a channel allowing max_frame:
 * HOSTREQ_SMALL_CAP for an unknown method (refused whatever its size).
 */
size_t hostreq_cap(const char *method, size_t max_frame);

/*
 * Dispatches q from the worker. active is the running cell (NULL: none).
 * A request whose body was refused unread by the channel reader has
 * q->body.ptr NULL and q->body.len its size. Refused here, with an error
 * reply through h->error: an unknown method, a body over its cap, a
 * request whose cell is not active, a method with no handler.
 */
void hostreq_dispatch(const struct hostreq_handlers *h, struct cell *active,
    const struct msg_request *q);

#endif
