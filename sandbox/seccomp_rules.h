/*
 * seccomp_rules.h - the seccomp policy as tables (internal to sandbox/:
 * seccomp_rules.c holds them, seccomp.c turns them into filters).
 *
 * Compiled into the worker (and tests/sandbox/try_syscall) only: the
 * one header besides seccomp*.c that includes <seccomp.h>.
 */
#ifndef AGENTZ_SANDBOX_SECCOMP_RULES_H
#define AGENTZ_SANDBOX_SECCOMP_RULES_H

#include <stddef.h>
#include <stdint.h>

#include <seccomp.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* clone()'s flags are its second argument on s390. */
#if defined(__s390__) || defined(__s390x__)
#define CLONE_ARG 1
#else
#define CLONE_ARG 0
#endif

/* personality(2)'s query value. */
#define PERSONA_QUERY 0xffffffffu

/* open_tree_attr (Linux 6.15) is newer than our libseccomp; new syscalls
 * share one number on every architecture except alpha, mips and x32. */
#if defined(__SNR_open_tree_attr)
#define NR_OPEN_TREE_ATTR SCMP_SYS(open_tree_attr)
#elif (defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__)
#define NR_OPEN_TREE_ATTR 467
#else
#define NR_OPEN_TREE_ATTR (-1)
#endif

/* fchmodat2 (Linux 6.6) and setxattrat (6.13): the same. */
#if (defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__)
#define NR_FCHMODAT2 452
#define NR_SETXATTRAT 463
#else
#define NR_FCHMODAT2 (-1)
#define NR_SETXATTRAT (-1)
#endif

enum rule_kind {
	R_ALLOW, /* run the call */
	R_DENY,  /* fail with err; SIGSYS under SANDBOX_DEBUG */
	R_COMPAT /* fail with err always: libc probes it and falls back */
};

struct rule {
	int nr;             /* negative: not on this architecture */
	unsigned char kind; /* enum rule_kind */
	unsigned char ncmp;
	int err;
	struct scmp_arg_cmp cmp[2]; /* all must hold */
};

/* Argument comparisons, as the tables and the generated rules write them. */
/* clang-format off */
#define C_NONE         { 0, SCMP_CMP_EQ, 0, 0 }
#define LOW32(a, v)    { a, SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)(v) }
#define BITS(a, m, v)  { a, SCMP_CMP_MASKED_EQ, m, v }
#define EQ64(a, v)     { a, SCMP_CMP_EQ, v, 0 }
#define NE64(a, v)     { a, SCMP_CMP_NE, v, 0 }
/* clang-format on */

/* The default profile (also loaded by strict).  SPEC section 7. */
extern const struct rule seccomp_escape_rules[];
extern const size_t seccomp_escape_nrules;
/* SysV IPC: denied when the worker shares the host's IPC namespace. */
extern const struct rule seccomp_sysv_rules[];
extern const size_t seccomp_sysv_nrules;
/* Calls whose first argument names a process (see seccomp_rules.c). */
extern const int seccomp_pid_target_nrs[];
extern const size_t seccomp_pid_target_nnrs;
/* The strict profile's own filter: default ENOSYS. */
extern const struct rule seccomp_strict_rules[];
extern const size_t seccomp_strict_nrules;

#endif
