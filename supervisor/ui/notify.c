/*
 * notify.c - sd_notify glue (see notify.h).
 */
#include "supervisor/ui/notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "supervisor/ui/listen.h"
#include "supervisor/ui/out.h"

static uint64_t watchdog_ms;
static notify_alive_fn *alive_fn;
static void *alive_ctx;

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
		(void)sd_notify(0, "WATCHDOG=1");
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
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		watchdog_ms = usec / 2000;	/* half the interval */
		if (watchdog_ms == 0)
			watchdog_ms = 1;
		(void)loop_timer(l, watchdog_ms, watchdog_ping, NULL);
	}
}

void
notify_ready(void)
{
	(void)sd_notify(0, "READY=1");
}

void
notify_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1");
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
	char msg[512], *clean;
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
	(void)sd_notifyf(0, "STATUS=%s", clean);
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
