/*
 * tests/sandbox/try_syscall.c - probes the seccomp profiles from outside,
 * bubblewrap's try-syscall style.
 *
 *   try_syscall [--protect-pid N] [--protect-pgid N] [--debug] PROFILE PROBE...
 *
 * Applies PROFILE (off|default|strict) with N as the supervisor (default:
 * our parent, and its process group), then runs each probe and prints
 * "NAME errno=ENAME" ("errno=0" on success).  Each call is made with
 * arguments the kernel rejects (bad fd, NULL pointer, invalid flags), so an
 * allowed call shows the kernel's EBADF/EFAULT/EINVAL/ENOENT and a filtered
 * one shows the policy's errno.  Every kill-style probe sends signal 0, so
 * a broken filter can never hurt the protected process.
 *
 * Exit: 0 after all probes, 1 if the profile could not be applied, 2 on
 * bad usage.  Built without sanitizers: they make syscalls of their own.
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

#include "sandbox/seccomp.h"
#include "tests/sandbox/try_syscall.h"

pid_t protect_pid;
pid_t protect_pgid;

static const struct {
	const struct probe *p;
	const size_t *n;
} tables[] = {
	{ probes_kernel, &probes_kernel_n },
	{ probes_proc, &probes_proc_n },
	{ probes_files, &probes_files_n },
};

int
res(long r)
{
	return r == -1 ? errno : 0;
}

int
res_fd(long fd)
{
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

int
res_persona(long old)
{
	if (old == -1)
		return errno;
	personality((unsigned long)old);
	return 0;
}

static const struct probe *
probe_find(const char *name)
{
	size_t t, i;

	for (t = 0; t < NELEM(tables); t++)
		for (i = 0; i < *tables[t].n; i++)
			if (strcmp(tables[t].p[i].name, name) == 0)
				return &tables[t].p[i];
	return NULL;
}

static void
probe_run(const struct probe *p)
{
	int e = p->fn();
	const char *en = e == 0 ? "0" : strerrorname_np(e);

	if (en != NULL)
		(void)printf("%s errno=%s\n", p->name, en);
	else
		(void)printf("%s errno=%d\n", p->name, e);
}

static int
usage(void)
{
	size_t t, i;

	(void)fprintf(stderr,
	    "usage: try_syscall [--protect-pid N] "
	    "[--protect-pgid N] [--debug] off|default|strict PROBE...\n"
	    "probes:");
	for (t = 0; t < NELEM(tables); t++)
		for (i = 0; i < *tables[t].n; i++)
			(void)fprintf(stderr, " %s", tables[t].p[i].name);
	(void)fprintf(stderr, "\n");
	return 2;
}

static int
parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > 0x7fffffff)
		return -1;
	*out = (pid_t)v;
	return 0;
}

/* Parses one option at argv[*i], stepping over its value. */
static int
parse_opt(int argc, char **argv, int *i, unsigned *flags)
{
	const char *opt = argv[*i];

	if (strcmp(opt, "--debug") == 0) {
		*flags |= SANDBOX_DEBUG;
		return 0;
	}
	if (*i + 1 >= argc)
		return -1;
	++*i;
	if (strcmp(opt, "--protect-pid") == 0)
		return parse_pid(argv[*i], &protect_pid);
	if (strcmp(opt, "--protect-pgid") == 0)
		return parse_pid(argv[*i], &protect_pgid);
	return -1;
}

/* Parses the options and the profile; returns the index of the first
 * probe, or -1 on bad usage. */
static int
parse_args(int argc, char **argv, enum sandbox_profile *prof, unsigned *flags)
{
	int i, j;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
		if (parse_opt(argc, argv, &i, flags) == -1)
			return -1;
	if (i >= argc || sandbox_profile_parse(argv[i], prof) == -1)
		return -1;
	for (j = i + 1; j < argc; j++)
		if (probe_find(argv[j]) == NULL)
			return -1;
	return i + 1;
}

int
main(int argc, char **argv)
{
	enum sandbox_profile prof;
	unsigned flags = 0;
	int i;

	protect_pid = getppid();
	if ((i = parse_args(argc, argv, &prof, &flags)) == -1)
		return usage();
	if (protect_pgid == 0 && (protect_pgid = getpgid(protect_pid)) == -1)
		protect_pgid = 0;

	(void)setvbuf(stdout, NULL, _IOLBF, 0);
	if ((flags & SANDBOX_DEBUG) && sandbox_seccomp_debug_install(-1) == -1) {
		(void)fprintf(stderr, "try_syscall: debug handler: %s\n",
		    strerror(errno));
		return 1;
	}
	if (sandbox_seccomp_apply(prof, protect_pid, protect_pgid, flags) ==
	    -1) {
		(void)fprintf(stderr, "try_syscall: apply %s: %s\n",
		    sandbox_profile_name(prof), strerror(errno));
		return 1;
	}
	for (; i < argc; i++)
		probe_run(probe_find(argv[i]));
	return 0;
}
