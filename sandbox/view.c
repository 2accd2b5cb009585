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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "sandbox/jail.h"

static const char *const op_names[] = {
	"bind the host's root", "make read-only", "mount /proc",
	"bind read-only", "mount tmpfs", "make folders", "make file",
	"bind", "make symlink", "bind id-mapped", "pin", "mask file",
	"mask folder", "make read-only", "make nosuid,nodev"
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

/* The host's root read-only, a fresh /proc whose own sys and
 * sysrq-trigger are read-only. */
static int
plan_root(struct plan *p)
{
	struct op *o;

	if (op_host(p, OP_RBIND, "/", "/") == NULL ||
	    op_new(p, OP_RDONLY_TREE, "/", 0) == NULL ||
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

	if (op_tmpfs(p, "/dev", 0755, 1u << 20, 0) == NULL)
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
	if (cover != NULL && op_tmpfs(p, cover, 0755, 1u << 20, 0) == NULL)
		rc = -1;
	if (rc == 0 && (cover != NULL || path_under(ws, "/tmp")) &&
	    op_new(p, OP_MKDIRS, ws, 0755) == NULL)
		rc = -1;
	free(cover);
	if (rc < 0 || op_host(p, root && p->idmap_fd >= 0 ? OP_IDMAP_BIND :
	    OP_BIND, ws, ws) == NULL)
		return -1;
	/* no set-id program and no device node runs from what cells write */
	return op_new(p, OP_NOSUID, ws, 0) != NULL ? 0 : -1;
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
plan_masks(struct plan *p, const char *const *masks)
{
	struct stat st;
	struct op *o;
	size_t i;

	for (i = 0; masks != NULL && masks[i] != NULL; i++) {
		if (masks[i][0] != '/' || stat(masks[i], &st) < 0)
			continue;
		if ((o = op_new(p, S_ISDIR(st.st_mode) ? OP_MASK_DIR :
		    OP_MASK_FILE, masks[i], 0)) == NULL)
			return -1;
		o->optional = 1;
	}
	return 0;
}

int
view_plan(struct plan *p, const struct jail_config *c, int root)
{
	struct op *o;
	size_t i;

	if (plan_root(p) < 0 || plan_dev(p, c->tmp_size) < 0 ||
	    (o = op_tmpfs(p, "/sys/fs/cgroup", 0555, 4096, 1)) == NULL)
		return -1;
	o->optional = 1;
	if (op_tmpfs(p, "/tmp", 01777, c->tmp_size, 0) == NULL ||
	    plan_workspace(p, c->workspace, root) < 0)
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
	return plan_masks(p, c->masks);
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
