/*
 * test_ctlpeer.c - unit tests for supervisor/ctl/ctlpeer.c: who may talk
 * to a run's control socket. This process is the "run": it may talk to
 * itself; another uid, a pid it cannot see, and its own child (as a
 * worker is) are refused, each saying why.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/ctl/ctl.h"

static void
test_ourselves_and_other_uids(void **state)
{
	struct ucred u = { getpid(), geteuid(), getegid() };
	char why[160];

	(void)state;
	assert_null(ctl_peer_refusal(0, &u, why, sizeof why));
	u.uid = geteuid() == 0 ? 4242 : geteuid() + 1;
	assert_non_null(ctl_peer_refusal(0, &u, why, sizeof why));
	assert_non_null(strstr(why, "is neither the run's"));
	u.uid = 0;		/* root may always */
	assert_null(ctl_peer_refusal(0, &u, why, sizeof why));
}

static void
test_invisible_pid(void **state)
{
	struct ucred u = { 0, geteuid(), getegid() };
	char why[160];

	(void)state;
	assert_non_null(ctl_peer_refusal(0, &u, why, sizeof why));
	assert_non_null(strstr(why, "not visible"));
}

static void
test_our_child_is_refused(void **state)
{
	struct ucred u = { 0, geteuid(), getegid() };
	char why[160];
	pid_t child;

	(void)state;
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	u.pid = child;
	assert_non_null(ctl_peer_refusal(0, &u, why, sizeof why));
	assert_non_null(strstr(why, "descendant"));
	(void)kill(child, SIGKILL);
	(void)waitpid(child, NULL, 0);
	/* gone: what cannot be read counts against the peer */
	assert_non_null(ctl_peer_refusal(0, &u, why, sizeof why));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ourselves_and_other_uids),
		cmocka_unit_test(test_invisible_pid),
		cmocka_unit_test(test_our_child_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
