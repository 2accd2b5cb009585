/*
 * jail.c - the run's namespaces, the worker's view and the init that
 * holds them (see jail.h).
 *
 * The view is planned in the supervisor (paths, sizes, what to cover,
 * pin and mask: allocation and string work happen here) and carried out
 * by the init right after clone, with system calls only: the supervisor
 * may be multithreaded, so its clone child must stay async-signal-safe.
 * The init makes / a slave tree, pivots into a staging tmpfs so the host
 * is at /oldroot, binds the host's root at /newroot, makes that tree
 * read-only, lays the writable and private parts over it, then pivots
 * into /newroot and detaches the rest, as bubblewrap does.
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
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/path.h"
#include "sandbox/contain.h"
#include "sandbox/landlock.h"

#define MAX_OPS 512
#define READY_WAIT_MS 10000
#define KILL_WAIT_MS 5000

enum op_kind {
	OP_RBIND, OP_RDONLY_TREE, OP_PROC, OP_BIND_RO, OP_TMPFS, OP_MKDIRS,
	OP_MKFILE, OP_BIND, OP_SYMLINK, OP_IDMAP_BIND, OP_PIN, OP_MASK_FILE,
	OP_MASK_DIR, OP_SET_RO, OP_NOSUID
};

static const char *const op_names[] = {
	"bind the host's root", "make read-only", "mount /proc",
	"bind read-only", "mount tmpfs", "make folders", "make file",
	"bind", "make symlink", "bind id-mapped", "pin", "mask file",
	"mask folder", "make read-only", "make nosuid,nodev"
};

struct op {
	enum op_kind kind;
	char *src;		/* host path (/oldroot/...), link target, data */
	char *dst;		/* view path (/newroot/...) */
	unsigned mode;
	int optional;		/* skipped when dst does not exist */
	int ro;
};

struct plan {
	struct op op[MAX_OPS];
	int n;
	int userns;		/* plain user: map our own ids */
	uid_t uid;		/* ours, before the jail */
	gid_t gid;
	int idmap_fd;		/* user namespace of the workspace idmap */
};

struct jail {
	enum jail_mode mode;
	int active;
	pid_t init;
	int pidfd;		/* the init's */
	int ns[5];		/* user, mnt, pid, ipc, uts (user: -1 as root) */
	int cmd;		/* to the init: requests (struct kill_req) */
	uint32_t seq;		/* of the last request */
	int slot_fd;		/* holds the uid slot */
	int userns;
	uid_t wuid;		/* the worker's ids (as root) */
	gid_t wgid;
	int landlock;		/* ABI, 0 = none */
	char *workspace;
	char desc[256];
	struct plan *plan;
	unsigned rebuilds;	/* new inits after a lost one */
	int built;		/* was active once: never runs a worker
				 * without it again */
};

/* What the init reports when the view is up, or which op failed. */
struct init_status {
	int op;			/* -1 = ready */
	int err;
};

/*
 * A request to the init (one SOCK_SEQPACKET message) and its answer. seq
 * pairs them: an answer that comes after its caller gave up is skipped
 * by the next caller, never taken for its own.
 */
enum init_op { INIT_KILL = 1, INIT_EXIT = 2 };

struct kill_req {
	int32_t op;		/* enum init_op */
	uint32_t seq;
	int32_t n;		/* INIT_KILL: how many pids are spared */
	int32_t pid[JAIL_MAX_SPARE];	/* the spared; INIT_EXIT: [0] */
};

struct init_reply {
	uint32_t seq;
	int32_t err;		/* 0, or ESRCH, EBUSY, EINVAL */
	int32_t status;		/* INIT_EXIT: as wait4 gave it */
	uint64_t cpu_us;
	int64_t maxrss_kb;
};

/* What the init reaped last: a ring, the oldest overwritten. */
#define REAPED_MAX 64

struct reaped {
	pid_t pid;		/* 0 = an empty slot */
	int status;
	uint64_t cpu_us;
	long maxrss_kb;
};

struct reaped_log {
	struct reaped r[REAPED_MAX];
	unsigned next;
};

/* --- plan (supervisor side; may allocate) ---------------------------- */

static char *
join(const char *a, const char *b)
{
	char *s;

	return asprintf(&s, "%s%s", a, strcmp(b, "/") == 0 ? "" : b) < 0 ?
	    NULL : s;
}

