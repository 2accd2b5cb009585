/*
 * snap.h - namespace snapshots (issue 12): on SNAP the worker forks a
 * frozen copy of itself that waits on WORKER_SPARE_FD; the supervisor
 * promotes it (struct promote_msg) when the next cell is killed, or the
 * worker discards it once that cell has ended. See proto.h.
 */
#ifndef AGENTZ_WORKER_SNAP_H
#define AGENTZ_WORKER_SNAP_H

#include <stdint.h>

/*
 * off: why snapshots are refused (SNAPPED's error), NULL when allowed.
 * send_ready: sends READY; a promoted snapshot calls it on its new channel.
 */
void snap_init(const char *off, int (*send_ready)(void));
/*
 * Handles SNAP for cell (main thread, GIL held): discards an older
 * snapshot, forks a new one and answers SNAPPED. Returns 0 once answered,
 * -1 with errno when the answer could not be sent. In a promoted
 * snapshot it returns 0 after READY went out on the new channel: the
 * caller goes on serving as the worker.
 */
int snap_take(uint32_t cell);
/* Kills and reaps the snapshot, if any (main thread, GIL held: it is
 * released for the reaping). */
void snap_discard(void);

#endif
