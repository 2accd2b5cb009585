/*
 * wspawn.c - the fork/exec path of a worker (see workers_impl.h).
 *
 * Owns: the environment allow-list, argv, the descriptors of a new worker,
 * clone/fork, and the child side up to exec. Everything the child does
 * after the fork is async-signal-safe: argv/envp are built before it, the
 * child only moves fds, sets rlimits, drops capabilities, resets signals
 * and execs (or becomes the init of the worker's PID namespace).
 *
 * May include: workers_impl.h, sandbox/ (contain, jail), secrets.h,
 * common/log.h. Nothing here touches the loop.
 */
#include "supervisor/run/workers_impl.h"

#include <errno.h>
#include <fcntl.h>
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
#include "proto/wexit.h"
#include "sandbox/landlock.h"
#include "supervisor/text/secrets.h"

#define MAX_ARGS 20
#define MAX_ENV 256

const char *const worker_sandbox_names[] = { "off", "default", "strict",
	NULL };

static const char *const env_allow[] = {
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE",
	"LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
	"LC_MONETARY", "LC_MESSAGES", "TERM", "TZ", "TMPDIR",
	/* the sanitizer runtime in a SAN build of the worker */
	"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", NULL
};

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

/* Is entry's name one set_env sets? */
static int
env_set(const char *entry, const char *const *set)
{
	size_t n = strcspn(entry, "="), i;

	for (i = 0; set != NULL && set[i] != NULL; i++)
		if (strncmp(set[i], entry, n) == 0 && set[i][n] == '=')
			return 1;
	return 0;
}

static void
build_env(const struct worker *w, char **envp)
{
	extern char **environ;
	size_t n = 0, i;

	for (i = 0; environ[i] != NULL && n < MAX_ENV - 16; i++)
		if (env_allowed(environ[i], w->cfg.pass_env) &&
		    !env_set(environ[i], w->cfg.set_env))
			envp[n++] = environ[i];
	for (i = 0; w->cfg.set_env != NULL && w->cfg.set_env[i] != NULL &&
	    n < MAX_ENV - 3; i++)
		envp[n++] = (char *)(uintptr_t)w->cfg.set_env[i];
	/* Fewer glibc arenas: threads stay cheap under RLIMIT_DATA. */
	envp[n++] = (char *)(uintptr_t)"MALLOC_ARENA_MAX=2";
	envp[n++] = (char *)(uintptr_t)"PYTHONIOENCODING=utf-8";
	envp[n] = NULL;
}

struct spawn_args {
	char *argv[MAX_ARGS];
	char *envp[MAX_ENV];
	char num[6][24];
	int fds[WSPAWN_NFDS];	/* chan, out, err, dump, sync, status, spare,
				 * outsock (the child's ends) */
	struct contain_limits lim;
	const char *path;
	int exe;		/* -1: exec path instead */
	const struct jail *jail;	/* NULL: no jail */
	const char *cwd;		/* without a jail: the workspace */
	/* without a jail's view: Landlock instead (jail_fallback; 0: none) */
	int fb_abi;
	const char *const *fb_ro, *const *fb_rw, *const *fb_files;
};

/* Where the executable's descriptor and the init's status pipe sit in
 * the child (after the output socket, WORKER_OUT_FD). */
#define EXE_FD (WORKER_OUT_FD + 1)
#define STATUS_FD (WORKER_OUT_FD + 2)
#define CHILD_NFDS 8
/* The supervisor's stderr, for the line saying which step failed. */
#define DIAG_FD (WORKER_OUT_FD + 3)

/* In the child: the supervisor's stderr (CLOEXEC), or -1. */
static int diag_fd = -1;

/*
 * Child side: says on the supervisor's stderr which step of starting the
 * worker failed and with which errno (the exit status, WEXIT_EXEC, says
 * only that one did), then exits. Async-signal-safe.
 */
static _Noreturn void
child_fail(const char *what)
{
	const char *name = strerrorname_np(errno);
	const char *parts[] = { "agentz: cannot start the worker: ", what,
	    ": ", name != NULL ? name : "errno?" };
	char line[256];
	size_t n = 0, k, i;

	for (i = 0; i < sizeof parts / sizeof parts[0]; i++)
		for (k = 0; parts[i][k] != '\0' && n < sizeof line - 1; k++)
			line[n++] = parts[i][k];
	line[n++] = '\n';
	if (diag_fd >= 0)
		(void)!write(diag_fd, line, n);
	_exit(WEXIT_EXEC);
}

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
	(void)snprintf(a->num[5], 24, "%u", wworker_next_gen(w));
	a->argv[n++] = (char *)(uintptr_t)"agentz-worker";
	a->argv[n++] = (char *)(uintptr_t)"--sandbox";
	a->argv[n++] = (char *)(uintptr_t)worker_sandbox_names[w->cfg.sandbox];
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
	a->argv[n++] = (char *)(uintptr_t)"--generation";
	a->argv[n++] = a->num[5];
	if (w->cfg.sandbox_debug)
		a->argv[n++] = (char *)(uintptr_t)"--sandbox-debug";
	/* no IPC namespace of its own: the host's SysV objects are near;
	 * or no memory cgroup: SysV shared memory would be bounded by
	 * nothing (it outlives every process and no rlimit counts it) */
	if (!jail_active(w->cfg.jail) || (w->cfg.limits.memory > 0 &&
	    !contain_has_cgroup(w->cfg.contain)))
		a->argv[n++] = (char *)(uintptr_t)"--no-sysv";
	a->argv[n] = NULL;
}

