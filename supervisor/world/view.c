/*
 * view.c - the worker's world from the operator's settings (see view.h).
 *
 * Masked always: the workspace's .env, $CREDENTIALS_DIRECTORY, the unit's
 * key folder /etc/agentz and the journal; by default also the usual
 * secret folders of every home (the supervisor's $HOME, /root, and each
 * folder in /home).
 * Paths that do not exist are dropped when the view is built. The view
 * is built on an empty root (sandbox/view.c), so a mask matters in the
 * workspace and in what --ro-bind and --bind add (binds.c).
 *
 * What a cell leaves behind must not hurt the operator: the workspace is
 * marked (VIEW_MARKER, read-only in the view), so that no later agentz
 * loads a .env from it but the one it loaded there itself (named in the
 * marker, masked in the view); every .git in it is read-only
 * (core.fsmonitor in .git/config would run at the operator's next `git
 * status`), and a .git that appears during the run is renamed when it
 * ends, so that the operator's git never takes a repository a cell made
 * for one of theirs.
 */
#include "supervisor/world/view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path.h"
#include "supervisor/world/binds.h"

/* Entries looked at for .git in a workspace, .git kept read-only, .git
 * named in the marker, and the most of a marker read. */
#define GIT_SCAN_MAX 200000
#define GIT_KEEP_MAX 64
#define GIT_RECORD_MAX 1000
#define MARKER_MAX 65536
#define UNTRUSTED ".git.agentz-untrusted"

static const char marker_text[] =
    "This folder is the workspace of agentz runs: their cells write here.\n"
    "agentz loads no .env from here or from a folder below (a cell could\n"
    "have written it) but the one named below, which it loaded here before\n"
    "and kept from the cells; it renames a .git a cell made when the run\n"
    "ends. Remove this file only if no run's cells ever wrote here.\n";

static const char *const home_secrets[] = {
	".ssh", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".netrc", ".gnupg", ".git-credentials", ".config/gh", ".npmrc",
	".pypirc", ".password-store", NULL
};

static int
add_mask(struct view *v, const char *dir, const char *name)
{
	char **nv, *s;

	if (asprintf(&s, "%s%s%s", dir, name != NULL ? "/" : "",
	    name != NULL ? name : "") < 0)
		return -1;
	nv = realloc(v->masks, (v->nmasks + 2) * sizeof *nv);
	if (nv == NULL) {
		free(s);
		return -1;
	}
	nv[v->nmasks++] = s;
	nv[v->nmasks] = NULL;
	v->masks = nv;
	return 0;
}

static int
home_masks(struct view *v, const char *home)
{
	size_t i;

	for (i = 0; home_secrets[i] != NULL; i++)
		if (add_mask(v, home, home_secrets[i]) < 0)
			return -1;
	return 0;
}

static int
default_masks(struct view *v)
{
	const char *home = getenv("HOME");
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (home != NULL && home[0] == '/' && strcmp(home, "/root") != 0 &&
	    home_masks(v, home) < 0)
		return -1;
	if (home_masks(v, "/root") < 0)
		return -1;
	if ((d = opendir("/home")) == NULL)
		return 0;
	while (rc == 0 && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && snprintf(path, sizeof path,
		    "/home/%s", de->d_name) < (int)sizeof path)
			rc = home_masks(v, path);
	(void)closedir(d);
	return rc;
}

/* path made absolute (and resolved when it exists), for a mask. */
static int
add_abs(struct view *v, const char *path)
{
	char buf[PATH_MAX], cwd[PATH_MAX];

	if (realpath(path, buf) != NULL)
		return add_mask(v, buf, NULL);
	if (path[0] == '/')
		return add_mask(v, path, NULL);
	if (getcwd(cwd, sizeof cwd) == NULL)
		return -1;
	return add_mask(v, cwd, path);
}

static int
always_masks(struct view *v, const struct view_options *c)
{
	const char *cred = getenv("CREDENTIALS_DIRECTORY");
	char cwd[PATH_MAX];
	size_t i;

	/* the .env agentz loaded, also with the workspace elsewhere */
	if (getcwd(cwd, sizeof cwd) != NULL && strcmp(cwd, v->workspace) != 0 &&
	    add_mask(v, cwd, ".env") < 0)
		return -1;
	if (add_mask(v, v->workspace, ".env") < 0 ||
	    add_mask(v, "/etc/agentz", NULL) < 0 ||
	    (cred != NULL && cred[0] == '/' && add_mask(v, cred, NULL) < 0) ||
	    (c->journal != NULL && add_abs(v, c->journal) < 0))
		return -1;
	for (i = 0; i < c->nmasks; i++)
		if (add_abs(v, c->masks[i]) < 0)
			return -1;
	return 0;
}

