/*
 * test_landlock.c - sandbox/landlock.c against the running kernel.
 *
 * A Landlock domain cannot be lifted, so every restriction happens in a
 * forked child: it checks what it may still do, reports the first failed
 * check on stderr and exits 1; the parent asserts a clean exit.
 *
 * Signals are asserted without sleeping: the parent blocks the signal
 * before the fork and reads sigpending() after waitpid().  The kernel
 * queues a signal inside the sender's syscall (kill, or the write that
 * makes an O_ASYNC fd readable), so once the child is reaped anything it
 * sent is pending.  Each such case has an unrestricted control child that
 * shows the signal does arrive, so an absence cannot pass by accident.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/landlock.h"

#define PATH_LEN 128

static int abi;		/* landlock_abi(), read once by the group setup */

/* Two private directories: a is writable to the child, b is not. */
struct tmp {
	char a[PATH_LEN];
	char b[PATH_LEN];
};

/* --- helpers -------------------------------------------------------------- */

/* dir/name in one of a few static buffers (tests only, no threads). */
static const char *
at(const char *dir, const char *name)
{
	static char ring[4][PATH_LEN * 2];
	static unsigned next;
	char *p = ring[next++ % 4];

	(void)snprintf(p, sizeof ring[0], "%s/%s", dir, name);
	return p;
}

/* Opens path with flags (plus O_CLOEXEC), writes one byte, closes. */
static int
write_path(const char *path, int flags)
{
	int fd = open(path, flags | O_WRONLY | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	if (write(fd, "x", 1) != 1) {
		(void)close(fd);
		return -1;
	}
	return close(fd);
}

static int
create_file(const char *path, const char *text)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	ssize_t n = (ssize_t)strlen(text);

	if (fd < 0)
		return -1;
	if (write(fd, text, (size_t)n) != n) {
		(void)close(fd);
		return -1;
	}
	return close(fd);
}

/* Does path read back as exactly text? */
static int
reads_as(const char *path, const char *text)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf);
	(void)close(fd);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

static int
no_new_privs(void)
{
	return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
}

/* In a child: the first failed check ends it with status 1. */
static void
check(int ok, int line, const char *what)
{
	int e = errno;

	if (ok)
		return;
	dprintf(2, "test_landlock.c:%d: in the child: %s (errno %d, %s)\n",
	    line, what, e, strerror(e));
	_exit(1);
}

/* rc must be -1 with errno e (read after rc was computed). */
static void
check_fails(long rc, int e, int line, const char *what)
{
	check(rc == -1 && errno == e, line, what);
}

#define CHECK(c)	check((c) != 0, __LINE__, #c)
#define FAILS(c, e)	check_fails((long)(c), (e), __LINE__, #c " fails " #e)

typedef void child_fn(const struct tmp *t);

/* Runs fn(t) in a forked child and asserts that it exited 0. */
static void
run_child(child_fn *fn, const struct tmp *t)
{
	pid_t pid, r;
	int st;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);	/* a broken case never outlives the run */
		fn(t);
		_exit(0);
	}
	do
		r = waitpid(pid, &st, 0);
	while (r == -1 && errno == EINTR);
	assert_int_equal(r, pid);
	if (!WIFEXITED(st))
		fail_msg("child killed by signal %d", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* Blocks sig in this process; the old mask goes to *old. */
static void
block(int sig, sigset_t *old)
{
	sigset_t set;

	(void)sigemptyset(&set);
	(void)sigaddset(&set, sig);
	assert_int_equal(sigprocmask(SIG_BLOCK, &set, old), 0);
}

/* Is sig pending here?  Consumes it (a zero timeout polls, never waits). */
static int
take_pending(int sig)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t set, one;

	assert_int_equal(sigpending(&set), 0);
	if (!sigismember(&set, sig))
		return 0;
	(void)sigemptyset(&one);
	(void)sigaddset(&one, sig);
	assert_int_equal(sigtimedwait(&one, NULL, &zero), sig);
	return 1;
}

/* --- fixture ---------------------------------------------------------------- */

static int
make_dir(char *out)
{
	(void)snprintf(out, PATH_LEN, "/tmp/agentz-landlock-XXXXXX");
	return mkdtemp(out) != NULL ? 0 : -1;
}

