/*
 * tools.c - the two host tools (see tools.h): their definitions and what
 * a call of one does: set_next_cell_code checks its arguments and
 * registers the code with the run, get_history_cells slices the cell
 * records. The model client runs them (model/hosttools.h).
 */
#include "supervisor/agent/tools.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cells/history.h"
#include "supervisor/text/jsonf.h"

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

/* set_next_cell_code's arguments, read: code (len bytes) and summary. */
struct submit_args {
	char *code, *summary;
	size_t len;
};

/* set_next_cell_code: the tool output, or NULL + *err for HOST_ABORT. */
static char *
run_submit(const struct agent_tools *t, uint32_t cell,
    const struct submit_args *args, char **err)
{
	const char *summary = args->summary;
	char buf[160];

	if (utf8_chars(summary) > SUMMARY_MAX) {
		(void)snprintf(buf, sizeof buf, "Error: summary must be at most "
		    "%d characters (got %zu); nothing was registered",
		    SUMMARY_MAX, utf8_chars(summary));
		return strdup(buf);
	}
	switch (t->submit(t->ctx, cell, args->code, args->len, summary)) {
	case SUBMIT_OK:
		(void)snprintf(buf, sizeof buf, "Registered as the next cell "
		    "(cell %u); it runs after cell %u ends.", cell + 1,
		    cell);
		return strdup(buf);
	case SUBMIT_REPAIR:
		(void)snprintf(buf, sizeof buf, "Registered as the repair cell; "
		    "it runs next, as cell %u.", cell);
		return strdup(buf);
	case SUBMIT_ALREADY:
		(void)snprintf(buf, sizeof buf, "cell %u already has a successor;"
		    " the first one is kept", cell);
		*err = strdup(buf);
		return NULL;
	case SUBMIT_INACTIVE:
	default:
		(void)snprintf(buf, sizeof buf, "Cell %u has finished", cell);
		return strdup(buf);
	}
}

static char *
run_history(const struct agent_tools *t, const char *args)
{
	char *err = NULL, *s;
	char *res = history_slice(t->history, args, &err);

	if (res == NULL) {
		s = msg("Error: %s", err != NULL ? err : "bad arguments");
		free(err);
		return s;
	}
	return res;
}

/* struct host_tools' run: args is a JSON object's text (hosttools.c
 * checked it). */
static char *
run_tool(void *ctx, uint32_t cell, const char *name, const char *args,
    char **err)
{
	const struct agent_tools *t = ctx;
	struct submit_args sa = { NULL, NULL, 0 };
	struct jf_in in[] = {
		{ .key = "code", .kind = JF_KSTR, .dst = &sa.code,
		    .len = &sa.len },
		{ .key = "summary", .kind = JF_KSTR, .dst = &sa.summary },
		{ .key = NULL }
	};
	char *out;

	if (strcmp(name, "set_next_cell_code") != 0)
		return run_history(t, args);
	if (jf_parse(args, strlen(args), in) < 0)
		return msg("Error: the arguments of %s are not a JSON object",
		    name);
	if (in[0].found != 1 || in[1].found != 1)	/* absent, null, other */
		out = strdup("Error: set_next_cell_code needs string arguments "
		    "code and summary");
	else
		out = run_submit(t, cell, &sa, err);
	jf_in_free(in);
	return out;
}

struct host_tools
agent_tools_host(struct agent_tools *t)
{
	struct host_tools h = { host_tools_json, run_tool, t };

	return h;
}
