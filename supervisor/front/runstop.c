/*
 * runstop.c - a run's signal and fatal endings, shared by the agent and
 * exec runs (see runstop.h).
 */
#include "supervisor/front/runstop.h"

#include <stdio.h>

#include "supervisor/loop/sig.h"

static void
on_signal(int signo, void *ctx)
{
	struct runstop *s = ctx;
	int rc = runner_signal(s->runner, signo);

	if (rc >= 0)
		loop_stop(s->loop, rc);
}

int
runstop_setup(struct runstop *s, struct loop *l)
{
	s->loop = l;
	return sig_setup(l, on_signal, s);
}

const char *
runstop_fatal_why(char *buf, size_t n, const char *why)
{
	(void)snprintf(buf, n, "the worker cannot be started: %s", why);
	return buf;
}