static int
tmp_setup(void **state)
{
	struct tmp *t = calloc(1, sizeof *t);

	if (t == NULL || make_dir(t->a) < 0 || make_dir(t->b) < 0 ||
	    create_file(at(t->a, "moveme"), "m") < 0 ||
	    create_file(at(t->b, "existing"), "hello") < 0 ||
	    create_file(at(t->b, "writable"), "w") < 0) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

/* Empties dir (one level: the children make no deeper trees), removes it. */
static void
remove_dir(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0)
			(void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	if (d != NULL)
		(void)closedir(d);
	(void)rmdir(dir);
}

static int
tmp_teardown(void **state)
{
	struct tmp *t = *state;

	remove_dir(t->a);
	remove_dir(t->b);
	free(t);
	return 0;
}

static void
on_signal(int sig)
{
	(void)sig;
}

/*
 * The signal cases keep SIGUSR1/SIGUSR2 blocked and read them as pending.
 * A failed assertion leaves that way (cmocka restores the signal mask it
 * saved), so a signal still pending must then be harmless: a no-op
 * handler instead of the default action, which would end this process.
 */
static int
group_setup(void **state)
{
	struct sigaction sa;

	(void)state;
	abi = landlock_abi();
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	(void)sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0 ||
	    sigaction(SIGUSR2, &sa, NULL) < 0)
		return -1;
	return 0;
}

static void
need_abi(int min)
{
	if (abi < min) {
		print_message("Landlock ABI %d here, this case needs %d\n", abi,
		    min);
		skip();
	}
}

/* --- 1. the kernel's ABI ------------------------------------------------------ */

/* landlock_abi() agrees with the raw version query; 0 only without Landlock. */
static void
test_abi_is_offered(void **state)
{
	long raw;

	(void)state;
	raw = syscall(SYS_landlock_create_ruleset, NULL, (size_t)0, 1U);
	if (raw <= 0) {
		assert_int_equal(landlock_abi(), 0);
		print_message("no Landlock here (errno %d)\n", errno);
		skip();
	}
	assert_int_equal(landlock_abi(), raw);
	assert_true(landlock_abi() > 0);
	print_message("Landlock ABI %d\n", landlock_abi());
}

/* --- 2. filesystem -------------------------------------------------------------- */

static void
fs_restricted(const struct tmp *t)
{
	char writable[PATH_LEN * 2];
	const char *dirs[] = { t->a, NULL };
	const char *files[] = { "/dev/null", writable, NULL };

	(void)snprintf(writable, sizeof writable, "%s", at(t->b, "writable"));
	CHECK(landlock_restrict(dirs, files, abi) == 0);
	CHECK(no_new_privs() == 1);
	/* Beneath a: create, overwrite (O_TRUNC), rename, unlink. */
	CHECK(write_path(at(t->a, "new"), O_CREAT) == 0);
	CHECK(write_path(at(t->a, "new"), O_TRUNC) == 0);
	CHECK(rename(at(t->a, "new"), at(t->a, "renamed")) == 0);
	CHECK(mkdir(at(t->a, "d"), 0700) == 0 && rmdir(at(t->a, "d")) == 0);
	/* Beneath b: nothing that writes. */
	FAILS(write_path(at(t->b, "new"), O_CREAT), EACCES);
	FAILS(write_path(at(t->b, "existing"), 0), EACCES);
	FAILS(unlink(at(t->b, "existing")), EACCES);
	FAILS(mkdir(at(t->b, "d"), 0700), EACCES);
	FAILS(mkfifo(at(t->b, "fifo"), 0600), EACCES);
	FAILS(symlink("/", at(t->b, "link")), EACCES);
	if (abi >= LANDLOCK_ABI_TRUNCATE)
		FAILS(truncate(at(t->b, "existing"), 0), EACCES);
	CHECK(rename(at(t->a, "moveme"), at(t->b, "moved")) == -1 &&
	    (errno == EXDEV || errno == EACCES));
	CHECK(reads_as(at(t->b, "existing"), "hello"));
	/* A file rule: the file is writable, its directory entry is not. */
	CHECK(write_path(at(t->b, "writable"), O_TRUNC) == 0);
	FAILS(unlink(at(t->b, "writable")), EACCES);
	FAILS(rename(at(t->b, "writable"), at(t->b, "w2")), EACCES);
	CHECK(write_path("/dev/null", 0) == 0);
	FAILS(write_path("/dev/zero", 0), EACCES);
}

