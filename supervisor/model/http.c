/*
 * http.c - HTTP POST over libcurl's multi interface on our loop (see
 * http.h): the client, its requests' lifetime, and the glue that drives
 * curl from the loop. One request's attempts are in http_xfer.c, the
 * retry rule in http_retry.c; all three share http_int.h and are the
 * only files that include <curl/curl.h>.
 *
 * curl tells us which sockets to watch (sock_cb -> loop_watch) and when
 * to call it back (timer_cb -> loop_timer); loop events go back in through
 * curl_multi_socket_action(), after which finished transfers are collected
 * with curl_multi_info_read().
 *
 * libcurl forbids removing a handle from inside its own callbacks, and our
 * write callback is where the caller's data callback runs. So while curl
 * is on the stack (h->busy), http_cancel() only unlinks the request and
 * parks it on h->zombies; the write callback then refuses further bytes,
 * and the zombies are freed once curl has returned.
 */
#include "supervisor/model/http_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check_done(struct http *h);

/* ---- bookkeeping of curl's sockets ---- */

static int
fds_add(struct http *h, int fd)
{
	size_t i;
	int *n;

	for (i = 0; i < h->nfds; i++)
		if (h->fds[i] == fd)
			return 0;
	if (h->nfds == h->capfds) {
		size_t cap = h->capfds ? h->capfds * 2 : 8;

		if ((n = realloc(h->fds, cap * sizeof *n)) == NULL)
			return -1;
		h->fds = n;
		h->capfds = cap;
	}
	h->fds[h->nfds++] = fd;
	return 0;
}

static void
fds_del(struct http *h, int fd)
{
	size_t i;

	for (i = 0; i < h->nfds; i++)
		if (h->fds[i] == fd) {
			h->fds[i] = h->fds[--h->nfds];
			return;
		}
}

/* ---- driving curl from the loop ---- */

/* Takes r's easy handle out of the multi handle: the attempt is over. */
void
http_req_stop(struct http_req *r)
{
	if (r->running)
		(void)http_lib.multi_remove_handle(r->h->multi, r->easy);
	r->running = 0;
	loop_timer_cancel(r->h->loop, r->idle_timer);
	r->idle_timer = 0;
}

/* Frees r, which is on no list and not in the multi handle. */
void
http_req_free(struct http_req *r)
{
	http_lib.easy_cleanup(r->easy);
	http_lib.slist_free_all(r->hdrs);
	buf_clear(&r->ebody);
	free(r);
}

/* Only when curl is not on the stack (h->busy == 0). */
void
http_reap_zombies(struct http *h)
{
	struct http_req *r;

	while ((r = h->zombies) != NULL) {
		h->zombies = r->next;
		http_req_stop(r);
		http_req_free(r);
	}
}

static void
drive(struct http *h, curl_socket_t s, int flags)
{
	int running;

	h->busy++;
	(void)http_lib.multi_socket_action(h->multi, s, flags, &running);
	h->busy--;
	http_reap_zombies(h);
	check_done(h);
}

