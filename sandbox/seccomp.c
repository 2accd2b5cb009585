/*
 * sandbox/seccomp.c - the worker's seccomp profiles: the tables of
 * seccomp_rules.c fed to libseccomp (with seccomp_rules.h and
 * seccomp_debug.c, the only <seccomp.h> users), plus the rules generated
 * at load time.
 *
 * Runs in the worker, once, before its first cell (may allocate:
 * libseccomp does). Two filters:
 *
 *   escape  the "default" profile: default ALLOW, and the kernel escape
 *           surface denied with EPERM (ENOSYS where libc or container
 *           runtimes expect "not implemented").  Generated rules complete
 *           it: personality() other than 0 and the query value, and calls
 *           aimed at the supervisor.
 *   strict  an allow-list, default ENOSYS, for pure computation.
 *
 * "strict" loads the allow-list first and the escape filter second.  The
 * kernel runs every filter and keeps the most severe action; between two
 * errnos it keeps the one from the filter loaded last.  So strict is exactly
 * "default plus the allow-list": an escape call reads EPERM in both
 * profiles, and no rule of one table has to be re-expressed in the other.
 */
#include "sandbox/seccomp.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox/seccomp_rules.h"

/* clang-format off */
static const char *const profile_names[] = {
	[SANDBOX_OFF] = "off",
	[SANDBOX_DEFAULT] = "default",
	[SANDBOX_STRICT] = "strict",
};
/* clang-format on */

