/*
 * rewrite.h - the supervisor's rewriting of every call_me request body
 * (SPEC §4): engine-set fields, reasoning effort only upward, host tools
 * that cannot be replaced, extra_body stripped of protected keys and
 * merged last, always streamed.
 */
#ifndef AGENTZ_REWRITE_H
#define AGENTZ_REWRITE_H

#include <jansson.h>

#include "supervisor/model/model.h"

/*
 * Builds the wire body from the caller's call_me parameters (not
 * modified). host_tools is an array of tool definitions (borrowed).
 * Returns a new object, or NULL with *err (malloc'ed) naming the problem
 * when params is not an object.
 */
json_t *rewrite_request(json_t *params, const struct model_settings *s,
    const json_t *host_tools, char **err);

/* Is name one of the host tools in host_tools? */
int rewrite_is_host_tool(const json_t *host_tools, const char *name);

#endif