static int
add(struct plan *p, enum op_kind k, const char *src, const char *dst,
    unsigned mode)
{
	struct op *o;

	if (p->n >= MAX_OPS) {
		errno = E2BIG;
		return -1;
	}
	o = &p->op[p->n];
	memset(o, 0, sizeof *o);
	o->kind = k;
	o->mode = mode;
	o->src = src != NULL ? join("/oldroot", src) : NULL;
	o->dst = dst != NULL ? join("/newroot", dst) : NULL;
	if ((src != NULL && o->src == NULL) || (dst != NULL && o->dst == NULL))
		return -1;
	p->n++;
	return 0;
}

/* An op whose src is taken as it is (a link target, mount data). */
static int
add_raw(struct plan *p, enum op_kind k, const char *raw, const char *dst,
    unsigned mode)
{
	if (add(p, k, NULL, dst, mode) < 0)
		return -1;
	if ((p->op[p->n - 1].src = strdup(raw)) == NULL)
		return -1;
	return 0;
}

static int
add_tmpfs(struct plan *p, const char *dst, unsigned mode, uint64_t size,
    int ro)
{
	char data[64];

	(void)snprintf(data, sizeof data, "mode=%04o,size=%llu", mode,
	    (unsigned long long)size);
	if (add_raw(p, OP_TMPFS, data, dst, mode) < 0)
		return -1;
	p->op[p->n - 1].ro = ro;
	return 0;
}

static int
plan_dev(struct plan *p, uint64_t tmp_size)
{
	static const char *const nodes[] = { "null", "zero", "full",
	    "random", "urandom" };
	static const char *const links[][2] = { { "/proc/self/fd", "fd" },
	    { "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" },
	    { "/proc/self/fd/2", "stderr" } };
	char path[64];
	size_t i;

	if (add_tmpfs(p, "/dev", 0755, 1u << 20, 0) < 0)
		return -1;
	for (i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		(void)snprintf(path, sizeof path, "/dev/%s", nodes[i]);
		if (add(p, OP_MKFILE, NULL, path, 0666) < 0 ||
		    add(p, OP_BIND, path, path, 0) < 0)
			return -1;
	}
	for (i = 0; i < sizeof links / sizeof links[0]; i++) {
		(void)snprintf(path, sizeof path, "/dev/%s", links[i][1]);
		if (add_raw(p, OP_SYMLINK, links[i][0], path, 0) < 0)
			return -1;
	}
	if (add(p, OP_MKDIRS, NULL, "/dev/shm", 0755) < 0 ||
	    add_tmpfs(p, "/dev/shm", 01777, tmp_size, 0) < 0)
		return -1;
	return add(p, OP_SET_RO, NULL, "/dev", 0);
}

/*
 * The first folder above the workspace the worker could not traverse
 * (as its own uid, with no group): a tmpfs there holds just the path
 * down to the workspace. NULL when every one is open to others.
 */
static char *
blocked_ancestor(const char *ws)
{
	char *d = strdup(ws), *s;
	struct stat st;

	if (d == NULL)
		return NULL;
	for (s = strchr(d + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (stat(d, &st) == 0 && (st.st_mode & S_IXOTH) == 0)
			return d;
		*s = '/';
	}
	free(d);
	return NULL;
}

static int
plan_workspace(struct plan *p, const char *ws, int root)
{
	char *cover = NULL;
	int rc = 0;

	/* under /tmp the path is made in the private tmpfs anyway */
	if (root && !path_under(ws, "/tmp"))
		cover = blocked_ancestor(ws);
	if (cover != NULL)
		rc = add_tmpfs(p, cover, 0755, 1u << 20, 0);
	if (rc == 0 && (cover != NULL || path_under(ws, "/tmp")))
		rc = add(p, OP_MKDIRS, NULL, ws, 0755);
	free(cover);
	if (rc < 0 || add(p, root && p->idmap_fd >= 0 ? OP_IDMAP_BIND :
	    OP_BIND, ws, ws, 0) < 0)
		return -1;
	/* no set-id program and no device node runs from what cells write */
	return add(p, OP_NOSUID, NULL, ws, 0);
}

static int
has_op(const struct plan *p, enum op_kind k, const char *dst)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (p->op[i].kind == k && strcmp(p->op[i].dst + 8, dst) == 0)
			return 1;
	return 0;
}

/*
 * Every folder from the workspace down to a binary inside it becomes a
 * mount point (once), so nothing can rename it or move it away.
 */
