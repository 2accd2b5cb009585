/*
 * confignet.c - the network options once the command line is read (see
 * confignet.h).
 */
#include "supervisor/front/confignet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/egress/policy.h"
#include "supervisor/front/confighelp.h"

/* An entries file is a list, not a database. */
#define HOSTS_FILE_MAX (1 << 20)

const char *const config_network_names[] = { "none", "host", "proxy",
	NULL };

/* The file's bytes, NUL-terminated (a regular file, at most
 * HOSTS_FILE_MAX), or NULL with errno. */
static char *
slurp(const char *path)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), e;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = EINVAL;
	else if (st.st_size > HOSTS_FILE_MAX)
		e = EFBIG;
	else
		e = 0;
	if (e != 0) {
		(void)close(fd);
		errno = e;
		return NULL;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		(void)close(fd);
		return NULL;
	}
	while (got < (size_t)st.st_size && (n = read(fd, buf + got,
	    (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	(void)close(fd);
	buf[got] = '\0';
	return buf;
}

static int
keep(struct config *c, char *buf)
{
	char **nv = realloc(c->host_files, (c->nhost_files + 1) * sizeof *nv);

	if (nv == NULL)
		return -1;
	nv[c->nhost_files++] = buf;
	c->host_files = nv;
	return 0;
}

static int
check(const char *cmd, const char *opt, const char *where, const char *e)
{
	struct policy_entry pe;
	char err[400];

	if (policy_entry_parse(e, &pe, err, sizeof err) < 0) {
		(void)fprintf(stderr, "%s: --%s %s%s\n", cmd, opt, where, err);
		return -1;
	}
	policy_entry_clear(&pe);
	return 0;
}

/* The entries of one option, @FILE read, each checked: a new list in
 * *out (*nout entries; on a failure what it holds is the caller's to
 * free). */
static int
expand_into(struct config *c, const char *cmd, const char *opt,
    const char **in, const char ***out, size_t *nout)
{
	char where[512], *buf, *line, *next, *end;
	size_t i;
	unsigned lineno;

	*out = NULL;
	*nout = 0;
	for (i = 0; in != NULL && in[i] != NULL; i++) {
		if (in[i][0] != '@') {
			if (check(cmd, opt, "", in[i]) < 0 ||
			    config_list_add(out, nout, in[i]) < 0)
				return -1;
			continue;
		}
		if ((buf = slurp(in[i] + 1)) == NULL || keep(c, buf) < 0) {
			(void)fprintf(stderr, "%s: --%s %s: %s\n", cmd, opt, in[i],
			    errno == EINVAL ? "not a regular file" :
			    errno == EFBIG ? "over 1 MiB" : strerror(errno));
			free(buf);
			return -1;
		}
		for (line = buf, lineno = 1; line != NULL; line = next,
		    lineno++) {
			if ((next = strchr(line, '\n')) != NULL)
				*next++ = '\0';
			if ((end = strchr(line, '#')) != NULL)
				*end = '\0';
			line += strspn(line, " \t\r");
			end = line + strlen(line);
			while (end > line && strchr(" \t\r", end[-1]) != NULL)
				*--end = '\0';
			if (*line == '\0')
				continue;
			(void)snprintf(where, sizeof where, "%s:%u: ", in[i] + 1,
			    lineno);
			if (check(cmd, opt, where, line) < 0 ||
			    config_list_add(out, nout, line) < 0)
				return -1;
		}
	}
	return 0;
}

static int
expand(struct config *c, const char *cmd, const char *opt,
    const char **in, const char ***out, size_t *nout)
{
	if (expand_into(c, cmd, opt, in, out, nout) == 0)
		return 0;
	free(*out);
	*out = NULL;
	return -1;
}

/* --allow-host's and --deny-host's lists with their files read. */
static int
entries(struct config *c, const char *cmd)
{
	const char **a, **d;
	size_t na, nd;

	if (expand(c, cmd, "allow-host", c->allow_hosts, &a, &na) < 0)
		return -1;
	if (expand(c, cmd, "deny-host", c->deny_hosts, &d, &nd) < 0) {
		free(a);
		return -1;
	}
	free(c->allow_hosts);
	free(c->deny_hosts);
	c->allow_hosts = a;
	c->nallow_hosts = na;
	c->deny_hosts = d;
	c->ndeny_hosts = nd;
	return 0;
}

int
config_network_check(struct config *c, const char *cmd)
{
	int given = c->allow_hosts != NULL || c->deny_hosts != NULL;

	if (c->network_ask && config_is_exec(cmd)) {
		(void)fprintf(stderr, "%s: --network-ask is for agent runs (the "
		    "operator answers through agentz ctl RUN approve)\n", cmd);
		return -1;
	}
	if (entries(c, cmd) < 0)
		return -1;
	if (c->network == NETWORK_UNSET)
		c->network = config_is_exec(cmd) && !given ? JAIL_NET_NONE :
		    JAIL_NET_PROXY;
	if ((given || c->network_ask || c->max_egress_bytes) &&
	    c->network != JAIL_NET_PROXY) {
		(void)fprintf(stderr, "%s: --%s needs --network proxy (the "
		    "network is %s)\n", cmd, c->allow_hosts ? "allow-host" :
		    c->deny_hosts ? "deny-host" : c->network_ask ?
		    "network-ask" : "max-egress-bytes",
		    config_network_names[c->network]);
		return -1;
	}
	return 0;
}

void
config_network_clear(struct config *c)
{
	size_t i;

	for (i = 0; i < c->nhost_files; i++)
		free(c->host_files[i]);
	free(c->host_files);
	c->host_files = NULL;
	c->nhost_files = 0;
}
