/*
 * agentz-worker - the process that runs cells.
 *
 * Started by the supervisor (fork + exec, never by hand) with the control
 * channel on fd 3, stdin on /dev/null and stdout/stderr as pipes to the
 * supervisor, the spare socket for snapshots on fd 5 (optional) and the
 * output socket on fd 6 (optional: fresh output pipes at a PIPES).
 * Order of set-up: signals reset, CPython initialised, seccomp
 * applied to ourselves (before any thread exists, so every later thread
 * inherits it), READY sent. Then one cell at a time, each perhaps
 * preceded by a SNAP (worker/snap.c), until SHUTDOWN or EOF. Exit codes
 * are enum worker_exit (proto.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"
#include "proto/proto.h"
#include "proto/wexit.h"
#include "sandbox/contain.h"	/* CONTAIN_UNDER_ASAN */
#include "sandbox/seccomp.h"
#include "worker/chan.h"
#include "worker/pipes.h"
#include "worker/py.h"
#include "worker/snap.h"


struct wconfig {
	enum sandbox_profile profile;
	unsigned sandbox_flags;
	pid_t protect_pid;
	pid_t protect_pgid;
	size_t max_frame;
	size_t output_limit;	/* traceback head + tail, as cell output */
	unsigned long long data_limit;
	uint32_t generation;	/* high 32 bits of REQUEST ids */
};

/* What READY says, kept for a promoted snapshot's READY. */
static const char *ready_version, *ready_limits;
static const struct wconfig *ready_config;

static void
usage(void)
{
	(void)fprintf(stderr, "usage: agentz-worker [--sandbox off|default|"
	    "strict] [--sandbox-debug] [--protect-pid N] [--protect-pgid N] "
	    "[--max-frame BYTES] [--output-limit BYTES] [--no-sysv] "
	    "[--generation N]\n(started by agentz, with the control channel "
	    "on fd 3)\n");
	_exit(WEXIT_USAGE);
}

static long
num_arg(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		usage();
	return v;
}

static void
parse_args(int argc, char **argv, struct wconfig *c)
{
	long v;
	int i;

	c->profile = SANDBOX_DEFAULT;
	c->sandbox_flags = 0;
	c->protect_pid = getppid();
	c->protect_pgid = getpgid(c->protect_pid);
	c->max_frame = PROTO_MAX_FRAME_DEFAULT;
	c->output_limit = (size_t)1 << 20;
	c->data_limit = 0;
	c->generation = 0;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--sandbox-debug") == 0)
			c->sandbox_flags |= SANDBOX_DEBUG;
		else if (strcmp(argv[i], "--no-sysv") == 0)
			c->sandbox_flags |= SANDBOX_NO_SYSV;
		else if (i + 1 >= argc)
			usage();
		else if (strcmp(argv[i], "--sandbox") == 0) {
			if (sandbox_profile_parse(argv[++i], &c->profile) < 0)
				usage();
		} else if (strcmp(argv[i], "--protect-pid") == 0)
			c->protect_pid = (pid_t)num_arg(argv[++i]);
		else if (strcmp(argv[i], "--protect-pgid") == 0)
			c->protect_pgid = (pid_t)num_arg(argv[++i]);
		else if (strcmp(argv[i], "--max-frame") == 0)
			c->max_frame = (size_t)num_arg(argv[++i]);
		else if (strcmp(argv[i], "--output-limit") == 0)
			c->output_limit = (size_t)num_arg(argv[++i]);
		else if (strcmp(argv[i], "--memory-limit") == 0)
			c->data_limit = (unsigned long long)num_arg(argv[++i]);
		else if (strcmp(argv[i], "--generation") == 0) {
			v = num_arg(argv[++i]);
			if (v > (long)UINT32_MAX)
				usage();
			c->generation = (uint32_t)v;
		}
		else
			usage();
	}
}

/* Undo whatever dispositions and mask we inherited (SIGINT must work). */
static void
reset_signals(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)signal(sig, SIG_DFL);
	(void)sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * Limits the worker sets on itself: RLIMIT_DATA gives a cell a catchable
 * MemoryError (RLIMIT_AS would break thread creation), and the OOM killer
 * should pick us before anything else. Under AddressSanitizer the shadow
 * memory alone exceeds any sane RLIMIT_DATA, so the cgroup is the only
 * ceiling there. The channel and dump fds must not leak into children.
 */
