/*
 * workers.c - one agentz-worker process (see workers.h).
 *
 * Spawn: socketpair + two pipes, all CLOEXEC, built argv/envp before the
 * fork, then only async-signal-safe calls in the child: new session (so no
 * controlling terminal and its own process group), PDEATHSIG, the fds
 * moved to 0-3 and everything else closed, exec. The parent watches a
 * pidfd for the death, so a death between cells is seen at once and a
 * grandchild holding our pipes open cannot make us wait. After a DONE the
 * output pipes are drained before the owner hears of it, so a cell's
 * output is complete in its record.
 */
#include "supervisor/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/secrets.h"

#define READ_CHUNK 65536
#define MAX_ARGS 16
#define MAX_ENV 256

struct worker {
	struct loop *loop;
	struct worker_config cfg;
	struct worker_ops ops;
	void *ctx;
	enum worker_state state;
	pid_t pid;
	int pidfd, chan, out, err;
	struct frame_rx rx;
	struct buf outq;
	unsigned generation;
	uint64_t spawned_us, ready_us;
	uint64_t ready_timer;
	uint32_t cell;
	char *kill_reason;
	char python_version[32];
	char sandbox[64];
};

static const char *const env_allow[] = {
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE",
	"LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
	"LC_MONETARY", "LC_MESSAGES", "TERM", "TZ", "TMPDIR",
	/* the sanitizer runtime in a SAN build of the worker */
	"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", NULL
};

static void chan_event(struct loop *l, int fd, short revents, void *ctx);
static void pipe_event(struct loop *l, int fd, short revents, void *ctx);
static void pidfd_event(struct loop *l, int fd, short revents, void *ctx);

struct worker *
worker_new(struct loop *l, const struct worker_config *c,
    const struct worker_ops *ops, void *ctx)
{
	struct worker *w = calloc(1, sizeof *w);

	if (w == NULL)
		return NULL;
	w->loop = l;
	w->cfg = *c;
	w->ops = *ops;
	w->ctx = ctx;
	w->pidfd = w->chan = w->out = w->err = -1;
	buf_init(&w->outq);
	frame_rx_init(&w->rx, c->max_frame);
	return w;
}

enum worker_state
worker_state(const struct worker *w)
{
	return w->state;
}

pid_t
worker_pid(const struct worker *w)
{
	return w->pid;
}

unsigned
worker_generation(const struct worker *w)
{
	return w->generation;
}

uint64_t
worker_spawn_ready_us(const struct worker *w)
{
	return w->ready_us > w->spawned_us ? w->ready_us - w->spawned_us : 0;
}

const char *
worker_python_version(const struct worker *w)
{
	return w->python_version;
}

const char *
worker_sandbox(const struct worker *w)
{
	return w->sandbox;
}

/* --- spawn ------------------------------------------------------------ */

static int
env_allowed(const char *entry, const char *const *extra)
{
	size_t n = strcspn(entry, "=");
	size_t i;

	if (secrets_is_secret_name(entry, n))
		return 0;
	for (i = 0; env_allow[i] != NULL; i++)
		if (strlen(env_allow[i]) == n &&
		    strncmp(entry, env_allow[i], n) == 0)
			return 1;
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		if (strlen(extra[i]) == n && strncmp(entry, extra[i], n) == 0)
			return 1;
	return 0;
}

static void
build_env(const struct worker *w, char **envp)
{
	extern char **environ;
	size_t n = 0, i;

	for (i = 0; environ[i] != NULL && n < MAX_ENV - 3; i++)
		if (env_allowed(environ[i], w->cfg.pass_env))
			envp[n++] = environ[i];
	/* Fewer glibc arenas: threads stay cheap under RLIMIT_DATA. */
	envp[n++] = (char *)(uintptr_t)"MALLOC_ARENA_MAX=2";
	envp[n++] = (char *)(uintptr_t)"PYTHONIOENCODING=utf-8";
	envp[n] = NULL;
}

static void
build_argv(const struct worker *w, char **argv, char *pidbuf, char *pgbuf,
    char *framebuf)
{
	size_t n = 0;

	(void)snprintf(pidbuf, 24, "%ld", (long)getpid());
	(void)snprintf(pgbuf, 24, "%ld", (long)getpgrp());
	(void)snprintf(framebuf, 24, "%zu", w->cfg.max_frame);
	argv[n++] = (char *)(uintptr_t)"agentz-worker";
	argv[n++] = (char *)(uintptr_t)"--sandbox";
	argv[n++] = (char *)(uintptr_t)w->cfg.sandbox;
	argv[n++] = (char *)(uintptr_t)"--protect-pid";
	argv[n++] = pidbuf;
	argv[n++] = (char *)(uintptr_t)"--protect-pgid";
	argv[n++] = pgbuf;
	argv[n++] = (char *)(uintptr_t)"--max-frame";
	argv[n++] = framebuf;
	if (w->cfg.sandbox_debug)
		argv[n++] = (char *)(uintptr_t)"--sandbox-debug";
	argv[n] = NULL;
}

