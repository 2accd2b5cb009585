/*
 * journal.c - append-only JSON-lines journal (see journal.h).
 *
 * The lock is a flock(2) on the descriptor we append through: it belongs
 * to the open file description, so reading old records back through
 * another descriptor (and closing it) keeps it, unlike a POSIX record
 * lock, and /proc/locks names its holder, unlike an OFD lock. The
 * descriptor is O_CLOEXEC; the processes the supervisor forks without
 * exec (the worker spawner, the jail's init) close every descriptor
 * above their own with close_range before they wait for anything, so no
 * child keeps the lock once the supervisor is gone.
 */
#include "supervisor/cells/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"

struct journal {
	int fd;
	int broken;		/* a write failed: nothing more is appended */
	off_t size;		/* where the last whole record ends */
	off_t last_off;		/* the last record appended, and its length */
	size_t last_len;
	const struct redact *red;
};

/* *err = "<what> <path>: <why>" */
static void
set_err(char **err, const char *what, const char *path, const char *why)
{
	if (asprintf(err, "%s %s: %s", what, path, why) < 0)
		*err = NULL;
}

/* The pid holding a flock on st's file, from /proc/locks; 0 if unknown. */
static long
lock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256], kind[16];
	unsigned maj, min;
	unsigned long ino;
	long pid, found = 0;

	if (f == NULL)
		return 0;
	while (found == 0 && fgets(line, sizeof line, f) != NULL) {
		if (strstr(line, "->") != NULL)	/* a waiter, not the holder */
			continue;
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &pid,
		    &maj, &min, &ino) != 5 || strcmp(kind, "FLOCK") != 0)
			continue;
		if (ino == (unsigned long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev))
			found = pid;
	}
	(void)fclose(f);
	return found;
}

static int
take_lock(int fd, const char *path, char **err)
{
	struct stat st;
	char what[96];
	long pid;

	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK) {
		set_err(err, "cannot lock the journal", path,
		    strerror(errno));
		return -1;
	}
	pid = fstat(fd, &st) == 0 ? lock_holder(&st) : 0;
	if (pid > 0)
		(void)snprintf(what, sizeof what, "pid %ld", pid);
	else
		(void)snprintf(what, sizeof what, "a process whose pid is not "
		    "visible here");
	if (asprintf(err, "the journal %s is in use by another agentz (%s): "
	    "one supervisor per journal", path, what) < 0)
		*err = NULL;
	return -1;
}

/* A new file's name is durable only once its directory is synced. */
static int
sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = -1;

	if (copy == NULL)
		return -1;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		rc = fsync(fd);
		(void)close(fd);
	}
	free(copy);
	return rc;
}

/*
 * Where the journal's last whole record ends: just after its last
 * newline, 0 when there is none. Reads backwards from size.
 */
static off_t
last_newline_end(int fd, off_t size)
{
	char buf[8192];
	off_t at = size;
	ssize_t n, i;

	while (at > 0) {
		n = (ssize_t)(at < (off_t)sizeof buf ? at : (off_t)sizeof buf);
		at -= n;
		if (pread(fd, buf, (size_t)n, at) != n)
			return -1;
		for (i = n - 1; i >= 0; i--)
			if (buf[i] == '\n')
				return at + i + 1;
	}
	return 0;
}

/* Cuts a torn tail (bytes after the last newline) off; logs what it did. */
static int
cut_torn_tail(struct journal *j, const char *path, char **err)
{
	struct stat st;
	off_t end;

	if (fstat(j->fd, &st) < 0 || (end = last_newline_end(j->fd,
	    st.st_size)) < 0) {
		set_err(err, "cannot read the journal", path,
		    strerror(errno));
		return -1;
	}
	if (end < st.st_size) {
		log_warnx("journal %s: cutting a torn last line (%lld bytes "
		    "after the last newline: a write that never finished)", path,
		    (long long)(st.st_size - end));
		if (ftruncate(j->fd, end) < 0 || fsync(j->fd) < 0) {
			set_err(err, "cannot cut the torn tail of", path,
			    strerror(errno));
			return -1;
		}
	}
	j->size = end;
	return 0;
}

