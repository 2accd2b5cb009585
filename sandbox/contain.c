/*
 * contain.c - cgroups, subreaper sweep, capability drop and rlimits for
 * the worker (see contain.h).
 *
 * cgroup v2 follows systemd's delegation pattern: the supervisor moves
 * itself into a leaf "supervisor" of its own cgroup, enables the memory
 * and pids controllers for the subtree and creates one "worker-N" per
 * worker. cgroup v1 (what this kind of machine has) uses one
 * agentz-<pid>/worker-N directory per controller: memory, pids and freezer
 * (freeze, SIGKILL every task, thaw: nothing can fork during the kill).
 * A worker's groups are a struct contain_group; contain_prepare and the
 * calls after it keep one current group for callers of one worker. A
 * group freed while its tasks are still exiting waits on a list.
 */
#include "sandbox/contain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	struct contain_group *cur;	/* contain_prepare's, or NULL */
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

/* Our own cgroup path for a v1 controller, or the v2 path ("0::"). */
static int
self_cgroup(const char *ctl, char *out, size_t len)
{
	char line[PATH_LEN];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int found = -1;
	char *a, *b;

	if (f == NULL)
		return -1;
	while (found < 0 && fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		a = strchr(line, ':');
		b = a != NULL ? strchr(a + 1, ':') : NULL;
		if (b == NULL)
			continue;
		*b = '\0';
		if ((ctl == NULL && a[1] == '\0') || (ctl != NULL &&
		    strcmp(a + 1, ctl) == 0)) {
			(void)snprintf(out, len, "%s", b + 1);
			found = 0;
		}
	}
	(void)fclose(f);
	return found;
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
		if (self_cgroup(v1_names[i], own, sizeof own) < 0)
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
	    self_cgroup(NULL, own, sizeof own) < 0)
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

int
contain_group_kill(struct contain_group *g)
{
	const char *fz;
	char state[32];
	int i, rc;

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
	if (g->c->cur == g)
		g->c->cur = NULL;
	if (remove_dirs(g) == 0) {
		free(g);
		return;
	}
	g->next = g->c->dying;
	g->c->dying = g;
}

/* Is the group empty (no task left to kill)? */
static int
group_empty(const struct contain_group *g)
{
	char buf[64];

	return read_file(g->dir[0], "cgroup.procs", buf, sizeof buf) == 0 &&
	    buf[0] == '\0';
}

/* --- the current group (one worker at a time) -------------------------- */

int
contain_prepare(struct contain *c, unsigned generation)
{
	contain_group_free(c->cur);
	if (ncontrollers(c) == 0)
		return 0;
	c->cur = contain_group_new(c, generation);
	return c->cur != NULL ? 0 : -1;
}

int
contain_attach(struct contain *c, pid_t pid)
{
	return c->cur != NULL ? contain_group_attach(c->cur, pid) : 0;
}

int
contain_kill(struct contain *c)
{
	return c->cur != NULL ? contain_group_kill(c->cur) : 0;
}

void
contain_stats(struct contain *c, struct contain_stats *st)
{
	if (c->cur != NULL)
		contain_group_stats(c->cur, st);
	else
		memset(st, 0, sizeof *st);
}

void
contain_release(struct contain *c)
{
	if (c->cur == NULL)
		return;
	if (!group_empty(c->cur))
		(void)contain_group_kill(c->cur);
	contain_group_free(c->cur);
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
	contain_release(c);
	drain_dying(c);
	if (c->kind == CG_V1)
		for (i = 0; i < V1_COUNT; i++)
			(void)rmdir(c->base[i]);
	free(c);
}

/* --- subreaper ------------------------------------------------------------- */

int
contain_subreaper(void)
{
	return prctl(PR_SET_CHILD_SUBREAPER, 1);
}