static void
on_sock(struct loop *l, int fd, short revents, void *ctx)
{
	int flags = 0;

	(void)l;
	if (revents & (POLLIN | POLLHUP))
		flags |= CURL_CSELECT_IN;
	if (revents & POLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (revents & (POLLERR | POLLNVAL))
		flags |= CURL_CSELECT_ERR;
	drive(ctx, fd, flags);
}

static void
on_timer(struct loop *l, void *ctx)
{
	struct http *h = ctx;

	(void)l;
	h->timer = 0;
	drive(h, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_SOCKETFUNCTION: mirror curl's interest in s onto the loop. */
static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http *h = userp;
	short ev = 0;

	(void)e;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		loop_unwatch(h->loop, s);
		fds_del(h, s);
		return 0;
	}
	if (what & CURL_POLL_IN)
		ev |= POLLIN;
	if (what & CURL_POLL_OUT)
		ev |= POLLOUT;
	if (loop_watch(h->loop, s, ev, on_sock, h) < 0)
		return -1;
	if (fds_add(h, s) < 0) {
		loop_unwatch(h->loop, s);
		return -1;
	}
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: one loop timer stands for curl's timeout. */
static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	struct http *h = userp;

	(void)m;
	loop_timer_cancel(h->loop, h->timer);
	h->timer = 0;
	if (timeout_ms < 0)
		return 0;
	h->timer = loop_timer(h->loop, (uint64_t)timeout_ms, on_timer, h);
	return h->timer != 0 ? 0 : -1;
}

/* ---- client ---- */

struct http *
http_new(struct loop *l)
{
	struct http *h;

	if (http_load(NULL, 0) < 0) {
		errno = EIO;
		return NULL;
	}
	if ((h = calloc(1, sizeof *h)) == NULL)
		return NULL;
	h->loop = l;
	h->next_id = 1;
	h->rng = loop_now_us() ^ ((uint64_t)getpid() << 32) ^
	    (uint64_t)(uintptr_t)h;
	if (h->rng == 0)
		h->rng = 1;
	if ((h->multi = http_lib.multi_init()) == NULL ||
	    http_lib.multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, sock_cb) ||
	    http_lib.multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) ||
	    http_lib.multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb) ||
	    http_lib.multi_setopt(h->multi, CURLMOPT_TIMERDATA, h)) {
		if (h->multi != NULL)
			(void)http_lib.multi_cleanup(h->multi);
		free(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

/* ---- requests: lifetime ---- */

void
http_req_unlink(struct http_req *r)
{
	struct http_req **pp;

	for (pp = &r->h->reqs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	r->next = NULL;
}

/* Cancels r's start, deadline and idle timers. */
void
http_req_timers_cancel(struct http_req *r)
{
	loop_timer_cancel(r->h->loop, r->start_timer);
	loop_timer_cancel(r->h->loop, r->deadline_timer);
	loop_timer_cancel(r->h->loop, r->idle_timer);
	r->start_timer = r->deadline_timer = r->idle_timer = 0;
}

/* Unlinks r and parks it on the zombie list; freed by http_reap_zombies(). */
static void
req_bury(struct http_req *r)
{
	struct http *h = r->h;

	http_req_unlink(r);
	http_req_timers_cancel(r);
	r->cancelled = 1;
	r->next = h->zombies;
	h->zombies = r;
}

void
http_free(struct http *h)
{
	size_t i;

	if (h == NULL)
		return;
	while (h->reqs != NULL)
		req_bury(h->reqs);
	http_reap_zombies(h);
	/* May still call sock_cb and timer_cb, which need h and the loop. */
	(void)http_lib.multi_cleanup(h->multi);
	loop_timer_cancel(h->loop, h->timer);
	for (i = 0; i < h->nfds; i++)
		loop_unwatch(h->loop, h->fds[i]);
	free(h->fds);
	free(h);
}

void
http_cancel(struct http *h, uint64_t id)
{
	struct http_req *r;

	if (h == NULL || id == 0)
		return;
	for (r = h->reqs; r != NULL && r->id != id; r = r->next)
		;
	if (r == NULL)
		return;
	req_bury(r);
	if (h->busy == 0)
		http_reap_zombies(h);
}

static void
check_done(struct http *h)
{
	struct http_req *r;
	CURLMsg *m;
	CURLcode rc;
	char *priv;
	int left;

	/* One message at a time: a done callback may cancel other requests,
	 * which drops their pending messages. */
	while ((m = http_lib.multi_info_read(h->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		rc = m->data.result;
		priv = NULL;
		if (http_lib.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
		    &priv) != CURLE_OK || priv == NULL)
			continue;
		r = (struct http_req *)(void *)priv;
		http_req_stop(r);
		http_req_attempt_done(r, rc);
	}
}

int
http_url_check(const char *url, char *why, size_t len)
{
	CURLU *u;
	char *scheme = NULL, *host = NULL;
	CURLUcode rc;
	int ok = 0;

	if (http_load(why, len) < 0)
		return -1;
	if ((u = http_lib.url()) == NULL) {
		(void)snprintf(why, len, "out of memory");
		return -1;
	}
	rc = *url == '\0' ? CURLUE_MALFORMED_INPUT : http_lib.url_set(u,
	    CURLUPART_URL, url, 0);
	if (rc != CURLUE_OK)
		(void)snprintf(why, len, "%s", *url == '\0' ? "empty" :
		    http_lib.url_strerror(rc));
	else if (http_lib.url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
		(void)snprintf(why, len, "scheme %s is not http or https",
		    scheme != NULL ? scheme : "(none)");
	else if (http_lib.url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    *host == '\0')
		(void)snprintf(why, len, "no host");
	else
		ok = 1;
	http_lib.free(scheme);
	http_lib.free(host);
	http_lib.url_cleanup(u);
	return ok ? 0 : -1;
}

char *
http_url_shown(const char *url)
{
	CURLU *u;
	char *got = NULL, *out = NULL;

	if (http_load(NULL, 0) < 0)
		return NULL;
	u = http_lib.url();
	if (u != NULL && http_lib.url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    http_lib.url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
	    http_lib.url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
	    http_lib.url_get(u, CURLUPART_URL, &got, 0) == CURLUE_OK)
		out = strdup(got);
	http_lib.free(got);
	http_lib.url_cleanup(u);
	return out;
}
