/*
 * chan.h - the worker's end of the control channel.
 *
 * Whoever waits reads (leader/follower): the main thread waiting for the
 * next EXEC, or a Python thread waiting for its REPLY/EVENT, takes the
 * reader role when it is free and routes what it reads: EXEC, SNAP and
 * SHUTDOWN to the main thread's slot, REPLY and EVENT to the waiter registered
 * under their id. Any number of threads may have a request outstanding;
 * writes from any thread are serialised by a mutex.
 *
 * A malformed frame from the supervisor, or EOF on the channel, ends the
 * process (_exit with WEXIT_PROTOCOL / WEXIT_CHANNEL / WEXIT_OK): there is
 * nobody left to report to. A snapshot (worker/snap.c) outlives that exit
 * on purpose, as the supervisor may close the channel before its kill
 * lands: it ends when the supervisor closes the spare socket.
 */
#ifndef AGENTZ_WORKER_CHAN_H
#define AGENTZ_WORKER_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/*
 * Records fd and frame limit; REQUEST ids will be (generation << 32) | n,
 * n from 1. Call once, before anything else here.
 */
void chan_init(int fd, size_t max_frame, uint32_t generation);
/*
 * In a promoted snapshot (one thread left, fd replaced by the caller):
 * re-initialises the locks a vanished thread may have held and drops the
 * reader role, the waiters, a pending EXEC/SNAP/SHUTDOWN; ids restart
 * under the new generation.
 */
void chan_reset(uint32_t generation);
/* Sends one frame; thread-safe. 0, or -1 with errno. */
int chan_send(const struct msg *m);
/*
 * Blocks the caller until the next EXEC, SNAP or PIPES (returns 1, *m
 * filled, m->type says which, caller msg_clears) or SHUTDOWN (returns 0).
 */
int chan_wait_exec(struct msg *m);
/* Registers a waiter and returns its id (never 0). 0 / ENOMEM on failure. */
uint64_t chan_waiter_new(void);
/*
 * Waits up to timeout_ms for the next REPLY or EVENT for id. 1 with *m
 * filled (caller msg_clears), 0 on timeout, -1/ENOENT for an unknown id.
 */
int chan_waiter_wait(uint64_t id, int timeout_ms, struct msg *m);
/* Forgets the waiter; later frames for id are dropped. */
void chan_waiter_free(uint64_t id);

#endif
