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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/capture.h"
#include "supervisor/hostreq.h"
#include "supervisor/procstat.h"
#include "supervisor/secrets.h"

#define READ_CHUNK 65536
/* Frames and body bytes handled per loop turn: the rest waits for the
 * next turn, so timers (the cell's deadline) run between slices. */
#define SLICE_FRAMES 8
#define SLICE_BYTES ((size_t)1 << 20)
/* Replies queued to the worker above which its requests are not read
 * (the cell blocks, not the supervisor), and stream events above which
 * events are refused. */
#define OUTQ_PAUSE ((size_t)1 << 20)
#define OUTQ_EVENTS_MAX ((size_t)4 << 20)
#define MAX_ARGS 20
#define STACK_MAX 65536
#define MAX_ENV 256

struct worker {
	struct loop *loop;
	struct worker_config cfg;
	struct worker_ops ops;
	void *ctx;
	enum worker_state state;
	pid_t pid;
	pid_t wpid;		/* the worker itself (pid is its ns init) */
	pid_t ns_pid;		/* the worker as its namespace sees it */
	int exe;		/* agentz-worker, opened at start-up */
	int pidfd, chan, out, err, dump, status;
	int pidns_state;	/* 0 untried, 1 works, -1 refused */
	struct frame_rx rx;
	int starved;		/* rx holds no frame we can handle yet */
	uint64_t more_timer;	/* continues buffered frames next turn */
	struct buf outq;
	struct buf stack;	/* faulthandler dump (bounded) */
	unsigned generation;
	uint64_t spawned_us, ready_us;
	uint64_t ready_timer;
	uint32_t cell;
	char *kill_reason;
	int sampled;		/* kill_cpu_us/kill_peak_kb are set */
	uint64_t kill_cpu_us;
	long kill_peak_kb;
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
static void chan_process(struct worker *w);
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
	w->pidfd = w->chan = w->out = w->err = w->dump = w->status = -1;
	/* workers start from this descriptor: a path swapped later
	 * changes nothing */
	w->exe = open(c->path, O_PATH | O_CLOEXEC);
	buf_init(&w->outq);
	buf_init(&w->stack);
	frame_rx_init(&w->rx, c->max_frame);
	w->starved = 1;
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
	return w->wpid;
}

pid_t
worker_child_pid(const struct worker *w)
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

struct spawn_args {
	char *argv[MAX_ARGS];
	char *envp[MAX_ENV];
	char num[5][24];
	int fds[6];	/* chan, out, err, dump, sync, status (child ends) */
	struct contain_limits lim;
	const char *path;
	int exe;		/* -1: exec path instead */
	const struct jail *jail;	/* NULL: no jail */
	const char *cwd;		/* without a jail: the workspace */
};

/* Where the executable's descriptor sits in the child. */
#define EXE_FD (WORKER_DUMP_FD + 2)

static void
build_argv(const struct worker *w, struct spawn_args *a)
{
	size_t n = 0;

	(void)snprintf(a->num[0], 24, "%ld", (long)getpid());
	(void)snprintf(a->num[1], 24, "%ld", (long)getpgrp());
	(void)snprintf(a->num[2], 24, "%zu", w->cfg.max_frame);
	(void)snprintf(a->num[3], 24, "%llu",
	    (unsigned long long)w->cfg.data_limit);
	(void)snprintf(a->num[4], 24, "%zu", w->cfg.output_limit);
	a->argv[n++] = (char *)(uintptr_t)"agentz-worker";
	a->argv[n++] = (char *)(uintptr_t)"--sandbox";
	a->argv[n++] = (char *)(uintptr_t)w->cfg.sandbox;
	a->argv[n++] = (char *)(uintptr_t)"--protect-pid";
	a->argv[n++] = a->num[0];
	a->argv[n++] = (char *)(uintptr_t)"--protect-pgid";
	a->argv[n++] = a->num[1];
	a->argv[n++] = (char *)(uintptr_t)"--max-frame";
	a->argv[n++] = a->num[2];
	a->argv[n++] = (char *)(uintptr_t)"--memory-limit";
	a->argv[n++] = a->num[3];
	if (w->cfg.output_limit > 0) {
		a->argv[n++] = (char *)(uintptr_t)"--output-limit";
		a->argv[n++] = a->num[4];
	}
	if (w->cfg.sandbox_debug)
		a->argv[n++] = (char *)(uintptr_t)"--sandbox-debug";
	/* no IPC namespace of its own: the host's SysV objects are near */
	if (!jail_active(w->cfg.jail))
		a->argv[n++] = (char *)(uintptr_t)"--no-sysv";
	a->argv[n] = NULL;
}