static int
plan_pins(struct plan *p, const char *ws, const char *file)
{
	char *d;
	size_t i;
	int rc = 0;

	if (!path_under(file, ws) || strcmp(file, ws) == 0)
		return 0;
	if ((d = strdup(file)) == NULL)
		return -1;
	for (i = strlen(ws) + 1; rc == 0 && d[i] != '\0'; i++) {
		if (d[i] != '/')
			continue;
		d[i] = '\0';
		if (!has_op(p, OP_PIN, d))
			rc = add(p, OP_PIN, NULL, d, 0);
		d[i] = '/';
	}
	free(d);
	return rc;
}

/* A binary inside the workspace, read-only on itself (after the pins:
 * a later bind over its folder would cover this one). */
static int
plan_readonly(struct plan *p, const char *ws, const char *file)
{
	struct op *o;

	if (!path_under(file, ws) || strcmp(file, ws) == 0)
		return 0;
	if (add(p, OP_BIND_RO, NULL, file, 0) < 0)
		return -1;
	o = &p->op[p->n - 1];
	free(o->src);		/* the source is the view's own file */
	return (o->src = strdup(o->dst)) != NULL ? 0 : -1;
}

static int
plan_masks(struct plan *p, const char *const *masks)
{
	struct stat st;
	size_t i;

	for (i = 0; masks != NULL && masks[i] != NULL; i++) {
		if (masks[i][0] != '/' || stat(masks[i], &st) < 0)
			continue;
		if (add(p, S_ISDIR(st.st_mode) ? OP_MASK_DIR : OP_MASK_FILE,
		    NULL, masks[i], 0) < 0)
			return -1;
		p->op[p->n - 1].optional = 1;
	}
	return 0;
}

static int
plan_view(struct plan *p, const struct jail_config *c, int root)
{
	size_t i;
	int n;

	if (add(p, OP_RBIND, "/", "/", 0) < 0 ||
	    add(p, OP_RDONLY_TREE, NULL, "/", 0) < 0 ||
	    add(p, OP_PROC, NULL, "/proc", 0) < 0 ||
	    add(p, OP_BIND_RO, "/proc/sys", "/proc/sys", 0) < 0 ||
	    add(p, OP_BIND_RO, "/proc/sysrq-trigger", "/proc/sysrq-trigger",
	    0) < 0)
		return -1;
	p->op[p->n - 1].optional = 1;	/* not every kernel has sysrq */
	if (plan_dev(p, c->tmp_size) < 0 ||
	    add_tmpfs(p, "/sys/fs/cgroup", 0555, 4096, 1) < 0)
		return -1;
	/* the fresh /proc's own files, not the host's */
	for (i = 0; i < (size_t)p->n; i++)
		if (p->op[i].kind == OP_BIND_RO && p->op[i].src != NULL &&
		    path_under(p->op[i].src + 8, "/proc")) {
			free(p->op[i].src);
			if ((p->op[i].src = strdup(p->op[i].dst)) == NULL)
				return -1;
		}
	p->op[p->n - 1].optional = 1;	/* /sys/fs/cgroup */
	if (add_tmpfs(p, "/tmp", 01777, c->tmp_size, 0) < 0 ||
	    plan_workspace(p, c->workspace, root) < 0)
		return -1;
	for (i = 0; c->protect != NULL && c->protect[i] != NULL; i++)
		if (plan_pins(p, c->workspace, c->protect[i]) < 0)
			return -1;
	for (i = 0; c->protect != NULL && c->protect[i] != NULL; i++)
		if (plan_readonly(p, c->workspace, c->protect[i]) < 0)
			return -1;
	/* .git and the run's own files: read-only where they are (not
	 * pinned: a folder moved away takes its read-only .git along) */
	for (i = 0; c->readonly != NULL && c->readonly[i] != NULL; i++) {
		n = p->n;
		if (plan_readonly(p, c->workspace, c->readonly[i]) < 0)
			return -1;
		if (p->n > n)	/* gone meanwhile: nothing to keep */
			p->op[p->n - 1].optional = 1;
	}
	return plan_masks(p, c->masks);
}

static void
plan_free(struct plan *p)
{
	int i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++) {
		free(p->op[i].src);
		free(p->op[i].dst);
	}
	if (p->idmap_fd >= 0)
		(void)close(p->idmap_fd);
	free(p);
}

