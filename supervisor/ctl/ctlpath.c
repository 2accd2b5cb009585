/*
 * ctlpath.c - where a run's control socket lives and what the run is
 * called (see ctl.h). A folder we make is 0700 and must be ours: a folder
 * someone else made, or a symlink, is not used.
 */
#include "supervisor/ctl/ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_DIR "/run/agentz"

char *
ctl_run_name(const char *journal)
{
	const char *run = getenv("AGENTZ_RUN"), *base, *dot;
	char *s;

	if (run != NULL && *run != '\0' && strchr(run, '/') == NULL)
		return strdup(run);
	if (journal != NULL) {
		base = strrchr(journal, '/');
		base = base != NULL ? base + 1 : journal;
		dot = strrchr(base, '.');
		if (dot == NULL || dot == base)
			dot = base + strlen(base);
		if (dot > base)
			return strndup(base, (size_t)(dot - base));
	}
	return asprintf(&s, "agentz-%ld", (long)getpid()) < 0 ? NULL : s;
}

/* dir exists as a real folder of ours (made 0700 if missing). */
static int
own_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

static char *
journal_dir(const char *journal)
{
	char *copy, *slash, *abs;

	if ((copy = strdup(journal)) == NULL)
		return NULL;
	slash = strrchr(copy, '/');
	if (slash == copy)
		slash[1] = '\0';
	else if (slash != NULL)
		*slash = '\0';
	abs = realpath(slash != NULL ? copy : ".", NULL);
	free(copy);
	return abs;
}

char *
ctl_socket_dir(const char *journal, int *dedicated)
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *d;

	*dedicated = 1;
	if (rt != NULL && rt[0] == '/')
		return strdup(rt);
	if (geteuid() == 0 && access("/run", W_OK) == 0 &&
	    own_dir(RUN_DIR) == 0)
		return strdup(RUN_DIR);
	if (xdg != NULL && xdg[0] == '/' &&
	    asprintf(&d, "%s/agentz", xdg) >= 0) {
		if (own_dir(d) == 0)
			return d;
		free(d);
	}
	*dedicated = 0;
	if (journal != NULL)
		return journal_dir(journal);
	errno = ENOENT;
	return NULL;
}

size_t
ctl_search_dirs(char *dirs[3])
{
	const char *rt = getenv("RUNTIME_DIRECTORY");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	size_t n = 0;

	if (rt != NULL && rt[0] == '/' && (dirs[n] = strdup(rt)) != NULL)
		n++;
	if ((dirs[n] = strdup(RUN_DIR)) != NULL)
		n++;
	if (xdg != NULL && xdg[0] == '/' &&
	    asprintf(&dirs[n], "%s/agentz", xdg) >= 0)
		n++;
	return n;
}

int
ctl_sockaddr(const char *path, struct sockaddr_un *sa)
{
	size_t n = strlen(path);

	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	if (n >= sizeof sa->sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa->sun_path, path, n);
	return 0;
}