/*
 * Child: park the fds above 9, place them at 0-4, the init's status pipe
 * (fd 5, CLOEXEC: the worker never has it) and the executable (fd 6)
 * where present, close the rest. fd 6 survives the exec only because a
 * script's interpreter reads the script through it; agentz-worker
 * closes it before anything else.
 */
static int
child_fds(const int *fds, int status, int exe)
{
	int src[6] = { fds[0], fds[1], fds[2], fds[3], status, exe };
	static const int dst[6] = { WORKER_CHAN_FD, 1, 2, WORKER_DUMP_FD,
	    WORKER_DUMP_FD + 1, EXE_FD };
	int hi[6], nul, i;

	for (i = 0; i < 6; i++) {
		hi[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, 10);
		if (src[i] >= 0 && hi[i] < 0)
			return -1;
	}
	nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul < 0 || dup2(nul, 0) < 0)
		return -1;
	for (i = 0; i < 6; i++) {
		if (hi[i] < 0)
			(void)close(dst[i]);
		else if (dup2(hi[i], dst[i]) < 0 || (i == 4 &&
		    fcntl(dst[i], F_SETFD, FD_CLOEXEC) < 0))
			return -1;
	}
	return (int)syscall(SYS_close_range, EXE_FD + 1, ~0u, 0u);
}

static void
exec_worker(const struct spawn_args *a)
{
	if (a->exe >= 0)
		(void)syscall(SYS_execveat, EXE_FD, "", a->argv, a->envp,
		    AT_EMPTY_PATH);
	else
		(void)execve(a->path, a->argv, a->envp);
}

/*
 * PID 1 of the worker's namespace. A PID 1 ignores every signal it has
 * no handler for, even its own SIGKILL, so the worker must not be it: this
 * init forks the worker, reaps whatever is orphaned into the namespace,
 * and when the worker ends sends its wait status to the supervisor on fd
 * 5 and exits, which kills everything left in the namespace.
 */
static _Noreturn void
ns_init(const struct spawn_args *a, int status_fd)
{
	pid_t w, r;
	int st;

	w = fork();
	if (w < 0)
		_exit(WEXIT_EXEC);
	if (w == 0) {
		if (a->jail != NULL && jail_child_worker(a->jail) < 0)
			_exit(WEXIT_EXEC);
		exec_worker(a);
		_exit(WEXIT_EXEC);
	}
	(void)syscall(SYS_close_range, 0u, (unsigned)WORKER_DUMP_FD, 0u);
	for (;;) {
		r = waitpid(-1, &st, 0);
		if (r == w) {
			(void)!write(status_fd, &st, sizeof st);
			_exit(0);
		}
		if (r < 0 && errno != EINTR)
			_exit(WEXIT_EXEC);
	}
}

/*
 * Child side, async-signal-safe calls only; never returns. Waits for the
 * parent's go byte (it has put us in our cgroup by then; EOF means the
 * parent died before, and PDEATHSIG covers it dying after).
 */
