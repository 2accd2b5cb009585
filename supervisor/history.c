/*
 * history.c - history views for cells and the model (see history.h).
 */
#include "supervisor/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

json_t *
history_map(struct cells *h, const char *what)
{
	json_t *(*part)(const struct cell *);
	json_t *o;
	char key[24];
	size_t i;

	if (strcmp(what, "inputs") == 0)
		part = cells_inputs_json;
	else if (strcmp(what, "outputs") == 0)
		part = cells_outputs_json;
	else
		return NULL;
	o = json_object();
	for (i = 0; o != NULL && i < h->n; i++) {
		if (part == cells_outputs_json && h->v[i]->status == CELL_RUNNING)
			continue;	/* an output exists once the cell ended */
		(void)snprintf(key, sizeof key, "%zu", i);
		(void)json_object_set_new(o, key, part(h->v[i]));
	}
	return o;
}

json_t *
history_last_error(struct cells *h)
{
	size_t i;

	for (i = h->n; i > 0; i--)
		if (h->v[i - 1]->status == CELL_ERROR)
			return cells_json(h->v[i - 1]);
	return json_null();
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

json_t *
history_slice(struct cells *h, const json_t *args, char **err)
{
	json_int_t start = 0, end = 0, n = (json_int_t)h->n, i;
	int has_start, has_end;
	json_t *out, *list;

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
	list = json_array();
	for (i = start; i < end; i++)
		(void)json_array_append_new(list, cells_json(h->v[i]));
	(void)json_object_set_new(out, "cells", list);
	return out;
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

json_t *
history_runtime_info(void)
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
	    "platform", platform, "workspace", cwd);
	if (info != NULL)
		add_whitelisted(info);
	return info;
}
