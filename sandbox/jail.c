/*
 * jail.c - the supervisor's side of the run's jail (see jail.h): it
 * plans the view (view.c), clones the init (nsinit.c) into new
 * namespaces (the network's: net.c), opens them for the workers'
 * spawners, asks the init to kill and to say how a process ended, and
 * notices a lost init.
 *
 * Runs in the supervisor's main thread: may allocate, log nothing. The
 * only exceptions are jail_child_enter and jail_child_worker at the end,
 * one-line entries into child.c for a forked child (async-signal-safe).
 *
 * As root there is no user namespace: a user namespace under systemd's
 * ProtectKernelTunables cannot mount a fresh /proc, and root can build
 * the view itself; the worker then gets a dedicated uid and the workspace
 * an id-mapped bind. As a plain user, a user namespace maps the user's
 * own uid and the worker keeps it.
 */
#include "sandbox/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/procfs.h"
#include "sandbox/child.h"
#include "sandbox/idmap.h"
#include "sandbox/landlock.h"
#include "sandbox/net.h"
#include "sandbox/nsinit.h"
#include "sandbox/view.h"

#define READY_WAIT_MS 10000
#define KILL_WAIT_MS 5000

struct jail {
	enum jail_mode mode;
	int active;
	pid_t init;
	int pidfd;		/* the init's */
	int cmd;		/* to the init: requests (struct init_req) */
	uint32_t seq;		/* of the last request */
	int slot_fd;		/* holds the uid slot */
	struct jail_child child;	/* what the workers' children need:
					 * namespaces, ids, Landlock */
	char *workspace;
	char desc[256];
	struct plan *plan;
	int netns;		/* the worker's network: a namespace of its
				 * own (else the host's) */
	int first_net;		/* root: the first init's, made with the
				 * id map's user namespace (ns/net) */
	unsigned rebuilds;	/* new inits after a lost one */
	int built;		/* was active once: never runs a worker
				 * without it again */
	/* best-effort without the view: the Landlock domain a worker gets
	 * instead (jail_fallback), its ABI (0: none) */
	int fb_abi;
	const char *fb_ro[16];
	const char *fb_rw[4];
	const char *fb_files[8];
	char *fb_bins[2];	/* the binaries' folders */
};

/*
 * What a worker may reach without the view: what the view would show of
 * the host, read-only (the interpreter's folders, /etc, /proc, the
 * binaries' folders), the workspace, /tmp and /dev/shm writable, the
 * harmless devices. Anything else - homes, /run, /var, a key file - is
 * out of reach. Landlock's ABI, or 0 when the kernel has none.
 */
static void
plan_fallback(struct jail *j, const struct jail_config *c)
{
	static const char *const ro[] = { "/usr", "/bin", "/sbin", "/lib",
	    "/lib32", "/lib64", "/libx32", "/etc", "/proc" };
	static const char *const files[] = { "/dev/null", "/dev/zero",
	    "/dev/full", "/dev/random", "/dev/urandom", NULL };
	size_t i, n = 0;
	int abi = landlock_abi();

	if (abi <= 0 || j->workspace == NULL)
		return;		/* none: fb_abi stays 0 */
	for (i = 0; i < sizeof ro / sizeof ro[0]; i++)
		j->fb_ro[n++] = ro[i];
	for (i = 0; i < 2 && c->protect != NULL && c->protect[i] != NULL;
	    i++) {
		char *slash;

		if ((j->fb_bins[i] = strdup(c->protect[i])) == NULL)
			break;
		if ((slash = strrchr(j->fb_bins[i], '/')) != NULL &&
		    slash != j->fb_bins[i])
			*slash = '\0';
		j->fb_ro[n++] = j->fb_bins[i];
	}
	j->fb_ro[n] = NULL;
	j->fb_rw[0] = j->workspace;
	j->fb_rw[1] = "/tmp";
	j->fb_rw[2] = "/dev/shm";
	j->fb_rw[3] = NULL;
	memcpy(j->fb_files, files, sizeof files);
	j->fb_abi = abi;
}

int
jail_fallback(const struct jail *j, const char *const **ro,
    const char *const **rw_dirs, const char *const **rw_files)
{
	/* planned only where a best-effort jail could not be built */
	if (j == NULL || j->fb_abi <= 0)
		return 0;
	*ro = j->fb_ro;
	*rw_dirs = j->fb_rw;
	*rw_files = j->fb_files;
	return j->fb_abi;
}

static int
wait_readable(int fd, int ms)
{
	struct pollfd pf = { fd, POLLIN, 0 };
	int n;

	while ((n = poll(&pf, 1, ms)) < 0 && errno == EINTR)
		;
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : -1;
}

