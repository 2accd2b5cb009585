/*
 * hosttools.c - the two host tools (see hosttools.h): their definitions,
 * running set_next_cell_code and get_history_cells for the host calls of
 * a completed response, and telling host calls from the caller's. Their
 * outputs are kept by hoststore.c; the next input is built by hostfill.c.
 */
#include "supervisor/model/hosttools_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cells/history.h"
#include "supervisor/model/rewrite.h"

static const char host_tools_json[] =
"[{\"type\": \"function\", \"name\": \"set_next_cell_code\","
" \"description\": \"Register the complete Python code of the next cell."
" It runs after the current cell ends, in the same persistent namespace."
" This only registers the code; it never executes it. Exactly once per"
" cell: a second call raises NextCellAlreadyScheduled in the cell.\","
" \"strict\": true,"
" \"parameters\": {\"type\": \"object\", \"properties\": {"
"  \"code\": {\"type\": \"string\", \"description\": \"The whole Python"
" source of the next cell.\"},"
"  \"summary\": {\"type\": \"string\", \"description\": \"What the cell"
" does, at most 256 characters.\"}},"
" \"required\": [\"code\", \"summary\"], \"additionalProperties\": false}},"
" {\"type\": \"function\", \"name\": \"get_history_cells\","
" \"description\": \"Return history[start:end] of the cell records (Python"
" slice semantics: negative indices count from the end, out-of-range"
" bounds are truncated), the running cell included with its output so"
" far. With both null, only {total} is returned.\","
" \"strict\": false,"
" \"parameters\": {\"type\": \"object\", \"properties\": {"
"  \"start\": {\"type\": [\"integer\", \"null\"]},"
"  \"end\": {\"type\": [\"integer\", \"null\"]}}}}]";

/* Tool calls that the caller, not the server or the host, must answer. */
static const char *const external_types[] = {
	"function_call", "custom_tool_call", "computer_call",
	"local_shell_call", "shell_call", "apply_patch_call",
	"mcp_approval_request", NULL
};

struct hosttools *
hosttools_new(void)
{
	struct hosttools *h = calloc(1, sizeof *h);

	if (h == NULL)
		return NULL;
	h->tail = &h->head;
	h->budget = HOSTTOOLS_STORE_BUDGET;
	h->defs = json_loads(host_tools_json, 0, NULL);
	h->by_response = json_object();
	h->by_call = json_object();
	if (h->defs == NULL || h->by_response == NULL || h->by_call == NULL) {
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

static int
is_host_call(const struct hosttools *h, const json_t *item)
{
	const char *type = json_string_value(json_object_get(item, "type"));

	return type != NULL && strcmp(type, "function_call") == 0 &&
	    rewrite_is_host_tool(h->defs, json_string_value(json_object_get(
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

/* Unicode code points in a UTF-8 string. */
static size_t
utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

/* set_next_cell_code: the tool output, or NULL + *err for HOST_ABORT. */
static char *
run_submit(const json_t *args, const struct host_binding *b, char **err)
{
	const json_t *code = json_object_get(args, "code");
	const char *summary = json_string_value(json_object_get(args,
	    "summary"));
	char buf[160];

	if (!json_is_string(code) || summary == NULL)
		return strdup("Error: set_next_cell_code needs string arguments "
		    "code and summary");
	if (utf8_chars(summary) > SUMMARY_MAX) {
		(void)snprintf(buf, sizeof buf, "Error: summary must be at most "
		    "%d characters (got %zu); nothing was registered",
		    SUMMARY_MAX, utf8_chars(summary));
		return strdup(buf);
	}
	switch (b->submit(b->ctx, b->cell, json_string_value(code),
	    json_string_length(code), summary)) {
	case SUBMIT_OK:
		(void)snprintf(buf, sizeof buf, "Registered as the next cell "
		    "(cell %u); it runs after cell %u ends.", b->cell + 1,
		    b->cell);
		return strdup(buf);
	case SUBMIT_REPAIR:
		(void)snprintf(buf, sizeof buf, "Registered as the repair cell; "
		    "it runs next, as cell %u.", b->cell);
		return strdup(buf);
	case SUBMIT_ALREADY:
		(void)snprintf(buf, sizeof buf, "cell %u already has a successor;"
		    " the first one is kept", b->cell);
		*err = strdup(buf);
		return NULL;
	case SUBMIT_INACTIVE:
	default:
		(void)snprintf(buf, sizeof buf, "Cell %u has finished", b->cell);
		return strdup(buf);
	}
}

static char *
run_history(const json_t *args, const struct host_binding *b)
{
	char *err = NULL, *s;
	char *a = args != NULL ? json_dumps(args, JSON_COMPACT |
	    JSON_ENCODE_ANY) : NULL;
	char *res = history_slice(b->history, a, &err);

	free(a);
	if (res == NULL) {
		s = msg("Error: %s", err != NULL ? err : "bad arguments");
		free(err);
		return s;
	}
	return res;
}

/* Runs one host call; returns its output text, or NULL + *err to abort. */
static char *
run_call(const json_t *item, const struct host_binding *b, char **err)
{
	const char *name = json_string_value(json_object_get(item, "name"));
	const char *argstr = json_string_value(json_object_get(item,
	    "arguments"));
	json_error_t je;
	json_t *args = argstr != NULL && *argstr != '\0' ?
	    json_loads(argstr, 0, &je) : json_object();
	char *out;

	if (!json_is_object(args)) {
		json_decref(args);
		return msg("Error: the arguments of %s are not a JSON object",
		    name);
	}
	if (strcmp(name, "set_next_cell_code") == 0)
		out = run_submit(args, b, err);
	else
		out = run_history(args, b);
	json_decref(args);
	return out;
}

enum host_verdict
hosttools_handle(struct hosttools *h, const json_t *response,
    const struct host_binding *b, const struct redact *red,
    json_t **outputs, char **err)
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
		text = run_call(item, b, err);
		if (text == NULL)
			return HOST_ABORT;
		clean = red != NULL ? redact_string(red, text, strlen(text),
		    &clen) : NULL;
		out = hosttools_output_item(cid != NULL ? cid : "", clean ? clean : text);
		free(text);
		free(clean);
		(void)json_array_append(*outputs, out);
		if (rid != NULL && cid != NULL)
			hoststore_put(h, rid, cid, b->cell, out);
		json_decref(out);
	}
	if (external > 0)
		return HOST_EXTERNAL;
	return hosts > 0 ? HOST_ONLY : HOST_NO_CALLS;
}
