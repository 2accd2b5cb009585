/*
 * view.c - the worker's view planned as a list of ops (see view.h).
 *
 * Runs in the supervisor, while it builds or rebuilds the jail: it may
 * allocate, stat the host and format strings. Nothing here runs in the
 * init, which only reads the finished plan (viewmount.c). Each function
 * adding an op returns that op, its source fixed as it is added: a host
 * path (under /oldroot in the init), the view's own file, or data.
 */
#include "sandbox/view.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "sandbox/jail.h"

static const char *const op_names[] = {
	"bind with what is below", "make read-only", "mount /proc",
	"bind read-only", "mount tmpfs", "make folders", "make file",
	"bind", "make symlink", "bind id-mapped", "pin", "mask file",
	"mask folder", "make read-only", "make nosuid,nodev", "write file"
};

/* root + path, "/" adding nothing ("/newroot" for "/"). */
static char *
join(const char *root, const char *path)
{
	char *s;

	return asprintf(&s, "%s%s", root, strcmp(path, "/") == 0 ? "" :
	    path) < 0 ? NULL : s;
}

/* An op at view path `path` with no source. NULL with errno. */
static struct op *
op_new(struct plan *p, enum op_kind k, const char *path, unsigned mode)
{
	struct op *o;

	if (p->n >= VIEW_MAX_OPS) {
		errno = E2BIG;
		return NULL;
	}
	o = &p->op[p->n];
	memset(o, 0, sizeof *o);
	o->kind = k;
	o->mode = mode;
	if ((o->path = strdup(path)) == NULL ||
	    (o->dst = join("/newroot", path)) == NULL) {
		free(o->path);
		o->path = NULL;
		return NULL;
	}
	p->n++;
	return o;
}

/* An op binding the host's `host` at view path `path`. */
static struct op *
op_host(struct plan *p, enum op_kind k, const char *host, const char *path)
{
	struct op *o = op_new(p, k, path, 0);

	if (o == NULL || (o->src = join("/oldroot", host)) == NULL)
		return NULL;
	return o;
}

/* An op binding the view's own file at path over itself. */
static struct op *
op_self(struct plan *p, enum op_kind k, const char *path)
{
	struct op *o = op_new(p, k, path, 0);

	if (o == NULL || (o->src = strdup(o->dst)) == NULL)
		return NULL;
	return o;
}

/* An op carrying data (a link target, mount options). */
static struct op *
op_data(struct plan *p, enum op_kind k, const char *data, const char *path,
    unsigned mode)
{
	struct op *o = op_new(p, k, path, mode);

	if (o == NULL || (o->data = strdup(data)) == NULL)
		return NULL;
	return o;
}

static struct op *
op_tmpfs(struct plan *p, const char *path, unsigned mode, uint64_t size,
    int ro)
{
	char data[64];
	struct op *o;

	(void)snprintf(data, sizeof data, "mode=%04o,size=%llu", mode,
	    (unsigned long long)size);
	if ((o = op_data(p, OP_TMPFS, data, path, mode)) != NULL)
		o->ro = ro;
	return o;
}

struct op *
view_op(struct plan *p, enum op_kind k, const char *path, const char *host,
    const char *data, unsigned mode)
{
	struct op *o = op_new(p, k, path, mode);

	if (o == NULL || (host != NULL && (o->src = join("/oldroot",
	    host)) == NULL) || (data != NULL && (o->data = strdup(data)) ==
	    NULL))
		return NULL;
	return o;
}

/* A folder of the host, read-only with what is mounted below it. */
static int
plan_host_dir(struct plan *p, const char *host, const char *path)
{
	return op_new(p, OP_MKDIRS, path, 0755) == NULL ||
	    op_host(p, OP_RBIND, host, path) == NULL ||
	    op_new(p, OP_RDONLY_TREE, path, 0) == NULL ? -1 : 0;
}

/* An empty file at path, its folder made. */
static int
plan_file(struct plan *p, const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (slash != NULL && slash != path) {
		(void)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path),
		    path);
		if (op_new(p, OP_MKDIRS, dir, 0755) == NULL)
			return -1;
	}
	return op_new(p, OP_MKFILE, path, 0644) != NULL ? 0 : -1;
}

/* A file of the host, read-only. */
static int
plan_host_file(struct plan *p, const char *host, const char *path)
{
	return plan_file(p, path) < 0 ||
	    op_host(p, OP_BIND_RO, host, path) == NULL ? -1 : 0;
}

