/*
 * view.c - the worker's world from the operator's settings (see view.h).
 *
 * Masked always: the workspace's .env, $CREDENTIALS_DIRECTORY, the unit's
 * key folder /etc/agentz and the journal; by default also the usual
 * secret folders of every home (the supervisor's $HOME, /root, and each
 * folder in /home).
 * Paths that do not exist are dropped when the view is built.
 */
#include "supervisor/front/view.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "supervisor/front/config.h"

static const char *const home_secrets[] = {
	".ssh", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".netrc", ".gnupg", ".git-credentials", ".config/gh", ".npmrc",
	".pypirc", ".password-store", NULL
};

static int
add_mask(struct view *v, const char *dir, const char *name)
{
	char **nv, *s;

	if (asprintf(&s, "%s%s%s", dir, name != NULL ? "/" : "",
	    name != NULL ? name : "") < 0)
		return -1;
	nv = realloc(v->masks, (v->nmasks + 2) * sizeof *nv);
	if (nv == NULL) {
		free(s);
		return -1;
	}
	nv[v->nmasks++] = s;
	nv[v->nmasks] = NULL;
	v->masks = nv;
	return 0;
}

static int
home_masks(struct view *v, const char *home)
{
	size_t i;

	for (i = 0; home_secrets[i] != NULL; i++)
		if (add_mask(v, home, home_secrets[i]) < 0)
			return -1;
	return 0;
}

static int
default_masks(struct view *v)
{
	const char *home = getenv("HOME");
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (home != NULL && home[0] == '/' && strcmp(home, "/root") != 0 &&
	    home_masks(v, home) < 0)
		return -1;
	if (home_masks(v, "/root") < 0)
		return -1;
	if ((d = opendir("/home")) == NULL)
		return 0;
	while (rc == 0 && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && snprintf(path, sizeof path,
		    "/home/%s", de->d_name) < (int)sizeof path)
			rc = home_masks(v, path);
	(void)closedir(d);
	return rc;
}

/* path made absolute (and resolved when it exists), for a mask. */
static int
add_abs(struct view *v, const char *path)
{
	char buf[PATH_MAX], cwd[PATH_MAX];

	if (realpath(path, buf) != NULL)
		return add_mask(v, buf, NULL);
	if (path[0] == '/')
		return add_mask(v, path, NULL);
	if (getcwd(cwd, sizeof cwd) == NULL)
		return -1;
	return add_mask(v, cwd, path);
}

static int
always_masks(struct view *v, const struct config *c)
{
	const char *cred = getenv("CREDENTIALS_DIRECTORY");
	size_t i;

	if (add_mask(v, v->workspace, ".env") < 0 ||
	    add_mask(v, "/etc/agentz", NULL) < 0 ||
	    (cred != NULL && cred[0] == '/' && add_mask(v, cred, NULL) < 0) ||
	    (c->journal != NULL && add_abs(v, c->journal) < 0))
		return -1;
	for (i = 0; i < c->nmasks; i++)
		if (add_abs(v, c->masks[i]) < 0)
			return -1;
	return 0;
}

static int
workspace(struct view *v, const struct config *c, const char *cmd)
{
	const char *given = c->workspace != NULL ? c->workspace : ".";
	char buf[PATH_MAX];
	struct stat st;

	if (realpath(given, buf) == NULL || stat(buf, &st) < 0) {
		(void)fprintf(stderr, "%s: workspace '%s': %s\n", cmd, given,
		    strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(void)fprintf(stderr, "%s: workspace '%s' is not a folder\n",
		    cmd, given);
		return -1;
	}
	if (strcmp(buf, "/") == 0 || path_under(buf, "/proc") ||
	    path_under(buf, "/sys") || path_under(buf, "/dev")) {
		(void)fprintf(stderr, "%s: workspace '%s' (%s) would open the "
		    "system to cells; run from a project folder or pass "
		    "--workspace DIR\n", cmd, given, buf);
		return -1;
	}
	return (v->workspace = strdup(buf)) != NULL ? 0 : -1;
}

static enum jail_mode
mode_of(const struct config *c)
{
	if (c->isolation != NULL)
		return strcmp(c->isolation, "off") == 0 ? JAIL_OFF :
		    strcmp(c->isolation, "required") == 0 ? JAIL_REQUIRED :
		    JAIL_BEST_EFFORT;
	/* a plain user's kernel may refuse user namespaces (e.g. AppArmor's
	 * restriction): such a user still gets a worker, and is told */
	return geteuid() == 0 || getenv("NOTIFY_SOCKET") != NULL ||
	    getenv("INVOCATION_ID") != NULL ? JAIL_REQUIRED : JAIL_BEST_EFFORT;
}

int
view_init(struct view *v, const struct config *c, const char *wpath,
    const char *cmd)
{
	memset(v, 0, sizeof *v);
	v->jc.mode = mode_of(c);
	if (v->jc.mode == JAIL_OFF) {
		/* no view, but --workspace is still the worker's cwd */
		if (c->workspace != NULL &&
		    (v->workspace = realpath(c->workspace, NULL)) == NULL) {
			(void)fprintf(stderr, "%s: workspace '%s': %s\n", cmd,
			    c->workspace, strerror(errno));
			return -1;
		}
		v->jc.workspace = v->workspace;
		return 0;
	}
	if (workspace(v, c, cmd) < 0)
		return -1;
	if (always_masks(v, c) < 0 ||
	    (!c->no_default_masks && default_masks(v) < 0)) {
		(void)fprintf(stderr, "%s: the worker's view: %s\n", cmd,
		    strerror(errno));
		view_clear(v);
		return -1;
	}
	v->protect[0] = realpath("/proc/self/exe", NULL);
	v->protect[1] = realpath(wpath, NULL);
	if (v->protect[0] == NULL) {	/* keep the list NULL-ended */
		v->protect[0] = v->protect[1];
		v->protect[1] = NULL;
	}
	v->jc.workspace = v->workspace;
	v->jc.tmp_size = c->tmp_size;
	v->jc.masks = (const char *const *)v->masks;
	v->jc.protect = (const char *const *)v->protect;
	return 0;
}

int
view_add_mask(struct view *v, const char *path)
{
	if (v->jc.mode == JAIL_OFF)
		return 0;
	if (add_mask(v, path, NULL) < 0)
		return -1;
	v->jc.masks = (const char *const *)v->masks;
	return 0;
}

void
view_clear(struct view *v)
{
	size_t i;

	for (i = 0; i < v->nmasks; i++)
		free(v->masks[i]);
	free(v->masks);
	free(v->protect[0]);
	free(v->protect[1]);
	free(v->workspace);
	memset(v, 0, sizeof *v);
}
