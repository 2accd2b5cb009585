/*
 * history.c - history views for cells and the model (see history.h).
 */
#include "supervisor/cells/history.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "supervisor/cells/record_json.h"

/* Bytes of j as compact JSON. */
static size_t
json_bytes(const json_t *j)
{
	return json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* j (consumed) as compact JSON text; NULL for NULL or out of memory. */
static char *
text_of(json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) :
	    NULL;

	json_decref(j);
	return s;
}

static void
set_err(char **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_err(char **err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(err, fmt, ap) < 0)
		*err = NULL;
	va_end(ap);
}

static const char *
part_name(enum cells_part p)
{
	return p == PART_INPUTS ? "inputs" : p == PART_OUTPUTS ? "outputs" :
	    "whole";
}

/* Cell i's part, checked against the reply bound; NULL + *err. */
static json_t *
bounded_part(struct cells *h, size_t i, enum cells_part p, char **err)
{
	json_t *j = cells_part(h, i, p);
	size_t n;

	if (j == NULL) {
		set_err(err, "cells: cannot read cell %zu's record back (%s)", i,
		    strerror(errno));
		return NULL;
	}
	if ((n = json_bytes(j)) > h->reply_max) {
		set_err(err, "cells: the %s record of cell %zu is %zu bytes as "
		    "JSON, more than the %zu bytes one reply may carry (half of "
		    "--max-frame): it cannot be served", part_name(p), i, n,
		    h->reply_max);
		json_decref(j);
		return NULL;
	}
	return j;
}

static json_t *
keys_of(struct cells *h)
{
	json_t *running = json_array();
	size_t i;

	/* only the newest cells can still run (one at a time) */
	for (i = h->n > 2 ? h->n - 2 : 0; i < h->n; i++)
		if (cells_status(h, i) == CELL_RUNNING)
			(void)json_array_append_new(running,
			    json_integer((json_int_t)i));
	return json_pack("{s:I, s:o}", "total", (json_int_t)h->n, "running",
	    running);
}

/* {"cells": {"a": part, ...}, "next": k}, as much of [a, b) as fits. */
static json_t *
page(struct cells *h, enum cells_part p, size_t a, size_t b, char **err)
{
	json_t *cells = json_object(), *j;
	size_t i, total = 64, n;
	char key[24];

	for (i = a; cells != NULL && i < b && i < h->n; i++) {
		if (p == PART_OUTPUTS && cells_status(h, i) == CELL_RUNNING)
			continue;	/* an output exists once the cell ended */
		if ((j = bounded_part(h, i, p, err)) == NULL) {
			if (json_object_size(cells) == 0) {
				json_decref(cells);
				return NULL;
			}
			free(*err);	/* said when asked for it first */
			*err = NULL;
			break;
		}
		n = json_bytes(j) + 32;
		if (total + n > h->reply_max) {
			json_decref(j);
			break;
		}
		total += n;
		(void)snprintf(key, sizeof key, "%zu", i);
		(void)json_object_set_new(cells, key, j);
	}
	return json_pack("{s:o, s:I}", "cells", cells, "next", (json_int_t)i);
}

static json_t *
last_error(struct cells *h, char **err)
{
	size_t i;

	for (i = h->n; i > 0; i--)
		if (cells_status(h, i - 1) == CELL_ERROR)
			return bounded_part(h, i - 1, PART_ALL, err);
	return json_null();
}

static int
get_index(const json_t *body, const char *name, size_t *v)
{
	const json_t *j = json_object_get(body, name);

	if (!json_is_integer(j))
		return 0;
	*v = json_integer_value(j) < 0 ? SIZE_MAX :
	    (size_t)json_integer_value(j);
	return 1;
}

static json_t *
serve(struct cells *h, const json_t *body, const char **type, char **err)
{
	const char *what = json_string_value(json_object_get(body, "what"));
	enum cells_part p;
	size_t i, end;

	*err = NULL;
	*type = "RuntimeError";
	if (what != NULL && strcmp(what, "last_error") == 0)
		return last_error(h, err);
	if (what != NULL && (strcmp(what, "inputs") == 0 ||
	    strcmp(what, "outputs") == 0)) {
		p = what[0] == 'i' ? PART_INPUTS : PART_OUTPUTS;
		if (json_is_true(json_object_get(body, "keys")))
			return keys_of(h);
		if (get_index(body, "cell", &i)) {
			if (i >= h->n || (p == PART_OUTPUTS &&
			    cells_status(h, i) == CELL_RUNNING))
				return json_null();
			return bounded_part(h, i, p, err);
		}
		if (get_index(body, "start", &i) && get_index(body, "end", &end))
			return page(h, p, i, end, err);
	}
	*type = "ValueError";
	*err = strdup("cells: give what (inputs, outputs or last_error) and, "
	    "for inputs and outputs, keys, cell or start and end");
	return NULL;
}

char *
history_serve(struct cells *h, const char *body, size_t len,
    const char **type, char **err)
{
	json_t *b = json_loadb(body, len, 0, NULL);
	json_t *res = serve(h, b, type, err);

	json_decref(b);
	return text_of(res);
}