int
view_plan_host(struct plan *p, const char *host, const char *path,
    int keep_link)
{
	char link[PATH_MAX], real[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(host, &st) < 0)
		return 0;
	if (S_ISLNK(st.st_mode) && keep_link) {
		if ((n = readlink(host, link, sizeof link - 1)) < 0)
			return 0;
		link[n] = '\0';
		return op_data(p, OP_SYMLINK, link, path, 0) != NULL ? 0 : -1;
	}
	if (S_ISLNK(st.st_mode)) {
		if (realpath(host, real) == NULL || stat(real, &st) < 0)
			return 0;	/* leads nowhere */
		host = real;
	}
	if (S_ISDIR(st.st_mode))
		return plan_host_dir(p, host, path);
	return S_ISREG(st.st_mode) ? plan_host_file(p, host, path) : 0;
}

/*
 * An empty root, and what the interpreter needs of the host's, read-only:
 * /usr, and /bin, /sbin and every /lib* (links into /usr on a merged-usr
 * system, made again), a filtered /etc (viewetc.c). A fresh /proc whose
 * own sys and sysrq-trigger are read-only; no /sys.
 */
static int
plan_root(struct plan *p)
{
	char path[NAME_MAX + 2];
	struct dirent *de;
	struct op *o;
	DIR *d;
	int rc = 0;

	if (op_tmpfs(p, "/", 0755, 1u << 20, 0) == NULL ||
	    plan_host_dir(p, "/usr", "/usr") < 0)
		return -1;
	if ((d = opendir("/")) == NULL)
		return -1;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "lib", 3) != 0 &&
		    strcmp(de->d_name, "bin") != 0 &&
		    strcmp(de->d_name, "sbin") != 0)
			continue;
		(void)snprintf(path, sizeof path, "/%s", de->d_name);
		rc = view_plan_host(p, path, path, 1);
	}
	(void)closedir(d);
	if (rc < 0 || view_plan_etc(p) < 0 ||
	    op_new(p, OP_MKDIRS, "/proc", 0755) == NULL ||
	    op_new(p, OP_PROC, "/proc", 0) == NULL ||
	    op_self(p, OP_BIND_RO, "/proc/sys") == NULL ||
	    (o = op_self(p, OP_BIND_RO, "/proc/sysrq-trigger")) == NULL)
		return -1;
	o->optional = 1;	/* not every kernel has sysrq */
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

	if (op_new(p, OP_MKDIRS, "/dev", 0755) == NULL ||
	    op_tmpfs(p, "/dev", 0755, 1u << 20, 0) == NULL)
		return -1;
	for (i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		(void)snprintf(path, sizeof path, "/dev/%s", nodes[i]);
		if (op_new(p, OP_MKFILE, path, 0666) == NULL ||
		    op_host(p, OP_BIND, path, path) == NULL)
			return -1;
	}
	for (i = 0; i < sizeof links / sizeof links[0]; i++) {
		(void)snprintf(path, sizeof path, "/dev/%s", links[i][1]);
		if (op_data(p, OP_SYMLINK, links[i][0], path, 0) == NULL)
			return -1;
	}
	if (op_new(p, OP_MKDIRS, "/dev/shm", 0755) == NULL ||
	    op_tmpfs(p, "/dev/shm", 01777, tmp_size, 0) == NULL ||
	    op_new(p, OP_SET_RO, "/dev", 0) == NULL)
		return -1;
	return 0;
}

/* The workspace read-write at its own path (its folders made in the
 * empty root, or in the private /tmp). */
static int
plan_workspace(struct plan *p, const char *ws, int root)
{
	if (op_new(p, OP_MKDIRS, ws, 0755) == NULL ||
	    op_host(p, root && p->idmap_fd >= 0 ? OP_IDMAP_BIND : OP_BIND, ws,
	    ws) == NULL)
		return -1;
	/* no set-id program and no device node runs from what cells write
	 * (OP_NOSUID's mode: what the worker may write, for Landlock) */
	return op_new(p, OP_NOSUID, ws, S_IFDIR) != NULL ? 0 : -1;
}

/* --ro-bind: a folder with what is mounted below it, or a file,
 * read-only; --bind: read-write, nosuid,nodev, id-mapped as the
 * workspace is (as root the worker writes there as the operator). */
static int
plan_binds(struct plan *p, const struct jail_bind *b, size_t n, int root)
{
	enum op_kind rw = root && p->idmap_fd >= 0 ? OP_IDMAP_BIND : OP_BIND;
	struct stat st;
	size_t i;
	int dir;

	for (i = 0; i < n; i++) {
		if (stat(b[i].src, &st) < 0)
			return -1;
		dir = S_ISDIR(st.st_mode);
		if (dir && !b[i].rw && plan_host_dir(p, b[i].src,
		    b[i].dst) < 0)
			return -1;
		if (!dir && !b[i].rw && plan_host_file(p, b[i].src,
		    b[i].dst) < 0)
			return -1;
		if (b[i].rw && ((dir ? op_new(p, OP_MKDIRS, b[i].dst, 0755) ==
		    NULL : plan_file(p, b[i].dst) < 0) ||
		    op_host(p, rw, b[i].src, b[i].dst) == NULL ||
		    op_new(p, OP_NOSUID, b[i].dst, dir ? S_IFDIR : S_IFREG) ==
		    NULL))
			return -1;
	}
	return 0;
}

