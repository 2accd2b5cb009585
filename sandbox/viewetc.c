/*
 * viewetc.c - the view's /etc, filtered (see view.h).
 *
 * Runs in the supervisor while it plans the view: it may allocate and
 * read the host's files. Only what the interpreter, its libraries and the
 * usual tools read is taken from the host, read-only: the name service
 * and resolver files, certificates, the time zone, the dynamic loader's
 * cache and configuration, the alternatives links, Python's own folder.
 * passwd and group are made here, naming root and the worker alone: no
 * other account, home or group member of the host is in the view.
 */
#include "sandbox/view.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/path.h"

/* Names of /etc taken from the host; an entry ending in '*' is a prefix. */
static const char *const etc_kept[] = {
	"hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
	"protocols", "services", "networks", "rpc", "ssl", "ca-certificates",
	"ca-certificates.conf", "pki", "localtime", "timezone", "ld.so.cache",
	"ld.so.conf", "ld.so.conf.d", "alternatives", "os-release",
	"debian_version", "mime.types", "locale.alias", "mtab", "python3*",
	NULL
};

static int
kept(const char *name)
{
	size_t i, n;

	for (i = 0; etc_kept[i] != NULL; i++) {
		n = strlen(etc_kept[i]);
		if (etc_kept[i][n - 1] == '*' ?
		    strncmp(name, etc_kept[i], n - 1) == 0 :
		    strcmp(name, etc_kept[i]) == 0)
			return 1;
	}
	return 0;
}

/* A link leading into what the view has of the host (/usr, its own
 * /proc) is made again; any other is replaced by what it leads to. */
static int
link_kept(const char *host)
{
	char real[PATH_MAX];

	return realpath(host, real) != NULL && (path_under(real, "/usr") ||
	    path_under(real, "/proc"));
}

/* The numeric field idx (0-based) of a passwd or group line; -1 when
 * there is none. */
static long long
field_id(const char *line, int idx)
{
	const char *s = line;
	char *end;
	long long v;

	while (idx-- > 0)
		if ((s = strchr(s, ':')) == NULL)
			return -1;
		else
			s++;
	v = strtoll(s, &end, 10);
	return end == s || *end != ':' ? -1 : v;
}

/*
 * The host's lines of file whose id (field 2) is 0 or id; a group's
 * members are left out. When none names id, one for it: "agentz" (a
 * user's group gid). NULL with errno.
 */
static char *
filter_ids(const char *file, unsigned long id, int group, unsigned long gid)
{
	char line[4096], *buf = NULL, *nl;
	size_t len = 0;
	long long v;
	int seen = 0;
	FILE *in, *out;

	if ((out = open_memstream(&buf, &len)) == NULL)
		return NULL;
	if ((in = fopen(file, "re")) != NULL) {
		while (fgets(line, sizeof line, in) != NULL) {
			if ((nl = strchr(line, '\n')) != NULL)
				*nl = '\0';
			v = field_id(line, 2);
			if (v < 0 || (v != 0 && (unsigned long long)v != id))
				continue;
			seen |= (unsigned long long)v == id;
			if (group && (nl = strrchr(line, ':')) != NULL)
				nl[1] = '\0';
			(void)fprintf(out, "%s\n", line);
		}
		(void)fclose(in);
	}
	if (!seen && group)
		(void)fprintf(out, "agentz:x:%lu:\n", id);
	else if (!seen)
		(void)fprintf(out, "agentz:x:%lu:%lu:agentz worker:/tmp:"
		    "/usr/sbin/nologin\n", id, gid);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int
plan_ids(struct plan *p)
{
	char *pw, *gr;
	int rc = -1;

	pw = filter_ids("/etc/passwd", p->wuid, 0, p->wgid);
	gr = filter_ids("/etc/group", p->wgid, 1, p->wgid);
	if (pw != NULL && gr != NULL &&
	    view_op(p, OP_WRITE, "/etc/passwd", NULL, pw, 0644) != NULL &&
	    view_op(p, OP_WRITE, "/etc/group", NULL, gr, 0644) != NULL)
		rc = 0;
	free(pw);
	free(gr);
	return rc;
}

int
view_plan_etc(struct plan *p)
{
	char host[NAME_MAX + 8];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (view_op(p, OP_MKDIRS, "/etc", NULL, NULL, 0755) == NULL ||
	    plan_ids(p) < 0)
		return -1;
	if ((d = opendir("/etc")) == NULL)
		return errno == ENOENT ? 0 : -1;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || !kept(de->d_name))
			continue;
		(void)snprintf(host, sizeof host, "/etc/%s", de->d_name);
		rc = view_plan_host(p, host, host, link_kept(host));
	}
	(void)closedir(d);
	return rc;
}