/* Child side: async-signal-safe calls only. Never returns. */
static void
child(const char *path, char **argv, char **envp, int chan, int out,
    int err, pid_t parent)
{
	int fds[3], nul, i;

	(void)setsid();
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(WEXIT_EXEC);
	/* Park the three fds above 9 so the dup2s below cannot clobber. */
	fds[0] = fcntl(chan, F_DUPFD_CLOEXEC, 10);
	fds[1] = fcntl(out, F_DUPFD_CLOEXEC, 10);
	fds[2] = fcntl(err, F_DUPFD_CLOEXEC, 10);
	nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || nul < 0 ||
	    dup2(nul, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0 ||
	    dup2(fds[0], 3) < 0)
		_exit(WEXIT_EXEC);
	(void)syscall(SYS_close_range, 4u, ~0u, 0u);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			(void)signal(i, SIG_DFL);
	execve(path, argv, envp);
	_exit(WEXIT_EXEC);
}

static int
make_fds(int sv[2], int po[2], int pe[2])
{
	sv[0] = sv[1] = po[0] = po[1] = pe[0] = pe[1] = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return -1;
	return 0;
}

static void
close_fds(int *fds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fds[i] >= 0) {
			(void)close(fds[i]);
			fds[i] = -1;
		}
}

static void ready_timeout(struct loop *l, void *ctx);

static int
watch_all(struct worker *w)
{
	int fl[3] = { w->chan, w->out, w->err };
	size_t i;

	for (i = 0; i < 3; i++)
		if (fcntl(fl[i], F_SETFL, O_NONBLOCK) < 0)
			return -1;
	if (loop_watch(w->loop, w->chan, POLLIN, chan_event, w) < 0 ||
	    loop_watch(w->loop, w->out, POLLIN, pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->err, POLLIN, pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->pidfd, POLLIN, pidfd_event, w) < 0)
		return -1;
	w->ready_timer = loop_timer(w->loop, w->cfg.ready_timeout_ms,
	    ready_timeout, w);
	return 0;
}

static int
fork_child(struct worker *w, int sv[2], int po[2], int pe[2])
{
	char *argv[MAX_ARGS], *envp[MAX_ENV];
	char pidbuf[24], pgbuf[24], framebuf[24];
	pid_t parent = getpid();

	build_argv(w, argv, pidbuf, pgbuf, framebuf);
	build_env(w, envp);
	w->spawned_us = loop_now_us();
	w->pid = fork();
	if (w->pid < 0)
		return -1;
	if (w->pid == 0)
		child(w->cfg.path, argv, envp, sv[1], po[1], pe[1], parent);
	return 0;
}

int
worker_spawn(struct worker *w)
{
	int sv[2], po[2], pe[2];
	int theirs[3];

	if (w->state != WORKER_DOWN) {
		errno = EBUSY;
		return -1;
	}
	if (make_fds(sv, po, pe) < 0 || fork_child(w, sv, po, pe) < 0) {
		int all[6] = { sv[0], sv[1], po[0], po[1], pe[0], pe[1] };

		close_fds(all, 6);
		return -1;
	}
	theirs[0] = sv[1], theirs[1] = po[1], theirs[2] = pe[1];
	close_fds(theirs, 3);
	w->chan = sv[0], w->out = po[0], w->err = pe[0];
	w->pidfd = (int)syscall(SYS_pidfd_open, w->pid, 0);
	w->generation++;
	w->ready_us = 0;
	w->state = WORKER_STARTING;
	frame_rx_clear(&w->rx);
	frame_rx_init(&w->rx, w->cfg.max_frame);
	buf_clear(&w->outq);
	if (w->pidfd < 0 || watch_all(w) < 0) {
		worker_kill(w, "cannot watch the new worker");
		return 0;	/* its death is reported like any other */
	}
	return 0;
}

/* --- output ----------------------------------------------------------- */

/* Reads what a pipe holds now. Returns 0 at EOF, 1 otherwise. */
static int
drain_pipe(struct worker *w, int fd)
{
	char buf[READ_CHUNK];
	ssize_t n;
	int rounds;

	/* Bounded per call, so a flood cannot starve the channel. */
	for (rounds = 0; rounds < 16; rounds++) {
		n = read(fd, buf, sizeof buf);
		if (n > 0) {
			w->ops.output(w, fd == w->out ? 1 : 2, buf, (size_t)n,
			    w->ctx);
			continue;
		}
		if (n == 0)
			return 0;
		if (errno != EINTR)
			return 1;
	}
	return 1;
}

