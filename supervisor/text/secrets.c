/*
 * secrets.c - secret variable names (see secrets.h).
 */
#include "supervisor/text/secrets.h"

#include <stdlib.h>
#include <string.h>

static const char *const suffixes[] = {
	"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", NULL
};

static int
ends_with(const char *name, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(name + len - n, suffix, n) == 0;
}

static int
listed(const char *name, size_t len)
{
	const char *list = getenv("AGENTZ_SECRETS");
	const char *p, *end;

	for (p = list; p != NULL && *p != '\0'; p = *end ? end + 1 : end) {
		end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		if ((size_t)(end - p) == len && memcmp(p, name, len) == 0)
			return 1;
	}
	return 0;
}

int
secrets_is_secret_name(const char *name, size_t len)
{
	size_t i;

	if (len == 14 && memcmp(name, "OPENAI_API_KEY", 14) == 0)
		return 1;
	for (i = 0; suffixes[i] != NULL; i++)
		if (ends_with(name, len, suffixes[i]))
			return 1;
	return listed(name, len);
}
