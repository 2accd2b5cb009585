/*
 * journal.c - append-only JSON-lines journal (see journal.h).
 */
#include "supervisor/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fdio.h"

struct journal {
	int fd;
	const struct redact *red;
};

struct journal *
journal_open(const char *path, const struct redact *red)
{
	struct journal *j = calloc(1, sizeof *j);

	if (j == NULL)
		return NULL;
	j->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0) {
		free(j);
		return NULL;
	}
	j->red = red;
	return j;
}

void
journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	(void)close(j->fd);
	free(j);
}

int
journal_append(struct journal *j, const char *type, json_t *rec)
{
	char *line, *clean = NULL;
	size_t n;
	int rc;

	(void)json_object_set_new(rec, "v", json_integer(JOURNAL_VERSION));
	(void)json_object_set_new(rec, "type", json_string(type));
	line = json_dumps(rec, JSON_COMPACT);
	if (line == NULL) {
		errno = ENOMEM;
		return -1;
	}
	n = strlen(line);
	if (j->red != NULL && redact_count(j->red) > 0 &&
	    (clean = redact_string(j->red, line, n, &n)) == NULL) {
		free(line);
		errno = ENOMEM;
		return -1;
	}
	/* one write of the line and its newline: no interleaving */
	if (clean == NULL)
		clean = line, line = NULL;
	clean[n] = '\n';	/* the NUL goes; we never print it */
	rc = fd_write_all(j->fd, clean, n + 1);
	if (rc == 0)
		rc = fdatasync(j->fd);
	free(line);
	free(clean);
	return rc;
}

json_t *
journal_load(const char *path, char **err)
{
	FILE *f = fopen(path, "re");
	json_t *all, *rec;
	json_error_t je;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0;

	*err = NULL;
	if (f == NULL) {
		if (asprintf(err, "cannot read %s: %s", path, strerror(errno)) < 0)
			*err = NULL;
		return NULL;
	}
	all = json_array();
	while ((n = getline(&line, &cap, f)) > 0) {
		lineno++;
		rec = json_loadb(line, (size_t)n, 0, &je);
		if (json_is_object(rec)) {
			(void)json_array_append_new(all, rec);
			continue;
		}
		json_decref(rec);
		if (line[n - 1] != '\n' && feof(f))
			break;	/* torn last line: the write never finished */
		if (asprintf(err, "%s:%d: not a journal record: %s", path,
		    lineno, je.text) < 0)
			*err = NULL;
		json_decref(all);
		all = NULL;
		break;
	}
	free(line);
	(void)fclose(f);
	return all;
}