/* --- the init (clone child; system calls only) ------------------------ */

static int
write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = -1;

	if (fd >= 0) {
		n = write(fd, s, strlen(s));
		(void)close(fd);
	}
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* "N N 1" for an id; no stdio in the clone child. */
static void
id_line(char *out, unsigned long id)
{
	char num[24];
	int n = 0, i;

	do
		num[n++] = (char)('0' + id % 10);
	while ((id /= 10) > 0 && n < 23);
	for (i = 0; i < n; i++)
		out[i] = num[n - 1 - i];
	out[n] = ' ';
	for (i = 0; i < n; i++)
		out[n + 1 + i] = num[n - 1 - i];
	memcpy(out + 2 * n + 1, " 1", 3);
}

static int
map_self(const struct plan *p)
{
	char line[64];

	id_line(line, p->uid);
	if (write_str("/proc/self/uid_map", line) < 0 ||
	    write_str("/proc/self/setgroups", "deny") < 0)
		return -1;
	id_line(line, p->gid);
	return write_str("/proc/self/gid_map", line);
}

static int
mkdirs(const char *path, unsigned mode)
{
	char buf[PATH_MAX];
	size_t i, n = strlen(path);

	if (n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		buf[i] = path[i];
	}
	return 0;
}

static int
set_ro(const char *path, unsigned flags)
{
	struct mount_attr a;

	memset(&a, 0, sizeof a);
	a.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
	return mount_setattr(AT_FDCWD, path, flags, &a, sizeof a);
}

static int
set_nosuid(const char *path)
{
	struct mount_attr a;

	memset(&a, 0, sizeof a);
	a.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	return mount_setattr(AT_FDCWD, path, 0, &a, sizeof a);
}

static int
idmap_bind(const char *src, const char *dst, int userns)
{
	struct mount_attr a;
	int t, rc;

	if ((t = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE |
	    OPEN_TREE_CLOEXEC)) < 0)
		return -1;
	memset(&a, 0, sizeof a);
	a.attr_set = MOUNT_ATTR_IDMAP;
	a.userns_fd = (uint64_t)userns;
	rc = mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof a);
	if (rc == 0)
		rc = move_mount(t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
	(void)close(t);
	return rc;
}

static int
bind_mount(const char *src, const char *dst, unsigned long extra)
{
	return mount(src, dst, NULL, MS_BIND | extra, NULL);
}

static int
run_op(const struct plan *p, const struct op *o)
{
	struct stat st;
	int fd;

	if (o->optional && stat(o->dst, &st) < 0)
		return 0;
	switch (o->kind) {
	case OP_RBIND:
		return bind_mount(o->src, o->dst, MS_REC);
	case OP_RDONLY_TREE:
		return set_ro(o->dst, AT_RECURSIVE);
	case OP_SET_RO:
		return set_ro(o->dst, 0);
	case OP_NOSUID:
		return set_nosuid(o->dst);
	case OP_PROC:
		return mount("proc", o->dst, "proc", MS_NOSUID | MS_NODEV |
		    MS_NOEXEC, NULL);
	case OP_BIND_RO:
		return bind_mount(o->src, o->dst, 0) < 0 ? -1 : set_ro(o->dst, 0);
	case OP_TMPFS:
		return mount("tmpfs", o->dst, "tmpfs", MS_NOSUID | MS_NODEV |
		    (o->ro ? MS_RDONLY : 0), o->src);
	case OP_MKDIRS:
		return mkdirs(o->dst, o->mode);
	case OP_MKFILE:
		if ((fd = open(o->dst, O_CREAT | O_WRONLY | O_CLOEXEC,
		    o->mode)) < 0)
			return -1;
		return close(fd);
	case OP_BIND:
		return bind_mount(o->src, o->dst, 0);
	case OP_SYMLINK:
		return symlink(o->src, o->dst);
	case OP_IDMAP_BIND:
		return idmap_bind(o->src, o->dst, p->idmap_fd);
	case OP_PIN:
		return bind_mount(o->dst, o->dst, 0);
	case OP_MASK_FILE:
		return bind_mount("/mask", o->dst, 0) < 0 ? -1 : set_ro(o->dst, 0);
	case OP_MASK_DIR:
		return mount("tmpfs", o->dst, "tmpfs", MS_NOSUID | MS_NODEV |
		    MS_NOEXEC | MS_RDONLY, "mode=000,size=4096");
	default:
		errno = EINVAL;
		return -1;
	}
}