struct journal *
journal_open(const char *path, const struct redact *red, char **err)
{
	struct journal *j = calloc(1, sizeof *j);
	int created = 1;

	*err = NULL;
	if (j == NULL)
		return NULL;
	j->red = red;
	j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600);
	if (j->fd < 0 && errno == EEXIST) {
		created = 0;
		j->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
	}
	if (j->fd < 0) {
		set_err(err, "cannot open the journal", path,
		    strerror(errno));
		free(j);
		return NULL;
	}
	if (created && sync_dir(path) < 0) {
		set_err(err, "cannot sync the directory of", path,
		    strerror(errno));
		journal_close(j);
		return NULL;
	}
	/* the lock before the tail: two supervisors must not both cut it */
	if (take_lock(j->fd, path, err) < 0 || cut_torn_tail(j, path, err) < 0) {
		journal_close(j);
		return NULL;
	}
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

/* Writes one line (its newline included) and syncs it; cuts it on error. */
static int
append_line(struct journal *j, const char *line, size_t n)
{
	int saved;

	if (fd_write_all(j->fd, line, n) == 0 && fdatasync(j->fd) == 0) {
		j->last_off = j->size;
		j->last_len = n;
		j->size += (off_t)n;
		return 0;
	}
	saved = errno;
	/* never half a record: the journal ends at its last whole one */
	if (ftruncate(j->fd, j->size) == 0)
		(void)fdatasync(j->fd);
	j->broken = 1;
	errno = saved;
	return -1;
}

int
journal_append(struct journal *j, const char *type, json_t *rec)
{
	char *line, *clean = NULL;
	size_t n;
	int rc;

	if (j->broken) {
		errno = EIO;
		return -1;
	}
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
	rc = append_line(j, clean, n + 1);
	free(line);
	free(clean);
	return rc;
}

void
journal_last(const struct journal *j, uint64_t *off, size_t *len)
{
	*off = (uint64_t)j->last_off;
	*len = j->last_len;
}

json_t *
journal_read(const struct journal *j, uint64_t off, size_t len)
{
	char *line;
	json_t *rec;
	ssize_t n;

	if (len == 0 || (line = malloc(len)) == NULL) {
		errno = len == 0 ? EIO : ENOMEM;
		return NULL;
	}
	n = pread(j->fd, line, len, (off_t)off);
	if (n != (ssize_t)len || line[len - 1] != '\n') {
		free(line);
		errno = n < 0 ? errno : EIO;
		return NULL;
	}
	rec = json_loadb(line, len - 1, 0, NULL);
	free(line);
	if (rec == NULL)
		errno = EIO;
	return rec;
}

/* --- reading back ----------------------------------------------------------- */

enum ftype { F_STR, F_NUM, F_INT, F_CELL, F_BOOL };

struct field {
	const char *name;
	enum ftype type;
	int optional;		/* may be absent or null */
};

/* What each record type must hold (journal.h). */
static const struct schema {
	const char *type;
	struct field f[4];
} schemas[] = {
	{ "run", { { "task", F_STR, 0 }, { "model", F_STR, 0 },
	    { "at", F_NUM, 0 } } },
	{ "resume", { { "task", F_STR, 0 }, { "model", F_STR, 0 },
	    { "at", F_NUM, 0 } } },
	{ "isolation", { { "isolation", F_STR, 0 },
	    { "containment", F_STR, 0 } } },
	{ "input", { { "cell", F_CELL, 0 }, { "code", F_STR, 0 },
	    { "summary", F_STR, 1 }, { "generated_by", F_INT, 1 } } },
	{ "successor", { { "cell", F_CELL, 0 }, { "code", F_STR, 0 },
	    { "summary", F_STR, 0 }, { "repair", F_BOOL, 1 } } },
	{ "usage", { { "tokens", F_INT, 0 }, { "estimated", F_INT, 1 },
	    { "cost", F_NUM, 1 } } },
	{ "output", { { "cell", F_CELL, 0 }, { "status", F_STR, 0 },
	    { "kind", F_STR, 1 } } },
	{ "stop", { { "exit", F_INT, 0 }, { "reason", F_STR, 1 },
	    { "at", F_NUM, 1 } } },
};