static int
add_readonly(struct view *v, const char *path)
{
	char **nv, *s;

	if ((s = strdup(path)) == NULL)
		return -1;
	nv = realloc(v->readonly, (v->nreadonly + 2) * sizeof *nv);
	if (nv == NULL) {
		free(s);
		return -1;
	}
	nv[v->nreadonly++] = s;
	nv[v->nreadonly] = NULL;
	v->readonly = nv;
	v->jc.readonly = (const char *const *)v->readonly;
	return 0;
}

/* Where main loaded ./.env from (absolute), "" when it did not. */
static char dotenv_dir[PATH_MAX];

void
view_dotenv_loaded(const char *dir)
{
	(void)snprintf(dotenv_dir, sizeof dotenv_dir, "%s", dir);
}

/* What tells one .env from another: ctime is the kernel's, no write,
 * rename or chmod keeps it. */
static void
dotenv_print(const struct stat *st, char *out, size_t len)
{
	(void)snprintf(out, len, "dotenv %llu %llu %lld %lld.%09ld\n",
	    (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
	    (long long)st->st_size, (long long)st->st_ctim.tv_sec,
	    st->st_ctim.tv_nsec);
}

/* The .env of dir (a regular file) as dotenv_print says it; 0 / -1. */
static int
dotenv_of(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX];
	struct stat st;

	if (snprintf(path, sizeof path, "%s/.env", dir) >= (int)sizeof path ||
	    lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	dotenv_print(&st, out, len);
	return 0;
}

/* The marker of ws as text (NUL-ended, allocated), or NULL. */
static char *
marker_read(const char *ws)
{
	char path[PATH_MAX], *buf;
	struct stat st;
	ssize_t n = -1;
	int fd;

	if (snprintf(path, sizeof path, "%s/%s", ws, VIEW_MARKER) >=
	    (int)sizeof path)
		return NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
	    O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if ((buf = malloc(MARKER_MAX + 1)) != NULL && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode))
		n = read(fd, buf, MARKER_MAX);
	(void)close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/*
 * Rewrites the marker: what it is, the .env agentz loaded from the
 * workspace itself (masked in the view: no cell can change it), the .git
 * trusted at the start, and whether a run is going on there (a marker
 * still saying so at the next start: that run never renamed what its
 * cells made).
 */
static void
marker_write(const struct view *v, int running)
{
	struct stat st;
	size_t i;
	int fd, rc = 0;

	if (v->marker == NULL)
		return;
	fd = open(v->marker, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
	    O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    ftruncate(fd, 0) < 0 ||
	    dprintf(fd, "%s%s", marker_text, v->dotenv) < 0)
		rc = -1;
	if (rc == 0 && v->git_record == GIT_RECORD_ANY)
		rc = dprintf(fd, "gits any\n");
	else if (rc == 0 && v->git_record == GIT_RECORD_LIST) {
		rc = dprintf(fd, "gits");
		for (i = 0; rc >= 0 && i < v->ngits; i++)
			rc = dprintf(fd, " %llu:%llu",
			    (unsigned long long)v->gits[i].dev,
			    (unsigned long long)v->gits[i].ino);
		if (rc >= 0)
			rc = dprintf(fd, "\n");
	}
	if (rc >= 0 && running)
		rc = dprintf(fd, "running\n");
	if (rc < 0)
		log_warn("cannot write %s", v->marker);
	if (fd >= 0)
		(void)close(fd);
}

/*
 * The workspace's VIEW_MARKER: made if missing (never through a link,
 * never a FIFO opened) and written; kept read-only in the view (keep)
 * when it is a regular file. A marker that cannot be made is said; the
 * run goes on.
 */
static int
mark_workspace(struct view *v, const char *ws, int keep)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof path, "%s/%s", ws, VIEW_MARKER) >=
	    (int)sizeof path)
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
	    O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (lstat(path, &st) < 0)	/* a link there marks it too */
			log_warn("cannot mark the workspace: %s", path);
		return 0;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		return 0;
	}
	(void)close(fd);
	if ((v->marker = strdup(path)) == NULL)
		return -1;
	/* the .env main loaded from here, as it is now (the view masks it);
	 * without a view (--isolation off) cells could write it: none */
	if (v->jc.mode != JAIL_OFF && strcmp(dotenv_dir, ws) == 0 &&
	    dotenv_of(ws, v->dotenv, sizeof v->dotenv) < 0)
		v->dotenv[0] = '\0';
	marker_write(v, 0);
	return keep ? add_readonly(v, path) : 0;
}

