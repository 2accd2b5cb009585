/*
 * viewmount.c - the view carried out (see view.h).
 *
 * Runs in the jail's init right after clone, before it answers the
 * supervisor: SYSTEM CALLS ONLY. The supervisor may be multithreaded, so
 * its clone child must stay async-signal-safe: no malloc, no stdio; it
 * only reads the plan view.c made. The init makes / a slave tree, pivots
 * into a staging tmpfs so the host is at /oldroot, mounts an empty tmpfs
 * at /newroot, binds into it what the plan takes of the host (read-only)
 * and lays the writable and private parts over it, makes that root
 * read-only, then pivots into /newroot and detaches the rest, as
 * bubblewrap does.
 */
#include "sandbox/view.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"

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
	if (procfs_put("/proc/self/uid_map", line) < 0 ||
	    procfs_put("/proc/self/setgroups", "deny") < 0)
		return -1;
	id_line(line, p->gid);
	return procfs_put("/proc/self/gid_map", line);
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

/* A file of the view made with the plan's text. */
static int
write_file(const struct op *o)
{
	size_t n = strlen(o->data), off = 0;
	ssize_t w;
	int fd;

	if ((fd = open(o->dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
	    o->mode)) < 0)
		return -1;
	while (off < n) {
		if ((w = write(fd, o->data + off, n - off)) < 0) {
			if (errno == EINTR)
				continue;
			(void)close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	return close(fd);
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
		    (o->ro ? MS_RDONLY : 0), o->data);
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
		return symlink(o->data, o->dst);
	case OP_WRITE:
		return write_file(o);
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

/*
 * Every mode is the plan's, whatever the supervisor's umask: under the
 * unit's UMask=0077 a mkdir(0755) made the workspace's parents 0700 and
 * root's, and the worker (at a uid of its own) could not reach its
 * workspace (its Landlock rules could not open it: EACCES; the worker
 * "exited with code 127").
 */
int
view_build(const struct plan *p, int *step)
{
	mode_t old;
	int i, r = -1;

	*step = VIEW_MAP_IDS;
	if (p->userns && map_self(p) < 0)
		return -1;
	old = umask(0);
	*step = VIEW_STAGE;
	if (stage() < 0)
		goto out;
	for (i = 0; i < p->n; i++) {
		*step = i;
		if (run_op(p, &p->op[i]) < 0)
			goto out;
	}
	r = 0;
out:
	(void)umask(old);
	if (r < 0)
		return -1;
	*step = VIEW_ENTER;
	if (enter_view() < 0)
		return -1;
	*step = VIEW_READY;
	return 0;
}
