/*
 * secrets.h - which environment variables are secrets. Their values never
 * reach the worker; redaction (later) replaces them in everything shown,
 * recorded or returned to the model.
 */
#ifndef AGENTZ_SECRETS_H
#define AGENTZ_SECRETS_H

#include <stddef.h>

/*
 * 1 if the variable name (name[0..len), not NUL-terminated) is a secret:
 * OPENAI_API_KEY, any *_API_KEY, *_TOKEN, *_SECRET, *_PASSWORD, and every
 * name listed in AGENTZ_SECRETS (comma-separated).
 */
int secrets_is_secret_name(const char *name, size_t len);

#endif