static _Noreturn void
child(const struct spawn_args *a)
{
	char go;
	int i, status_fd = -1, in_ns = getpid() == 1 || a->jail != NULL;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(a->fds[4], &go, 1) != 1)
		_exit(WEXIT_EXEC);
	(void)setsid();
	/* into the run's namespaces while we still may; the worker we fork
	 * is born there and takes its own identity */
	if (a->jail != NULL && jail_child_enter(a->jail) < 0)
		_exit(WEXIT_EXEC);
	if (a->cwd != NULL && chdir(a->cwd) < 0)
		_exit(WEXIT_EXEC);
	if (in_ns && (status_fd = fcntl(a->fds[5], F_DUPFD_CLOEXEC,
	    WORKER_DUMP_FD + 1)) < 0)
		_exit(WEXIT_EXEC);
	if (child_fds(a->fds, status_fd, a->exe) < 0 ||
	    contain_child_rlimits(&a->lim) < 0 ||
	    (a->jail == NULL && contain_child_drop_caps() < 0))
		_exit(WEXIT_EXEC);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			(void)signal(i, SIG_DFL);
	if (in_ns)
		ns_init(a, WORKER_DUMP_FD + 1);
	exec_worker(a);
	_exit(WEXIT_EXEC);
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

/*
 * ours[6]/theirs[6]: chan, out, err, dump, sync, status. We read the
 * output, dump and status pipes and write the sync pipe.
 */
static int
make_fds(int *ours, int *theirs)
{
	int sv[2], p[5][2], i;

	for (i = 0; i < 6; i++)
		ours[i] = theirs[i] = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	ours[0] = sv[0], theirs[0] = sv[1];
	for (i = 0; i < 5; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return -1;
		ours[i + 1] = i != 3 ? p[i][0] : p[i][1];
		theirs[i + 1] = i != 3 ? p[i][1] : p[i][0];
	}
	return 0;
}

/* clone into a new PID namespace when allowed, else a plain fork. */
static pid_t
clone_child(struct worker *w)
{
	pid_t pid = -1;

	if (jail_active(w->cfg.jail)) {
		w->pidns_state = 1;	/* the jail's */
		pid = fork();
	} else if (w->cfg.pidns && w->pidns_state >= 0) {
		pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL,
		    NULL, NULL, NULL);
		w->pidns_state = pid < 0 ? -1 : 1;
		if (pid < 0)
			log_debug("no PID namespace for the worker: %s",
			    strerror(errno));
	}
	if (pid < 0 && w->pidns_state <= 0)
		pid = fork();
	if (w->cfg.contain != NULL)
		contain_set_pidns(w->cfg.contain, w->pidns_state > 0);
	return pid;
}

static int
fork_child(struct worker *w, const int *theirs)
{
	struct spawn_args a;

	memset(&a, 0, sizeof a);
	build_argv(w, &a);
	build_env(w, a.envp);
	memcpy(a.fds, theirs, sizeof a.fds);
	a.lim = w->cfg.limits;
	a.path = w->cfg.path;
	a.exe = w->exe;
	a.jail = jail_active(w->cfg.jail) ? w->cfg.jail : NULL;
	a.cwd = a.jail == NULL ? jail_workspace(w->cfg.jail) : NULL;
	w->spawned_us = loop_now_us();
	w->pid = clone_child(w);
	if (w->pid < 0)
		return -1;
	if (w->pid == 0)
		child(&a);
	return 0;
}

static void ready_timeout(struct loop *l, void *ctx);
static void dump_event(struct loop *l, int fd, short revents, void *ctx);

static int
watch_all(struct worker *w)
{
	int fl[4] = { w->chan, w->out, w->err, w->dump };
	size_t i;

	for (i = 0; i < 4; i++)
		if (fcntl(fl[i], F_SETFL, O_NONBLOCK) < 0)
			return -1;
	if (loop_watch(w->loop, w->chan, POLLIN, chan_event, w) < 0 ||
	    loop_watch(w->loop, w->out, POLLIN, pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->err, POLLIN, pipe_event, w) < 0 ||
	    loop_watch(w->loop, w->dump, POLLIN, dump_event, w) < 0 ||
	    loop_watch(w->loop, w->pidfd, POLLIN, pidfd_event, w) < 0)
		return -1;
	w->ready_timer = loop_timer(w->loop, w->cfg.ready_timeout_ms,
	    ready_timeout, w);
	return 0;
}

