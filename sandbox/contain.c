/*
 * contain.c - the run's cgroups and one group per worker (see contain.h;
 * the subreaper sweep is reap.c, the child's capabilities and rlimits
 * child.c).
 *
 * Runs in the supervisor's main thread: may allocate. cgroup v2 follows
 * systemd's delegation pattern: the supervisor moves itself into a leaf
 * "supervisor" of its own cgroup, enables the memory and pids
 * controllers for the subtree and creates one "worker-N" per worker.
 * cgroup v1 (what this kind of machine has) uses one
 * agentz-<pid>/worker-N directory per controller: memory, pids and freezer
 * (freeze, SIGKILL every task, thaw: nothing can fork during the kill).
 * A worker's groups are a struct contain_group. A group freed while its
 * tasks are still exiting waits on a list.
 */
#include "sandbox/contain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/procfs.h"

#define CG_ROOT "/sys/fs/cgroup"
#define PATH_LEN 512

enum cg_kind { CG_NONE, CG_V1, CG_V2 };
enum { V1_MEMORY, V1_PIDS, V1_FREEZER, V1_COUNT };

static const char *const v1_names[V1_COUNT] = { "memory", "pids", "freezer" };

/*
 * One worker's groups: worker-<id> under each controller's base (v2: one
 * directory). A directory already removed is "".
 */
struct contain_group {
	struct contain *c;
	unsigned id;
	char dir[V1_COUNT][PATH_LEN];
	struct contain_group *next;	/* on c->dying */
};

struct contain {
	struct contain_limits lim;
	enum cg_kind kind;
	char base[V1_COUNT][PATH_LEN];	/* v1: per controller; v2: [0] */
	struct contain_group *dying;	/* freed, tasks were still there */
	int pidns;
	char mech[160];
};

/* snprintf into a PATH_LEN buffer; -1/ENAMETOOLONG when it does not fit. */
__attribute__((format(printf, 2, 3))) static int
pathf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_LEN, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= PATH_LEN) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static int
write_file(const char *dir, const char *name, const char *val)
{
	char path[PATH_LEN + 64];
	int fd, rc;
	size_t n = strlen(val);

	(void)snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = write(fd, val, n) == (ssize_t)n ? 0 : -1;
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

static int
read_file(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_LEN + 64];
	ssize_t n;
	int fd;

	(void)snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	(void)close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static uint64_t
read_u64(const char *dir, const char *name, const char *key)
{
	char buf[4096], *p;

	if (read_file(dir, name, buf, sizeof buf) < 0)
		return 0;
	p = buf;
	if (key != NULL) {
		p = strstr(buf, key);
		if (p == NULL)
			return 0;
		p += strlen(key);
	}
	return strtoull(p, NULL, 10);
}

/*
 * Removes the agentz-<pid> groups (and their worker-N) under dir whose
 * supervisor is gone: a SIGKILLed supervisor cannot clean up after itself.
 * A group that still has tasks refuses rmdir (EBUSY) and stays.
 */
static void
sweep_stale(const char *dir)
{
	char path[PATH_LEN], sub[PATH_LEN];
	struct dirent *de, *we;
	DIR *d = opendir(dir), *wd;
	long pid;

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "agentz-", 7) != 0)
			continue;
		pid = strtol(de->d_name + 7, NULL, 10);
		if (pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
		    pathf(path, "%s/%s", dir, de->d_name) < 0)
			continue;
		wd = opendir(path);
		while (wd != NULL && (we = readdir(wd)) != NULL)
			if (strncmp(we->d_name, "worker-", 7) == 0 &&
			    pathf(sub, "%s/%s", path, we->d_name) == 0)
				(void)rmdir(sub);
		if (wd != NULL)
			(void)closedir(wd);
		(void)rmdir(path);
	}
	if (d != NULL)
		(void)closedir(d);
}