/* Into a staging tmpfs, with the host's root at /oldroot. */
static int
stage(void)
{
	int fd;

	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1048576") < 0 || chdir("/tmp") < 0 ||
	    mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0 ||
	    syscall(SYS_pivot_root, ".", "oldroot") < 0 || chdir("/") < 0)
		return -1;
	/* what a masked file is: empty, unreadable */
	if ((fd = open("/mask", O_CREAT | O_WRONLY | O_CLOEXEC, 0)) < 0)
		return -1;
	return close(fd);
}

/* /newroot becomes / and the staging tree with the host goes away. */
static int
enter_view(void)
{
	if (chdir("/newroot") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0)
		return -1;
	return chdir("/");
}

static void
report(int fd, int op, int err)
{
	struct init_status s = { op, err };

	(void)!write(fd, &s, sizeof s);
}

static int
spared(const int32_t *spare, int n, long pid)
{
	int i;

	for (i = 0; i < n; i++)
		if (spare[i] == pid)
			return 1;
	return 0;
}

/* The pids one kill has signalled (a fork bomb's worth; more only
 * costs another round). */
#define KILLED_MAX 4096
/* Rounds of /proc scans one kill makes at most. */
#define KILL_ROUNDS 64

struct killed {
	int32_t pid[KILLED_MAX];
	int n;
};

static int
was_killed(const struct killed *k, long pid)
{
	int i;

	for (i = 0; i < k->n; i++)
		if (k->pid[i] == pid)
			return 1;
	return 0;
}

/*
 * Every pid in this namespace's /proc but 1, the n spared and those
 * killed already gets SIGKILL; raw getdents64, since malloc may be
 * unusable in this clone child. Returns how many it signalled (a kill
 * that finds the pid gone does not count).
 */
static int
kill_others(const int32_t *spare, int n, struct killed *k)
{
	char buf[8192];
	long len, off, pid;
	int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), hit = 0;

	if (fd < 0)
		return 0;
	while ((len = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (off = 0; off < len; ) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2,
			 * type 1, name */
			unsigned short reclen;

			memcpy(&reclen, buf + off + 16, sizeof reclen);
			pid = strtol(buf + off + 19, NULL, 10);
			off += reclen;
			if (pid <= 1 || spared(spare, n, pid) ||
			    was_killed(k, pid) || kill((pid_t)pid, SIGKILL) < 0)
				continue;
			hit++;
			if (k->n < KILLED_MAX)
				k->pid[k->n++] = (int32_t)pid;
		}
	(void)close(fd);
	return hit;
}

/*
 * Everything in the namespace but us and the n spared. With some to
 * spare, everything is stopped first, then the others are killed, then
 * the spared go on (SIGCONT also undoes a stop someone else sent them).
 * Neither kill(-1, SIGSTOP) nor kill(-1, SIGKILL) reaches a child whose
 * fork was in flight: it appears after the signal (and after a /proc
 * scan made at once). So the scans go on until one finds nothing left
 * to kill: whatever forked meanwhile was stopped or killed by then, and
 * its children are found by the next scan.
 */
static void
kill_all(const int32_t *spare, int n)
{
	static struct killed k;
	int i, round;

	k.n = 0;
	(void)kill(-1, n == 0 ? SIGKILL : SIGSTOP);
	for (round = 0; round < KILL_ROUNDS; round++)
		if (kill_others(spare, n, &k) == 0)
			break;
	for (i = 0; i < n; i++)
		(void)kill((pid_t)spare[i], SIGCONT);
}

/* Reaps every child that has ended (orphans of the namespace come to
 * us), keeping its status and usage. */
static void
reap_all(struct reaped_log *log)
{
	struct reaped *r;
	struct rusage ru;
	int status;
	pid_t pid;

	while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
		r = &log->r[log->next++ % REAPED_MAX];
		r->pid = pid;
		r->status = status;
		r->cpu_us = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
		    1000000u + (uint64_t)(ru.ru_utime.tv_usec +
		    ru.ru_stime.tv_usec);
		r->maxrss_kb = ru.ru_maxrss;
	}
}

/*
 * How pid ended. Our zombies are reaped first; a pid that is still in
 * use (alive, or a zombie of another parent) is EBUSY, even when an
 * earlier process of that number is in the log: the newest entry of a
 * pid no process holds is the answer.
 */