/* Parent: cgroup, then the go byte. A failure kills the child. */
static int
release_child(struct worker *w, int sync)
{
	int rc = 0;

	if (w->cfg.contain != NULL && contain_attach(w->cfg.contain,
	    w->pid) < 0) {
		log_warn("cannot move worker %ld into its cgroup",
		    (long)w->pid);
		rc = -1;
	} else if (write(sync, "g", 1) != 1) {
		rc = -1;
	}
	(void)close(sync);
	return rc;
}

static void
reset_state(struct worker *w, const int *ours)
{
	w->chan = ours[0], w->out = ours[1], w->err = ours[2];
	w->dump = ours[3];
	w->status = ours[5];
	w->wpid = w->pid;	/* until READY tells us better */
	w->generation++;
	w->ready_us = 0;
	w->state = WORKER_STARTING;
	frame_rx_clear(&w->rx);
	frame_rx_init(&w->rx, w->cfg.max_frame);
	w->starved = 1;
	buf_clear(&w->outq);
	buf_clear(&w->stack);
}

int
worker_spawn(struct worker *w)
{
	int ours[6], theirs[6];

	if (w->state != WORKER_DOWN) {
		errno = EBUSY;
		return -1;
	}
	if (w->cfg.contain != NULL &&
	    contain_prepare(w->cfg.contain, w->generation + 1) < 0)
		log_warn("worker cgroup set-up failed; continuing without");
	if (make_fds(ours, theirs) < 0 || fork_child(w, theirs) < 0) {
		close_fds(ours, 6);
		close_fds(theirs, 6);
		return -1;
	}
	close_fds(theirs, 6);
	reset_state(w, ours);
	w->pidfd = (int)syscall(SYS_pidfd_open, w->pid, 0);
	if (release_child(w, ours[4]) < 0 || w->pidfd < 0 || watch_all(w) < 0)
		worker_kill(w, "cannot set up the new worker");
	return 0;
}

/* --- output ----------------------------------------------------------- */

/*
 * Reads what a pipe holds now, at most `rounds` reads (a flood must not
 * starve the channel; unbounded when draining before a DONE or a death).
 * Returns 0 at EOF, 1 otherwise.
 */
static int
drain_pipe(struct worker *w, int fd, unsigned rounds)
{
	char buf[READ_CHUNK];
	ssize_t n;

	while (rounds-- > 0) {
		n = read(fd, buf, sizeof buf);
		if (n > 0)
			w->ops.output(w, fd == w->out ? 1 : 2, buf, (size_t)n,
			    w->ctx);
		else if (n == 0)
			return 0;
		else if (errno != EINTR)
			return 1;
	}
	return 1;
}

/* 16 reads of READ_CHUNK: 1 MiB, the most an unprivileged worker can
 * make a pipe hold (F_SETPIPE_SZ up to pipe-max-size). */
void
worker_drain_output(struct worker *w)
{
	if (w->out >= 0)
		(void)drain_pipe(w, w->out, 16);
	if (w->err >= 0)
		(void)drain_pipe(w, w->err, 16);
}

/* Everything written to the pipes before now (a DONE or a death). */
static void
drain_all(struct worker *w)
{
	if (w->out >= 0)
		(void)drain_pipe(w, w->out, UINT_MAX);
	if (w->err >= 0)
		(void)drain_pipe(w, w->err, UINT_MAX);
}

static void
pipe_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)revents;
	if (drain_pipe(w, fd, 16) == 0) {
		loop_unwatch(l, fd);
		(void)close(fd);
		if (fd == w->out)
			w->out = -1;
		else
			w->err = -1;
	}
}

/* --- stack dumps ------------------------------------------------------- */

/* Reads what the dump pipe holds, keeping at most STACK_MAX bytes. */
static void
read_dump(struct worker *w)
{
	char buf[4096];
	ssize_t n;

	while (w->dump >= 0 && ((n = read(w->dump, buf, sizeof buf)) > 0 ||
	    (n < 0 && errno == EINTR)))
		if (n > 0 && w->stack.len + (size_t)n <= STACK_MAX)
			(void)buf_append(&w->stack, buf, (size_t)n);
}

