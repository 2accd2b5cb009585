/*
 * notify.h - systemd integration: READY, STATUS and the watchdog ping for a
 * Type=notify unit (no-ops when not started by systemd). The watchdog is
 * pinged from a loop timer, so a stalled event loop gets the unit
 * restarted.
 */
#ifndef AGENTZ_NOTIFY_H
#define AGENTZ_NOTIFY_H

#include "common/log.h"
#include "supervisor/loop.h"

/* Starts the watchdog pings when WATCHDOG_USEC asks for them. */
void notify_init(struct loop *l);
void notify_ready(void);
void notify_status(const char *fmt, ...) LOG_PRINTF(1, 2);
void notify_stopping(void);

/*
 * OPENAI_API_KEY from systemd credentials ($CREDENTIALS_DIRECTORY/
 * openai_api_key, LoadCredential=) when the environment has none.
 */
void notify_load_credentials(void);

#endif