static void
explain(const struct jail *j, const struct init_status *s, char *err,
    size_t len)
{
	const struct op *o;
	const char *what;

	if (s->op == INIT_STEP_NET) {
		(void)snprintf(err, len, "cannot set up the worker's network "
		    "namespace (lo up): %s", strerror(s->err));
		return;
	}
	if (s->op >= 0 && s->op < j->plan->n) {
		o = &j->plan->op[s->op];
		(void)snprintf(err, len, "cannot build the worker's view: %s "
		    "%s: %s", view_op_name(o), o->path, strerror(s->err));
		return;
	}
	what = s->op == VIEW_MAP_IDS ? "map our ids in a user namespace" :
	    s->op == VIEW_STAGE ? "pivot into a staging tmpfs" :
	    "enter the view";
	(void)snprintf(err, len, "cannot build the worker's view: %s: %s",
	    what, strerror(s->err));
}

/* In enum jail_ns's order. */
static const char *const ns_names[JAIL_NS_COUNT] = { "ns/user", "ns/mnt",
    "ns/pid", "ns/ipc", "ns/uts", "ns/net" };

static int
open_ns(struct jail *j)
{
	int i;

	for (i = j->child.userns ? JAIL_NS_USER : JAIL_NS_MNT;
	    i < JAIL_NS_COUNT; i++) {
		if (i == JAIL_NS_NET && !j->netns)
			continue;	/* the host's: children keep ours */
		if ((j->child.ns[i] = procfs_open(j->init, ns_names[i],
		    O_RDONLY)) < 0)
			return -1;
	}
	return 0;
}

/*
 * The init's network (nsinit_main's net). A plain user's init makes the
 * namespace in its clone: the jail's user namespace owns it, so the init
 * may bring lo up. Root's joins one made in a user namespace of its own
 * (root may lack CAP_NET_ADMIN, e.g. in a systemd unit): the first init
 * the one idmap_userns made with the id map, a rebuilt init a new one
 * from net_ns_new. -1 with errno if it cannot.
 */
static int
init_net(struct jail *j, int *flags)
{
	int net;

	if (!j->netns)
		return INIT_NET_HOST;
	if (j->child.userns) {
		*flags |= CLONE_NEWNET;
		return INIT_NET_CLONED;
	}
	if (j->first_net >= 0) {
		net = j->first_net;
		j->first_net = -1;
		return net;
	}
	return net_ns_new();	/* a rebuilt init's: a new one */
}

