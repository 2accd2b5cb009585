/*
 * sandbox/seccomp_debug.c - --sandbox-debug: a SIGSYS handler that names
 * the blocked call and ends the worker with WEXIT_SECCOMP.
 *
 * sandbox_seccomp_debug_install runs in the worker before the filter is
 * loaded (may allocate: libseccomp's resolver does, so every name is
 * resolved then); on_sigsys runs as a signal handler in any thread and
 * is ASYNC-SIGNAL-SAFE (static storage, write, _exit).
 */
#include "sandbox/seccomp.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "proto/wexit.h"
#include "sandbox/seccomp_rules.h"

#ifndef SYS_SECCOMP
/* si_code of a seccomp SIGSYS (asm-generic/siginfo.h) */
#define SYS_SECCOMP 1
#endif

/*
 * Debug mode.  Names are resolved when the handler is installed, into
 * static storage, because libseccomp's resolver allocates.
 */
#define NAME_NR_MAX 512

static char name_pool[8192];
static uint16_t name_off[NAME_NR_MAX]; /* offset + 1 into name_pool; 0: none */
static uint32_t name_arch;

static void
name_add(int nr, const char *name, size_t *used)
{
	size_t len = strlen(name) + 1;

	if (nr < 0 || nr >= NAME_NR_MAX || name_off[nr] != 0 ||
	    len > sizeof(name_pool) - *used)
		return;
	memcpy(name_pool + *used, name, len);
	name_off[nr] = (uint16_t)(*used + 1);
	*used += len;
}

static void
names_load(void)
{
	size_t used = 0;
	int nr;

	memset(name_off, 0, sizeof(name_off));
	name_arch = seccomp_arch_native();
	for (nr = 0; nr < NAME_NR_MAX; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(name_arch, nr);

		if (name != NULL)
			name_add(nr, name, &used);
		free(name);
	}
	name_add(NR_OPEN_TREE_ATTR, "open_tree_attr", &used);
	name_add(NR_FCHMODAT2, "fchmodat2", &used);
	name_add(NR_SETXATTRAT, "setxattrat", &used);
}

static size_t
put_str(char *buf, size_t n, size_t cap, const char *s)
{
	while (*s != '\0' && n < cap)
		buf[n++] = *s++;
	return n;
}

static size_t
put_num(char *buf, size_t n, size_t cap, unsigned long v, unsigned base)
{
	char tmp[24];
	size_t i = 0;

	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v != 0 && i < sizeof(tmp));
	while (i > 0 && n < cap)
		buf[n++] = tmp[--i];
	return n;
}

static int report_to = -1;	/* a second fd for the handler's line */

static void
on_sigsys(int sig, siginfo_t *si, void *uctx)
{
	char buf[160];
	size_t n, cap = sizeof(buf) - 1;
	const char *name = "?";
	unsigned nr = (unsigned)si->si_syscall;
	ssize_t w;

	(void)sig;
	(void)uctx;
	n = put_str(buf, 0, cap, "agentz-worker: ");
	if (si->si_code != SYS_SECCOMP) {
		n = put_str(buf, n, cap, "SIGSYS not from seccomp, si_code ");
		n = put_num(
		    buf, n, cap, (unsigned long)(unsigned)si->si_code, 10);
	} else {
		if (si->si_arch == name_arch && nr < NAME_NR_MAX &&
		    name_off[nr] != 0)
			name = name_pool + name_off[nr] - 1;
		n = put_str(buf, n, cap, "seccomp blocked syscall ");
		n = put_str(buf, n, cap, name);
		n = put_str(buf, n, cap, " (");
		n = put_num(buf, n, cap, nr, 10);
#if defined(__x86_64__) && !defined(__ILP32__)
		if (si->si_arch == name_arch && (nr & 0x40000000u) != 0)
			n = put_str(buf, n, cap, ", x32 ABI");
#endif
		if (si->si_arch != name_arch) {
			n = put_str(buf, n, cap, ", arch 0x");
			n = put_num(buf, n, cap, si->si_arch, 16);
		}
		n = put_str(buf, n, cap, ")");
	}
	buf[n++] = '\n';
	w = write(STDERR_FILENO, buf, n);
	if (report_to >= 0)
		w = write(report_to, buf, n);
	(void)w;
	_exit(WEXIT_SECCOMP);
}

int
sandbox_seccomp_debug_install(int report_fd)
{
	struct sigaction sa;

	report_to = report_fd;
	names_load();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	return sigaction(SIGSYS, &sa, NULL);
}