static void
dump_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	size_t before = w->stack.len;

	read_dump(w);
	if (w->stack.len > before && w->ops.stack != NULL)
		w->ops.stack(w, w->ctx);
	if (revents & POLLHUP) {
		loop_unwatch(l, fd);
		(void)close(fd);
		w->dump = -1;
	}
}

/* --- death ------------------------------------------------------------ */

static void
close_all(struct worker *w)
{
	int *fds[6] = { &w->chan, &w->out, &w->err, &w->dump, &w->status,
	    &w->pidfd };
	size_t i;

	for (i = 0; i < 6; i++) {
		if (*fds[i] < 0)
			continue;
		loop_unwatch(w->loop, *fds[i]);
		(void)close(*fds[i]);
		*fds[i] = -1;
	}
	loop_timer_cancel(w->loop, w->ready_timer);
	w->ready_timer = 0;
	loop_timer_cancel(w->loop, w->more_timer);
	w->more_timer = 0;
}

static void
usage_at_death(const struct worker *w, struct worker_death *d)
{
	const struct rusage *ru = &d->ru;

	d->cpu_us = (uint64_t)ru->ru_utime.tv_sec * 1000000u +
	    (uint64_t)ru->ru_utime.tv_usec +
	    (uint64_t)ru->ru_stime.tv_sec * 1000000u +
	    (uint64_t)ru->ru_stime.tv_usec;
	d->peak_kb = ru->ru_maxrss;
	if (w->sampled && w->kill_cpu_us > d->cpu_us) {
		d->cpu_us = w->kill_cpu_us;
		d->peak_kb = w->kill_peak_kb;
	}
}

static void
reap(struct worker *w, int options)
{
	struct worker_death d;
	int status = 0, ws;
	pid_t r;

	memset(&d, 0, sizeof d);
	do
		r = wait4(w->pid, &status, options, &d.ru);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;		/* pidfd readable but not yet waitable */
	if (r < 0)
		log_warn("reaping worker %ld", (long)w->pid);
	/* With a namespace init, the worker's own status came by pipe. */
	if (w->status >= 0 && read(w->status, &ws, sizeof ws) == sizeof ws)
		status = ws;
	/* frames it sent before dying still count (its DONE): the slices
	 * left for later turns are handled now */
	while (w->chan >= 0 && w->more_timer != 0) {
		loop_timer_cancel(w->loop, w->more_timer);
		w->more_timer = 0;
		chan_process(w);
	}
	drain_all(w);
	read_dump(w);
	if (w->cfg.contain != NULL) {
		contain_stats(w->cfg.contain, &d.cg);
		contain_release(w->cfg.contain);
	}
	/* What is left of this worker's tree: in the jail, everything but
	 * its init; without one, orphans reparented to us. */
	if (jail_active(w->cfg.jail))
		(void)jail_kill(w->cfg.jail, 0);
	(void)contain_sweep(jail_init_pid(w->cfg.jail));
	close_all(w);
	if (w->stack.len > 0 && buf_append(&w->stack, "", 1) == 0)
		d.stack = (const char *)w->stack.data;
	d.exited = WIFEXITED(status);
	d.code = d.exited ? WEXITSTATUS(status) : 0;
	d.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	d.during_cell = w->state == WORKER_BUSY ||
	    (w->state == WORKER_DYING && w->cell != UINT32_MAX);
	d.cell = w->cell;
	d.before_ready = w->ready_us == 0;
	d.reason = w->kill_reason;
	usage_at_death(w, &d);
	w->state = WORKER_DOWN;
	w->pid = w->wpid = 0;
	w->ops.death(w, &d, w->ctx);
	free(w->kill_reason);
	w->kill_reason = NULL;
	w->sampled = 0;
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
	if (!w->sampled && w->wpid > 0 && procstat_sample_pid(w->wpid,
	    &w->kill_peak_kb, &w->kill_cpu_us) == 0)
		w->sampled = 1;
	if (w->state != WORKER_BUSY && w->state != WORKER_DYING)
		w->cell = UINT32_MAX;
	w->state = WORKER_DYING;
	/* cgroup (atomic), group (setsid made pgid == pid), the pid (init
	 * of its PID namespace: its death ends every process in it). */
	if (w->cfg.contain != NULL)
		(void)contain_kill(w->cfg.contain);
	(void)kill(-w->pid, SIGKILL);
	(void)kill(w->pid, SIGKILL);
	if (jail_active(w->cfg.jail))
		(void)jail_kill(w->cfg.jail, 0);
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
	if (w->exe >= 0)
		(void)close(w->exe);
	frame_rx_clear(&w->rx);
	buf_clear(&w->outq);
	buf_clear(&w->stack);
	free(w->kill_reason);
	free(w);
}

