/*
 * notify.c - systemd's notify protocol (see notify.h), spoken here: one
 * datagram of "NAME=value" lines to the AF_UNIX socket $NOTIFY_SOCKET
 * names (a path, or @name in the abstract namespace), the watchdog's
 * interval from $WATCHDOG_USEC when $WATCHDOG_PID is unset or ours, as
 * sd_notify(3) and sd_watchdog_enabled(3) do. Not libsystemd: loading it
 * and what it links cost every start (`agentz exec`, --version) about
 * 2 ms for three calls only a unit's run makes.
 */
#include "supervisor/ui/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/ui/listen.h"
#include "supervisor/ui/out.h"

static uint64_t watchdog_ms;
static notify_alive_fn *alive_fn;
static void *alive_ctx;

/* msg to $NOTIFY_SOCKET: 1 sent, 0 no socket, -1 (errno) failed. */
static int
notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	size_t n;
	socklen_t len;
	ssize_t sent;
	int fd, saved;

	if (path == NULL || *path == '\0')
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path) {
		errno = EINVAL;
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';	/* abstract: no terminator counted */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	sent = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL,
	    (const struct sockaddr *)&sa, len);
	saved = errno;
	(void)close(fd);
	errno = saved;
	return sent < 0 ? -1 : 1;
}

/* $WATCHDOG_USEC when it is meant for this process, else 0. */
static uint64_t
watchdog_usec(void)
{
	const char *s = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (s == NULL || *s == '\0')
		return 0;
	if (p != NULL && *p != '\0' &&
	    strtol(p, &end, 10) != (long)getpid())
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '-')
		return 0;
	return (uint64_t)v;
}

/*
 * The loop turned (this timer ran); the ping goes out only if the owner
 * also says something is alive within its own deadline, so a supervisor
 * waiting for nothing is restarted like a stuck one.
 */
static void
watchdog_ping(struct loop *l, void *ctx)
{
	(void)ctx;
	if (alive_fn == NULL || alive_fn(alive_ctx))
		(void)notify_send("WATCHDOG=1");
	(void)loop_timer(l, watchdog_ms, watchdog_ping, NULL);
}

void
notify_set_alive(notify_alive_fn *fn, void *ctx)
{
	alive_fn = fn;
	alive_ctx = ctx;
}

void
notify_init(struct loop *l)
{
	uint64_t usec = watchdog_usec();

	if (usec > 0) {
		watchdog_ms = usec / 2000;	/* half the interval */
		if (watchdog_ms == 0)
			watchdog_ms = 1;
		(void)loop_timer(l, watchdog_ms, watchdog_ping, NULL);
	}
}

void
notify_ready(void)
{
	(void)notify_send("READY=1");
}

void
notify_stopping(void)
{
	(void)notify_send("STOPPING=1");
}

void
notify_sanitize(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
}

void
notify_status(const char *fmt, ...)
{
	char msg[512], *clean, *line;
	va_list ap;

	if (getenv("NOTIFY_SOCKET") == NULL)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* the gate: secrets hidden, controls visible (one assignment) */
	clean = out_clean(msg, strlen(msg), 0);
	if (clean == NULL)
		return;
	notify_sanitize(clean);
	if (asprintf(&line, "STATUS=%s", clean) >= 0) {
		(void)notify_send(line);
		free(line);
	}
	free(clean);
}

void
notify_load_credentials(void)
{
	const char *dir = getenv("CREDENTIALS_DIRECTORY");
	char path[4096], key[4096];
	size_t n;
	FILE *f;

	if (dir == NULL || getenv("OPENAI_API_KEY") != NULL)
		return;
	(void)snprintf(path, sizeof path, "%s/openai_api_key", dir);
	f = fopen(path, "re");
	if (f == NULL)
		return;
	n = fread(key, 1, sizeof key - 1, f);
	(void)fclose(f);
	while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r'))
		n--;
	key[n] = '\0';
	if (n > 0)
		(void)setenv("OPENAI_API_KEY", key, 0);
	memset(key, 0, sizeof key);
}

/* --- the agent run's observer (listen.h) ---------------------------------- */

static void
sd_live(void *ctx, struct loop *l, int (*alive)(void *), void *actx)
{
	(void)ctx;
	notify_init(l);
	notify_set_alive(alive, actx);
}

static void
sd_status(void *ctx, const char *line)
{
	(void)ctx;
	notify_status("%s", line);
}

static void
sd_ready(void *ctx)
{
	(void)ctx;
	notify_ready();
}

static void
sd_stopping(void *ctx)
{
	(void)ctx;
	notify_stopping();
}

void
ui_notify_observer(struct agent_observer *o)
{
	memset(o, 0, sizeof *o);
	o->live = sd_live;
	o->status = sd_status;
	o->ready = sd_ready;
	o->stopping = sd_stopping;
}
