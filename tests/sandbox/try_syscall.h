/*
 * tests/sandbox/try_syscall.h - what try_syscall.c and its probe files
 * (try_probes_*.c) share: a probe, the tables, the result helpers.
 */
#ifndef AGENTZ_TESTS_TRY_SYSCALL_H
#define AGENTZ_TESTS_TRY_SYSCALL_H

#include <stddef.h>
#include <sys/types.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define HIGHBITS 0xdead00000000UL

/* A probe: makes one call, returns 0 or the errno it failed with. */
struct probe {
	const char *name;
	int (*fn)(void);
};

/* The supervisor the profile protects (--protect-pid, --protect-pgid). */
extern pid_t protect_pid;
extern pid_t protect_pgid;

/* Result of a call that returns -1 and sets errno on failure. */
int res(long r);
/* Result of a call that returns a descriptor, which is closed. */
int res_fd(long fd);
/* personality() succeeded when allowed: put the old persona back. */
int res_persona(long old);

/* The probes, in the order usage lists them: the kernel's escape surface
 * and signals (try_probes_kernel.c), sockets, processes and what strict
 * allows (try_probes_proc.c), set-id modes and xattrs
 * (try_probes_files.c). */
extern const struct probe probes_kernel[];
extern const size_t probes_kernel_n;
extern const struct probe probes_proc[];
extern const size_t probes_proc_n;
extern const struct probe probes_files[];
extern const size_t probes_files_n;

#endif
