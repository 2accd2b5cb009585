/*
 * log.h - diagnostics for both binaries.
 *
 * log_* write one line "<prog>: <message>" to stderr. fatal()/fatalx() are
 * for start-up failures and broken invariants only: a misbehaving worker is
 * a state change for the supervisor, never fatal to it. fatal() appends
 * strerror(errno).
 */
#ifndef AGENTZ_LOG_H
#define AGENTZ_LOG_H

#include <stdarg.h>
#include <stddef.h>

#define LOG_PRINTF(a, b) __attribute__((format(printf, a, b)))

void log_init(const char *prog, int verbose);
void log_warn(const char *fmt, ...) LOG_PRINTF(1, 2);	/* + strerror */
void log_warnx(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_info(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_debug(const char *fmt, ...) LOG_PRINTF(1, 2);	/* -v only */
/* The last warning's message (log_warn, log_warnx) without "<prog>: ",
 * or NULL before any: what a usage error said, for the event stream. */
const char *log_last_warning(void);
/*
 * Where log lines go instead of stderr (NULL: stderr again): the
 * supervisor's event loop must not block on a stalled stderr. line[0..n)
 * is "<prog>: <message>" without the newline; the sink must not log.
 */
typedef void log_sink_fn(const char *line, size_t n);
void log_set_sink(log_sink_fn *fn);
_Noreturn void fatal(const char *fmt, ...) LOG_PRINTF(1, 2);
_Noreturn void fatalx(const char *fmt, ...) LOG_PRINTF(1, 2);

#endif
