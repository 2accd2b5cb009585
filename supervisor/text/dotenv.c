/*
 * dotenv.c - .env loading (see dotenv.h).
 */
#include "supervisor/text/dotenv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int
valid_name(const char *s)
{
	if (*s == '\0' || isdigit((unsigned char)*s))
		return 0;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

/* Strips matching quotes, or an unquoted trailing " # comment". */
static char *
value_of(char *v)
{
	size_t n = strlen(v);
	char *hash;

	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
		v[n - 1] = '\0';
		return v + 1;
	}
	hash = strstr(v, " #");
	if (hash != NULL)
		*hash = '\0';
	return trim(v);
}

int
dotenv_load(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[8192], *s, *eq;
	int n = 0, lineno = 0;

	if (f == NULL)
		return errno == ENOENT ? 0 : (log_warn("cannot read %s", path), -1);
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		if (strncmp(s, "export ", 7) == 0)
			s = trim(s + 7);
		eq = strchr(s, '=');
		if (eq == NULL) {
			log_warnx("%s:%d: expected NAME=VALUE", path, lineno);
			(void)fclose(f);
			return -1;
		}
		*eq = '\0';
		if (!valid_name(trim(s))) {
			log_warnx("%s:%d: invalid variable name '%s'", path,
			    lineno, trim(s));
			(void)fclose(f);
			return -1;
		}
		if (getenv(trim(s)) == NULL &&
		    setenv(trim(s), value_of(eq + 1), 0) == 0)
			n++;
	}
	(void)fclose(f);
	return n;
}