static int
has_op(const struct plan *p, enum op_kind k, const char *path)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (p->op[i].kind == k && strcmp(p->op[i].path, path) == 0)
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
		if (!has_op(p, OP_PIN, d) && op_new(p, OP_PIN, d, 0) == NULL)
			rc = -1;
		d[i] = '/';
	}
	free(d);
	return rc;
}

/* A file inside the workspace, read-only on itself (after the pins: a
 * later bind over its folder would cover this one); optional: skipped
 * when it is gone by then. */
static int
plan_readonly(struct plan *p, const char *ws, const char *file,
    int optional)
{
	struct op *o;

	if (!path_under(file, ws) || strcmp(file, ws) == 0)
		return 0;
	if ((o = op_self(p, OP_BIND_RO, file)) == NULL)
		return -1;
	o->optional = optional;
	return 0;
}

static int
plan_mask(struct plan *p, const char *path, int dir)
{
	struct op *o;

	if ((o = op_new(p, dir ? OP_MASK_DIR : OP_MASK_FILE, path, 0)) ==
	    NULL)
		return -1;
	o->optional = 1;	/* only where the view has it */
	return 0;
}

/* Each mask where the host has it, and where a bind shows it elsewhere
 * (a SRC holding it bound at another DST). */
static int
plan_masks(struct plan *p, const struct jail_config *c)
{
	const char *const *masks = c->masks;
	char moved[PATH_MAX];
	struct stat st;
	size_t i, k;

	for (i = 0; masks != NULL && masks[i] != NULL; i++) {
		if (masks[i][0] != '/' || stat(masks[i], &st) < 0)
			continue;
		if (plan_mask(p, masks[i], S_ISDIR(st.st_mode)) < 0)
			return -1;
		for (k = 0; k < c->nbinds; k++) {
			if (!path_under(masks[i], c->binds[k].src) ||
			    strcmp(c->binds[k].src, c->binds[k].dst) == 0 ||
			    snprintf(moved, sizeof moved, "%s%s",
			    c->binds[k].dst, masks[i] +
			    strlen(c->binds[k].src)) >= (int)sizeof moved)
				continue;
			if (plan_mask(p, moved, S_ISDIR(st.st_mode)) < 0)
				return -1;
		}
	}
	return 0;
}

int
view_plan(struct plan *p, const struct jail_config *c, int root)
{
	size_t i;

	if (plan_root(p) < 0 || plan_dev(p, c->tmp_size) < 0 ||
	    op_new(p, OP_MKDIRS, "/tmp", 0755) == NULL ||
	    op_tmpfs(p, "/tmp", 01777, c->tmp_size, 0) == NULL ||
	    plan_workspace(p, c->workspace, root) < 0 ||
	    plan_binds(p, c->binds, c->nbinds, root) < 0)
		return -1;
	for (i = 0; c->protect != NULL && c->protect[i] != NULL; i++)
		if (plan_pins(p, c->workspace, c->protect[i]) < 0)
			return -1;
	for (i = 0; c->protect != NULL && c->protect[i] != NULL; i++)
		if (plan_readonly(p, c->workspace, c->protect[i], 0) < 0)
			return -1;
	/* .git and the run's own files: read-only where they are (not
	 * pinned: a folder moved away takes its read-only .git along) */
	for (i = 0; c->readonly != NULL && c->readonly[i] != NULL; i++)
		if (plan_readonly(p, c->workspace, c->readonly[i], 1) < 0)
			return -1;
	/* the empty root itself read-only, once everything is in it */
	if (plan_masks(p, c) < 0 ||
	    op_new(p, OP_SET_RO, "/", 0) == NULL)
		return -1;
	return 0;
}

struct plan *
view_plan_new(void)
{
	struct plan *p = calloc(1, sizeof *p);

	if (p != NULL)
		p->idmap_fd = -1;
	return p;
}

void
view_plan_free(struct plan *p)
{
	int i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++) {
		free(p->op[i].path);
		free(p->op[i].dst);
		free(p->op[i].src);
		free(p->op[i].data);
	}
	if (p->idmap_fd >= 0)
		(void)close(p->idmap_fd);
	free(p);
}

const char *
view_op_name(const struct op *o)
{
	return o->kind < sizeof op_names / sizeof op_names[0] ?
	    op_names[o->kind] : "?";
}