int
sandbox_profile_parse(const char *s, enum sandbox_profile *out)
{
	size_t i;

	for (i = 0; s != NULL && i < NELEM(profile_names); i++) {
		if (strcmp(s, profile_names[i]) == 0) {
			*out = (enum sandbox_profile)i;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

const char *
sandbox_profile_name(enum sandbox_profile p)
{
	if ((unsigned)p >= NELEM(profile_names))
		return "?";
	return profile_names[p];
}

static uint32_t
deny_action(int err, unsigned flags)
{
	if (flags & SANDBOX_DEBUG)
		return SCMP_ACT_TRAP;
	return SCMP_ACT_ERRNO((uint32_t)err);
}

static uint32_t
rule_action(const struct rule *r, unsigned flags)
{
	switch ((enum rule_kind)r->kind) {
	case R_ALLOW:
		return SCMP_ACT_ALLOW;
	case R_COMPAT:
		return SCMP_ACT_ERRNO((uint32_t)r->err);
	case R_DENY:
		break;
	}
	return deny_action(r->err, flags);
}

/* A rule with the filter's default action is redundant, and libseccomp
 * refuses it (EACCES): skip it.  Returns 0 or a negative errno. */
static int
add_rule(scmp_filter_ctx ctx, uint32_t def, uint32_t action, int nr,
    unsigned ncmp, const struct scmp_arg_cmp *cmp)
{
	if (nr < 0 || action == def)
		return 0;
	return seccomp_rule_add_array(ctx, action, nr, ncmp, cmp);
}

static int
add_table(scmp_filter_ctx ctx, uint32_t def, const struct rule *t, size_t n,
    unsigned flags)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int rc = add_rule(ctx, def, rule_action(&t[i], flags), t[i].nr,
		    t[i].ncmp, t[i].cmp);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * personality(2) reads an unsigned int; allowed are 0 (PER_LINUX) and the
 * query 0xffffffff.  One rule may compare an argument only once, so "the
 * low 32 bits are neither all 0 nor all 1" is written as "some bit i is 1
 * and bit i+1 (mod 32) is 0": every other word has such a pair.
 */
static int
add_personality(scmp_filter_ctx ctx, uint32_t action)
{
	struct scmp_arg_cmp c = BITS(0, 0, 0);
	unsigned i;

	for (i = 0; i < 32; i++) {
		int rc;

		c.datum_a = (1u << i) | (1u << ((i + 1) % 32));
		c.datum_b = 1u << i;
		rc = seccomp_rule_add_array(
		    ctx, action, SCMP_SYS(personality), 1, &c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Every pid_target_nrs call aimed at -1, sup or -pgid; and kill(0), which
 * names our own process group: the supervisor's too while we share it. */
static int
add_pid_targets(scmp_filter_ctx ctx, uint32_t action, pid_t sup, pid_t pgid)
{
	uint32_t targets[3];
	struct scmp_arg_cmp c = LOW32(0, 0);
	size_t i, j, nt = 0;

	targets[nt++] = (uint32_t)-1;
	if (sup > 0)
		targets[nt++] = (uint32_t)sup;
	if (pgid > 1)
		targets[nt++] = (uint32_t)-pgid;
	for (i = 0; i < seccomp_pid_target_nnrs; i++) {
		for (j = 0; j < nt; j++) {
			int rc;

			c.datum_b = targets[j];
			rc = add_rule(ctx, SCMP_ACT_ALLOW, action,
			    seccomp_pid_target_nrs[i], 1, &c);
			if (rc < 0)
				return rc;
		}
	}
	if (pgid > 0 && getpgrp() == pgid) {
		c.datum_b = 0;
		return add_rule(
		    ctx, SCMP_ACT_ALLOW, action, SCMP_SYS(kill), 1, &c);
	}
	return 0;
}

/* Returns a new filter with default action def, or NULL and *rc. */
static scmp_filter_ctx
filter_new(uint32_t def, int *rc)
{
	scmp_filter_ctx ctx = seccomp_init(def);

	if (ctx == NULL) {
		*rc = -ENOMEM;
		return NULL;
	}
	/* A foreign ABI (i386's int 0x80, x32) would bypass every rule.
	 * TRAP: the call is not executed either way, and a handler can name
	 * it; unhandled (or blocked) SIGSYS still kills the process. */
	*rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_TRAP);
	if (*rc == 0)
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (*rc == 0)
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (*rc == 0) /* the kernel's errno, not ECANCELED */
		*rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static scmp_filter_ctx
escape_filter(pid_t sup, pid_t pgid, unsigned flags, int *rc)
{
	uint32_t action = deny_action(EPERM, flags);
	scmp_filter_ctx ctx = filter_new(SCMP_ACT_ALLOW, rc);

	if (ctx == NULL)
		return NULL;
	*rc = add_table(
	    ctx, SCMP_ACT_ALLOW, seccomp_escape_rules,
	    seccomp_escape_nrules, flags);
	if (*rc == 0 && (flags & SANDBOX_NO_SYSV))
		*rc = add_table(
		    ctx, SCMP_ACT_ALLOW, seccomp_sysv_rules,
		    seccomp_sysv_nrules, flags);
	if (*rc == 0)
		*rc = add_personality(ctx, action);
	if (*rc == 0)
		*rc = add_pid_targets(ctx, action, sup, pgid);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static scmp_filter_ctx
strict_filter(unsigned flags, int *rc)
{
	uint32_t def = deny_action(ENOSYS, flags);
	scmp_filter_ctx ctx = filter_new(def, rc);

	if (ctx == NULL)
		return NULL;
	*rc = add_table(ctx, def, seccomp_strict_rules,
	    seccomp_strict_nrules, flags);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

int
sandbox_seccomp_apply(enum sandbox_profile p, pid_t supervisor_pid,
    pid_t supervisor_pgid, unsigned flags)
{
	scmp_filter_ctx strict = NULL, escape = NULL;
	int rc = 0;

	if ((flags & ~(SANDBOX_DEBUG | SANDBOX_NO_SYSV)) != 0 ||
	    supervisor_pid < 0 ||
	    supervisor_pgid < 0) {
		errno = EINVAL;
		return -1;
	}
	switch (p) {
	case SANDBOX_OFF:
		return 0;
	case SANDBOX_DEFAULT:
	case SANDBOX_STRICT:
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;

	/* Both filters are built before either is loaded: once the strict
	 * one is in, only what it allows is left to finish with.  Strict is
	 * loaded first: between two errnos the kernel keeps the one of the
	 * filter loaded last, so escape calls read as they do in default. */
	if (p == SANDBOX_STRICT)
		strict = strict_filter(flags, &rc);
	if (rc == 0)
		escape =
		    escape_filter(supervisor_pid, supervisor_pgid, flags, &rc);
	if (rc == 0 && strict != NULL)
		rc = seccomp_load(strict);
	if (rc == 0)
		rc = seccomp_load(escape);
	if (strict != NULL)
		seccomp_release(strict);
	if (escape != NULL)
		seccomp_release(escape);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

