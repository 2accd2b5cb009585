/*
 * sig.h - process signals as loop events: SIGINT, SIGTERM, SIGHUP and
 * SIGCHLD (orphans reparented to us, the subreaper) are blocked and read
 * from a signalfd; SIGPIPE is ignored (a dead worker's
 * channel is an EPIPE, not a death).
 */
#ifndef AGENTZ_SIG_H
#define AGENTZ_SIG_H

#include "supervisor/loop/loop.h"

typedef void sig_fn(int signo, void *ctx);

/* 0, or -1 with errno. */
int sig_setup(struct loop *l, sig_fn *fn, void *ctx);

#endif