/* Does the marker in ws name line (a dotenv_print line)? */
static int
marker_names(const char *ws, const char *line)
{
	char *buf = marker_read(ws);
	int found = buf != NULL && strstr(buf, line) != NULL;

	free(buf);
	return found;
}

static int
git_known(const struct view *v, const struct stat *st)
{
	size_t i;

	for (i = 0; i < v->ngits; i++)
		if (v->gits[i].dev == st->st_dev && v->gits[i].ino == st->st_ino)
			return 1;
	return 0;
}

/* A .git there at the start: remembered, and read-only in the view
 * (where a link leads, when that is in the workspace). */
static int
git_keep(struct view *v, const char *path, const struct stat *st)
{
	struct view_git *ng;
	char *real;
	int rc = 0;

	ng = realloc(v->gits, (v->ngits + 1) * sizeof *ng);
	if (ng == NULL)
		return -1;
	v->gits = ng;
	v->gits[v->ngits].dev = st->st_dev;
	v->gits[v->ngits++].ino = st->st_ino;
	if (v->ngits > GIT_KEEP_MAX) {
		if (v->ngits == GIT_KEEP_MAX + 1)
			log_warnx("more than %d .git in the workspace: %s and "
			    "those after it stay writable to cells",
			    GIT_KEEP_MAX, path);
		return 0;
	}
	if (!S_ISLNK(st->st_mode))
		return add_readonly(v, path);
	if ((real = realpath(path, NULL)) != NULL &&
	    path_under(real, v->workspace) && strcmp(real, v->workspace) != 0)
		rc = add_readonly(v, real);
	free(real);
	return rc;
}

/* A .git a cell made: renamed beside it, never replacing anything. */
static void
git_untrust(const char *path)
{
	char dst[PATH_MAX];
	size_t dir = strlen(path) - 4;	/* up to ".git" */
	int i;

	for (i = 0; i < 100; i++) {
		if (snprintf(dst, sizeof dst, "%.*s%s%.0d", (int)dir, path,
		    UNTRUSTED, i) >= (int)sizeof dst)
			break;
		if (renameat2(AT_FDCWD, path, AT_FDCWD, dst,
		    RENAME_NOREPLACE) == 0) {
			log_warnx("%s was made by a cell: renamed to %s, so "
			    "that git does not take it for yours "
			    "(--writable-git keeps it)", path, dst);
			return;
		}
		if (errno != EEXIST)
			break;
	}
	log_warn("cannot rename %s, which a cell made: do not run git there",
	    path);
}

/*
 * Every .git in the workspace (not descending into one, nor into another
 * file system): at the start (keep) remembered and made read-only, at
 * the end the ones not remembered renamed. 1 when all was looked at, 0
 * when the workspace was too large, -1 on ENOMEM.
 */
static int
git_scan(struct view *v, int keep)
{
	char *const roots[] = { v->workspace, NULL };
	struct stat st;
	FTSENT *e;
	FTS *f;
	long seen = 0;
	int rc = 1;

	/* no stat but of folders (d_type tells them) and of each .git: both
	 * scans of a workspace of 50,000 files add ~20 ms to a run (~360 ms
	 * with a stat of every entry) */
	f = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR | FTS_XDEV | FTS_NOSTAT,
	    NULL);
	if (f == NULL)
		return 0;
	while (rc == 1 && (e = fts_read(f)) != NULL) {
		if (e->fts_info == FTS_DP || e->fts_info == FTS_NS ||
		    e->fts_level == 0 || strcmp(e->fts_name, ".git") != 0 ||
		    lstat(e->fts_path, &st) < 0) {
			if (++seen <= GIT_SCAN_MAX)
				continue;
			log_warnx("more than %d entries in the workspace %s: "
			    "not all were looked at for .git", GIT_SCAN_MAX,
			    v->workspace);
			rc = 0;
			break;
		}
		if (e->fts_info == FTS_D)
			(void)fts_set(f, e, FTS_SKIP);
		if (keep && git_keep(v, e->fts_path, &st) < 0)
			rc = -1;
		else if (!keep && !git_known(v, &st))
			git_untrust(e->fts_path);
	}
	(void)fts_close(f);
	return rc;
}