static int
setup_v1(struct contain *c)
{
	char own[PATH_LEN];
	int i;

	for (i = 0; i < V1_COUNT; i++) {
		if (procfs_self_cgroup(v1_names[i], own, sizeof own) < 0)
			return -1;
		if (pathf(c->base[i], CG_ROOT "/%s%s%sagentz-%ld", v1_names[i],
		    own, own[strlen(own) - 1] == '/' ? "" : "/",
		    (long)getpid()) < 0)
			return -1;
		*strrchr(c->base[i], '/') = '\0';
		sweep_stale(c->base[i]);
		c->base[i][strlen(c->base[i])] = '/';
		if (mkdir(c->base[i], 0700) < 0 && errno != EEXIST)
			return -1;
	}
	c->kind = CG_V1;
	return 0;
}

static int
setup_v2(struct contain *c)
{
	char own[PATH_LEN], dir[PATH_LEN], pid[24];

	if (access(CG_ROOT "/cgroup.controllers", F_OK) < 0 ||
	    procfs_self_cgroup(NULL, own, sizeof own) < 0)
		return -1;
	if (pathf(dir, CG_ROOT "%s", own) < 0 ||
	    pathf(c->base[0], "%s/agentz-supervisor", dir) < 0)
		return -1;
	/* No internal processes: we move into a leaf of our own group. */
	if (mkdir(c->base[0], 0700) < 0 && errno != EEXIST)
		return -1;
	(void)snprintf(pid, sizeof pid, "%ld", (long)getpid());
	if (write_file(c->base[0], "cgroup.procs", pid) < 0 ||
	    write_file(dir, "cgroup.subtree_control", "+memory +pids") < 0) {
		(void)rmdir(c->base[0]);
		return -1;
	}
	memcpy(c->base[0], dir, PATH_LEN);
	c->kind = CG_V2;
	return 0;
}

static void
describe(struct contain *c)
{
	(void)snprintf(c->mech, sizeof c->mech, "%s%ssubreaper,process-group",
	    c->kind == CG_V2 ? "cgroup-v2," : c->kind == CG_V1 ?
	    "cgroup-v1," : "", c->pidns ? "pid-namespace," : "");
}

struct contain *
contain_new(const struct contain_limits *lim)
{
	struct contain *c = calloc(1, sizeof *c);
	int i;

	if (c == NULL)
		return NULL;
	c->lim = *lim;
	if (access(CG_ROOT "/cgroup.controllers", F_OK) == 0) {
		if (setup_v2(c) < 0)
			c->kind = CG_NONE;
	} else if (setup_v1(c) < 0) {
		for (i = 0; i < V1_COUNT; i++)
			if (c->base[i][0] != '\0')
				(void)rmdir(c->base[i]);
		c->kind = CG_NONE;
	}
	describe(c);
	return c;
}

const char *
contain_mechanisms(const struct contain *c)
{
	return c->mech;
}

void
contain_set_pidns(struct contain *c, int active)
{
	c->pidns = active;
	describe(c);
}

int
contain_has_cgroup(const struct contain *c)
{
	return c->kind != CG_NONE;
}

static int
ncontrollers(const struct contain *c)
{
	return c->kind == CG_V1 ? V1_COUNT : c->kind == CG_V2 ? 1 : 0;
}

static int
write_num(const char *dir, const char *name, unsigned long long v)
{
	char buf[32];

	(void)snprintf(buf, sizeof buf, "%llu", v);
	return write_file(dir, name, buf);
}

/*
 * A group's limits. v1: memory+swap gets the same value as memory, so the
 * ceiling cannot swap; v2: no swap at all, and an OOM kills the whole
 * group (contain_group_oom_group turns that off).
 */
static int
set_limits(struct contain_group *g)
{
	const struct contain *c = g->c;
	int v1 = c->kind == CG_V1;
	const char *mem = g->dir[v1 ? V1_MEMORY : 0];
	const char *pids = g->dir[v1 ? V1_PIDS : 0];

	if (c->lim.memory > 0) {
		if (write_num(mem, v1 ? "memory.limit_in_bytes" : "memory.max",
		    c->lim.memory) < 0)
			return -1;
		(void)write_num(mem, v1 ? "memory.memsw.limit_in_bytes" :
		    "memory.swap.max", v1 ? c->lim.memory : 0);
		if (!v1)
			(void)write_file(mem, "memory.oom.group", "1");
	}
	if (c->lim.pids > 0 && write_num(pids, "pids.max", c->lim.pids) < 0)
		return -1;
	return 0;
}

