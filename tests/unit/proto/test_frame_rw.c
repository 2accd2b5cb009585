/*
 * test_frame_rw.c - the blocking pair (proto/frame.c, frame_read and
 * frame_write) over real socketpairs, with a forked peer where the kernel
 * buffer would otherwise fill up: round trips, EOF mid-frame, bad frames,
 * no over-read, non-blocking fds, signals during a write, write errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/proto.h"
#include "tests/unit/proto/frame_helpers.h"
#include "tests/unit/proto/proto_helpers.h"

static void
write_raw(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

/* ------------------------------------------------- frame_read/frame_write */

static void
test_rw_roundtrip(void **state)
{
	struct msg m;
	size_t i;
	int sv[2];

	(void)state;
	make_pair(sv);
	for (i = 0; i < NITEMS(samples); i++)
		assert_int_equal(frame_write(sv[1], &samples[i], 4096), 0);
	assert_int_equal(close(sv[1]), 0);
	for (i = 0; i < NITEMS(samples); i++) {
		assert_int_equal(frame_read(sv[0], &m, 4096), 1);
		msg_equal(&samples[i], &m);
		msg_clear(&m);
	}
	assert_int_equal(frame_read(sv[0], &m, 4096), 0);	/* clean EOF */
	assert_zeroed(&m);
	assert_int_equal(close(sv[0]), 0);
}

/* Writes raw bytes, closes the writer, and expects frame_read to fail. */
static void
expect_read_fail(const void *p, size_t n, size_t max_frame, int e)
{
	struct msg m;
	int sv[2];

	make_pair(sv);
	if (n > 0)
		write_raw(sv[1], p, n);
	assert_int_equal(close(sv[1]), 0);
	errno = 0;
	assert_int_equal(frame_read(sv[0], &m, max_frame), -1);
	assert_int_equal(errno, e);
	assert_zeroed(&m);
	assert_int_equal(close(sv[0]), 0);
}

static void
test_rw_eof_mid_frame(void **state)
{
	struct buf b;
	size_t i;

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&samples[0], &b, 4096), 0);
	for (i = 1; i < b.len; i++)
		expect_read_fail(b.data, i, 4096, ECONNRESET);
	buf_clear(&b);
}

static void
test_rw_bad_frames(void **state)
{
	uint8_t hdr[PROTO_HEADER_SIZE];
	struct buf b;

	(void)state;
	/* oversized: refused from the header alone, not ECONNRESET */
	put_header(hdr, UINT32_MAX, MSG_EXEC, 0);
	expect_read_fail(hdr, sizeof(hdr), PROTO_MAX_FRAME_DEFAULT, EMSGSIZE);
	put_header(hdr, 4097, MSG_EXEC, 0);
	expect_read_fail(hdr, sizeof(hdr), 4096, EMSGSIZE);
	put_header(hdr, 1, MSG_SHUTDOWN, 1);
	expect_read_fail(hdr, sizeof(hdr), 4096, EPROTO);
	put_header(hdr, 1, 11, 0);	/* no such type */
	expect_read_fail(hdr, sizeof(hdr), 4096, EPROTO);
	buf_init(&b);
	raw_frame(&b, 3, MSG_EXEC, 0, RAW(0x92, 0x01, 0xa0), 3);
	expect_read_fail(b.data, b.len, 4096, EBADMSG);
	buf_clear(&b);
}

/* frame_read takes one frame and leaves the next one in the socket. */
static void
test_rw_no_overread(void **state)
{
	struct buf b;
	struct msg m;
	int sv[2];

	(void)state;
	buf_init(&b);
	assert_int_equal(msg_encode(&samples[6], &b, 4096), 0);
	assert_int_equal(msg_encode(&samples[8], &b, 4096), 0);
	make_pair(sv);
	write_raw(sv[1], b.data, b.len);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[6], &m);
	msg_clear(&m);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[8], &m);
	msg_clear(&m);
	assert_int_equal(close(sv[0]), 0);
	assert_int_equal(close(sv[1]), 0);
	buf_clear(&b);
}

/*
 * Child: reads one frame in 8 KiB pieces and checks it is the n-byte
 * pattern. With sig, it pauses and signals the parent after each piece,
 * while the parent's write is blocked on the full socket.
 */
static void
slow_reader(int fd, size_t n, int sig)
{
	struct frame_rx rx;
	struct timespec ts = { 0, 20000 };
	struct msg m;
	char chunk[8192];
	int rc = 0;

	frame_rx_init(&rx, 2 * n);
	while (rc == 0) {
		ssize_t r = read(fd, chunk, sizeof(chunk));

		if (r <= 0)
			_exit(2);
		if (frame_rx_feed(&rx, chunk, (size_t)r) == -1)
			_exit(3);
		rc = frame_rx_pop(&rx, &m);
		if (sig != 0) {
			nanosleep(&ts, NULL);
			kill(getppid(), sig);
		}
	}
	_exit(rc == 1 && m.type == MSG_EXEC && is_pattern(&m.u.exec.code, n) ?
	    0 : 1);
}