static void
answer_exit(struct reaped_log *log, pid_t pid, struct init_reply *rep)
{
	const struct reaped *r;
	unsigned i;

	reap_all(log);
	if (pid <= 1) {
		rep->err = EINVAL;
		return;
	}
	if (kill(pid, 0) == 0 || errno == EPERM) {
		rep->err = EBUSY;
		return;
	}
	rep->err = ESRCH;
	for (i = 1; i <= REAPED_MAX; i++) {
		r = &log->r[(log->next - i) % REAPED_MAX];
		if (r->pid != pid)
			continue;
		rep->err = 0;
		rep->status = r->status;
		rep->cpu_us = r->cpu_us;
		rep->maxrss_kb = r->maxrss_kb;
		return;
	}
}

static void
answer(struct reaped_log *log, const struct kill_req *req,
    struct init_reply *rep)
{
	memset(rep, 0, sizeof *rep);
	rep->seq = req->seq;
	if (req->op == INIT_KILL && req->n >= 0 && req->n <= JAIL_MAX_SPARE)
		kill_all(req->pid, req->n);
	else if (req->op == INIT_EXIT)
		answer_exit(log, (pid_t)req->pid[0], rep);
	else
		rep->err = EINVAL;
}

static _Noreturn void
init_loop(int cmd)
{
	static struct reaped_log done;
	struct signalfd_siginfo si;
	struct pollfd pf[2];
	struct kill_req req;
	struct init_reply rep;
	sigset_t set;
	ssize_t n;

	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGCHLD);
	pf[0].fd = cmd, pf[0].events = POLLIN;
	pf[1].fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	pf[1].events = POLLIN;
	for (;;) {
		if (poll(pf, 2, -1) < 0)
			continue;
		while (pf[1].fd >= 0 && read(pf[1].fd, &si, sizeof si) > 0)
			;
		reap_all(&done);
		if (!(pf[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(cmd, &req, sizeof req);
		if (n <= 0 || n != (ssize_t)sizeof req) {
			(void)kill(-1, SIGKILL);
			_exit(0);
		}
		answer(&done, &req, &rep);
		(void)!send(cmd, &rep, sizeof rep, MSG_NOSIGNAL);
	}
}

/*
 * PID 1 of the jail. A PID 1 ignores every signal it has no handler for
 * (from inside its namespace even SIGKILL), and it installs none: the
 * cells cannot touch it. It holds a copy of the supervisor's memory, so
 * it stays non-dumpable.
 */
static _Noreturn void
init_main(const struct plan *p, int cmd)
{
	sigset_t set;
	char go;
	int i;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Dumpable until the supervisor has opened our namespaces (it needs
	 * no CAP_SYS_PTRACE for that then, and a plain user's maps are
	 * ours to write): nothing else is in the namespace before "go". */
	(void)prctl(PR_SET_DUMPABLE, 1);
	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGCHLD);
	(void)sigprocmask(SIG_SETMASK, &set, NULL);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			(void)signal(i, SIG_DFL);
	if (p->userns && map_self(p) < 0) {
		report(cmd, -2, errno);
		_exit(1);
	}
	if (stage() < 0) {
		report(cmd, -3, errno);
		_exit(1);
	}
	for (i = 0; i < p->n; i++)
		if (run_op(p, &p->op[i]) < 0) {
			report(cmd, i, errno);
			_exit(1);
		}
	if (enter_view() < 0) {
		report(cmd, -4, errno);
		_exit(1);
	}
	if (dup2(cmd, 0) < 0)
		_exit(1);
	(void)syscall(SYS_close_range, 1u, ~0u, 0u);
	report(0, -1, 0);
	/* the supervisor opens our namespaces (a plain user needs us
	 * dumpable for that), then says go: nothing else is here yet */
	if (read(0, &go, 1) != 1)
		_exit(0);
	(void)prctl(PR_SET_DUMPABLE, 0);
	init_loop(0);
}

/* --- supervisor side ---------------------------------------------------- */

/* One uid per concurrent run: the slot is an abstract socket name we
 * hold for the run (it goes with us when we die). */
static int
take_slot(int *fd_out)
{
	struct sockaddr_un a;
	unsigned slot;
	int fd;

	for (slot = 0; slot < JAIL_UID_SLOTS; slot++) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return -1;
		memset(&a, 0, sizeof a);
		a.sun_family = AF_UNIX;
		(void)snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
		    "agentz-uid-%u", slot);
		if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			*fd_out = fd;
			return (int)slot;
		}
		(void)close(fd);
		if (errno != EADDRINUSE)
			return -1;
	}
	errno = EAGAIN;
	return -1;
}