/* Everything written to the pipes before now (a DONE or a death). */
static void
drain_all(struct worker *w)
{
	char buf[READ_CHUNK];
	int fds[2] = { w->out, w->err };
	ssize_t n;
	size_t i;

	for (i = 0; i < 2; i++) {
		if (fds[i] < 0)
			continue;
		while ((n = read(fds[i], buf, sizeof buf)) > 0 ||
		    (n < 0 && errno == EINTR))
			if (n > 0)
				w->ops.output(w, (int)i + 1, buf, (size_t)n,
				    w->ctx);
	}
}

static void
pipe_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)revents;
	if (drain_pipe(w, fd) == 0) {
		loop_unwatch(l, fd);
		(void)close(fd);
		if (fd == w->out)
			w->out = -1;
		else
			w->err = -1;
	}
}

/* --- death ------------------------------------------------------------ */

static void
close_all(struct worker *w)
{
	int *fds[4] = { &w->chan, &w->out, &w->err, &w->pidfd };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (*fds[i] < 0)
			continue;
		loop_unwatch(w->loop, *fds[i]);
		(void)close(*fds[i]);
		*fds[i] = -1;
	}
	loop_timer_cancel(w->loop, w->ready_timer);
	w->ready_timer = 0;
}

static void
reap(struct worker *w, int options)
{
	struct worker_death d;
	int status = 0;
	pid_t r;

	memset(&d, 0, sizeof d);
	do
		r = wait4(w->pid, &status, options, &d.ru);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;		/* pidfd readable but not yet waitable */
	drain_all(w);
	close_all(w);
	d.exited = WIFEXITED(status);
	d.code = d.exited ? WEXITSTATUS(status) : 0;
	d.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	d.during_cell = w->state == WORKER_BUSY ||
	    (w->state == WORKER_DYING && w->cell != UINT32_MAX);
	d.cell = w->cell;
	d.before_ready = w->ready_us == 0;
	d.reason = w->kill_reason;
	w->state = WORKER_DOWN;
	w->pid = 0;
	w->ops.death(w, &d, w->ctx);
	free(w->kill_reason);
	w->kill_reason = NULL;
}

static void
pidfd_event(struct loop *l, int fd, short revents, void *ctx)
{
	(void)l;
	(void)fd;
	(void)revents;
	reap(ctx, WNOHANG);
}

void
worker_kill(struct worker *w, const char *reason)
{
	if (w->state == WORKER_DOWN)
		return;
	if (reason != NULL && w->kill_reason == NULL)
		w->kill_reason = strdup(reason);
	if (w->state != WORKER_BUSY && w->state != WORKER_DYING)
		w->cell = UINT32_MAX;
	w->state = WORKER_DYING;
	/* Group first (setsid made pgid == pid), then the pid itself. */
	(void)kill(-w->pid, SIGKILL);
	(void)kill(w->pid, SIGKILL);
	if (w->chan >= 0) {
		loop_unwatch(w->loop, w->chan);
		(void)close(w->chan);
		w->chan = -1;
	}
	if (w->pidfd < 0)
		reap(w, 0);
}

static void
ready_timeout(struct loop *l, void *ctx)
{
	struct worker *w = ctx;
	char why[96];

	(void)l;
	w->ready_timer = 0;
	(void)snprintf(why, sizeof why, "no READY within %llu ms",
	    (unsigned long long)w->cfg.ready_timeout_ms);
	worker_kill(w, why);
}

void
worker_free(struct worker *w)
{
	if (w == NULL)
		return;
	if (w->state != WORKER_DOWN) {
		w->ops.death = NULL;
		(void)kill(-w->pid, SIGKILL);
		(void)kill(w->pid, SIGKILL);
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
		close_all(w);
	}
	frame_rx_clear(&w->rx);
	buf_clear(&w->outq);
	free(w->kill_reason);
	free(w);
}

/* --- control channel ---------------------------------------------------- */

static void
protocol_error(struct worker *w, const char *what, unsigned type)
{
	char why[160];

	(void)snprintf(why, sizeof why, "protocol error: %s (frame %s, "
	    "type %u)", what, msg_name(type), type);
	log_warnx("worker %ld: %s", (long)w->pid, why);
	worker_kill(w, why);
}

