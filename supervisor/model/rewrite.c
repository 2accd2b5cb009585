/*
 * rewrite.c - request rewriting (see model_int.h).
 */
#include "supervisor/model/model_int.h"

#include <stdlib.h>
#include <string.h>

/* Fields only the engine sets; removed from the caller and extra_body. */
static const char *const protected_keys[] = {
	"model", "instructions", "tools", "reasoning", "stream", "timeout",
	"background", "max_output_tokens", "service_tier", NULL
};

/* SDK-only call_me parameters that never go on the wire as such. */
static const char *const sdk_keys[] = {
	"extra_body", "extra_headers", "extra_query", "stream", "timeout", NULL
};

static const char *const low_efforts[] = {
	"none", "minimal", "low", NULL
};

static int
in_list(const char *const *list, const char *s)
{
	size_t i;

	for (i = 0; s != NULL && list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

/* reasoning.effort only goes up: missing, none, minimal, low -> medium. */
static json_t *
rewrite_reasoning(const json_t *given)
{
	json_t *r = json_is_object(given) ? json_deep_copy(given) :
	    json_object();
	const char *effort = json_string_value(json_object_get(r, "effort"));

	if (effort == NULL || in_list(low_efforts, effort))
		(void)json_object_set_new(r, "effort", json_string("medium"));
	return r;
}

/* Caller tools minus any named like a host tool, then the host tools. */
static json_t *
rewrite_tools(const json_t *given, const json_t *host_tools)
{
	json_t *out = json_array(), *t;
	const char *name;
	size_t i;

	json_array_foreach(given, i, t) {
		name = json_string_value(json_object_get(t, "name"));
		if (!hosttools_is_host_tool(host_tools, name))
			(void)json_array_append(out, t);
	}
	json_array_foreach(host_tools, i, t)
		(void)json_array_append(out, t);
	return out;
}

static void
set_engine_fields(json_t *b, const struct model_settings *s)
{
	(void)json_object_set_new(b, "model", json_string(s->model));
	(void)json_object_set_new(b, "instructions",
	    json_string(s->instructions));
	(void)json_object_set_new(b, "background", json_false());
	(void)json_object_set_new(b, "stream", json_true());
	if (s->max_output_tokens > 0)
		(void)json_object_set_new(b, "max_output_tokens",
		    json_integer(s->max_output_tokens));
	if (s->service_tier != NULL)
		(void)json_object_set_new(b, "service_tier",
		    json_string(s->service_tier));
}

json_t *
rewrite_request(json_t *params, const struct model_settings *s,
    const json_t *host_tools, char **err)
{
	json_t *b, *extra, *v;
	const char *k;
	void *tmp;

	*err = NULL;
	if (!json_is_object(params)) {
		*err = strdup("call_me: the parameters must be keyword arguments");
		return NULL;
	}
	b = json_object();
	json_object_foreach(params, k, v)
		if (!in_list(sdk_keys, k) && !in_list(protected_keys, k))
			(void)json_object_set(b, k, v);
	(void)json_object_set_new(b, "reasoning",
	    rewrite_reasoning(json_object_get(params, "reasoning")));
	(void)json_object_set_new(b, "tools",
	    rewrite_tools(json_object_get(params, "tools"), host_tools));
	set_engine_fields(b, s);
	extra = json_object_get(params, "extra_body");
	if (json_is_object(extra)) {
		extra = json_deep_copy(extra);
		json_object_foreach_safe(extra, tmp, k, v)
			if (in_list(protected_keys, k))
				(void)json_object_del(extra, k);
		(void)json_object_update(b, extra);
		json_decref(extra);
	}
	return b;
}