static int
field_ok(const json_t *v, const struct field *f)
{
	if (v == NULL || json_is_null(v))
		return f->optional;
	switch (f->type) {
	case F_STR:
		return json_is_string(v);
	case F_NUM:
		return json_is_number(v);
	case F_INT:
		return json_is_integer(v);
	case F_CELL:
		return json_is_integer(v) && json_integer_value(v) >= 0;
	case F_BOOL:
		return json_is_boolean(v);
	}
	return 0;
}

/* NULL when rec is a valid record, else what is wrong with it. */
static const char *
check_record(const json_t *rec, char *buf, size_t size)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	const json_t *v = json_object_get(rec, "v");
	size_t i, k;

	if (!json_is_object(rec))
		return "not a JSON object";
	if (type == NULL)
		return "no \"type\" string";
	if (!json_is_integer(v) || json_integer_value(v) != JOURNAL_VERSION) {
		(void)snprintf(buf, size, "record version is not %d",
		    JOURNAL_VERSION);
		return buf;
	}
	for (i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
		if (strcmp(schemas[i].type, type) != 0)
			continue;
		for (k = 0; k < 4 && schemas[i].f[k].name != NULL; k++) {
			if (field_ok(json_object_get(rec, schemas[i].f[k].name),
			    &schemas[i].f[k]))
				continue;
			(void)snprintf(buf, size, "a \"%s\" record with a missing "
			    "or mistyped \"%s\"", type, schemas[i].f[k].name);
			return buf;
		}
		break;
	}
	return NULL;
}

/* The cell records journal_load keeps only the place of. */
static int
kept_by_place(const json_t *rec)
{
	const char *type = json_string_value(json_object_get(rec, "type"));

	return strcmp(type, "input") == 0 || strcmp(type, "output") == 0;
}

static json_t *
place_of(json_t *rec, off_t off, size_t len)
{
	json_t *stub = json_pack("{s:O, s:O, s:O, s:[I, I]}", "v",
	    json_object_get(rec, "v"), "type", json_object_get(rec, "type"),
	    "cell", json_object_get(rec, "cell"), "@at", (json_int_t)off,
	    (json_int_t)len);

	json_decref(rec);
	return stub;
}

int
journal_where(const json_t *rec, uint64_t *off, size_t *len)
{
	const json_t *at = json_object_get(rec, "@at");

	if (json_array_size(at) != 2)
		return -1;
	*off = (uint64_t)json_integer_value(json_array_get(at, 0));
	*len = (size_t)json_integer_value(json_array_get(at, 1));
	return 0;
}

json_t *
journal_full(const struct journal *j, const json_t *rec)
{
	uint64_t off;
	size_t len;

	if (journal_where(rec, &off, &len) < 0)
		return json_incref((json_t *)(uintptr_t)rec);
	return journal_read(j, off, len);
}

json_t *
journal_load(const char *path, char **err)
{
	FILE *f = fopen(path, "re");
	json_t *all, *rec;
	json_error_t je;
	char *line = NULL, buf[160];
	const char *bad = NULL;
	size_t cap = 0;
	ssize_t n;
	off_t at = 0;
	int lineno = 0;

	*err = NULL;
	if (f == NULL) {
		set_err(err, "cannot read", path, strerror(errno));
		return NULL;
	}
	all = json_array();
	while (bad == NULL && (n = getline(&line, &cap, f)) > 0) {
		lineno++;
		rec = NULL;
		if (line[n - 1] != '\n')
			bad = "a last line without its newline";
		else if ((rec = json_loadb(line, (size_t)n, 0, &je)) == NULL)
			bad = je.text;
		else
			bad = check_record(rec, buf, sizeof buf);
		if (bad == NULL && kept_by_place(rec))
			rec = place_of(rec, at, (size_t)n);
		if (bad == NULL && rec == NULL)
			bad = "out of memory";
		if (bad == NULL)
			(void)json_array_append_new(all, rec);
		else
			json_decref(rec);
		at += n;
	}
	if (bad == NULL && ferror(f))
		bad = strerror(errno);
	if (bad != NULL) {
		if (asprintf(err, "%s:%d: corrupt journal record (%s): the "
		    "journal cannot be trusted past it; fix or move it",
		    path, lineno, bad) < 0)
			*err = NULL;
		json_decref(all);
		all = NULL;
	}
	free(line);
	(void)fclose(f);
	return all;
}