/*
 * The last run here never ended (its marker still says running, and
 * names the .git trusted when it started): what its cells made was never
 * renamed; it is now. old: the marker as it was. 0, or -1 on ENOMEM.
 */
static int
untrust_leftovers(struct view *v, const char *old)
{
	const char *g;
	unsigned long long dev, ino;
	struct view_git *ng;
	int used, rc;

	if (old == NULL || strstr(old, "\nrunning\n") == NULL ||
	    (g = strstr(old, "\ngits ")) == NULL ||
	    strncmp(g, "\ngits any\n", 10) == 0)
		return 0;
	log_warnx("the last run in %s did not end: a .git made since it "
	    "started was never renamed", v->workspace);
	for (g += 5; sscanf(g, " %llu:%llu%n", &dev, &ino, &used) == 2;
	    g += used) {
		ng = realloc(v->gits, (v->ngits + 1) * sizeof *ng);
		if (ng == NULL)
			return -1;
		v->gits = ng;
		v->gits[v->ngits].dev = (dev_t)dev;
		v->gits[v->ngits++].ino = (ino_t)ino;
	}
	rc = git_scan(v, 0);
	free(v->gits);
	v->gits = NULL;
	v->ngits = 0;
	return rc < 0 ? -1 : 0;
}

/* What keeps a cell's leftovers from the operator (see the top). */
static int
guard_workspace(struct view *v, const struct view_options *c)
{
	char *old = marker_read(v->workspace);
	int rc;

	if (mark_workspace(v, v->workspace, 1) < 0) {
		free(old);
		return -1;
	}
	if (c->writable_git) {
		free(old);
		v->git_record = GIT_RECORD_ANY;
		marker_write(v, 1);
		return 0;
	}
	rc = untrust_leftovers(v, old);
	free(old);
	if (rc < 0)
		return -1;
	switch (git_scan(v, 1)) {
	case -1:
		return -1;
	case 0:		/* what was not seen cannot be told apart later */
		log_warnx("a .git cells make in %s will not be renamed when "
		    "the run ends", v->workspace);
		break;
	default:
		v->git_watch = 1;
		if (v->ngits <= GIT_RECORD_MAX)
			v->git_record = GIT_RECORD_LIST;
	}
	marker_write(v, 1);
	return 0;
}

/* The outermost folder from dir up that holds VIEW_MARKER: cells write
 * only below it, so its marker is agentz's own. 1 and it in out, or 0. */
static int
outermost_workspace(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX];
	struct stat st;
	size_t n;
	int found = 0;

	if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
		return 0;
	for (;;) {
		n = strlen(path);
		if (snprintf(path + n, sizeof path - n, "%s%s",
		    n > 1 ? "/" : "", VIEW_MARKER) < (int)(sizeof path - n) &&
		    lstat(path, &st) == 0) {
			path[n] = '\0';
			(void)snprintf(out, len, "%s", n > 0 ? path : "/");
			found = 1;
		}
		path[n] = '\0';
		if (n <= 1)
			return found;
		while (n > 1 && path[n - 1] != '/')
			n--;
		path[n > 1 ? n - 1 : 1] = '\0';
	}
}

int
view_dotenv_check(const char *dir, char *ws, size_t len)
{
	char line[128];

	if (!outermost_workspace(dir, ws, len))
		return 0;
	if (strcmp(ws, dir) == 0 && dotenv_of(dir, line, sizeof line) == 0 &&
	    marker_names(ws, line))
		return 1;
	return -1;
}