/* A non-blocking writer: EAGAIN must turn into a poll, not an error. */
static void
test_rw_nonblocking_write(void **state)
{
	const size_t n = (size_t)4 << 20;
	struct msg m;
	char *p = pattern(n);
	pid_t pid;
	int sv[2];

	(void)state;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[1]);
		slow_reader(sv[0], n, 0);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[0]), 0);
	set_nonblock(sv[1]);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { p, n } } };
	assert_int_equal(frame_write(sv[1], &m, 2 * n), 0);
	wait_child(pid);
	assert_int_equal(close(sv[1]), 0);
	free(p);
}

static volatile sig_atomic_t signals;

static void
on_signal(int sig)
{
	(void)sig;
	signals++;
}

/*
 * Signals without SA_RESTART while a blocking write waits on a slow
 * reader: EINTR and short writes must be retried. The reader sends one
 * signal per read, so there is progress between signals even on a slow
 * machine (a fast timer livelocks under valgrind).
 */
static void
test_rw_write_signals(void **state)
{
	const size_t n = (size_t)1 << 20;
	struct sigaction sa, old;
	struct msg m;
	char *p = pattern(n);
	pid_t pid;
	int sv[2];

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART */
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	signals = 0;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[1]);
		slow_reader(sv[0], n, SIGUSR1);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[0]), 0);
	m = (struct msg){ .type = MSG_EXEC, .u.exec = { 1, { p, n } } };
	assert_int_equal(frame_write(sv[1], &m, 2 * n), 0);
	assert_true(signals > 0);
	wait_child(pid);	/* no signal can come after this */
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	assert_int_equal(close(sv[1]), 0);
	free(p);
}

/*
 * The state letter of pid from /proc/<pid>/stat ('R', 'S', ...), or 0.
 * The comm field may hold spaces and parentheses: the state follows the
 * last ')'.
 */
static char
proc_state(pid_t pid)
{
	char path[64], line[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, line, sizeof line - 1);
	close(fd);
	if (n <= 0)
		return 0;
	line[n] = '\0';
	p = strrchr(line, ')');
	return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/*
 * frame_read on a non-blocking fd waits for a late writer. The child
 * writes only once the parent sleeps: a non-blocking read never sleeps,
 * so the parent is then in the poll after EAGAIN, the path under test.
 */
static void
test_rw_nonblocking_read(void **state)
{
	pid_t pid, parent = getpid();
	struct msg m;
	int sv[2];

	(void)state;
	make_pair(sv);
	if ((pid = fork()) == 0) {
		child_start();
		close(sv[0]);
		while (proc_state(parent) != 'S')
			sched_yield();
		_exit(frame_write(sv[1], &samples[9], 4096) == 0 ? 0 : 1);
	}
	assert_true(pid > 0);
	assert_int_equal(close(sv[1]), 0);
	set_nonblock(sv[0]);
	assert_int_equal(frame_read(sv[0], &m, 4096), 1);
	msg_equal(&samples[9], &m);
	msg_clear(&m);
	assert_int_equal(frame_read(sv[0], &m, 4096), 0);
	wait_child(pid);
	assert_int_equal(close(sv[0]), 0);
}

static void
test_rw_write_errors(void **state)
{
	struct msg m = { .type = (enum msg_type)0 };
	char c;
	int sv[2];

	(void)state;
	make_pair(sv);
	set_nonblock(sv[0]);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &m, 4096), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &samples[0], 4), -1);
	assert_int_equal(errno, EMSGSIZE);
	/* nothing went out for either */
	assert_int_equal(read(sv[0], &c, 1), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	/* the peer is gone (SIGPIPE is ignored, as in the binaries) */
	assert_int_equal(close(sv[0]), 0);
	errno = 0;
	assert_int_equal(frame_write(sv[1], &samples[0], 4096), -1);
	assert_int_equal(errno, EPIPE);
	assert_int_equal(close(sv[1]), 0);
	/* a bad fd */
	errno = 0;
	assert_int_equal(frame_write(-1, &samples[0], 4096), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(frame_read(-1, &m, 4096), -1);
	assert_int_equal(errno, EBADF);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rw_roundtrip),
		cmocka_unit_test(test_rw_eof_mid_frame),
		cmocka_unit_test(test_rw_bad_frames),
		cmocka_unit_test(test_rw_no_overread),
		cmocka_unit_test(test_rw_nonblocking_write),
		cmocka_unit_test(test_rw_write_signals),
		cmocka_unit_test(test_rw_nonblocking_read),
		cmocka_unit_test(test_rw_write_errors),
	};

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return 1;
	return cmocka_run_group_tests_name("frame_rw", tests, NULL, NULL);
}
