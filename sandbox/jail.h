/*
 * jail.h - the world a run's workers live in (SPEC section 7).
 *
 * Once per run the supervisor builds a jail: an init process that is PID 1
 * of new mount, PID, IPC and UTS namespaces (and of a user namespace when
 * agentz is not root) and lives as long as the run, in a network
 * namespace of the run's own where only lo exists, up (unless the
 * operator keeps the host's network: JAIL_NET_HOST). It builds the view
 * before anything runs there, on an empty root: /usr, /bin, /sbin, /lib*
 * and a filtered /etc of the host read-only, the workspace read-write
 * (id-mapped to the invoking user when the worker gets its own uid), the
 * operator's binds, private size-capped /tmp and /dev/shm, a minimal
 * /dev, a fresh /proc, no /sys, masks inside what is bound, the engine's
 * binaries in the workspace read-only and pinned. Workers are started
 * inside from a spawner that
 * joins those namespaces (jail_child_enter) and forks the worker, which
 * takes its identity and Landlock domain (jail_child_worker) and execs.
 *
 * A best-effort jail that cannot be built gives its workers a Landlock
 * domain instead (jail_fallback): reads beneath what the view would show,
 * writes in the workspace, /tmp and /dev/shm.
 *
 * Should the init be killed from outside (its namespaces die with it),
 * jail_lost says so and jail_rebuild makes a new init, namespaces and
 * view from the same plan.
 *
 * The init kills on request: everything in the namespace, or everything
 * but a few processes (stopped first, so nothing forks meanwhile; /proc
 * is scanned again until no scan finds one left to kill). It
 * reaps every orphan of the namespace and remembers how the last ones
 * ended, for the supervisor to ask about a process that is not its
 * child. Nothing a cell can reach takes part in that.
 *
 * Functions return -1 with errno and never log; jail_new explains a
 * failure in err. jail.c is the supervisor's side; the view is planned
 * by view.c and built by viewmount.c, the init is nsinit.c, and the
 * jail_child_* steps are child.c.
 */
#ifndef AGENTZ_JAIL_H
#define AGENTZ_JAIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum jail_mode { JAIL_OFF, JAIL_BEST_EFFORT, JAIL_REQUIRED };

/* First of the dedicated worker uids (as root): one per concurrent run. */
#define JAIL_UID_BASE 1900000000u
#define JAIL_UID_SLOTS 65536u

/* The worker's network: a namespace of its own with only lo (NONE), the
 * same with the supervisor's egress proxy listening there (PROXY), or
 * the host's (HOST, the operator's opt-out). */
enum jail_network { JAIL_NET_NONE, JAIL_NET_HOST, JAIL_NET_PROXY };

/* A host path added to the view (--ro-bind, --bind). */
struct jail_bind {
	const char *src;		/* absolute, symlinks resolved */
	const char *dst;		/* absolute, in the view */
	int rw;
};

struct jail_config {
	enum jail_mode mode;
	enum jail_network network;
	const char *workspace;		/* absolute, symlinks resolved */
	uint64_t tmp_size;		/* bytes, /tmp and /dev/shm each */
	const char *const *masks;	/* paths to mask, NULL-ended */
	const char *const *protect;	/* files kept read-only, NULL-ended */
	const char *const *readonly;	/* in the workspace, files or folders
					 * kept read-only (not pinned) */
	const struct jail_bind *binds;	/* added to the view, in order */
	size_t nbinds;
};

struct jail;

/*
 * Builds the run's jail (nothing for JAIL_OFF). With JAIL_BEST_EFFORT a
 * view that cannot be built leaves an inactive jail that says why; with
 * JAIL_REQUIRED that is a failure: NULL, and err says what is missing.
 * NULL also on ENOMEM.
 */
struct jail *jail_new(const struct jail_config *c, char *err, size_t errlen);
/* Ends the run's namespaces and everything in them. Accepts NULL. */
void jail_free(struct jail *j);

int jail_active(const struct jail *j);

/*
 * The jail's init is gone (killed from outside, whatever the cause): its
 * namespaces died with everything in them, and nothing can be started
 * there any more. 1 or 0 (also for an inactive jail).
 */
int jail_lost(const struct jail *j);
/*
 * A new world for a lost jail: a new init, namespaces and view from the
 * same plan (the worker's uid, the id mapping, masks and pins stay), and
 * a fresh /tmp and /dev/shm. The old init is reaped if it has ended.
 * Children started later join the new namespaces (jail_child_enter). 0,
 * or -1 with errno and err says why; the jail is inactive then (another
 * jail_rebuild may try again).
 */
