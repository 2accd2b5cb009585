/*
 * test_jail_net.c - the worker's network (sandbox/jail.c, net.c, the
 * init's set_net), against the running kernel: a child that joins the
 * jail is in a network namespace other than ours whose only interface is
 * lo, up, and reaches itself on 127.0.0.1; with JAIL_NET_HOST it stays in
 * ours; jail_network and jail_describe say which.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/jail.h"

/* What the child found, as its exit code. */
enum { NET_OK, NET_ENTER, NET_SAME_NS, NET_OTHER_NS, NET_LO_DOWN,
    NET_IFACES, NET_LOOP };

struct run {
	char ws[64];
	struct jail *j;
	char err[512];
};

static int
jail_up(struct run *r, enum jail_network net)
{
	struct jail_config jc;

	(void)snprintf(r->ws, sizeof r->ws, "/tmp/agentz-jailnet-XXXXXX");
	assert_non_null(mkdtemp(r->ws));
	memset(&jc, 0, sizeof jc);
	jc.mode = JAIL_REQUIRED;
	jc.network = net;
	jc.workspace = r->ws;
	jc.tmp_size = 1u << 20;
	r->j = jail_new(&jc, r->err, sizeof r->err);
	if (r->j == NULL)
		(void)rmdir(r->ws);
	return r->j != NULL ? 0 : -1;
}

static void
jail_down(struct run *r)
{
	jail_free(r->j);
	(void)rmdir(r->ws);
}

static void
netns_of_self(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/ns/net", out, len - 1);

	out[n > 0 ? n : 0] = '\0';
}

static int
lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), up;

	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, "lo", 3);
	up = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 &&
	    (ifr.ifr_flags & IFF_UP) != 0;
	if (fd >= 0)
		(void)close(fd);
	return up;
}

static int
interfaces(void)
{
	struct if_nameindex *ni = if_nameindex(), *p;
	int n = 0;

	for (p = ni; p != NULL && p->if_index != 0; p++)
		n++;
	if (ni != NULL)
		if_freenameindex(ni);
	return n;
}

/* A TCP round trip to ourselves on 127.0.0.1. */
static int
loop_works(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int s = socket(AF_INET, SOCK_STREAM, 0), c = -1, d = -1, ok = 0;
	char b = 0;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
	    listen(s, 1) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0 &&
	    (c = socket(AF_INET, SOCK_STREAM, 0)) >= 0 &&
	    connect(c, (struct sockaddr *)&a, sizeof a) == 0 &&
	    (d = accept(s, NULL, NULL)) >= 0 && write(c, "x", 1) == 1 &&
	    read(d, &b, 1) == 1)
		ok = b == 'x';
	if (d >= 0)
		(void)close(d);
	if (c >= 0)
		(void)close(c);
	if (s >= 0)
		(void)close(s);
	return ok;
}

/* Forks a child that joins r's jail and checks its network: own (a
 * namespace of its own) or the host's. Its exit code. */
static int
child_check(struct run *r, int own)
{
	char ours[64], theirs[64];
	int st;
	pid_t pid;

	netns_of_self(ours, sizeof ours);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (jail_child_enter(r->j) < 0)
			_exit(NET_ENTER);
		/* born in the jail: its /proc shows the grandchild */
		if ((pid = fork()) > 0)
			_exit(waitpid(pid, &st, 0) == pid && WIFEXITED(st) ?
			    WEXITSTATUS(st) : NET_ENTER);
		netns_of_self(theirs, sizeof theirs);
		if (theirs[0] == '\0')
			_exit(NET_ENTER);
		if (!own)
			_exit(strcmp(ours, theirs) == 0 ? NET_OK :
			    NET_OTHER_NS);
		if (strcmp(ours, theirs) == 0)
			_exit(NET_SAME_NS);
		if (!lo_up())
			_exit(NET_LO_DOWN);
		if (interfaces() != 1)
			_exit(NET_IFACES);
		_exit(loop_works() ? NET_OK : NET_LOOP);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void
test_own_network_by_default(void **state)
{
	struct run r;

	(void)state;
	if (jail_up(&r, JAIL_NET_NONE) < 0)
		skip();
	assert_string_equal(jail_network(r.j), "none");
	assert_non_null(strstr(jail_describe(r.j), ",netns"));
	assert_int_equal(child_check(&r, 1), NET_OK);
	jail_down(&r);
}

static void
test_network_host_keeps_ours(void **state)
{
	struct run r;

	(void)state;
	if (jail_up(&r, JAIL_NET_HOST) < 0)
		skip();
	assert_string_equal(jail_network(r.j), "host");
	assert_null(strstr(jail_describe(r.j), "netns"));
	assert_int_equal(child_check(&r, 0), NET_OK);
	jail_down(&r);
}

/* A rebuilt world gets a namespace of its own again. */
static void
test_rebuilt_jail_has_its_own_network(void **state)
{
	struct run r;
	char err[512];
	int st, ms;

	(void)state;
	if (jail_up(&r, JAIL_NET_NONE) < 0)
		skip();
	assert_int_equal(kill(jail_init_pid(r.j), SIGKILL), 0);
	/* the init's end: its socket hangs up */
	for (ms = 0; !jail_lost(r.j) && ms < 10000; ms++)
		(void)usleep(1000);
	assert_true(jail_lost(r.j));
	assert_int_equal(jail_rebuild(r.j, err, sizeof err), 0);
	assert_string_equal(jail_network(r.j), "none");
	assert_int_equal(child_check(&r, 1), NET_OK);
	(void)waitpid(-1, &st, WNOHANG);
	jail_down(&r);
}

static void
test_no_jail_is_the_hosts_network(void **state)
{
	struct jail_config jc;
	struct jail *j;
	char err[64];

	(void)state;
	assert_string_equal(jail_network(NULL), "host");
	memset(&jc, 0, sizeof jc);
	jc.mode = JAIL_OFF;
	j = jail_new(&jc, err, sizeof err);
	assert_non_null(j);
	assert_string_equal(jail_network(j), "host");
	jail_free(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_network_by_default),
		cmocka_unit_test(test_network_host_keeps_ours),
		cmocka_unit_test(test_rebuilt_jail_has_its_own_network),
		cmocka_unit_test(test_no_jail_is_the_hosts_network),
	};

	return cmocka_run_group_tests_name("jail_net", tests, NULL, NULL);
}
