/*
 * tests/sandbox/try_probes_files.c - try_syscall's probes: set-id modes, xattrs, and a foreign ABI (last: it kills).
 * Each is made with arguments the kernel rejects (see try_syscall.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tests/sandbox/try_syscall.h"

/* Set-id modes: every path is under /nonexistent, every fd is -1, so an
 * allowed call answers ENOENT or EBADF and creates nothing. */
#define NOWHERE "/nonexistent/agentz-probe"
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#endif

static int
p_chmod_plain(void)
{
	return res(chmod(NOWHERE, 0755));
}

static int
p_chmod_setuid(void)
{
	return res(chmod(NOWHERE, 04755));
}

static int
p_chmod_setgid(void)
{
	return res(chmod(NOWHERE, 02755));
}

static int
p_fchmod_setuid(void)
{
	return res(fchmod(-1, 06755));
}

static int
p_fchmodat_setgid(void)
{
	return res(syscall(SYS_fchmodat, AT_FDCWD, NOWHERE, 02755));
}

static int
p_fchmodat2_setuid(void)
{
	return res(syscall(SYS_fchmodat2, AT_FDCWD, NOWHERE, 04755, 0));
}

static int
p_mknod_setuid(void)
{
	return res(syscall(SYS_mknod, NOWHERE, S_IFREG | 04755, 0));
}

static int
p_mknodat_setgid(void)
{
	return res(syscall(SYS_mknodat, AT_FDCWD, NOWHERE, S_IFREG | 02755, 0));
}

static int
p_open_setuid(void)
{
	return res_fd(syscall(SYS_open, NOWHERE, O_CREAT | O_WRONLY, 04755));
}

static int
p_openat_setuid(void)
{
	return res_fd(syscall(SYS_openat, AT_FDCWD, NOWHERE,
	    O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
}

static int
p_openat_plain(void)
{
	return res_fd(syscall(SYS_openat, AT_FDCWD, NOWHERE,
	    O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
}

static int
p_creat_setgid(void)
{
	return res_fd(syscall(SYS_creat, NOWHERE, 02755));
}

static int
p_mkdir_setgid(void)
{
	return res(syscall(SYS_mkdir, NOWHERE, 02775));
}

static int
p_mkdirat_setuid(void)
{
	return res(syscall(SYS_mkdirat, AT_FDCWD, NOWHERE, 04775));
}

static int
p_mkdir_plain(void)
{
	return res(mkdir(NOWHERE, 0755));
}

/* The mode bit above the low 32: the kernel truncates, the rule masks. */
static int
p_chmod_setuid_highbits(void)
{
	return res(syscall(SYS_chmod, NOWHERE, HIGHBITS | 04755));
}

static int
p_openat2(void)
{
	return res_fd(syscall(SYS_openat2, AT_FDCWD, NOWHERE, NULL, 0));
}

static int
p_setxattr(void)
{
	return res(syscall(SYS_setxattr, NOWHERE, "security.capability", "",
	    0, 0));
}

static int
p_lsetxattr(void)
{
	return res(syscall(SYS_lsetxattr, NOWHERE, "user.x", "", 0, 0));
}

static int
p_fsetxattr(void)
{
	return res(syscall(SYS_fsetxattr, -1, "security.capability", "", 0,
	    0));
}

static int
p_setxattrat(void)
{
	return res(syscall(SYS_setxattrat, -1, NOWHERE, 0, "user.x", NULL,
	    0));
}

static int
p_getxattr(void)
{
	char b[8];

	return res(syscall(SYS_getxattr, NOWHERE, "user.x", b, sizeof(b)));
}

static int
p_x32(void)
{
	/* Under a filter this kills the process: run it last, alone. */
#if defined(__x86_64__) && !defined(__ILP32__)
	return res(syscall(0x40000000 | SYS_getpid));
#else
	return ENOSYS;
#endif
}

/* clang-format off */
const struct probe probes_files[] = {
	{ "chmod_plain", p_chmod_plain },
	{ "chmod_setuid", p_chmod_setuid },
	{ "chmod_setgid", p_chmod_setgid },
	{ "chmod_setuid_highbits", p_chmod_setuid_highbits },
	{ "fchmod_setuid", p_fchmod_setuid },
	{ "fchmodat_setgid", p_fchmodat_setgid },
	{ "fchmodat2_setuid", p_fchmodat2_setuid },
	{ "mknod_setuid", p_mknod_setuid },
	{ "mknodat_setgid", p_mknodat_setgid },
	{ "open_setuid", p_open_setuid },
	{ "openat_setuid", p_openat_setuid },
	{ "openat_plain", p_openat_plain },
	{ "creat_setgid", p_creat_setgid },
	{ "mkdir_setgid", p_mkdir_setgid },
	{ "mkdirat_setuid", p_mkdirat_setuid },
	{ "mkdir_plain", p_mkdir_plain },
	{ "openat2", p_openat2 },
	{ "setxattr", p_setxattr },
	{ "lsetxattr", p_lsetxattr },
	{ "fsetxattr", p_fsetxattr },
	{ "setxattrat", p_setxattrat },
	{ "getxattr", p_getxattr },
	{ "x32", p_x32 },
};
/* clang-format on */

const size_t probes_files_n = NELEM(probes_files);
