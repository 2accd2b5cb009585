/*
 * log.c - one-line diagnostics to stderr (journald-friendly: no colour, no
 * timestamps; systemd adds its own).
 */
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_prog = "agentz";
static int log_level_verbose;
static log_sink_fn *log_sink;

void
log_set_sink(log_sink_fn *fn)
{
	log_sink = fn;
}

void
log_init(const char *prog, int verbose)
{
	log_prog = prog;
	log_level_verbose = verbose;
}

#define LINE_ERRNO	1	/* ": strerror(errno)" after the message */
#define LINE_WARNING	2	/* a warning: kept as the last one */

static char log_last[2304];	/* the last warning, without "<prog>: " */

const char *
log_last_warning(void)
{
	return log_last[0] != '\0' ? log_last : NULL;
}

static void log_vline(const char *fmt, va_list ap, int how)
    LOG_PRINTF(1, 0);

static void
log_vline(const char *fmt, va_list ap, int how)
{
	int saved = errno, with_errno = how & LINE_ERRNO;
	char msg[2048], line[2304];
	int n;

	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	if (how & LINE_WARNING)
		(void)snprintf(log_last, sizeof log_last, "%s%s%s", msg,
		    with_errno ? ": " : "", with_errno ? strerror(saved) : "");
	if (log_sink != NULL) {
		n = snprintf(line, sizeof line, "%s: %s%s%s", log_prog, msg,
		    with_errno ? ": " : "", with_errno ? strerror(saved) : "");
		if (n > 0)
			log_sink(line, (size_t)n < sizeof line ? (size_t)n :
			    sizeof line - 1);
		errno = saved;
		return;
	}
	if (with_errno)
		(void)fprintf(stderr, "%s: %s: %s\n", log_prog, msg,
		    strerror(saved));
	else
		(void)fprintf(stderr, "%s: %s\n", log_prog, msg);
	errno = saved;
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap, LINE_ERRNO | LINE_WARNING);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap, LINE_WARNING);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap, 0);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_level_verbose)
		return;
	va_start(ap, fmt);
	log_vline(fmt, ap, 0);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap, 1);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(fmt, ap, 0);
	va_end(ap);
	exit(1);
}