int jail_rebuild(struct jail *j, char *err, size_t errlen);
/* How many times the jail was rebuilt. */
unsigned jail_rebuilds(const struct jail *j);
/* What is active, e.g. "mountns,pidns,ipcns,utsns,view,netns,
 * uid=1900000000,idmap,landlock=7", or "none (why)". */
const char *jail_describe(const struct jail *j);
/* The worker's network: "none" (a namespace of its own, only lo) or
 * "host" (JAIL_NET_HOST, and for a jail never built: JAIL_OFF, or
 * best-effort without namespaces). Accepts NULL ("host"). */
const char *jail_network(const struct jail *j);
/*
 * A TCP socket listening on 127.0.0.1:port in the worker's network
 * namespace (the egress proxy's; a jail of the host's network has none:
 * ENOENT). A rebuilt jail has a new namespace: ask again. The
 * descriptor, or -1 with errno.
 */
int jail_net_listen(const struct jail *j, unsigned short port);
/*
 * A best-effort jail whose view could not be built: the Landlock domain
 * its workers get instead (landlock_restrict_reads' lists, valid as long
 * as the jail), and its ABI; 0 when there is none (an active jail, a
 * required or an off one, no Landlock).
 */
int jail_fallback(const struct jail *j, const char *const **ro,
    const char *const **rw_dirs, const char *const **rw_files);
/* The workspace (also without a view: the worker's cwd), or NULL. */
const char *jail_workspace(const struct jail *j);
/* The init's pid (ours, a child of the supervisor), 0 when inactive. */
pid_t jail_init_pid(const struct jail *j);

/*
 * In a forked child of the supervisor, before anything else that needs
 * privilege (async-signal-safe): joins the jail's namespaces. Its
 * children are then born in the jail. 0, or -1 with errno.
 */
int jail_child_enter(const struct jail *j);
/*
 * In the jail's child that becomes a worker (async-signal-safe): the
 * workspace as cwd, the worker's uid and gid (as root), no capabilities,
 * NO_NEW_PRIVS, the Landlock domain. 0, or -1 with errno and *what naming
 * the step that failed.
 */
int jail_child_worker(const struct jail *j, const char **what);

/* How many processes one kill may spare. */
#define JAIL_MAX_SPARE 4

/*
 * SIGKILLs every process of the jail but its init and the n pids of
 * spare (pids as the jail sees them, each > 1; n <= JAIL_MAX_SPARE, 0 =
 * all but the init). With n > 0 everything is stopped first (nothing
 * forks meanwhile), the others are killed, then the spared are
 * continued: SIGCONT, which also undoes a stop someone else sent them. A
 * spared pid that does not exist is no error. Returns when the init has
 * done it (bounded wait): 0, or -1 with errno: EINVAL (n or a pid out of
 * range), ESRCH (the jail is inactive or its init is gone), ETIMEDOUT
 * (the init did not answer), or the socket's error. The killed may still
 * be exiting on return.
 */
int jail_kill_spare(struct jail *j, const pid_t *spare, size_t n);
/* jail_kill_spare of spare alone, or of none when spare is 0 (or 1). */
int jail_kill(struct jail *j, pid_t spare);

/* A process of the jail that has ended, as its init reaped it. */
struct jail_exit {
	int status;		/* as wait(2) gives it: WIFEXITED, ... */
	uint64_t cpu_us;	/* user + system, its reaped children's too */
	long maxrss_kb;		/* peak RSS */
};

/*
 * How nspid (a pid as the jail sees it) ended, for a process the init
 * reaped: one whose parent died before it (e.g. a snapshot promoted to
 * be the worker) is the init's child. The init keeps the last 64 it
 * reaped; a zombie child of the init is reaped by the query. Ask once
 * the process is known to be gone (its pidfd polls readable): a pid is
 * only a number, and a new process of that number makes the answer
 * EBUSY. 0 and *out, or -1 with errno: ESRCH (never reaped by the init,
 * or forgotten since), EBUSY (a process of that pid is alive, or a
 * zombie its parent has not reaped), EINVAL (nspid <= 1), or as
 * jail_kill_spare (inactive jail, no answer).
 */
int jail_exit_status(struct jail *j, pid_t nspid, struct jail_exit *out);

#endif
