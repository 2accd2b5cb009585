/*
 * resolve.c - getaddrinfo in detached threads, answers through a pipe
 * (see resolve.h).
 */
#include "supervisor/egress/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/loop/loop.h"

#define MAX_INFLIGHT 64

/* What the threads share with the loop; freed by the last of them. */
struct shared {
	pthread_mutex_t mu;
	int wfd;		/* the pipe's write end */
	int closed;		/* the resolver is gone */
	unsigned inflight;
};

struct resolver {
	struct loop *loop;
	struct shared *sh;
	int rfd;
	resolve_fn *fn;
	void *ctx;
};

struct lookup {
	struct shared *sh;
	char host[256];
	char port[8];
	uint64_t tag;
	struct addrinfo *ai;
	int err;
};

static void
shared_release(struct shared *sh)
{
	int last;

	(void)pthread_mutex_lock(&sh->mu);
	sh->inflight--;
	last = sh->closed && sh->inflight == 0;
	(void)pthread_mutex_unlock(&sh->mu);
	if (last) {
		(void)close(sh->wfd);
		(void)pthread_mutex_destroy(&sh->mu);
		free(sh);
	}
}

static void *
lookup_thread(void *arg)
{
	struct lookup *lk = arg;
	struct shared *sh = lk->sh;
	struct addrinfo hints;
	int sent = 0;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	/* not AI_ADDRCONFIG: it does not count loopback as configured, so
	 * a host with only loopback (a container) would get no address for
	 * a name /etc/hosts maps to 127.0.0.1 */
	hints.ai_flags = AI_NUMERICSERV;
	lk->err = getaddrinfo(lk->host, lk->port, &hints, &lk->ai);
	(void)pthread_mutex_lock(&sh->mu);
	/* a pointer is one atomic pipe write (< PIPE_BUF) */
	if (!sh->closed && write(sh->wfd, &lk, sizeof lk) == sizeof lk)
		sent = 1;
	(void)pthread_mutex_unlock(&sh->mu);
	if (!sent) {
		if (lk->ai != NULL)
			freeaddrinfo(lk->ai);
		free(lk);
	}
	shared_release(sh);
	return NULL;
}

static void
on_answer(struct loop *l, int fd, short revents, void *ctx)
{
	struct resolver *r = ctx;
	struct lookup *lk;

	(void)l;
	(void)revents;
	while (read(fd, &lk, sizeof lk) == (ssize_t)sizeof lk) {
		r->fn(r->ctx, lk->tag, lk->ai, lk->err);
		free(lk);
	}
}

struct resolver *
resolver_new(struct loop *l, resolve_fn *fn, void *ctx)
{
	struct resolver *r = calloc(1, sizeof *r);
	struct shared *sh = calloc(1, sizeof *sh);
	int p[2] = { -1, -1 };

	if (r == NULL || sh == NULL || pthread_mutex_init(&sh->mu, NULL) != 0)
		goto fail;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		(void)pthread_mutex_destroy(&sh->mu);
		goto fail;
	}
	sh->wfd = p[1];
	r->rfd = p[0];
	r->sh = sh;
	r->loop = l;
	r->fn = fn;
	r->ctx = ctx;
	if (loop_watch(l, r->rfd, POLLIN, on_answer, r) < 0) {
		(void)close(p[0]);
		(void)close(p[1]);
		(void)pthread_mutex_destroy(&sh->mu);
		goto fail;
	}
	return r;
fail:
	free(sh);
	free(r);
	return NULL;
}

void
resolver_free(struct resolver *r)
{
	struct shared *sh;
	struct lookup *lk;
	int last;

	if (r == NULL)
		return;
	sh = r->sh;
	loop_unwatch(r->loop, r->rfd);
	(void)pthread_mutex_lock(&sh->mu);
	sh->closed = 1;
	last = sh->inflight == 0;
	(void)pthread_mutex_unlock(&sh->mu);
	/* answers written but not read yet */
	while (read(r->rfd, &lk, sizeof lk) == (ssize_t)sizeof lk) {
		if (lk->ai != NULL)
			freeaddrinfo(lk->ai);
		free(lk);
	}
	(void)close(r->rfd);
	if (last) {
		(void)close(sh->wfd);
		(void)pthread_mutex_destroy(&sh->mu);
		free(sh);
	}
	free(r);
}

int
resolver_lookup(struct resolver *r, const char *host, uint16_t port,
    uint64_t tag)
{
	struct lookup *lk;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (strlen(host) >= sizeof lk->host) {
		errno = ENAMETOOLONG;
		return -1;
	}
	(void)pthread_mutex_lock(&r->sh->mu);
	if (r->sh->inflight >= MAX_INFLIGHT) {
		(void)pthread_mutex_unlock(&r->sh->mu);
		errno = EAGAIN;
		return -1;
	}
	r->sh->inflight++;
	(void)pthread_mutex_unlock(&r->sh->mu);
	if ((lk = calloc(1, sizeof *lk)) == NULL) {
		shared_release(r->sh);
		return -1;
	}
	lk->sh = r->sh;
	lk->tag = tag;
	memcpy(lk->host, host, strlen(host) + 1);
	(void)snprintf(lk->port, sizeof lk->port, "%u", port);
	/* the thread takes no signal of the supervisor's (signalfd) */
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_attr_init(&attr);
	if (rc == 0) {
		(void)pthread_attr_setdetachstate(&attr,
		    PTHREAD_CREATE_DETACHED);
		(void)pthread_attr_setstacksize(&attr, 1024 * 1024);
		rc = pthread_create(&t, &attr, lookup_thread, lk);
		(void)pthread_attr_destroy(&attr);
	}
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		free(lk);
		shared_release(r->sh);
		errno = rc;
		return -1;
	}
	return 0;
}
