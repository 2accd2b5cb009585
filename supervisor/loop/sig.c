/*
 * sig.c - signals through a signalfd (see sig.h).
 */
#include "supervisor/loop/sig.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

static sig_fn *sig_cb;
static void *sig_ctx;

static void
sig_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct signalfd_siginfo si;

	(void)l;
	(void)revents;
	(void)ctx;
	while (read(fd, &si, sizeof si) == (ssize_t)sizeof si)
		sig_cb((int)si.ssi_signo, sig_ctx);
}

int
sig_setup(struct loop *l, sig_fn *fn, void *ctx)
{
	sigset_t set;
	int fd;

	(void)signal(SIGPIPE, SIG_IGN);
	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGINT);
	(void)sigaddset(&set, SIGTERM);
	(void)sigaddset(&set, SIGHUP);
	(void)sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -1;
	sig_cb = fn;
	sig_ctx = ctx;
	return loop_watch(l, fd, POLLIN, sig_event, NULL);
}
