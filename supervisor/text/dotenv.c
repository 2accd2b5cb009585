/*
 * dotenv.c - .env loading (see dotenv.h).
 */
#include "supervisor/text/dotenv.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static const char *
kind_of(mode_t m)
{
	return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" :
	    S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	    S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/*
 * Opens path for reading only when it is a regular file of ours (or
 * root's) within DOTENV_MAX bytes: never follows a symlink, never blocks
 * on a FIFO or a device. NULL and errno ENOENT without a file; NULL with
 * a warning (errno set) when it is refused.
 */
static FILE *
open_checked(const char *path)
{
	struct stat st;
	FILE *f;
	int fd;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
	    O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP)
			log_warnx("%s is a symbolic link: agentz reads it only "
			    "from a regular file", path);
		else if (errno != ENOENT)
			log_warn("cannot read %s", path);
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		log_warn("cannot read %s", path);
		(void)close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > DOTENV_MAX ||
	    (st.st_uid != geteuid() && st.st_uid != 0)) {
		if (!S_ISREG(st.st_mode))
			log_warnx("%s is %s: agentz reads it only from a "
			    "regular file", path, kind_of(st.st_mode));
		else if (st.st_size > DOTENV_MAX)
			log_warnx("%s is %lld bytes, more than the %d a .env "
			    "may have", path, (long long)st.st_size,
			    DOTENV_MAX);
		else
			log_warnx("%s belongs to uid %lu, neither you nor "
			    "root: not loaded", path,
			    (unsigned long)st.st_uid);
		(void)close(fd);
		errno = EPERM;
		return NULL;
	}
	if ((f = fdopen(fd, "r")) == NULL) {
		log_warn("cannot read %s", path);
		(void)close(fd);
	}
	return f;
}

int
dotenv_load(const char *path)
{
	FILE *f = open_checked(path);
	char line[8192], *s, *eq;
	int n = 0, lineno = 0;
	long total = 0;

	if (f == NULL)
		return errno == ENOENT ? 0 : -1;
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		/* it may have grown since fstat */
		if ((total += (long)strlen(line)) > DOTENV_MAX) {
			log_warnx("%s: more than the %d bytes a .env may have",
			    path, DOTENV_MAX);
			(void)fclose(f);
			return -1;
		}
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