int
worker_dump_stacks(struct worker *w)
{
	if (w->state == WORKER_DOWN || w->pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(w->wpid, SIGRTMIN + WORKER_DUMP_SIGNAL_OFFSET);
}

char *
worker_take_stack(struct worker *w)
{
	char *s;

	read_dump(w);
	if (w->stack.len == 0)
		return NULL;
	s = malloc(w->stack.len + 1);
	if (s != NULL) {
		memcpy(s, w->stack.data, w->stack.len);
		s[w->stack.len] = '\0';
	}
	return s;
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

/* The host pid of the namespace init's only child: the worker. */
static pid_t
ns_child(pid_t init)
{
	pid_t worker;

	return contain_children(init, &worker, 1) == 1 ? worker : init;
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
	if (w->pidns_state > 0)
		w->wpid = ns_child(w->pid);
	w->ns_pid = (pid_t)r->pid;
	(void)snprintf(w->python_version, sizeof w->python_version, "%s",
	    r->python_version.ptr);
	(void)snprintf(w->sandbox, sizeof w->sandbox, "%s", r->sandbox.ptr);
	w->state = WORKER_IDLE;
	w->ops.ready(w, w->ctx);
}

/* A text of the DONE kept to the output limit, head and tail, whatever
 * the worker sent (the worker caps it too). */
static void
cap_text(const struct worker *w, struct bytes *b)
{
	struct capture c;
	size_t n;
	char *s;

	if (w->cfg.output_limit == 0 || b->len <= w->cfg.output_limit)
		return;
	capture_init(&c, w->cfg.output_limit);
	if (capture_append(&c, b->ptr, b->len) == 0 &&
	    (s = capture_text(&c, &n)) != NULL) {
		free(b->ptr);
		b->ptr = s;
		b->len = n;
	}
	capture_clear(&c);
}

static void
on_done(struct worker *w, struct msg *m)
{
	if (m->u.done.cell != w->cell) {
		protocol_error(w, "DONE for a cell that is not running",
		    m->type);
		return;
	}
	cap_text(w, &m->u.done.traceback);
	cap_text(w, &m->u.done.exception_type);
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

/*
 * Reading is sliced and back-pressured. The channel is read (one chunk a
 * turn) only when rx holds no frame we could handle and the replies queued
 * to the worker are under OUTQ_PAUSE; buffered frames are handled at most
 * a slice a turn, the rest from a 0 ms timer on the next turn. So rx holds
 * at most one frame and a chunk, outq at most OUTQ_PAUSE and the replies
 * of one slice, and a flood of requests never holds up the loop's timers.
 */
static void chan_more(struct loop *l, void *ctx);

static int
outq_full(const struct worker *w)
{
	return w->outq.len > OUTQ_PAUSE;
}

/* Sets the channel's interest, and arms the continuation when there is
 * buffered work and room for its replies. */
static void
chan_interest(struct worker *w)
{
	short ev = 0;

	if (w->chan < 0)
		return;
	if (w->starved && !outq_full(w))
		ev |= POLLIN;
	if (w->outq.len > 0)
		ev |= POLLOUT;
	loop_events(w->loop, w->chan, ev);
	if (!w->starved && !outq_full(w) && w->more_timer == 0)
		w->more_timer = loop_timer(w->loop, 0, chan_more, w);
}

static void
malformed(struct worker *w)
{
	char why[96];

	(void)snprintf(why, sizeof why, "malformed frame: %s",
	    strerror(errno));
	protocol_error(w, why, 0);
}

/*
 * A REQUEST whose body is over its method's cap: dropped unread (its
 * bytes are skipped as they arrive), reported as a request with no body.
 * Returns 1 when refused (m filled), 0 when not over its cap or more bytes
 * are needed for its head (*wait set then), -1 on a malformed head.
 */
static int
refuse_big(struct worker *w, const uint8_t *body, size_t have, size_t len,
    struct msg *m, int *wait)
{
	int rc;

	if (len <= HOSTREQ_SMALL_CAP)
		return 0;
	rc = msg_request_head(body, have, m);
	if (rc <= 0) {
		*wait = rc == 0;
		return rc;
	}
	if (len <= hostreq_cap(m->u.request.method.ptr, w->cfg.max_frame)) {
		msg_clear(m);
		return 0;
	}
	frame_rx_skip(&w->rx);	/* body.len says how big it was */
	return 1;
}

/* The next frame to handle: 1 with m (*len its body size), 0 when more
 * bytes are needed, -1 when the worker was killed for a bad frame. */
static int
next_frame(struct worker *w, struct msg *m, size_t *len)
{
	const uint8_t *body;
	size_t have;
	unsigned type;
	int rc, wait = 0;

	rc = frame_rx_peek(&w->rx, &type, len, &body, &have);
	if (rc == 1 && type == MSG_REQUEST &&
	    (rc = refuse_big(w, body, have, *len, m, &wait)) != 0) {
		if (rc < 0)
			malformed(w);
		return rc;
	}
	if (rc < 0 || wait) {
		if (rc < 0)
			malformed(w);
		return wait ? 0 : -1;
	}
	if ((rc = frame_rx_pop(&w->rx, m)) < 0)
		malformed(w);
	return rc;
}

/* Handles at most a slice of the buffered frames. */
static void
chan_process(struct worker *w)
{
	size_t bytes = 0, len = 0;
	unsigned frames = 0;
	struct msg m;
	int rc = 1;

	while (w->chan >= 0 && !outq_full(w) && frames < SLICE_FRAMES &&
	    bytes < SLICE_BYTES) {
		if ((rc = next_frame(w, &m, &len)) <= 0)
			break;
		dispatch(w, &m);
		msg_clear(&m);
		frames++;
		bytes += len;
	}
	w->starved = rc == 0;
	chan_interest(w);
}

static void
chan_more(struct loop *l, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	w->more_timer = 0;
	chan_process(w);
}

static void
chan_read(struct worker *w)
{
	ssize_t n;

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
	chan_process(w);
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
	chan_interest(w);
}

static void
chan_event(struct loop *l, int fd, short revents, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	(void)fd;
	if ((revents & POLLOUT) && w->chan >= 0)
		chan_flush(w);
	/* Read only with no whole frame buffered: EOF then loses nothing.
	 * While paused a hang-up is left to the pending write (EPIPE kills
	 * the worker) or to the pidfd. */
	if ((revents & (POLLIN | POLLHUP | POLLERR)) && w->chan >= 0 &&
	    w->starved && !outq_full(w))
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
	if (w->outq.len > OUTQ_EVENTS_MAX) {
		errno = ENOBUFS;	/* the cell does not read its stream */
		return -1;
	}
	m.type = MSG_EVENT;
	m.u.event.id = id;
	m.u.event.body = (struct bytes){ (char *)(uintptr_t)body, len };
	return send_msg(w, &m);
}

int
worker_sweep(struct worker *w)
{
	if (!jail_active(w->cfg.jail) || w->ns_pid <= 0) {
		errno = ENOTSUP;
		return -1;
	}
	return jail_kill(w->cfg.jail, w->ns_pid);
}

int
worker_interrupt(struct worker *w)
{
	if (w->state != WORKER_BUSY) {
		errno = ESRCH;
		return -1;
	}
	return kill(w->wpid, SIGINT);
}
