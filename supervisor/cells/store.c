/*
 * store.c - where the records evicted from memory live (see store.h): the
 * journal, or for a cell the journal does not hold an unlinked spill file
 * of JSON lines, and reading a part of a record back from either.
 */
#include "supervisor/cells/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"
#include "supervisor/cells/journal.h"
#include "supervisor/cells/record_json.h"

static int
spill_open(struct cells *h)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && (size_t)snprintf(path, sizeof path,
	    "%s/agentz-spill-XXXXXX", dir) < sizeof path &&
	    (fd = mkostemp(path, O_CLOEXEC)) >= 0)
		(void)unlink(path);
	if (fd < 0)
		return -1;
	h->spill_fd = fd;
	return 0;
}

/*
 * Writes p[0..n) at off, the file's end: only these writes move the fd's
 * offset (reads are preads), so it is off unless a write failed part-way;
 * then it goes back, so the next line lands where this one should have.
 */
static int
spill_write(int fd, const char *p, size_t n, uint64_t off)
{
	int saved;

	if (fd_write_all(fd, p, n) == 0)
		return 0;
	saved = errno;
	(void)lseek(fd, (off_t)off, SEEK_SET);
	errno = saved;
	return -1;
}

/* Appends j (consumed) as one line to the spill file. */
static int
spill_put(struct cells *h, json_t *j, uint64_t *off, uint32_t *len)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n;
	int rc = -1;

	json_decref(j);
	if (s == NULL)
		return -1;
	n = strlen(s);
	s[n] = '\n';	/* the NUL goes: the lengths say where lines end */
	if (n + 1 <= UINT32_MAX && spill_write(h->spill_fd, s, n + 1,
	    h->spill_size) == 0) {
		*off = h->spill_size;
		*len = (uint32_t)(n + 1);
		h->spill_size += n + 1;
		rc = 0;
	}
	free(s);
	return rc;
}

static json_t *
spill_inputs(const struct cell *c)
{
	json_t *o = cells_inputs_json(c);

	if (o != NULL && c->source != NULL)
		(void)json_object_set_new(o, "source", json_string(c->source));
	return o;
}

/* Writes cell i's record to the spill file, unless the journal has it. */
int
cells_store(struct cells *h, size_t i)
{
	struct cell_slot *s = &h->slot[i];
	uint64_t in_off, out_off;
	uint32_t in_len, out_len;

	if (s->store == STORE_JOURNAL && s->in_len > 0 && s->out_len > 0)
		return 0;
	if ((h->spill_fd < 0 && spill_open(h) < 0) ||
	    spill_put(h, spill_inputs(s->rec), &in_off, &in_len) < 0 ||
	    spill_put(h, cells_outputs_json(s->rec), &out_off, &out_len) < 0) {
		if (!h->spill_failed)
			log_warn("cells: cannot write the history's spill file in "
			    "%s; older records stay in memory", getenv("TMPDIR") ?
			    getenv("TMPDIR") : "/tmp");
		h->spill_failed = 1;
		return -1;
	}
	s->store = STORE_SPILL;
	s->in_off = in_off, s->in_len = in_len;
	s->out_off = out_off, s->out_len = out_len;
	return 0;
}

static json_t *
spill_read(const struct cells *h, uint64_t off, uint32_t len)
{
	char *line = malloc(len);
	json_t *j = NULL;

	if (line == NULL)
		return NULL;
	if (pread(h->spill_fd, line, len, (off_t)off) == (ssize_t)len &&
	    line[len - 1] == '\n')
		j = json_loadb(line, len - 1, 0, NULL);
	free(line);
	if (j == NULL)
		errno = EIO;
	return j;
}

/* One part as stored, without what the store adds ("v", "type", "cell"). */
static json_t *
load_part(const struct cells *h, size_t i, int outputs)
{
	const struct cell_slot *s = &h->slot[i];
	uint64_t off = outputs ? s->out_off : s->in_off;
	uint32_t len = outputs ? s->out_len : s->in_len;
	json_t *j;

	if (len == 0) {
		errno = EIO;
		return NULL;
	}
	if (s->store == STORE_SPILL)
		j = spill_read(h, off, len);
	else
		j = journal_read(h->journal, off, len);
	if (j == NULL)
		return NULL;
	(void)json_object_del(j, "v");
	(void)json_object_del(j, "type");
	(void)json_object_del(j, "cell");
	return j;
}

static json_t *
whole(size_t i, json_t *in, json_t *out)
{
	json_t *o = json_object(), *src = json_object_get(in, "source");

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "cell", json_integer((json_int_t)i));
	(void)json_object_set(o, "source", src != NULL ? src : json_null());
	(void)json_object_del(in, "source");
	(void)json_object_update(o, in);
	(void)json_object_update(o, out);
	return o;
}

json_t *
cells_part(struct cells *h, size_t i, enum cells_part p)
{
	json_t *in = NULL, *out = NULL, *o = NULL;

	if (i >= h->n) {
		errno = ENOENT;
		return NULL;
	}
	if (h->slot[i].rec != NULL)
		return p == PART_INPUTS ? cells_inputs_json(h->slot[i].rec) :
		    p == PART_OUTPUTS ? cells_outputs_json(h->slot[i].rec) :
		    cells_json(h->slot[i].rec);
	if (p != PART_OUTPUTS && (in = load_part(h, i, 0)) == NULL)
		return NULL;
	if (p != PART_INPUTS && (out = load_part(h, i, 1)) == NULL) {
		json_decref(in);
		return NULL;
	}
	if (p == PART_INPUTS) {
		(void)json_object_del(in, "source");
		return in;
	}
	if (p == PART_OUTPUTS)
		return out;
	o = whole(i, in, out);
	json_decref(in);
	json_decref(out);
	return o;
}