static const char *
self_limits(const struct wconfig *c)
{
	(void)fcntl(WORKER_CHAN_FD, F_SETFD, FD_CLOEXEC);
	(void)fcntl(WORKER_DUMP_FD, F_SETFD, FD_CLOEXEC);
	(void)fcntl(WORKER_SPARE_FD, F_SETFD, FD_CLOEXEC);
	pipes_init();
	(void)procfs_put("/proc/self/oom_score_adj", "1000");
	if (c->data_limit == 0)
		return "";
#ifdef CONTAIN_UNDER_ASAN
	return ",rlimit_data=off(asan)";
#else
	{
		struct rlimit rl = { (rlim_t)c->data_limit,
		    (rlim_t)c->data_limit };

		return setrlimit(RLIMIT_DATA, &rl) == 0 ? ",rlimit_data" : "";
	}
#endif
}

static int
send_ready(void)
{
	const char *version = ready_version, *lims = ready_limits;
	const struct wconfig *c = ready_config;
	char pyver[64], sbx[128];
	struct msg m;
	size_t n;

	n = strcspn(version, " ");
	if (n >= sizeof pyver)
		n = sizeof pyver - 1;
	memcpy(pyver, version, n);
	pyver[n] = '\0';
	(void)snprintf(sbx, sizeof sbx, "seccomp=%s%s%s%s",
	    sandbox_profile_name(c->profile),
	    (c->sandbox_flags & SANDBOX_DEBUG) ? ",debug" : "",
	    (c->sandbox_flags & SANDBOX_NO_SYSV) && c->profile != SANDBOX_OFF ?
	    ",no-sysv" : "", lims);
	memset(&m, 0, sizeof m);
	m.type = MSG_READY;
	m.u.ready.version = PROTO_VERSION;
	m.u.ready.pid = (uint32_t)getpid();
	m.u.ready.python_version = (struct bytes){ pyver, strlen(pyver) };
	m.u.ready.sandbox = (struct bytes){ sbx, strlen(sbx) };
	return chan_send(&m);
}

static void
serve(size_t output_limit)
{
	struct msg m, done;

	while (py_wait_exec(&m)) {
		if (m.type == MSG_SNAP) {
			if (snap_take(m.u.snap.cell) < 0)
				_exit(WEXIT_CHANNEL);
			msg_clear(&m);
			continue;
		}
		if (m.type == MSG_PIPES) {
			pipes_next();	/* the next cell's pipes */
			msg_clear(&m);
			continue;
		}
		memset(&done, 0, sizeof done);
		done.type = MSG_DONE;
		py_run_cell(m.u.exec.cell, &m.u.exec.code, output_limit,
		    &done.u.done);
		msg_clear(&m);
		if (py_send(&done) < 0)
			_exit(WEXIT_CHANNEL);
		msg_clear(&done);
		snap_discard();	/* the cell ended: no rollback */
	}
	snap_discard();
}

int
main(int argc, char **argv)
{
	struct wconfig c;
	struct stat st;
	const char *version, *lims;

	/* what we were exec'd from (fd 7): never the cells' */
	(void)syscall(SYS_close_range, WORKER_OUT_FD + 1, ~0u, 0u);
	parse_args(argc, argv, &c);
	if (fstat(WORKER_CHAN_FD, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		(void)fprintf(stderr, "agentz-worker: fd %d is not the control "
		    "channel; this program is started by agentz\n", WORKER_CHAN_FD);
		return WEXIT_USAGE;
	}
	reset_signals();
	if (py_init(argv[0], &version) < 0)
		return WEXIT_PYINIT;
	lims = self_limits(&c);
	/* names any trapped call (foreign ABI always, every denial with
	 * --sandbox-debug) on stderr and in the supervisor's record */
	if (c.profile != SANDBOX_OFF &&
	    sandbox_seccomp_debug_install(WORKER_DUMP_FD) < 0)
		return WEXIT_SANDBOX;
	if (sandbox_seccomp_apply(c.profile, c.protect_pid, c.protect_pgid,
	    c.sandbox_flags) < 0) {
		(void)fprintf(stderr, "agentz-worker: seccomp profile %s: %s\n",
		    sandbox_profile_name(c.profile), strerror(errno));
		return WEXIT_SANDBOX;
	}
	chan_init(WORKER_CHAN_FD, c.max_frame, c.generation);
	snap_init(c.profile == SANDBOX_STRICT ?
	    "snapshots are off under --sandbox strict" : NULL, send_ready);
	ready_version = version;
	ready_limits = lims;
	ready_config = &c;
	if (send_ready() < 0)
		return WEXIT_CHANNEL;
	serve(c.output_limit);
	(void)fflush(NULL);
	_exit(WEXIT_OK);
}