static void
on_ready(struct worker *w, struct msg *m)
{
	const struct msg_ready *r = &m->u.ready;

	if (r->version != PROTO_VERSION) {
		protocol_error(w, "protocol version mismatch", m->type);
		return;
	}
	loop_timer_cancel(w->loop, w->ready_timer);
	w->ready_timer = 0;
	w->ready_us = loop_now_us();
	(void)snprintf(w->python_version, sizeof w->python_version, "%s",
	    r->python_version.ptr);
	(void)snprintf(w->sandbox, sizeof w->sandbox, "%s", r->sandbox.ptr);
	w->state = WORKER_IDLE;
	w->ops.ready(w, w->ctx);
}

static void
on_done(struct worker *w, struct msg *m)
{
	if (m->u.done.cell != w->cell) {
		protocol_error(w, "DONE for a cell that is not running",
		    m->type);
		return;
	}
	drain_all(w);
	w->state = WORKER_IDLE;
	w->ops.done(w, &m->u.done, w->ctx);
}

/* Which frames a worker may send in which state. */
static int
frame_allowed(const struct worker *w, unsigned type)
{
	switch (w->state) {
	case WORKER_STARTING:
		return type == MSG_READY;
	case WORKER_BUSY:
		return type == MSG_DONE || type == MSG_REQUEST;
	case WORKER_IDLE:
		return type == MSG_REQUEST;	/* a cell's leftover thread */
	case WORKER_DOWN:
	case WORKER_DYING:
	default:
		return 0;
	}
}

static void
dispatch(struct worker *w, struct msg *m)
{
	if (!frame_allowed(w, m->type)) {
		protocol_error(w, "unexpected frame in this state", m->type);
		return;
	}
	if (m->type == MSG_READY)
		on_ready(w, m);
	else if (m->type == MSG_DONE)
		on_done(w, m);
	else
		w->ops.request(w, &m->u.request, w->ctx);
}

static void
chan_read(struct worker *w)
{
	struct msg m;
	ssize_t n;
	int rc;

	n = frame_rx_fill(&w->rx, w->chan);
	if (n == 0) {		/* EOF: the process is going; pidfd tells */
		loop_unwatch(w->loop, w->chan);
		(void)close(w->chan);
		w->chan = -1;
		return;
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		worker_kill(w, "control channel read failed");
		return;
	}
	while (w->chan >= 0 && (rc = frame_rx_pop(&w->rx, &m)) != 0) {
		if (rc < 0) {
			char why[96];

			(void)snprintf(why, sizeof why, "malformed frame: %s",
			    strerror(errno));
			protocol_error(w, why, 0);
			return;
		}
		dispatch(w, &m);
		msg_clear(&m);
	}
}

static void
chan_flush(struct worker *w)
{
	ssize_t n;

	while (w->outq.len > 0) {
		n = write(w->chan, w->outq.data, w->outq.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			worker_kill(w, "control channel write failed");
			return;
		}
		buf_consume(&w->outq, (size_t)n);
	}
	loop_events(w->loop, w->chan, w->outq.len > 0 ? POLLIN | POLLOUT :
	    POLLIN);
}

static void
chan_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	(void)fd;
	if ((revents & POLLOUT) && w->chan >= 0)
		chan_flush(w);
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && w->chan >= 0)
		chan_read(w);
}

static int
send_msg(struct worker *w, const struct msg *m)
{
	if (w->chan < 0 || w->state == WORKER_DYING ||
	    w->state == WORKER_DOWN) {
		errno = EPIPE;
		return -1;
	}
	if (msg_encode(m, &w->outq, w->cfg.max_frame) < 0)
		return -1;
	chan_flush(w);
	return 0;
}

int
worker_exec(struct worker *w, uint32_t cell, const char *code, size_t len)
{
	struct msg m;

	if (w->state != WORKER_IDLE) {
		errno = EBUSY;
		return -1;
	}
	memset(&m, 0, sizeof m);
	m.type = MSG_EXEC;
	m.u.exec.cell = cell;
	m.u.exec.code = (struct bytes){ (char *)(uintptr_t)code, len };
	if (send_msg(w, &m) < 0)
		return -1;
	w->cell = cell;
	w->state = WORKER_BUSY;
	return 0;
}

int
worker_reply(struct worker *w, uint64_t id, uint32_t status,
    const char *body, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	m.type = MSG_REPLY;
	m.u.reply.id = id;
	m.u.reply.status = status;
	m.u.reply.body = (struct bytes){ (char *)(uintptr_t)body, len };
	return send_msg(w, &m);
}

int
worker_event(struct worker *w, uint64_t id, const char *body, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof m);
	m.type = MSG_EVENT;
	m.u.event.id = id;
	m.u.event.body = (struct bytes){ (char *)(uintptr_t)body, len };
	return send_msg(w, &m);
}

int
worker_interrupt(struct worker *w)
{
	if (w->state != WORKER_BUSY) {
		errno = ESRCH;
		return -1;
	}
	return kill(w->pid, SIGINT);
}
