/*
 * notify.h - systemd integration: READY, STATUS and the watchdog ping for a
 * Type=notify unit (no-ops when not started by systemd). The watchdog is
 * pinged from a loop timer, so a stalled event loop gets the unit
 * restarted.
 */
#ifndef AGENTZ_NOTIFY_H
#define AGENTZ_NOTIFY_H

#include "common/log.h"
#include "supervisor/loop/loop.h"

/* Starts the watchdog pings when WATCHDOG_USEC asks for them. */
void notify_init(struct loop *l);
/*
 * Pings are sent only while fn(ctx) says the run makes progress (a cell,
 * a model call, a wait with its own deadline is alive); NULL: whenever
 * the loop turns.
 */
typedef int notify_alive_fn(void *ctx);
void notify_set_alive(notify_alive_fn *fn, void *ctx);
/*
 * Control characters (a newline would start a new assignment such as
 * WATCHDOG=trigger) become spaces, in place.
 */
void notify_sanitize(char *s);
void notify_ready(void);
void notify_status(const char *fmt, ...) LOG_PRINTF(1, 2);
void notify_stopping(void);

/*
 * OPENAI_API_KEY from systemd credentials ($CREDENTIALS_DIRECTORY/
 * openai_api_key, LoadCredential=) when the environment has none.
 */
void notify_load_credentials(void);

#endif