/* An index argument: missing or null (1, *set = 0) or an integer. */
static int
index_arg(const json_t *args, const char *name, json_int_t *v, int *set,
    char **err)
{
	const json_t *j = json_object_get(args, name);

	*set = 0;
	if (j == NULL || json_is_null(j))
		return 0;
	if (!json_is_integer(j)) {
		char *dump = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);

		if (asprintf(err, "get_history_cells: %s must be an integer or "
		    "null, got %s", name, dump != NULL ? dump : "?") < 0)
			*err = NULL;
		free(dump);
		return -1;
	}
	*v = json_integer_value(j);
	*set = 1;
	return 0;
}

/* Python's slice index normalisation for step 1. */
static json_int_t
clamp(json_int_t i, json_int_t n)
{
	if (i < 0)
		i += n;
	if (i < 0)
		return 0;
	return i > n ? n : i;
}

/* What stands for a record too big for any result. */
static json_t *
omitted(struct cells *h, size_t i, size_t n)
{
	char why[200];

	(void)snprintf(why, sizeof why, "its record is %zu bytes as JSON, more "
	    "than the %zu bytes one result may carry; read it from a cell with "
	    "CELL_INPUTS[%zu] and CELL_OUTPUTS[%zu]", n, h->reply_max, i, i);
	return json_pack("{s:I, s:s, s:s}", "cell", (json_int_t)i, "status",
	    cells_status_name(cells_status(h, i)), "omitted", why);
}

/* history[a:b] within the reply bound; out gets "truncated" when cut. */
static json_t *
slice_cells(struct cells *h, size_t a, size_t b, json_t *out)
{
	json_t *list = json_array(), *j;
	size_t i, total = 256, n;
	char note[200];

	for (i = a; list != NULL && i < b; i++) {
		j = cells_part(h, i, PART_ALL);
		if (j == NULL)
			j = json_pack("{s:I, s:s}", "cell", (json_int_t)i, "error",
			    "its record cannot be read back");
		if ((n = json_bytes(j)) + 264 > h->reply_max) {
			json_decref(j);
			j = omitted(h, i, n);
			n = json_bytes(j);
		}
		if (total + n + 8 > h->reply_max) {
			json_decref(j);
			(void)snprintf(note, sizeof note, "the result is capped at "
			    "%zu bytes: cells %zu to %zu are not in it; ask again "
			    "with start=%zu", h->reply_max, i, b - 1, i);
			(void)json_object_set_new(out, "truncated", json_pack(
			    "{s:I, s:s}", "next_start", (json_int_t)i, "note",
			    note));
			break;
		}
		total += n + 8;
		(void)json_array_append_new(list, j);
	}
	return list;
}

static json_t *
slice(struct cells *h, const json_t *args, char **err)
{
	json_int_t start = 0, end = 0, n = (json_int_t)h->n;
	int has_start, has_end;
	json_t *out;

	*err = NULL;
	if (args != NULL && !json_is_object(args)) {
		*err = strdup("get_history_cells: arguments must be an object");
		return NULL;
	}
	if (index_arg(args, "start", &start, &has_start, err) < 0 ||
	    index_arg(args, "end", &end, &has_end, err) < 0)
		return NULL;
	out = json_pack("{s:I}", "total", (json_int_t)n);
	if (!has_start && !has_end)
		return out;
	start = has_start ? clamp(start, n) : 0;
	end = has_end ? clamp(end, n) : n;
	(void)json_object_set_new(out, "cells", slice_cells(h, (size_t)start,
	    (size_t)end, out));
	return out;
}

char *
history_slice(struct cells *h, const char *args, char **err)
{
	json_t *a = args != NULL ? json_loads(args, 0, NULL) : NULL;
	json_t *res = slice(h, a, err);

	json_decref(a);
	return text_of(res);
}

static void
add_whitelisted(json_t *info)
{
	static const char *const keys[] = {
		"session_id", "memory_gib", "public_origin", "user_timezone", NULL
	};
	const char *env = getenv("AGENTZ_RUNTIME_INFO");
	json_t *given, *v;
	size_t i;

	given = env != NULL ? json_loads(env, 0, NULL) : NULL;
	for (i = 0; json_is_object(given) && keys[i] != NULL; i++)
		if ((v = json_object_get(given, keys[i])) != NULL)
			(void)json_object_set(info, keys[i], v);
	json_decref(given);
}

char *
history_runtime_info(const char *isolation, const char *network,
    const char *workspace)
{
	const char *provider = getenv("AGENTZ_PROVIDER");
	char cwd[4096], platform[400];
	struct utsname u;
	json_t *info;

	if (getcwd(cwd, sizeof cwd) == NULL)
		(void)snprintf(cwd, sizeof cwd, "?");
	if (uname(&u) == 0)
		(void)snprintf(platform, sizeof platform, "%s-%s %s", u.sysname,
		    u.machine, u.release);
	else
		(void)snprintf(platform, sizeof platform, "linux");
	info = json_pack("{s:s, s:s, s:s}", "provider",
	    provider != NULL && *provider ? provider : "local",
	    "platform", platform, "workspace", workspace != NULL ? workspace :
	    cwd);
	if (info != NULL) {
		add_whitelisted(info);
		(void)json_object_set_new(info, "isolation",
		    json_string(isolation));
		(void)json_object_set_new(info, "network",
		    json_string(network));
	}
	return text_of(info);
}
