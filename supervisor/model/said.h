/*
 * said.h - what a model response said, as one short line for a log
 * message ("the model did not submit a repair cell; it said: ...").
 */
#ifndef AGENTZ_SAID_H
#define AGENTZ_SAID_H

#include <jansson.h>
#include <stddef.h>

#include "supervisor/text/redact.h"

/*
 * The text of response's output (borrowed; its message text and refusals,
 * and "[called NAME]" for each tool call), secrets hidden by red (may be
 * NULL), control characters and line breaks made spaces, runs of spaces
 * made one, and cut to at most max bytes on a UTF-8 boundary with "..."
 * when longer. "" when it said nothing. Malloc'ed; NULL / ENOMEM.
 */
char *said_text(const json_t *response, const struct redact *red,
    size_t max);

#endif