static void
fs_no_files(const struct tmp *t)
{
	const char *dirs[] = { t->a, NULL };

	CHECK(landlock_restrict(dirs, NULL, abi) == 0);
	CHECK(write_path(at(t->a, "new"), O_CREAT) == 0);
	FAILS(write_path("/dev/null", 0), EACCES);
	CHECK(reads_as(at(t->b, "existing"), "hello"));
}

static void
test_writes_only_beneath_rw_dirs_and_files(void **state)
{
	const struct tmp *t = *state;
	struct stat st;

	need_abi(1);
	run_child(fs_restricted, t);
	run_child(fs_no_files, t);
	/* What the children did, seen from outside. */
	assert_int_equal(stat(at(t->a, "renamed"), &st), 0);
	assert_int_equal(stat(at(t->a, "moveme"), &st), 0);
	assert_int_equal(stat(at(t->b, "moved"), &st), -1);
	assert_int_equal(stat(at(t->b, "new"), &st), -1);
	assert_true(reads_as(at(t->b, "writable"), "x"));
}

/* --- 3. signal scope ------------------------------------------------------------ */

static void
kill_parent(const struct tmp *t)
{
	(void)t;
	CHECK(kill(getppid(), SIGUSR1) == 0);
}

static void
kill_parent_restricted(const struct tmp *t)
{
	(void)t;
	CHECK(landlock_restrict(NULL, NULL, abi) == 0);
	FAILS(kill(getppid(), SIGUSR1), EPERM);
	FAILS(kill(getppid(), 0), EPERM);
}

/* A process forked after the restriction is inside the domain. */
static void
kill_own_child_restricted(const struct tmp *t)
{
	int p[2], st;
	pid_t pid;
	char c;

	(void)t;
	CHECK(landlock_restrict(NULL, NULL, abi) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		(void)close(p[1]);
		(void)read(p[0], &c, 1);	/* EOF if its parent dies */
		_exit(0);
	}
	(void)close(p[0]);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void
test_signals_do_not_leave_the_domain(void **state)
{
	sigset_t old;

	need_abi(LANDLOCK_ABI_SCOPES);
	block(SIGUSR1, &old);
	run_child(kill_parent, *state);
	assert_true(take_pending(SIGUSR1));	/* the control arrives */
	run_child(kill_parent_restricted, *state);
	assert_false(take_pending(SIGUSR1));
	run_child(kill_own_child_restricted, *state);
	assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

/*
 * The owner of an O_ASYNC pipe set to our parent, SIGUSR2 as the SIGIO
 * signal; then the read end becomes readable.
 */
static void
sigio_to_parent(int restricted)
{
	int p[2], fl;

	if (restricted)
		CHECK(landlock_restrict(NULL, NULL, abi) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	if (fcntl(p[0], F_SETOWN, getppid()) < 0) {
		/* Refusing the owner outright is as good as dropping. */
		CHECK(restricted && errno == EPERM);
		return;
	}
	CHECK(fcntl(p[0], F_SETSIG, SIGUSR2) == 0);
	fl = fcntl(p[0], F_GETFL);
	CHECK(fl != -1 && fcntl(p[0], F_SETFL, fl | O_ASYNC) == 0);
	CHECK(write(p[1], "x", 1) == 1);
}

static void
sigio_plain(const struct tmp *t)
{
	(void)t;
	sigio_to_parent(0);
}

static void
sigio_restricted(const struct tmp *t)
{
	(void)t;
	sigio_to_parent(1);
}

static void
test_sigio_does_not_leave_the_domain(void **state)
{
	sigset_t old;

	need_abi(LANDLOCK_ABI_SCOPES);
	block(SIGUSR2, &old);
	run_child(sigio_plain, *state);
	assert_true(take_pending(SIGUSR2));	/* the control arrives */
	run_child(sigio_restricted, *state);
	assert_false(take_pending(SIGUSR2));
	assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

/* --- 4. abstract unix sockets ------------------------------------------------ */

/* The abstract address "\0agentz-landlock-<owner>-<kind>". */
static socklen_t
abstract_addr(struct sockaddr_un *sa, pid_t owner, const char *kind)
{
	int n;

	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1,
	    "agentz-landlock-%ld-%s", (long)owner, kind);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    (size_t)n);
}

/* Connects (stream) and sends (datagram) to the parent's sockets. */
static void
reach_parent(int restricted)
{
	struct sockaddr_un sa;
	socklen_t len;
	int s, d;

	if (restricted)
		CHECK(landlock_restrict(NULL, NULL, abi) == 0);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	d = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(s >= 0 && d >= 0);
	len = abstract_addr(&sa, getppid(), "stream");
	if (restricted)
		FAILS(connect(s, (struct sockaddr *)&sa, len), EPERM);
	else
		CHECK(connect(s, (struct sockaddr *)&sa, len) == 0);
	len = abstract_addr(&sa, getppid(), "dgram");
	if (restricted)
		FAILS(sendto(d, "r", 1, 0, (struct sockaddr *)&sa, len), EPERM);
	else
		CHECK(sendto(d, "p", 1, 0, (struct sockaddr *)&sa, len) == 1);
}

static void
reach_plain(const struct tmp *t)
{
	(void)t;
	reach_parent(0);
}

static void
reach_restricted(const struct tmp *t)
{
	(void)t;
	reach_parent(1);
}

/* Binds an abstract socket of ours; a stream one listens. */
static int
bind_abstract(int type, const char *kind)
{
	struct sockaddr_un sa;
	socklen_t len;
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	len = abstract_addr(&sa, getpid(), kind);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 8), 0);
	return fd;
}