/* rmdir of every directory left; 0 once all are gone. A group with
 * tasks refuses (EBUSY) until the last one has exited. */
static int
remove_dirs(struct contain_group *g)
{
	int i, left = 0;

	for (i = 0; i < ncontrollers(g->c); i++) {
		if (g->dir[i][0] == '\0')
			continue;
		if (rmdir(g->dir[i]) == 0 || errno == ENOENT)
			g->dir[i][0] = '\0';
		else
			left++;
	}
	return left == 0 ? 0 : -1;
}

/* Retries the groups freed while their tasks were still exiting; the
 * one of id `take` (about to be made again) is dropped from the list. */
static void
retry_dying(struct contain *c, int take, unsigned id)
{
	struct contain_group **pp = &c->dying, *g;

	while ((g = *pp) != NULL) {
		if ((take && g->id == id) || remove_dirs(g) == 0) {
			*pp = g->next;
			free(g);
		} else {
			pp = &g->next;
		}
	}
}

struct contain_group *
contain_group_new(struct contain *c, unsigned id)
{
	struct contain_group *g;
	int i, e;

	if (ncontrollers(c) == 0) {
		errno = ENOTSUP;
		return NULL;
	}
	retry_dying(c, 1, id);
	if ((g = calloc(1, sizeof *g)) == NULL)
		return NULL;
	g->c = c;
	g->id = id;
	for (i = 0; i < ncontrollers(c); i++) {
		if (pathf(g->dir[i], "%s/worker-%u", c->base[i], id) < 0) {
			g->dir[i][0] = '\0';	/* truncated: not ours */
			break;
		}
		if (mkdir(g->dir[i], 0700) < 0 && errno != EEXIST)
			break;
	}
	if (i == ncontrollers(c) && set_limits(g) == 0)
		return g;
	e = errno;
	(void)remove_dirs(g);	/* only the empty ones go */
	free(g);
	errno = e;
	return NULL;
}

int
contain_group_attach(struct contain_group *g, pid_t pid)
{
	int i;

	for (i = 0; i < ncontrollers(g->c); i++)
		if (write_num(g->dir[i], "cgroup.procs",
		    (unsigned long long)pid) < 0)
			return -1;
	return 0;
}

/* SIGKILLs every pid listed in dir/cgroup.procs. */
static int
kill_procs(const char *dir)
{
	char buf[65536], *p, *end;
	long pid;
	int n = 0;

	if (read_file(dir, "cgroup.procs", buf, sizeof buf) < 0)
		return -1;
	for (p = buf; *p != '\0'; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
			n++;
	}
	return n;
}

/*
 * Is every task of the group gone or in exit() already (SIGKILLed: its
 * process group, the jail)? Then nothing in it can fork, and nothing
 * can join (only we attach): a kill has nothing left to do.
 */
static int
all_exiting(const struct contain_group *g)
{
	char buf[65536];
	pid_t pids[256];
	struct procfs_stat st;
	int i, n;

	if (read_file(g->dir[0], "cgroup.procs", buf, sizeof buf) < 0)
		return 0;
	n = procfs_pids(buf, pids, (int)(sizeof pids / sizeof *pids));
	if (n == (int)(sizeof pids / sizeof *pids))
		return 0;	/* perhaps more: the kill decides */
	for (i = 0; i < n; i++) {
		if (procfs_stat(pids[i], &st) < 0) {
			if (errno != ENOENT)
				return 0;
			continue;	/* gone */
		}
		/* one thread (a leader in exit() may leave others
		 * running), past its last fork */
		if (st.threads > 1 || (st.state != 'Z' &&
		    !(st.flags & PROCFS_PF_EXITING)))
			return 0;
	}
	return 1;
}

