/*
 * landlock.c - the worker tree's Landlock domain (see landlock.h).
 *
 * The rights are a table keyed by the ABI version that introduced them: a
 * ruleset handles the union of the rows up to the caller's abi, so an older
 * kernel gets the rights it knows and no EINVAL.  The kernel refuses a rule
 * that grants a right the ruleset does not handle, and a rule on a file
 * that grants a directory right (both EINVAL): each rule's rights are the
 * handled set, narrowed to the file rights for a file.
 *
 * landlock_abi runs in the supervisor (once per jail); landlock_restrict
 * runs between fork and exec in a child of a multithreaded process (from
 * child.c): ASYNC-SIGNAL-SAFE, raw syscalls only, nothing that allocates
 * or takes a lock.
 */
#include "sandbox/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's <linux/landlock.h> knows ABI 1-2 (3 on some updates). */
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION	(1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER	(1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE	(1ULL << 14)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL		(1ULL << 1)
#endif

/*
 * glibc >= 2.35 names them.  Syscalls added since Linux 5.1 have one number
 * on every architecture but alpha (x86_64 included).
 */
#ifndef SYS_landlock_create_ruleset
#ifdef __alpha__
#error "alpha numbers its Landlock syscalls apart; use newer headers"
#endif
#define SYS_landlock_create_ruleset	444
#define SYS_landlock_add_rule		445
#define SYS_landlock_restrict_self	446
#endif

#define LL_FS(r)	LANDLOCK_ACCESS_FS_##r

/*
 * The ruleset attribute as of ABI 6, whatever the header says.  The size
 * handed to the kernel tells it which fields we mean: an older kernel
 * refuses a size it does not know unless the extra bytes are zero.
 */
struct ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;	/* ABI 4; 0: no network rules */
	uint64_t scoped;		/* ABI 6 */
};

static const struct {
	int abi;		/* the first ABI that knows these rights */
	uint64_t fs;		/* handled, granted beneath rw_dirs */
	uint64_t scoped;
} rights[] = {
	{ 1, LL_FS(WRITE_FILE) | LL_FS(REMOVE_DIR) | LL_FS(REMOVE_FILE) |
	    LL_FS(MAKE_CHAR) | LL_FS(MAKE_DIR) | LL_FS(MAKE_REG) |
	    LL_FS(MAKE_SOCK) | LL_FS(MAKE_FIFO) | LL_FS(MAKE_BLOCK) |
	    LL_FS(MAKE_SYM), 0 },
	{ LANDLOCK_ABI_REFER, LL_FS(REFER), 0 },
	{ LANDLOCK_ABI_TRUNCATE, LL_FS(TRUNCATE), 0 },
	{ LANDLOCK_ABI_SCOPES, 0, LANDLOCK_SCOPE_SIGNAL |
	    LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET },
};

/* Reading, listing and executing: handled only when ro_dirs is given. */
#define READ_RIGHTS	(LL_FS(EXECUTE) | LL_FS(READ_FILE) | LL_FS(READ_DIR))

/* The rights a rule on a file (not a directory) may carry. */
#define FILE_RIGHTS	(LL_FS(WRITE_FILE) | LL_FS(TRUNCATE) | \
			 LL_FS(READ_FILE) | LL_FS(EXECUTE))

int
landlock_abi(void)
{
	long v;

	v = syscall(SYS_landlock_create_ruleset, NULL, (size_t)0,
	    (uint32_t)LANDLOCK_CREATE_RULESET_VERSION);
	return v > 0 ? (int)v : 0;
}

/* Fills *a with what abi handles; returns the attribute size to pass. */
static size_t
handled(int abi, struct ruleset_attr *a)
{
	size_t i;

	a->handled_access_fs = a->handled_access_net = a->scoped = 0;
	for (i = 0; i < sizeof rights / sizeof rights[0]; i++)
		if (rights[i].abi <= abi) {
			a->handled_access_fs |= rights[i].fs;
			a->scoped |= rights[i].scoped;
		}
	if (abi >= LANDLOCK_ABI_SCOPES)
		return sizeof *a;
	return abi >= 4 ? offsetof(struct ruleset_attr, scoped) :
	    offsetof(struct ruleset_attr, handled_access_net);
}

/* close(fd) without losing the errno of the failure being reported. */
static int
fail_close(int fd)
{
	int e = errno;

	(void)close(fd);
	errno = e;
	return -1;
}

/*
 * Grants fs (narrowed to FILE_RIGHTS unless is_dir) on path.  A path that
 * does not exist is skipped (0); one of the wrong type is an error.
 */
static int
add_rule(int ruleset, const char *path, uint64_t fs, int is_dir)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd;

	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) < 0)
		return fail_close(fd);
	if (is_dir != (S_ISDIR(st.st_mode) != 0)) {
		errno = is_dir ? ENOTDIR : EISDIR;
		return fail_close(fd);
	}
	pb.allowed_access = is_dir ? fs : fs & FILE_RIGHTS;
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
	    &pb, (uint32_t)0) < 0)
		return fail_close(fd);
	return close(fd);
}

static int
add_rules(int ruleset, const char *const *paths, uint64_t fs, int is_dir)
{
	for (; paths != NULL && *paths != NULL; paths++)
		if (add_rule(ruleset, *paths, fs, is_dir) < 0)
			return -1;
	return 0;
}

int
landlock_restrict(const char *const *rw_dirs, const char *const *rw_files,
    int abi)
{
	return landlock_restrict_reads(NULL, rw_dirs, rw_files, abi);
}

int
landlock_restrict_reads(const char *const *ro_dirs,
    const char *const *rw_dirs, const char *const *rw_files, int abi)
{
	struct ruleset_attr attr;
	size_t size;
	int kabi, fd;

	kabi = abi > 0 ? landlock_abi() : 0;
	if (abi <= 0 || abi > kabi) {
		errno = abi < 0 || (abi > kabi && kabi > 0) ? EINVAL :
		    EOPNOTSUPP;
		return -1;
	}
	size = handled(abi, &attr);
	if (ro_dirs != NULL)
		attr.handled_access_fs |= READ_RIGHTS;
	fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size,
	    (uint32_t)0);
	if (fd < 0)
		return -1;
	if (add_rules(fd, ro_dirs, READ_RIGHTS, 1) < 0 ||
	    add_rules(fd, rw_dirs, attr.handled_access_fs, 1) < 0 ||
	    add_rules(fd, rw_files, attr.handled_access_fs, 0) < 0)
		return fail_close(fd);
	/* Last, so that a bad path above leaves the process unchanged. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, fd, (uint32_t)0) < 0)
		return fail_close(fd);
	return close(fd);
}