/* The state letter of pid from /proc/<pid>/stat, or 0. */
static char
proc_state(long pid)
{
	char dir[32], buf[512], *rp, state = 0;

	(void)snprintf(dir, sizeof dir, "/proc/%ld", pid);
	if (read_file(dir, "stat", buf, sizeof buf) < 0)
		return 0;
	rp = strrchr(buf, ')');
	if (rp == NULL || sscanf(rp + 1, " %c", &state) != 1)
		return 0;
	return state;
}

int
contain_children(pid_t parent, pid_t *out, int max)
{
	char dir[64], buf[16384], *p, *end;
	long pid;
	int n = 0;

	(void)snprintf(dir, sizeof dir, "/proc/%ld/task/%ld", (long)parent,
	    (long)parent);
	if (read_file(dir, "children", buf, sizeof buf) < 0)
		return 0;
	for (p = buf; n < max; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0)
			out[n++] = (pid_t)pid;
	}
	return n;
}

/*
 * Our children other than keep (the supervisor forks and reaps from its
 * main thread only, and orphans are reparented to it): with kill set,
 * every one is SIGKILLed; without, only zombies are collected. Their pids
 * go to out (at most max). Returns how many were found.
 */
static int
kept(pid_t pid, const pid_t *keep, int nkeep)
{
	int i;

	for (i = 0; i < nkeep; i++)
		if (keep[i] > 0 && keep[i] == pid)
			return 1;
	return 0;
}

static int
scan_children(const pid_t *keep, int nkeep, int kill_them, pid_t *out,
    int max)
{
	pid_t all[1024];
	int i, found = contain_children(getpid(), all, 1024), n = 0;

	for (i = 0; i < found && n < max; i++) {
		if (kept(all[i], keep, nkeep) ||
		    (!kill_them && proc_state(all[i]) != 'Z'))
			continue;
		/* An unreaped child of ours: its pid cannot be reused. */
		if (kill_them)
			(void)kill(all[i], SIGKILL);
		out[n++] = all[i];
	}
	return n;
}

static int
sweep_round(const pid_t *keep, int nkeep, int kill_them)
{
	pid_t pids[1024];
	int n, i;

	n = scan_children(keep, nkeep, kill_them, pids, 1024);
	for (i = 0; i < n; i++)
		while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
			;
	return n;
}

int
contain_sweep_except(const pid_t *keep, int nkeep)
{
	int total = 0, n, round;

	/* Killing an orphan can reparent its own children to us: repeat. */
	for (round = 0; round < 64; round++) {
		n = sweep_round(keep, nkeep, 1);
		total += n;
		if (n == 0)
			break;
	}
	return total;
}

int
contain_sweep(pid_t keep)
{
	return contain_sweep_except(&keep, 1);
}

int
contain_reap_except(const pid_t *keep, int nkeep)
{
	return sweep_round(keep, nkeep, 0);
}

int
contain_reap(pid_t keep)
{
	return sweep_round(&keep, 1, 0);
}

/* --- child side -------------------------------------------------------------- */

int
contain_child_drop_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	int cap;

	/* Without CAP_SETPCAP (a plain user) the bounding set cannot be
	 * dropped: EPERM. Such a process holds no capability to lose, and
	 * NO_NEW_PRIVS (set with the seccomp filter) stops setuid gains. */
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL &&
		    !(errno == EPERM && geteuid() != 0))
			return -1;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(data, 0, sizeof data);
	return (int)syscall(SYS_capset, &hdr, data);
}

static int
set_limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };

	return setrlimit(res, &rl);
}

int
contain_child_rlimits(const struct contain_limits *lim)
{
	if (set_limit(RLIMIT_CORE, 0) < 0)
		return -1;
	if (lim->nofile > 0 && set_limit(RLIMIT_NOFILE, lim->nofile) < 0)
		return -1;
	if (lim->fsize > 0 && set_limit(RLIMIT_FSIZE, lim->fsize) < 0)
		return -1;
	return 0;
}
