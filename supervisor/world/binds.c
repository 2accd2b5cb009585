/*
 * binds.c - what --ro-bind and --bind add to the worker's view (see
 * binds.h): SRC[:DST] read and checked before the world is built.
 *
 * Refused (a usage error, printed): a SRC that does not exist, a DST that
 * is not a plain absolute path, either one being / or in /proc, /sys or
 * /dev (the jail's own), and a SRC in the journal's folder or a folder of
 * control sockets ($RUNTIME_DIRECTORY, /run/agentz,
 * $XDG_RUNTIME_DIR/agentz: where ctl_search_dirs looks). What is masked
 * inside a SRC stays masked at its DST (sandbox/view.c).
 */
#include "supervisor/world/binds.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"

/* The jail's own places: never bound from the host nor over. */
static const char *
system_place(const char *path)
{
	static const char *const own[] = { "/proc", "/sys", "/dev", NULL };
	size_t i;

	if (strcmp(path, "/") == 0)
		return "the root";
	for (i = 0; own[i] != NULL; i++)
		if (path_under(path, own[i]))
			return own[i];
	return NULL;
}

/* dir (resolved when it exists) holds or is path. */
static int
under_dir(const char *path, const char *dir)
{
	char real[PATH_MAX];

	if (dir == NULL || dir[0] != '/')
		return 0;
	return path_under(path, realpath(dir, real) != NULL ? real : dir);
}

/* Is src the journal's folder, or in it? */
static int
journal_folder(const char *src, const char *journal)
{
	char dir[PATH_MAX], real[PATH_MAX], *slash;

	if (journal == NULL || snprintf(dir, sizeof dir, "%s", journal) >=
	    (int)sizeof dir)
		return 0;
	if ((slash = strrchr(dir, '/')) == NULL)
		(void)snprintf(dir, sizeof dir, ".");
	else
		slash[slash == dir ? 1 : 0] = '\0';
	if (realpath(dir, real) != NULL)
		return path_under(src, real);
	return dir[0] == '/' && path_under(src, dir);
}

/* Is src in a folder of control sockets? */
static int
socket_folder(const char *src)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char d[PATH_MAX];

	if (under_dir(src, getenv("RUNTIME_DIRECTORY")) ||
	    under_dir(src, "/run/agentz"))
		return 1;
	return xdg != NULL && xdg[0] == '/' && snprintf(d, sizeof d,
	    "%s/agentz", xdg) < (int)sizeof d && under_dir(src, d);
}

/* A plain absolute path: no empty, "." or ".." component. */
static int
plain_path(const char *p)
{
	const char *s;

	if (p[0] != '/' || (p[1] == '\0'))
		return p[0] == '/';
	for (s = p; *s != '\0'; s++)
		if (s[0] == '/' && (s[1] == '/' || s[1] == '\0' ||
		    (s[1] == '.' && (s[2] == '/' || s[2] == '\0' ||
		    (s[2] == '.' && (s[3] == '/' || s[3] == '\0'))))))
			return 0;
	return 1;
}

static int
refuse(const char *cmd, const char *opt, const char *spec, const char *why,
    const char *what)
{
	(void)fprintf(stderr, "%s: %s '%s': %s%s; refused\n", cmd, opt, spec,
	    why, what != NULL ? what : "");
	return -1;
}

static int
keep(struct view *v, const char *src, const char *dst, int rw)
{
	struct jail_bind *nb;
	char **np;

	nb = realloc(v->binds, (v->nbinds + 1) * sizeof *nb);
	if (nb == NULL)
		return -1;
	v->binds = nb;
	np = realloc(v->bindpaths, (2 * v->nbinds + 2) * sizeof *np);
	if (np == NULL)
		return -1;
	v->bindpaths = np;
	np[2 * v->nbinds] = strdup(src);
	np[2 * v->nbinds + 1] = strdup(dst);
	if (np[2 * v->nbinds] == NULL || np[2 * v->nbinds + 1] == NULL) {
		free(np[2 * v->nbinds]);
		free(np[2 * v->nbinds + 1]);
		return -1;
	}
	nb[v->nbinds].src = np[2 * v->nbinds];
	nb[v->nbinds].dst = np[2 * v->nbinds + 1];
	nb[v->nbinds++].rw = rw;
	return 0;
}

/* One SRC[:DST]: 0, -1 refused (printed), -2 ENOMEM. */
static int
one(struct view *v, const struct view_options *c, const char *spec, int rw,
    const char *cmd)
{
	const char *opt = rw ? "--bind" : "--ro-bind", *colon, *place;
	char src[PATH_MAX], given[PATH_MAX];
	const char *dst;

	colon = strchr(spec, ':');
	if (snprintf(given, sizeof given, "%.*s", colon != NULL ?
	    (int)(colon - spec) : (int)strlen(spec), spec) >= (int)sizeof given)
		return refuse(cmd, opt, spec, "too long", NULL);
	if (realpath(given, src) == NULL)
		return refuse(cmd, opt, spec, given, errno == ENOENT ?
		    ": no such file or folder" : ": cannot be resolved");
	dst = colon != NULL ? colon + 1 : src;
	if (!plain_path(dst))
		return refuse(cmd, opt, spec, "DST must be a plain absolute "
		    "path: ", dst);
	if ((place = system_place(src)) != NULL)
		return refuse(cmd, opt, spec, "SRC is (in) ", place);
	if ((place = system_place(dst)) != NULL)
		return refuse(cmd, opt, spec, "DST is (in) ", place);
	if (journal_folder(src, c->journal))
		return refuse(cmd, opt, spec, "SRC is (in) the journal's "
		    "folder", NULL);
	if (socket_folder(src))
		return refuse(cmd, opt, spec, "SRC is (in) a folder of "
		    "agentz control sockets", NULL);
	return keep(v, src, dst, rw) < 0 ? -2 : 0;
}

int
view_binds(struct view *v, const struct view_options *c, const char *cmd)
{
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < c->nro_binds; i++)
		rc = one(v, c, c->ro_binds[i], 0, cmd);
	for (i = 0; rc == 0 && i < c->nbinds; i++)
		rc = one(v, c, c->binds[i], 1, cmd);
	if (rc == -2)
		(void)fprintf(stderr, "%s: the worker's view: %s\n", cmd,
		    strerror(ENOMEM));
	v->jc.binds = v->binds;
	v->jc.nbinds = v->nbinds;
	return rc < 0 ? -1 : 0;
}

void
view_binds_clear(struct view *v)
{
	size_t i;

	for (i = 0; i < 2 * v->nbinds; i++)
		free(v->bindpaths[i]);
	free(v->bindpaths);
	free(v->binds);
	v->bindpaths = NULL;
	v->binds = NULL;
	v->nbinds = 0;
}
