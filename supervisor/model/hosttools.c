/*
 * hosttools.c - the host calls of a completed response (see hosttools.h):
 * telling them from the caller's and running them through the owner's
 * tools (struct host_tools). Their outputs are kept by hoststore.c; the
 * next input is built by hostfill.c.
 */
#include "supervisor/model/hosttools_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tool calls that the caller, not the server or the host, must answer. */
static const char *const external_types[] = {
	"function_call", "custom_tool_call", "computer_call",
	"local_shell_call", "shell_call", "apply_patch_call",
	"mcp_approval_request", NULL
};

struct hosttools *
hosttools_new(const struct host_tools *t)
{
	struct hosttools *h = calloc(1, sizeof *h);

	if (h == NULL)
		return NULL;
	h->tools = *t;
	h->tail = &h->head;
	h->budget = HOSTTOOLS_STORE_BUDGET;
	h->defs = json_loads(t->definitions, 0, NULL);
	h->by_response = json_object();
	h->by_call = json_object();
	if (!json_is_array(h->defs) || h->by_response == NULL ||
	    h->by_call == NULL) {
		hosttools_free(h);
		return NULL;
	}
	return h;
}

void
hosttools_free(struct hosttools *h)
{
	if (h == NULL)
		return;
	hoststore_clear(h);
	json_decref(h->defs);
	json_decref(h->by_response);
	json_decref(h->by_call);
	free(h);
}

const json_t *
hosttools_definitions(const struct hosttools *h)
{
	return h->defs;
}

int
hosttools_is_host_tool(const json_t *defs, const char *name)
{
	const char *host;
	size_t i;
	json_t *t;

	json_array_foreach(defs, i, t) {
		host = json_string_value(json_object_get(t, "name"));
		if (name != NULL && host != NULL && strcmp(name, host) == 0)
			return 1;
	}
	return 0;
}

static int
is_host_call(const struct hosttools *h, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));

	return type != NULL && strcmp(type, "function_call") == 0 &&
	    hosttools_is_host_tool(h->defs, json_string_value(json_object_get(
	    item, "name")));
}

static int
is_external_call(const struct hosttools *h, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	size_t i;

	for (i = 0; type != NULL && external_types[i] != NULL; i++)
		if (strcmp(type, external_types[i]) == 0)
			return !is_host_call(h, item);
	return 0;
}

__attribute__((format(printf, 1, 2))) static char *
msg(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	return rc < 0 ? NULL : s;
}

/* Runs one host call of cell through the owner's tools; returns its
 * output text, or NULL + *err to abort. */
static char *
run_call(struct hosttools *h, const json_t *item, uint32_t cell, char **err)
{
	const char *name = json_string_value(json_object_get(item, "name"));
	const char *argstr = json_string_value(json_object_get(item,
	    "arguments"));
	json_error_t je;
	json_t *args = argstr != NULL && *argstr != '\0' ?
	    json_loads(argstr, 0, &je) : json_object();
	int ok = json_is_object(args);

	json_decref(args);
	if (!ok)
		return msg("Error: the arguments of %s are not a JSON object",
		    name);
	return h->tools.run(h->tools.ctx, cell, name, argstr != NULL &&
	    *argstr != '\0' ? argstr : "{}", err);
}

enum host_verdict
hosttools_handle(struct hosttools *h, const json_t *response,
    uint32_t cell, const struct redact *red, json_t **outputs, char **err)
{
	const char *rid = json_string_value(json_object_get(response, "id"));
	const char *cid;
	int hosts = 0, external = 0;
	json_t *item, *out;
	char *text, *clean;
	size_t i, clen;

	*outputs = json_array();
	*err = NULL;
	json_array_foreach(json_object_get(response, "output"), i, item) {
		external += is_external_call(h, item);
		if (!is_host_call(h, item))
			continue;
		hosts++;
		cid = json_string_value(json_object_get(item, "call_id"));
		text = run_call(h, item, cell, err);
		if (text == NULL)
			return HOST_ABORT;
		clean = red != NULL ? redact_string(red, text, strlen(text),
		    &clen) : NULL;
		out = hosttools_output_item(cid != NULL ? cid : "", clean ? clean : text);
		free(text);
		free(clean);
		(void)json_array_append(*outputs, out);
		if (rid != NULL && cid != NULL)
			hoststore_put(h, rid, cid, cell, out);
		json_decref(out);
	}
	if (external > 0)
		return HOST_EXTERNAL;
	return hosts > 0 ? HOST_ONLY : HOST_NO_CALLS;
}
