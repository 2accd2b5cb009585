/*
 * runstop.c - a run's signal and fatal endings, shared by the agent and
 * exec runs (see runstop.h).
 */
#include "supervisor/agent/runstop.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/loop/sig.h"

/* The signals sig.h delivers besides SIGCHLD. */
static const char *
sig_name(int signo)
{
	return signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" :
	    signo == SIGHUP ? "SIGHUP" : "a signal";
}

static void
on_signal(int signo, void *ctx)
{
	struct runstop *s = ctx;
	int rc = runner_signal(s->runner, signo);
	char why[96];

	if (rc < 0)
		return;
	if (s->stop == NULL) {
		loop_stop(s->loop, rc);
		return;
	}
	(void)snprintf(why, sizeof why, "stopping: %s (%s)", strsignal(signo),
	    sig_name(signo));
	s->stop(s->ctx, rc, why);
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
