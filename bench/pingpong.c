/*
 * pingpong - the floor for any two-process round trip on this machine.
 *
 * A parent and a forked child bounce a 64-byte message over a pair of
 * pipes. Each round trip (write, child reads and writes back, parent
 * reads) is timed on its own with CLOCK_MONOTONIC; the first WARMUP are
 * dropped. Prints one line of JSON:
 *   {"mode":"none","n":N,"bytes":64,"median_us":M,"p90_us":P,"min_us":L}
 *
 *   pingpong [ROUNDS [same|cross|none [SPIN_US]]]
 *       default 20000 rounds, unpinned, no spin
 *
 * "same" pins both processes to the first allowed CPU, "cross" puts them on
 * the first two: on a small VM the unpinned figure swings between the two
 * depending on where the scheduler wakes the peer. SPIN_US > 0: each side
 * polls without blocking for up to that long before its blocking read
 * (the figure for a bounded spin before blocking; "spin_us" in the JSON).
 *
 * Built by bench/run.py with cc -O2 and common/fdio.c (the one write
 * loop); not part of the agentz build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fdio.h"

#define MSG 64
#define WARMUP 500

/* 0 on success, 1 on EOF, -1 on error. */
static int full_read(int fd, char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, buf, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			return 1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static double now_us(void);

/* Waits up to spin_us for fd to be readable, polling without blocking
 * (the bounded spin agentz uses before blocking on its channel); 0 when
 * spin_us is 0. */
static void spin_wait(int fd, double spin_us)
{
	struct pollfd p = { fd, POLLIN, 0 };
	double end;

	if (spin_us <= 0)
		return;
	end = now_us() + spin_us;
	while (poll(&p, 1, 0) == 0 && now_us() < end)
		(void)sched_yield();
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Pin the calling process to the idx-th CPU it may run on. */
static int pin_nth(int idx)
{
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
		return -1;
	for (int c = 0, seen = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &allowed))
			continue;
		if (seen++ == idx) {
			CPU_ZERO(&one);
			CPU_SET(c, &one);
			return sched_setaffinity(0, sizeof one, &one);
		}
	}
	errno = ESRCH;
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	if (rounds < 1 || rounds > 10000000) {
		fprintf(stderr, "pingpong: bad round count\n");
		return 2;
	}
	const char *mode = argc > 2 ? argv[2] : "none";
	double spin_us = argc > 3 ? strtod(argv[3], NULL) : 0;
	int pin_parent = -1, pin_child = -1;
	if (strcmp(mode, "same") == 0) {
		pin_parent = pin_child = 0;
	} else if (strcmp(mode, "cross") == 0) {
		pin_parent = 0;
		pin_child = 1;
	} else if (strcmp(mode, "none") != 0) {
		fprintf(stderr, "pingpong: mode is same, cross or none\n");
		return 2;
	}
	long total = rounds + WARMUP;
	int to_child[2], to_parent[2];
	if (pipe(to_child) < 0 || pipe(to_parent) < 0) {
		perror("pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	char buf[MSG];
	if (pid == 0) {
		if (pin_child >= 0 && pin_nth(pin_child) < 0) {
			perror("pingpong: pin child");
			_exit(1);
		}
		close(to_child[1]);
		close(to_parent[0]);
		for (;;) {
			spin_wait(to_child[0], spin_us);
			int r = full_read(to_child[0], buf, MSG);
			if (r != 0)
				_exit(r < 0);
			if (fd_write_all(to_parent[1], buf, MSG) < 0)
				_exit(1);
		}
	}
	close(to_child[0]);
	close(to_parent[1]);
	if (pin_parent >= 0 && pin_nth(pin_parent) < 0) {
		perror("pingpong: pin parent");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}

	double *t = malloc((size_t)total * sizeof *t);
	if (!t) {
		perror("malloc");
		kill(pid, SIGKILL);
		return 1;
	}
	memset(buf, 'x', MSG);
	int rc = 0;
	for (long i = 0; i < total; i++) {
		double t0 = now_us();
		if (fd_write_all(to_child[1], buf, MSG) < 0 ||
		    (spin_wait(to_parent[0], spin_us),
		    full_read(to_parent[0], buf, MSG) != 0)) {
			perror("pingpong");
			rc = 1;
			break;
		}
		t[i] = now_us() - t0;
	}
	close(to_child[1]);
	waitpid(pid, NULL, 0);
	if (rc) {
		free(t);
		return rc;
	}
	double *s = t + WARMUP;
	qsort(s, (size_t)rounds, sizeof *s, cmp_double);
	printf("{\"mode\":\"%s\",\"n\":%ld,\"bytes\":%d,\"median_us\":%.3f,"
	       "\"p90_us\":%.3f,\"min_us\":%.3f,\"spin_us\":%.0f}\n",
	       mode, rounds, MSG, s[rounds / 2], s[(rounds * 9) / 10], s[0],
	       spin_us);
	free(t);
	return 0;
}