/* Accepts one pending connection without waiting: 1 if there was one. */
static int
take_connection(int lfd)
{
	int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (c < 0)
		return 0;
	(void)close(c);
	return 1;
}

static void
test_abstract_sockets_do_not_leave_the_domain(void **state)
{
	int s, d;
	char c;

	need_abi(LANDLOCK_ABI_SCOPES);
	s = bind_abstract(SOCK_STREAM, "stream");
	d = bind_abstract(SOCK_DGRAM, "dgram");
	assert_int_equal(fcntl(s, F_SETFL, O_NONBLOCK), 0);
	run_child(reach_plain, *state);
	assert_true(take_connection(s));	/* the control arrives */
	assert_int_equal(recv(d, &c, 1, MSG_DONTWAIT), 1);
	assert_int_equal(c, 'p');
	run_child(reach_restricted, *state);
	assert_false(take_connection(s));
	assert_int_equal(recv(d, &c, 1, MSG_DONTWAIT), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	(void)close(s);
	(void)close(d);
}

/* --- 5. arguments ---------------------------------------------------------------- */

static void
missing_paths(const struct tmp *t)
{
	const char *dirs[] = { "/nonexistent/agentz-landlock", t->a, NULL };
	const char *files[] = { "/nonexistent/agentz-landlock-file", NULL };

	CHECK(landlock_restrict(dirs, files, abi) == 0);
	CHECK(write_path(at(t->a, "new"), O_CREAT) == 0);
	FAILS(write_path(at(t->b, "new"), O_CREAT), EACCES);
}

/* NULL lists: the whole filesystem is read-only, still readable. */
static void
null_lists(const struct tmp *t)
{
	CHECK(landlock_restrict(NULL, NULL, abi) == 0);
	FAILS(write_path(at(t->a, "new"), O_CREAT), EACCES);
	FAILS(write_path("/dev/null", 0), EACCES);
	CHECK(reads_as(at(t->b, "existing"), "hello"));
}

static void
test_missing_paths_are_skipped(void **state)
{
	need_abi(1);
	run_child(missing_paths, *state);
	run_child(null_lists, *state);
}

/* Each refusal leaves the process as it was: no NNP, b writable. */
static void
refusals(const struct tmp *t)
{
	char existing[PATH_LEN * 2];
	const char *rel[] = { "tmp", NULL };
	const char *file[] = { existing, NULL };
	const char *dir[] = { t->b, NULL };
	int nnp = no_new_privs();

	(void)snprintf(existing, sizeof existing, "%s", at(t->b, "existing"));
	FAILS(landlock_restrict(dir, NULL, 0), EOPNOTSUPP);
	FAILS(landlock_restrict(dir, NULL, -1), EINVAL);
	if (abi > 0) {
		FAILS(landlock_restrict(dir, NULL, abi + 1), EINVAL);
		FAILS(landlock_restrict(rel, NULL, abi), EINVAL);
		FAILS(landlock_restrict(NULL, rel, abi), EINVAL);
		FAILS(landlock_restrict(file, NULL, abi), ENOTDIR);
		FAILS(landlock_restrict(NULL, dir, abi), EISDIR);
	} else {
		FAILS(landlock_restrict(dir, NULL, 1), EOPNOTSUPP);
	}
	CHECK(no_new_privs() == nnp);
	CHECK(write_path(at(t->b, "new"), O_CREAT) == 0);
}

static void
test_refusals_change_nothing(void **state)
{
	struct stat st;

	run_child(refusals, *state);
	assert_int_equal(stat(at(((struct tmp *)*state)->b, "new"), &st), 0);
}

/* --- 6. an older ABI handles only what it knows ---------------------------------- */

static void
abi_1(const struct tmp *t)
{
	CHECK(landlock_restrict(NULL, NULL, 1) == 0);
	FAILS(write_path(at(t->b, "new"), O_CREAT), EACCES);
	/* Truncation (ABI 3) is not handled, nor are signals (ABI 6). */
	CHECK(truncate(at(t->b, "existing"), 0) == 0);
	CHECK(kill(getppid(), 0) == 0);
}

static void
abi_5(const struct tmp *t)
{
	CHECK(landlock_restrict(NULL, NULL, 5) == 0);
	FAILS(truncate(at(t->b, "writable"), 0), EACCES);
	CHECK(kill(getppid(), 0) == 0);
}

static void
test_older_abi_handles_less(void **state)
{
	need_abi(LANDLOCK_ABI_SCOPES);
	run_child(abi_1, *state);
	run_child(abi_5, *state);
	assert_true(reads_as(at(((struct tmp *)*state)->b, "existing"), ""));
}

/* --- reads too: the domain a worker gets without the view --------------- */

static void
fs_reads(const struct tmp *t)
{
	const char *ro[] = { "/usr", NULL };
	const char *rw[] = { t->a, NULL };
	const char *files[] = { "/dev/null", NULL };
	int fd;

	CHECK(landlock_restrict_reads(ro, rw, files, abi) == 0);
	/* beneath ro: read and execute, never write */
	CHECK((fd = open("/usr/bin/env", O_RDONLY | O_CLOEXEC)) >= 0);
	(void)close(fd);
	CHECK(access("/usr/bin/env", X_OK) == 0);
	FAILS(open("/usr/bin/agentz-no-such", O_WRONLY | O_CREAT, 0600),
	    EACCES);
	/* beneath rw: everything; the listed file: read and write */
	CHECK(write_path(at(t->a, "new"), O_CREAT) == 0);
	CHECK(reads_as(at(t->a, "new"), "x"));
	CHECK(write_path("/dev/null", 0) == 0);
	/* elsewhere: no reading, no listing (stat still answers) */
	FAILS(open(at(t->b, "existing"), O_RDONLY | O_CLOEXEC), EACCES);
	FAILS(open("/etc/hostname", O_RDONLY | O_CLOEXEC), EACCES);
	FAILS(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), EACCES);
}

static void
test_reads_only_beneath_ro_and_rw(void **state)
{
	need_abi(1);
	run_child(fs_reads, *state);
	/* the child's restriction stayed in the child */
	assert_true(reads_as(at(((struct tmp *)*state)->b, "existing"),
	    "hello"));
}

#define T(f)	cmocka_unit_test_setup_teardown(f, tmp_setup, tmp_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_abi_is_offered),
		T(test_writes_only_beneath_rw_dirs_and_files),
		T(test_signals_do_not_leave_the_domain),
		T(test_sigio_does_not_leave_the_domain),
		T(test_abstract_sockets_do_not_leave_the_domain),
		T(test_missing_paths_are_skipped),
		T(test_refusals_change_nothing),
		T(test_older_abi_handles_less),
		T(test_reads_only_beneath_ro_and_rw),
	};

	return cmocka_run_group_tests_name("landlock", tests, group_setup,
	    NULL);
}