int
contain_group_kill(struct contain_group *g)
{
	const char *fz;
	char state[32];
	int i, rc;

	/* no freeze and thaw (each a few ms on v1, and the freeze waits
	 * for exiting tasks) at every worker's end */
	if (all_exiting(g))
		return 0;
	if (g->c->kind == CG_V2)
		return write_file(g->dir[0], "cgroup.kill", "1") < 0 ?
		    (kill_procs(g->dir[0]) < 0 ? -1 : 0) : 0;
	fz = g->dir[V1_FREEZER];
	(void)write_file(fz, "freezer.state", "FROZEN");
	/* FREEZING settles in microseconds; bounded so a stuck task
	 * cannot hold us (SIGKILL reaches frozen tasks once thawed). */
	for (i = 0; i < 1000; i++)
		if (read_file(fz, "freezer.state", state, sizeof state) < 0 ||
		    strncmp(state, "FROZEN", 6) == 0)
			break;
	rc = kill_procs(g->dir[V1_MEMORY]);
	(void)kill_procs(fz);
	(void)write_file(fz, "freezer.state", "THAWED");
	return rc < 0 ? -1 : 0;
}

void
contain_group_stats(struct contain_group *g, struct contain_stats *st)
{
	memset(st, 0, sizeof *st);
	if (g->c->kind == CG_V1) {
		st->memory_peak = read_u64(g->dir[V1_MEMORY],
		    "memory.max_usage_in_bytes", NULL);
		st->oom_kills = read_u64(g->dir[V1_MEMORY],
		    "memory.oom_control", "oom_kill ");
	} else {
		st->memory_peak = read_u64(g->dir[0], "memory.peak", NULL);
		st->oom_kills = read_u64(g->dir[0], "memory.events",
		    "oom_kill ");
		st->cpu_ns = read_u64(g->dir[0], "cpu.stat", "usage_usec ") *
		    1000u;
	}
}

int
contain_group_oom_group(struct contain_group *g, int on)
{
	if (g->c->kind != CG_V2)
		return 0;
	return write_file(g->dir[0], "memory.oom.group", on ? "1" : "0");
}

void
contain_group_free(struct contain_group *g)
{
	if (g == NULL)
		return;
	if (remove_dirs(g) == 0) {
		free(g);
		return;
	}
	g->next = g->c->dying;
	g->c->dying = g;
}

int
contain_group_others(struct contain_group *g, const pid_t *known, int n)
{
	char buf[256];
	pid_t pids[16];
	int i, j, np;

	if (g == NULL || g->dir[0][0] == '\0') {
		errno = ENOTSUP;
		return -1;
	}
	if (read_file(g->dir[0], "cgroup.procs", buf, sizeof buf) < 0)
		return -1;
	np = procfs_pids(buf, pids, (int)(sizeof pids / sizeof *pids));
	/* a full buffer or array: perhaps more than it showed */
	if (strlen(buf) == sizeof buf - 1 ||
	    np == (int)(sizeof pids / sizeof *pids))
		return 1;
	for (i = 0; i < np; i++) {
		for (j = 0; j < n && known[j] != pids[i]; j++)
			;
		if (j == n)
			return 1;
	}
	return 0;
}

/* Is the group empty (no task left to kill)? */
static int
group_empty(const struct contain_group *g)
{
	char buf[64];

	return read_file(g->dir[0], "cgroup.procs", buf, sizeof buf) == 0 &&
	    buf[0] == '\0';
}

/*
 * The groups still on the dying list at the end of the run: their tasks
 * are killed, then each gets up to FREE_WAIT_MS to empty (a task that is
 * exiting, e.g. unmapping a large heap, keeps its group busy until it is
 * done; its parent need not have reaped it). What is left after that
 * stays for sweep_stale of a later run.
 */
#define FREE_WAIT_MS 2000

static void
drain_dying(struct contain *c)
{
	const struct timespec ms = { 0, 1000000 };
	struct contain_group *g;
	int i;

	for (g = c->dying; g != NULL; g = g->next)
		if (g->dir[0][0] != '\0' && !group_empty(g))
			(void)contain_group_kill(g);
	for (i = 0; i < FREE_WAIT_MS && c->dying != NULL; i++) {
		retry_dying(c, 0, 0);
		if (c->dying != NULL)
			(void)nanosleep(&ms, NULL);
	}
	while ((g = c->dying) != NULL) {
		c->dying = g->next;
		free(g);
	}
}

void
contain_free(struct contain *c)
{
	int i;

	if (c == NULL)
		return;
	drain_dying(c);
	if (c->kind == CG_V1)
		for (i = 0; i < V1_COUNT; i++)
			(void)rmdir(c->base[i]);
	free(c);
}
