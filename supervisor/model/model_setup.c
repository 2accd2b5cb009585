/*
 * model_setup.c - set-up errors: until the model first answered (an HTTP
 * 2xx), an answer that says the key, the URL or the model is wrong stops
 * the run with what to check, and a connection nobody answers says once
 * that the base URL may be wrong (see model.h).
 */
#include "supervisor/model/model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "supervisor/text/redact.h"

void
model_set_setup_observer(struct model *m, model_setup_fn *fn, void *ctx)
{
	m->setup_fn = fn;
	m->setup_ctx = ctx;
}

void
model_set_answered(struct model *m)
{
	m->answered = 1;
}

char *
model_url_shown(const char *url)
{
	return http_url_shown(url);
}

/* s holds word, any case. */
static int
has(const char *s, const char *word)
{
	return s != NULL && strcasestr(s, word) != NULL;
}

/*
 * Whether an error body {"error": {"message", "code", "param"}} is about
 * the model's name: its code (model_not_found, invalid_model), its param
 * ("model") or its message (OpenAI, vLLM: "The model `x` does not
 * exist"; Ollama: "model \"x\" not found"; OpenRouter: "x is not a valid
 * model ID"; LiteLLM: "Invalid model name passed").
 */
static int
about_model(const char *body, size_t len)
{
	json_t *doc = len > 0 ? json_loadb(body, len, JSON_ALLOW_NUL, NULL) :
	    NULL;
	json_t *err = json_object_get(doc, "error"), *obj;
	const char *code, *param, *msg;
	int yes;

	obj = json_is_object(err) ? err : doc;
	code = json_string_value(json_object_get(obj, "code"));
	param = json_string_value(json_object_get(obj, "param"));
	if ((msg = json_string_value(json_object_get(obj, "message"))) == NULL)
		msg = json_string_value(err);
	yes = has(code, "model") || (param != NULL &&
	    strcmp(param, "model") == 0) || (has(msg, "model") &&
	    (has(msg, "does not exist") || has(msg, "not found") ||
	    has(msg, "not a valid model") || has(msg, "invalid model") ||
	    has(msg, "unknown model")));
	json_decref(doc);
	return yes;
}

/* What to check for an answer of status (NULL: not a set-up error). */
static const char *
what_to_check(const struct model *m, const struct http_result *r,
    char *buf, size_t size)
{
	const char *model = m->cfg.settings.model;

	switch (r->status) {
	case 401:
		return "check OPENAI_API_KEY";
	case 403:
		return "check OPENAI_API_KEY and what it may access";
	case 404:
		(void)snprintf(buf, size, "check OPENAI_BASE_URL (or --base-url; "
		    "it usually ends in /v1) and the model name (--model: '%s')",
		    model);
		return buf;
	case 400:
		if (!about_model(r->body, r->body_len))
			return NULL;
		(void)snprintf(buf, size, "check the model name (--model or "
		    "AGENTZ_MODEL: '%s')", model);
		return buf;
	default:
		return NULL;
	}
}

void
call_setup_error(struct call *c, const struct http_result *r,
    const char *line)
{
	struct model *m = c->m;
	char check[256], why[1024], *clean;
	const char *what;
	size_t n;

	if (m->answered || m->setup_fn == NULL ||
	    (what = what_to_check(m, r, check, sizeof check)) == NULL)
		return;
	(void)snprintf(why, sizeof why, "%s (from %s, before any model call "
	    "succeeded): %s", line, m->shown, what);
	/* the server's words may repeat a secret */
	clean = m->red != NULL ? redact_string(m->red, why, strlen(why), &n) :
	    NULL;
	m->setup_fn(m->setup_ctx, clean != NULL ? clean : why);
	free(clean);
}

const char *
model_no_answer_hint(struct model *m, const struct http_result *r,
    char *buf, size_t size)
{
	char *base;

	if (m->answered || m->hinted || r->status != 0 || !r->transport)
		return NULL;
	m->hinted = 1;
	base = http_url_shown(m->cfg.base_url);
	(void)snprintf(buf, size, "no answer yet from %s \u2014 is "
	    "OPENAI_BASE_URL right?", base != NULL ? base : "the model's URL");
	free(base);
	return buf;
}