static int
start_init(struct jail *j, char *err, size_t len)
{
	struct init_status s;
	ssize_t n;
	int sv[2], net, flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	    CLONE_NEWUTS;

	if (j->child.userns)
		flags |= CLONE_NEWUSER;
	if ((net = init_net(j, &flags)) == -1) {
		(void)snprintf(err, len, "cannot make the worker's network "
		    "namespace (in a user namespace of its own): %s",
		    strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		if (net >= 0)
			(void)close(net);
		return -1;
	}
	j->init = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL,
	    NULL);
	if (j->init == 0)
		nsinit_main(j->plan, net, sv[1]);
	(void)close(sv[1]);
	if (net >= 0)
		(void)close(net);	/* the init joins it: it lives on */
	j->cmd = sv[0];
	if (j->init < 0) {
		(void)snprintf(err, len, "cannot make the worker's namespaces "
		    "(%s%s): %s", j->child.userns ? "user, mount, PID, IPC, UTS" :
		    "mount, PID, IPC, UTS", flags & CLONE_NEWNET ? ", network" :
		    "", strerror(errno));
		return -1;
	}
	if (wait_readable(j->cmd, READY_WAIT_MS) < 0 ||
	    (n = read(j->cmd, &s, sizeof s)) < 0) {
		(void)snprintf(err, len, "the jail's init did not report: %s",
		    strerror(errno));
		return -1;
	}
	if (n != (ssize_t)sizeof s) {
		(void)snprintf(err, len, "the jail's init ended before it "
		    "reported (killed?)");
		errno = ESRCH;
		return -1;
	}
	if (s.op != VIEW_READY) {
		explain(j, &s, err, len);
		return -1;
	}
	j->pidfd = (int)syscall(SYS_pidfd_open, j->init, 0);
	if (j->pidfd < 0 || open_ns(j) < 0 || write(j->cmd, "g", 1) != 1) {
		(void)snprintf(err, len, "cannot open the jail's namespaces: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

static void
describe(struct jail *j)
{
	int n;

	n = snprintf(j->desc, sizeof j->desc, "%smountns,pidns,ipcns,utsns,"
	    "view%s", j->child.userns ? "userns," : "", j->netns ? ",netns" :
	    "");
	if (!j->child.userns && n > 0 && (size_t)n < sizeof j->desc)
		n += snprintf(j->desc + n, sizeof j->desc - (size_t)n,
		    ",uid=%u%s", j->child.wuid, j->plan->idmap_fd >= 0 ? ",idmap" :
		    "");
	if (j->child.landlock > 0 && n > 0 && (size_t)n < sizeof j->desc)
		(void)snprintf(j->desc + n, sizeof j->desc - (size_t)n,
		    ",landlock=%d", j->child.landlock);
}

/*
 * Are we the machine's root (uid 0 that is uid 0 of the host, whatever
 * namespace we are in)? Then the worker must get another uid: even with
 * no capability, kernel uid 0 owns root's files. A container's root that
 * is some other uid of the host builds the view as a plain user does.
 */
static int
machine_root(void)
{
	unsigned long m[3];

	if (geteuid() != 0 || procfs_id_map(0, "uid_map", m) < 0)
		return 0;
	return m[0] == 0 && m[1] == 0 && m[2] > 0;
}

/*
 * Where the worker writes, for its Landlock domain: the workspace and
 * each --bind (the plan's OP_NOSUID places), /tmp, /dev/shm, and the
 * writable devices. The strings are the plan's.
 */
static int
rw_lists(struct jail *j)
{
	static const char *const devs[] = { "/dev/null", "/dev/zero",
	    "/dev/full" };
	const struct op *o;
	size_t nd = 0, nf = 0, n = (size_t)j->plan->n + 4;
	int i;

	j->child.rw_dirs = calloc(n, sizeof *j->child.rw_dirs);
	j->child.rw_files = calloc(n, sizeof *j->child.rw_files);
	if (j->child.rw_dirs == NULL || j->child.rw_files == NULL)
		return -1;
	for (i = 0; i < j->plan->n; i++) {
		o = &j->plan->op[i];
		if (o->kind == OP_NOSUID && o->mode == S_IFDIR)
			j->child.rw_dirs[nd++] = o->path;
		else if (o->kind == OP_NOSUID && o->mode == S_IFREG)
			j->child.rw_files[nf++] = o->path;
	}
	j->child.rw_dirs[nd++] = "/tmp";
	j->child.rw_dirs[nd] = "/dev/shm";
	for (i = 0; i < 3; i++)
		j->child.rw_files[nf++] = devs[i];
	return 0;
}

static int
setup(struct jail *j, const struct jail_config *c, char *err, size_t len)
{
	int root = machine_root(), slot;

	j->child.userns = !root;
	j->plan->userns = !root;
	j->netns = c->network != JAIL_NET_HOST;
	j->plan->uid = getuid();
	j->plan->gid = getgid();
	j->plan->wuid = getuid();
	j->plan->wgid = getgid();
	if (root) {
		if ((slot = idmap_take_slot(&j->slot_fd)) < 0) {
			(void)snprintf(err, len, "no free worker uid: %s",
			    strerror(errno));
			return -1;
		}
		j->child.wuid = JAIL_UID_BASE + (unsigned)slot;
		j->child.wgid = j->child.wuid;
		j->plan->wuid = j->child.wuid;
		j->plan->wgid = j->child.wgid;
		j->plan->idmap_fd = idmap_userns(geteuid(), getegid(), j->child.wuid,
		    j->child.wgid, j->netns ? &j->first_net : NULL);
		if (j->plan->idmap_fd < 0 && j->netns)	/* which failed? */
			j->plan->idmap_fd = idmap_userns(geteuid(), getegid(),
			    j->child.wuid, j->child.wgid, NULL);
		if (j->plan->idmap_fd < 0) {
			(void)snprintf(err, len, "cannot make the workspace's "
			    "id mapping (a user namespace): %s",
			    strerror(errno));
			return -1;
		}
	}
	if (view_plan(j->plan, c, root) < 0 || rw_lists(j) < 0) {
		(void)snprintf(err, len, "cannot plan the worker's view: %s",
		    strerror(errno));
		return -1;
	}
	if (start_init(j, err, len) < 0)
		return -1;
	j->child.landlock = landlock_abi();
	j->active = 1;
	j->built = 1;
	describe(j);
	return 0;
}

/*
 * Reaps our children until init is among them. A dying PID 1 waits for
 * every task of its namespace to be reaped, and a worker whose spawner
 * died first was reparented to us (we are the subreaper): without this
 * the init and we would wait for each other.
 */
static void
reap_until(pid_t init)
{
	pid_t r;

	do
		r = waitpid(-1, NULL, 0);
	while (r != init && (r > 0 || errno == EINTR));
}

static void
stop_init(struct jail *j)
{
	if (j->init > 0) {
		if (j->pidfd >= 0)
			(void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL,
			    NULL, 0);
		else
			(void)kill(j->init, SIGKILL);
		reap_until(j->init);
		j->init = 0;
	}
}

struct jail *
jail_new(const struct jail_config *c, char *err, size_t errlen)
{
	struct jail *j = calloc(1, sizeof *j);
	int i;

	if (j == NULL)
		return NULL;
	j->mode = c->mode;
	j->pidfd = j->cmd = j->slot_fd = j->first_net = -1;
	for (i = 0; i < JAIL_NS_COUNT; i++)
		j->child.ns[i] = -1;
	err[0] = '\0';
	if (c->workspace != NULL &&
	    (j->workspace = strdup(c->workspace)) == NULL) {
		jail_free(j);
		return NULL;
	}
	j->child.workspace = j->workspace;
	if (c->mode == JAIL_OFF) {
		(void)snprintf(j->desc, sizeof j->desc, "none (--isolation "
		    "off)");
		return j;
	}
	if ((j->plan = view_plan_new()) == NULL) {
		jail_free(j);
		return NULL;
	}
	if (setup(j, c, err, errlen) == 0)
		return j;
	stop_init(j);
	if (c->mode == JAIL_REQUIRED) {
		jail_free(j);
		return NULL;
	}
	j->active = 0;
	plan_fallback(j, c);
	if (j->fb_abi > 0)
		(void)snprintf(j->desc, sizeof j->desc, "landlock=%d (no "
		    "view: %s; files outside what it would show are out of "
		    "reach)", j->fb_abi, err);
	else
		(void)snprintf(j->desc, sizeof j->desc, "none (%s)", err);
	return j;
}

void
jail_free(struct jail *j)
{
	int i;

	if (j == NULL)
		return;
	if (j->cmd >= 0)
		(void)close(j->cmd);	/* the init kills all and exits */
	stop_init(j);
	if (j->pidfd >= 0)
		(void)close(j->pidfd);
	for (i = 0; i < JAIL_NS_COUNT; i++)
		if (j->child.ns[i] >= 0)
			(void)close(j->child.ns[i]);
	if (j->slot_fd >= 0)
		(void)close(j->slot_fd);
	if (j->first_net >= 0)
		(void)close(j->first_net);
	view_plan_free(j->plan);
	free(j->fb_bins[0]);
	free(j->fb_bins[1]);
	free(j->child.rw_dirs);
	free(j->child.rw_files);
	free(j->workspace);
	free(j);
}

/*
 * The init of a jail we built is gone: killed from outside (nothing in
 * the jail can signal it), which killed everything in its namespaces.
 * Its socket hangs up as it exits (its pidfd polls readable only once
 * its namespace is empty).
 */
int
jail_lost(const struct jail *j)
{
	struct pollfd pf[2];
	int n = 0;

	if (j == NULL || !j->built)
		return 0;
	if (!j->active || j->cmd < 0 || j->pidfd < 0 || j->init <= 0)
		return 1;
	pf[n].fd = j->pidfd, pf[n].events = POLLIN, pf[n++].revents = 0;
	pf[n].fd = j->cmd, pf[n].events = 0, pf[n++].revents = 0;
	if (poll(pf, (nfds_t)n, 0) <= 0)
		return 0;
	return (pf[0].revents & POLLIN) != 0 ||
	    (pf[1].revents & (POLLHUP | POLLERR)) != 0;
}

/* The descriptors of a lost init; the init itself is SIGKILLed and
 * reaped if it has ended (else the run's SIGCHLD sweep reaps it: it is
 * no longer jail_init_pid). */
static void
drop_init(struct jail *j)
{
	int i;

	if (j->init > 0) {
		if (j->pidfd >= 0)
			(void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL,
			    NULL, 0);
		(void)waitpid(j->init, NULL, WNOHANG);
	}
	j->init = 0;
	if (j->cmd >= 0)
		(void)close(j->cmd);
	if (j->pidfd >= 0)
		(void)close(j->pidfd);
	j->cmd = j->pidfd = -1;
	for (i = 0; i < JAIL_NS_COUNT; i++) {
		if (j->child.ns[i] >= 0)
			(void)close(j->child.ns[i]);
		j->child.ns[i] = -1;
	}
}

int
jail_rebuild(struct jail *j, char *err, size_t errlen)
{
	err[0] = '\0';
	if (j == NULL || j->plan == NULL) {
		errno = EINVAL;
		(void)snprintf(err, errlen, "no jail to rebuild");
		return -1;
	}
	j->active = 0;
	drop_init(j);
	if (start_init(j, err, errlen) < 0) {
		/* a new init that failed has nothing in its namespaces:
		 * waiting for it is short */
		if (j->init > 0) {
			(void)kill(j->init, SIGKILL);
			(void)waitpid(j->init, NULL, 0);
			j->init = 0;
		}
		drop_init(j);
		return -1;
	}
	j->active = 1;
	j->rebuilds++;
	return 0;
}

unsigned
jail_rebuilds(const struct jail *j)
{
	return j != NULL ? j->rebuilds : 0;
}

int
jail_active(const struct jail *j)
{
	return j != NULL && j->active;
}

const char *
jail_describe(const struct jail *j)
{
	return j != NULL ? j->desc : "none";
}

const char *
jail_network(const struct jail *j)
{
	/* built once, it never runs a worker without it again */
	return j != NULL && j->built && j->netns ? "none" : "host";
}

int
jail_net_listen(const struct jail *j, unsigned short port)
{
	if (j == NULL || !j->active || !j->netns ||
	    j->child.ns[JAIL_NS_NET] < 0) {
		errno = ENOENT;
		return -1;
	}
	return net_listen_in(j->child.userns ? j->child.ns[JAIL_NS_USER] : -1,
	    j->child.ns[JAIL_NS_NET], port);
}

pid_t
jail_init_pid(const struct jail *j)
{
	return jail_active(j) ? j->init : 0;
}

const char *
jail_workspace(const struct jail *j)
{
	return j != NULL ? j->workspace : NULL;
}

static long
now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One request to the init and its answer, within KILL_WAIT_MS. */
static int
ask_init(struct jail *j, struct init_req *req, struct init_reply *rep)
{
	long deadline = now_ms() + KILL_WAIT_MS, left;
	ssize_t n;

	if (!jail_active(j) || j->cmd < 0) {
		errno = ESRCH;
		return -1;
	}
	req->seq = ++j->seq;
	if (send(j->cmd, req, sizeof *req, MSG_NOSIGNAL) !=
	    (ssize_t)sizeof *req)
		return -1;
	for (;;) {
		left = deadline - now_ms();
		if (wait_readable(j->cmd, left > 0 ? (int)left : 0) < 0)
			return -1;
		n = recv(j->cmd, rep, sizeof *rep, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ESRCH;	/* the init is gone */
			return -1;
		}
		/* an answer to an earlier request that timed out: skip */
		if (n == (ssize_t)sizeof *rep && rep->seq == req->seq)
			return 0;
	}
}

int
jail_kill_spare(struct jail *j, const pid_t *spare, size_t n)
{
	struct init_req req;
	struct init_reply rep;
	size_t i;

	if (n > JAIL_MAX_SPARE || (n > 0 && spare == NULL)) {
		errno = EINVAL;
		return -1;
	}
	memset(&req, 0, sizeof req);
	req.op = INIT_KILL;
	req.n = (int32_t)n;
	for (i = 0; i < n; i++) {
		if (spare[i] <= 1) {
			errno = EINVAL;
			return -1;
		}
		req.pid[i] = (int32_t)spare[i];
	}
	if (ask_init(j, &req, &rep) < 0)
		return -1;
	if (rep.err != 0) {
		errno = rep.err;
		return -1;
	}
	return 0;
}

int
jail_kill(struct jail *j, pid_t spare)
{
	/* 1 is the init, spared anyway: as none (this call's old contract) */
	return jail_kill_spare(j, &spare, spare > 1 ? 1 : 0);
}

int
jail_exit_status(struct jail *j, pid_t nspid, struct jail_exit *out)
{
	struct init_req req;
	struct init_reply rep;

	if (nspid <= 1) {
		errno = EINVAL;
		return -1;
	}
	memset(&req, 0, sizeof req);
	req.op = INIT_EXIT;
	req.pid[0] = (int32_t)nspid;
	if (ask_init(j, &req, &rep) < 0)
		return -1;
	if (rep.err != 0) {
		errno = rep.err;
		return -1;
	}
	out->status = rep.status;
	out->cpu_us = rep.cpu_us;
	out->maxrss_kb = (long)rep.maxrss_kb;
	return 0;
}

/* --- children (async-signal-safe: child.c) ------------------------------ */

int
jail_child_enter(const struct jail *j)
{
	return child_enter(&j->child);
}

int
jail_child_worker(const struct jail *j, const char **what)
{
	return child_worker(&j->child, what);
}