/* A user namespace mapping our (the invoking user's) ids to the worker's:
 * through an id-mapped bind, the worker's files land as ours. */
/* The helper of idmap_userns: a user namespace held open while the
 * parent maps it; it says when it may be opened, and waits for EOF. */
static _Noreturn void
idmap_holder(int fd)
{
	char c;

	/* ours to open without CAP_SYS_PTRACE, for the moment */
	(void)prctl(PR_SET_DUMPABLE, 1);
	if (write(fd, "r", 1) == 1)
		(void)!read(fd, &c, 1);
	_exit(0);
}

static int
map_ids(pid_t pid, const char *file, unsigned inside, unsigned outside)
{
	char path[64], line[64];

	(void)snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, file);
	(void)snprintf(line, sizeof line, "%u %u 1", inside, outside);
	return write_str(path, line);
}

/* A user namespace mapping our (the invoking user's) ids to the worker's:
 * through an id-mapped bind, the worker's files land as ours. */
static int
idmap_userns(uid_t ours, gid_t ourg, uid_t theirs, gid_t theirg)
{
	char path[64], c;
	int sv[2], fd = -1;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL,
	    NULL, NULL);
	if (pid == 0) {
		(void)close(sv[0]);
		idmap_holder(sv[1]);
	}
	(void)close(sv[1]);
	if (pid > 0 && read(sv[0], &c, 1) == 1 &&
	    map_ids(pid, "uid_map", ours, theirs) == 0 &&
	    map_ids(pid, "gid_map", ourg, theirg) == 0) {
		(void)snprintf(path, sizeof path, "/proc/%ld/ns/user",
		    (long)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	(void)close(sv[0]);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	return fd;
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

	if (s->op >= 0 && s->op < j->plan->n) {
		o = &j->plan->op[s->op];
		what = o->dst != NULL ? o->dst + 8 : "";
		(void)snprintf(err, len, "cannot build the worker's view: %s "
		    "%s: %s", op_names[o->kind], *what ? what : "/",
		    strerror(s->err));
		return;
	}
	what = s->op == -2 ? "map our ids in a user namespace" : s->op == -3 ?
	    "pivot into a staging tmpfs" : "enter the view";
	(void)snprintf(err, len, "cannot build the worker's view: %s: %s",
	    what, strerror(s->err));
}

static const char *const ns_names[5] = { "user", "mnt", "pid", "ipc",
    "uts" };
static const int ns_types[5] = { CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID,
    CLONE_NEWIPC, CLONE_NEWUTS };

static int
open_ns(struct jail *j)
{
	char path[64];
	int i;

	for (i = j->userns ? 0 : 1; i < 5; i++) {
		(void)snprintf(path, sizeof path, "/proc/%ld/ns/%s",
		    (long)j->init, ns_names[i]);
		if ((j->ns[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return -1;
	}
	return 0;
}

static int
start_init(struct jail *j, char *err, size_t len)
{
	struct init_status s;
	ssize_t n;
	int sv[2], flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
	    CLONE_NEWUTS;

	if (j->userns)
		flags |= CLONE_NEWUSER;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	j->init = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL,
	    NULL);
	if (j->init == 0)
		init_main(j->plan, sv[1]);
	(void)close(sv[1]);
	j->cmd = sv[0];
	if (j->init < 0) {
		(void)snprintf(err, len, "cannot make the worker's namespaces "
		    "(%s): %s", j->userns ? "user, mount, PID, IPC, UTS" :
		    "mount, PID, IPC, UTS", strerror(errno));
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
	if (s.op != -1) {
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
	    "view", j->userns ? "userns," : "");
	if (!j->userns && n > 0 && (size_t)n < sizeof j->desc)
		n += snprintf(j->desc + n, sizeof j->desc - (size_t)n,
		    ",uid=%u%s", j->wuid, j->plan->idmap_fd >= 0 ? ",idmap" :
		    "");
	if (j->landlock > 0 && n > 0 && (size_t)n < sizeof j->desc)
		(void)snprintf(j->desc + n, sizeof j->desc - (size_t)n,
		    ",landlock=%d", j->landlock);
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
	unsigned long a = 1, b = 1, n = 0;
	FILE *f;

	if (geteuid() != 0 || (f = fopen("/proc/self/uid_map", "re")) == NULL)
		return 0;
	if (fscanf(f, "%lu %lu %lu", &a, &b, &n) != 3)
		n = 0;
	(void)fclose(f);
	return a == 0 && b == 0 && n > 0;
}

static int
setup(struct jail *j, const struct jail_config *c, char *err, size_t len)
{
	int root = machine_root(), slot;

	j->userns = !root;
	j->plan->userns = !root;
	j->plan->uid = getuid();
	j->plan->gid = getgid();
	if (root) {
		if ((slot = take_slot(&j->slot_fd)) < 0) {
			(void)snprintf(err, len, "no free worker uid: %s",
			    strerror(errno));
			return -1;
		}
		j->wuid = JAIL_UID_BASE + (unsigned)slot;
		j->wgid = j->wuid;
		j->plan->idmap_fd = idmap_userns(geteuid(), getegid(), j->wuid,
		    j->wgid);
		if (j->plan->idmap_fd < 0) {
			(void)snprintf(err, len, "cannot make the workspace's "
			    "id mapping (a user namespace): %s",
			    strerror(errno));
			return -1;
		}
	}
	if (plan_view(j->plan, c, root) < 0) {
		(void)snprintf(err, len, "cannot plan the worker's view: %s",
		    strerror(errno));
		return -1;
	}
	if (start_init(j, err, len) < 0)
		return -1;
	j->landlock = landlock_abi();
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
	j->pidfd = j->cmd = j->slot_fd = -1;
	for (i = 0; i < 5; i++)
		j->ns[i] = -1;
	err[0] = '\0';
	if (c->workspace != NULL &&
	    (j->workspace = strdup(c->workspace)) == NULL) {
		jail_free(j);
		return NULL;
	}
	if (c->mode == JAIL_OFF) {
		(void)snprintf(j->desc, sizeof j->desc, "none (--isolation "
		    "off)");
		return j;
	}
	if ((j->plan = calloc(1, sizeof *j->plan)) == NULL) {
		jail_free(j);
		return NULL;
	}
	j->plan->idmap_fd = -1;
	if (setup(j, c, err, errlen) == 0)
		return j;
	stop_init(j);
	if (c->mode == JAIL_REQUIRED) {
		jail_free(j);
		return NULL;
	}
	j->active = 0;
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
	for (i = 0; i < 5; i++)
		if (j->ns[i] >= 0)
			(void)close(j->ns[i]);
	if (j->slot_fd >= 0)
		(void)close(j->slot_fd);
	plan_free(j->plan);
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
	for (i = 0; i < 5; i++) {
		if (j->ns[i] >= 0)
			(void)close(j->ns[i]);
		j->ns[i] = -1;
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
ask_init(struct jail *j, struct kill_req *req, struct init_reply *rep)
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
	struct kill_req req;
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
	struct kill_req req;
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

/* --- children (async-signal-safe) --------------------------------------- */

/* The user namespace first: it gives the rights to join the others. */
int
jail_child_enter(const struct jail *j)
{
	int i;

	for (i = 0; i < 5; i++)
		if (j->ns[i] >= 0 && setns(j->ns[i], ns_types[i]) < 0)
			return -1;
	return 0;
}

/* As root: every capability out of the bounding set while we may, then
 * the worker's ids (which clears the rest). */
static int
become_uid(const struct jail *j)
{
	int cap;

	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, j->wgid, j->wgid, j->wgid) < 0 ||
	    syscall(SYS_setresuid, j->wuid, j->wuid, j->wuid) < 0)
		return -1;
	return 0;
}

int
jail_child_worker(const struct jail *j)
{
	const char *dirs[] = { j->workspace, "/tmp", "/dev/shm", NULL };
	const char *files[] = { "/dev/null", "/dev/zero", "/dev/full", NULL };

	if (chdir(j->workspace) < 0)
		return -1;
	/* before Landlock, which would refuse the write */
	(void)write_str("/proc/self/oom_score_adj", "1000");
	if (!j->userns && become_uid(j) < 0)
		return -1;
	if (contain_child_drop_caps() < 0)
		return -1;
	if (j->landlock > 0)
		return landlock_restrict(dirs, files, j->landlock);
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
