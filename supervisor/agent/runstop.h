/*
 * runstop.h - how a run with a worker (agent or exec) ends from outside
 * its cells: a signal ends it with the status runner_signal decides, and
 * a worker that cannot be started is said in one sentence.
 */
#ifndef AGENTZ_RUNSTOP_H
#define AGENTZ_RUNSTOP_H

#include <stddef.h>

#include "supervisor/loop/loop.h"
#include "supervisor/run/runner.h"

struct runstop {
	struct loop *loop;
	struct runner *runner;	/* set once it exists; read at a signal */
	/* Who decides the stop a signal asks for (rc, why: "stopping:
	 * Terminated (SIGTERM)"); NULL: the loop just stops with rc. */
	void (*stop)(void *ctx, int rc, const char *why);
	void *ctx;
};

/* Signals stop s->loop (sig.h); 0, or -1 with errno. */
int runstop_setup(struct runstop *s, struct loop *l);

/* "the worker cannot be started: why" in buf; returns buf. */
const char *runstop_fatal_why(char *buf, size_t n, const char *why);

#endif