/*
 * Child: park the fds above 9, place them at 0-6 (5: the spare socket,
 * 6: the output socket), the executable (fd 7) and the init's status
 * pipe (fd 8, CLOEXEC: the worker never has it) where present, close the
 * rest. fd 7 survives the exec only because a script's interpreter reads
 * the script through it; agentz-worker closes it before anything else.
 */
static int
child_fds(const int *fds, int status, int exe)
{
	int src[CHILD_NFDS] = { fds[0], fds[1], fds[2], fds[3], fds[6],
	    fds[7], exe, status };
	static const int dst[CHILD_NFDS] = { WORKER_CHAN_FD, 1, 2,
	    WORKER_DUMP_FD, WORKER_SPARE_FD, WORKER_OUT_FD, EXE_FD, STATUS_FD };
	int hi[CHILD_NFDS], nul, i;

	for (i = 0; i < CHILD_NFDS; i++) {
		hi[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, 10);
		if (src[i] >= 0 && hi[i] < 0)
			return -1;
	}
	nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul < 0 || dup2(nul, 0) < 0)
		return -1;
	for (i = 0; i < CHILD_NFDS; i++) {
		if (hi[i] < 0)
			(void)close(dst[i]);
		else if (dup2(hi[i], dst[i]) < 0 || (dst[i] == STATUS_FD &&
		    fcntl(dst[i], F_SETFD, FD_CLOEXEC) < 0))
			return -1;
	}
	if (diag_fd >= 0) {
		if (dup3(diag_fd, DIAG_FD, O_CLOEXEC) < 0)
			return -1;
		diag_fd = DIAG_FD;
	}
	return (int)syscall(SYS_close_range, DIAG_FD + 1, ~0u, 0u);
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
 * 8 and exits, which kills everything left in the namespace (in the
 * run's jail, the jail's own init stays: a snapshot can outlive us).
 * It keeps none of the worker's fds 0-6.
 */
static _Noreturn void
ns_init(const struct spawn_args *a, int status_fd)
{
	const char *what = "";
	pid_t w, r;
	int st;

	w = fork();
	if (w < 0)
		child_fail("fork the worker");
	if (w == 0) {
		if (a->jail != NULL && jail_child_worker(a->jail, &what) < 0)
			child_fail(what);
		exec_worker(a);
		child_fail("exec agentz-worker");
	}
	(void)syscall(SYS_close_range, 0u, (unsigned)WORKER_OUT_FD, 0u);
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
	diag_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
	if (read(a->fds[4], &go, 1) != 1)
		_exit(WEXIT_EXEC);	/* the parent is gone: nothing to say */
	(void)setsid();
	/* into the run's namespaces while we still may; the worker we fork
	 * is born there and takes its own identity */
	if (a->jail != NULL && jail_child_enter(a->jail) < 0)
		child_fail("join the run's namespaces");
	if (a->cwd != NULL && chdir(a->cwd) < 0)
		child_fail("chdir into the workspace");
	if (in_ns && (status_fd = fcntl(a->fds[5], F_DUPFD_CLOEXEC,
	    DIAG_FD + 1)) < 0)
		child_fail("descriptors");
	if (child_fds(a->fds, status_fd, a->exe) < 0)
		child_fail("descriptors");
	if (contain_child_rlimits(&a->lim) < 0)
		child_fail("rlimits");
	if (a->jail == NULL && contain_child_drop_caps() < 0)
		child_fail("drop capabilities");
	if (a->fb_abi > 0 && landlock_restrict_reads(a->fb_ro, a->fb_rw,
	    a->fb_files, a->fb_abi) < 0)
		child_fail("Landlock (no view)");
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			(void)signal(i, SIG_DFL);
	if (in_ns)
		ns_init(a, STATUS_FD);
	exec_worker(a);
	child_fail("exec agentz-worker");
}

void
wspawn_close_fds(int *fds, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fds[i] >= 0) {
			(void)close(fds[i]);
			fds[i] = -1;
		}
}

/*
 * ours/theirs[WSPAWN_NFDS]: chan, out, err, dump, sync, status, spare,
 * outsock. We read the output, dump and status pipes and write the sync
 * pipe; the spare socket (datagrams) carries a promotion to a snapshot,
 * the output socket each cell's pipes (proto.h; we only send on it, so
 * what the worker's side sends fails with EPIPE).
 */
int
wspawn_make_fds(int *ours, int *theirs)
{
	int sv[2], p[5][2], i, one = 1;

	for (i = 0; i < WSPAWN_NFDS; i++)
		ours[i] = theirs[i] = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	ours[7] = sv[0], theirs[7] = sv[1];
	if (shutdown(ours[7], SHUT_RD) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	ours[6] = sv[0], theirs[6] = sv[1];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	ours[0] = sv[0], theirs[0] = sv[1];
	/* who wrote each byte (wchan.c: the worker itself, or nobody) */
	if (setsockopt(ours[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0)
		return -1;
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

int
wspawn_fork(struct worker *w, const int *theirs)
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
	a.fb_abi = jail_fallback(w->cfg.jail, &a.fb_ro, &a.fb_rw,
	    &a.fb_files);
	w->spawned_us = loop_now_us();
	w->spawner_pid = clone_child(w);
	if (w->spawner_pid < 0)
		return -1;
	if (w->spawner_pid == 0)
		child(&a);
	return 0;
}
