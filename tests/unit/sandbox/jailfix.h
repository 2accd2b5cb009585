/*
 * jailfix.h - the fixture the jail's unit tests share (test_jail_kill.c,
 * test_jail_exit.c): a real jail, a spawner that joins it and forks the
 * cases' processes there, and the records they send the test.
 */
#ifndef AGENTZ_TESTS_JAILFIX_H
#define AGENTZ_TESTS_JAILFIX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/jail.h"

#define WAIT_MS 10000
#define NPROC 5
#define MAX_EVENTS 256

enum rec_kind { REC_NSPID, REC_HOSTPID, REC_EVENT, REC_PONG };

/* One record on the pipe to the test (atomic: smaller than PIPE_BUF). */
struct rec {
	int32_t kind;
	int32_t idx;		/* REC_EVENT: the child's pid (ours) */
	int32_t a;		/* pid, or si_code */
	int32_t b;		/* si_status */
};

struct fixture {
	char ws[64];
	struct jail *j;
	int rep[2];		/* records to the test */
	int ping[NPROC][2];	/* the test to process idx */
	pid_t spawner;
	pid_t host[NPROC];	/* as we see them, 0 = unknown */
	pid_t ns[NPROC];	/* as the jail sees them */
	int pongs[NPROC];
	struct rec ev[MAX_EVENTS];	/* every wait event so far */
	int nev;
};

typedef void role_fn(struct fixture *f, int idx);

/* Why the cases skip (no jail here), or "". */
extern char jf_skip_why[600];

/* In a process of the jail: one record to the test (exits 120 if it
 * cannot). */
void jf_put(int fd, int kind, int idx, int a, int b);
/* Says who it is, then answers every 'p' on its ping pipe; other bytes
 * go to act (NULL: none). */
_Noreturn void jf_serve(struct fixture *f, int idx, void (*act)(char));

/* cmocka's group setup and the per-case setup and teardown. */
int jf_group_setup(void **state);
int jf_fixture_setup(void **state);
int jf_fixture_teardown(void **state);
/* Skips the case, saying why, when there is no jail. */
void jf_need_jail(void **state);
/* Forks the spawner, which forks role(idx) for each idx < n. */
void jf_start(struct fixture *f, role_fn *role, int n);
/* Reads records until the pids of the first n processes are known (the
 * host pids of the first nhost). */
void jf_await_pids(struct fixture *f, int n, int nhost);
/* Reads records until the event (pid, code) has come; its status. An
 * end of a pid in never (n of them) fails the test. */
int jf_await_event(struct fixture *f, pid_t pid, int code,
    const pid_t *never, int n);
/* Process idx answers a ping: it runs. */
void jf_ping(struct fixture *f, int idx);
/* The pid namespace of host pid, as "pid:[inode]", or "". */
void jf_pidns_of(long pid, char *out, size_t len);
/* The processes of the jail's namespace but its init and keep[n]. */
int jf_others_in_jail(const struct fixture *f, const pid_t *keep, int n);
long jf_ms_now(void);

#endif