static int
workspace(struct view *v, const struct view_options *c, const char *cmd)
{
	const char *given = c->workspace != NULL ? c->workspace : ".";
	char buf[PATH_MAX];
	struct stat st;

	if (realpath(given, buf) == NULL || stat(buf, &st) < 0) {
		(void)fprintf(stderr, "%s: workspace '%s': %s\n", cmd, given,
		    strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(void)fprintf(stderr, "%s: workspace '%s' is not a folder\n",
		    cmd, given);
		return -1;
	}
	if (strcmp(buf, "/") == 0 || path_under(buf, "/proc") ||
	    path_under(buf, "/sys") || path_under(buf, "/dev")) {
		(void)fprintf(stderr, "%s: workspace '%s' (%s) would open the "
		    "system to cells; run from a project folder or pass "
		    "--workspace DIR\n", cmd, given, buf);
		return -1;
	}
	return (v->workspace = strdup(buf)) != NULL ? 0 : -1;
}

static enum jail_mode
mode_of(const struct view_options *c)
{
	switch (c->isolation) {
	case ISOLATION_OFF:
		return JAIL_OFF;
	case ISOLATION_REQUIRED:
		return JAIL_REQUIRED;
	case ISOLATION_BEST_EFFORT:
		return JAIL_BEST_EFFORT;
	case ISOLATION_AUTO:
		break;
	}
	/* a plain user's kernel may refuse user namespaces (e.g. AppArmor's
	 * restriction): such a user still gets a worker, and is told */
	return geteuid() == 0 || getenv("NOTIFY_SOCKET") != NULL ||
	    getenv("INVOCATION_ID") != NULL ? JAIL_REQUIRED : JAIL_BEST_EFFORT;
}

int
view_init(struct view *v, const struct view_options *c, const char *wpath,
    const char *cmd)
{
	memset(v, 0, sizeof *v);
	v->jc.mode = mode_of(c);
	v->jc.network = c->network;
	if (v->jc.mode == JAIL_OFF) {
		/* no view, but --workspace is still the worker's cwd */
		if (c->workspace != NULL &&
		    (v->workspace = realpath(c->workspace, NULL)) == NULL) {
			(void)fprintf(stderr, "%s: workspace '%s': %s\n", cmd,
			    c->workspace, strerror(errno));
			return -1;
		}
		v->jc.workspace = v->workspace;
		/* no view to keep anything read-only; no .env from here */
		return mark_workspace(v, v->workspace != NULL ? v->workspace :
		    ".", 0);
	}
	if (workspace(v, c, cmd) < 0)
		return -1;
	if (view_binds(v, c, cmd) < 0) {
		view_binds_clear(v);
		free(v->workspace);
		v->workspace = NULL;
		return -1;
	}
	if (always_masks(v, c) < 0 || guard_workspace(v, c) < 0 ||
	    (!c->no_default_masks && default_masks(v) < 0)) {
		(void)fprintf(stderr, "%s: the worker's view: %s\n", cmd,
		    strerror(errno));
		view_clear(v);
		return -1;
	}
	v->protect[0] = realpath("/proc/self/exe", NULL);
	v->protect[1] = realpath(wpath, NULL);
	if (v->protect[0] == NULL) {	/* keep the list NULL-ended */
		v->protect[0] = v->protect[1];
		v->protect[1] = NULL;
	}
	v->jc.workspace = v->workspace;
	v->jc.tmp_size = c->tmp_size;
	v->jc.masks = (const char *const *)v->masks;
	v->jc.protect = (const char *const *)v->protect;
	return 0;
}

int
view_add_mask(struct view *v, const char *path)
{
	if (v->jc.mode == JAIL_OFF)
		return 0;
	if (add_mask(v, path, NULL) < 0)
		return -1;
	v->jc.masks = (const char *const *)v->masks;
	return 0;
}

void
view_clear(struct view *v)
{
	size_t i;

	/* the run is over: no cell is left to race the renames */
	if (v->git_watch)
		(void)git_scan(v, 0);
	marker_write(v, 0);
	free(v->marker);
	for (i = 0; i < v->nreadonly; i++)
		free(v->readonly[i]);
	free(v->readonly);
	free(v->gits);
	for (i = 0; i < v->nmasks; i++)
		free(v->masks[i]);
	free(v->masks);
	view_binds_clear(v);
	free(v->protect[0]);
	free(v->protect[1]);
	free(v->workspace);
	memset(v, 0, sizeof *v);
}
