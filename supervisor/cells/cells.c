/*
 * cells.c - cell records (see cells.h).
 */
#include "supervisor/cells/cells.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/cells/journal.h"
#include "supervisor/loop/loop.h"
#include "supervisor/text/utf8.h"

void
cells_init(struct cells *h, size_t output_limit)
{
	memset(h, 0, sizeof *h);
	h->output_limit = output_limit;
	h->budget = CELLS_MEMORY_BUDGET;
	h->reply_max = CELLS_REPLY_MAX;
	h->spill_fd = -1;
}

void
cells_set_limits(struct cells *h, size_t budget, size_t reply_max)
{
	if (budget > 0)
		h->budget = budget;
	if (reply_max > 0)
		h->reply_max = reply_max;
}

static void
cell_free(struct cell *c)
{
	if (c == NULL)
		return;
	free(c->code);
	free(c->summary);
	free(c->source);
	free(c->exception_type);
	free(c->traceback);
	free(c->detail);
	free(c->stack);
	capture_clear(&c->out);
	free(c);
}

void
cells_clear(struct cells *h)
{
	size_t i, limit = h->output_limit, budget = h->budget;
	size_t reply_max = h->reply_max;

	for (i = 0; i < h->n; i++)
		cell_free(h->slot[i].rec);
	free(h->slot);
	if (h->spill_fd >= 0)
		(void)close(h->spill_fd);
	cells_init(h, limit);
	cells_set_limits(h, budget, reply_max);
}

struct cell *
cells_get(struct cells *h, size_t i)
{
	return i < h->n ? h->slot[i].rec : NULL;
}

enum cell_status
cells_status(const struct cells *h, size_t i)
{
	if (h->slot[i].rec != NULL)
		return h->slot[i].rec->status;
	return (enum cell_status)h->slot[i].status;
}

void
cells_journaled(struct cells *h, const struct cell *c, int outputs,
    const struct journal *j, uint64_t off, size_t len)
{
	struct cell_slot *s;

	if (c == NULL || c->n >= h->n || len == 0 || len > UINT32_MAX)
		return;
	s = &h->slot[c->n];
	if (s->store == STORE_SPILL)
		return;
	h->journal = j;
	s->store = STORE_JOURNAL;
	if (outputs) {
		s->out_off = off;
		s->out_len = (uint32_t)len;
	} else {
		s->in_off = off;
		s->in_len = (uint32_t)len;
	}
}

/* --- the store: the journal, or the spill file ------------------------------ */

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

static int
pwrite_all(int fd, const char *p, size_t n, uint64_t off)
{
	ssize_t w;

	while (n > 0) {
		w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
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
	if (n + 1 <= UINT32_MAX && pwrite_all(h->spill_fd, s, n + 1,
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
static int
store(struct cells *h, size_t i)
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

/* --- keeping memory flat ------------------------------------------------------ */

static size_t
str_bytes(const char *s)
{
	return s != NULL ? strlen(s) + 1 : 0;
}

/* Heap bytes of a record in memory. */
static size_t
cell_bytes(const struct cell *c)
{
	return sizeof *c + c->code_len + 1 + str_bytes(c->summary) +
	    str_bytes(c->source) + str_bytes(c->exception_type) +
	    str_bytes(c->traceback) + str_bytes(c->detail) +
	    str_bytes(c->stack) + capture_bytes(&c->out);
}

static int
evict(struct cells *h, size_t i)
{
	struct cell_slot *s = &h->slot[i];

	if (s->rec->status == CELL_RUNNING || store(h, i) < 0)
		return -1;
	s->status = (uint8_t)s->rec->status;
	cell_free(s->rec);
	s->rec = NULL;
	return 0;
}

/*
 * Before a new cell: finished records give back their capture's spare
 * room, and the oldest go to the store until the rest fits the budget.
 * The newest record stays (the front ends hold it, e.g. as the failed
 * cell a repair is about), and so does any running one.
 */
static void
compact(struct cells *h)
{
	size_t i, total = 0, kept;

	for (i = h->lo; i < h->n; i++) {
		if (h->slot[i].rec == NULL)
			continue;
		if (h->slot[i].rec->status != CELL_RUNNING)
			(void)capture_freeze(&h->slot[i].rec->out);
		total += cell_bytes(h->slot[i].rec);
	}
	while (h->lo + 1 < h->n) {
		struct cell *c = h->slot[h->lo].rec;
		size_t size;

		kept = h->n - h->lo;
		if (c != NULL && kept < CELLS_RESIDENT_MAX && total <= h->budget)
			break;
		size = c != NULL ? cell_bytes(c) : 0;
		if (c != NULL && evict(h, h->lo) < 0)
			break;
		total -= size;
		h->lo++;
	}
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

struct cell *
cells_begin(struct cells *h, const char *code, size_t len,
    const char *summary, const char *source, int64_t generated_by)
{
	struct cell *c;
	struct cell_slot *nv;

	if (h->n == h->cap) {
		nv = realloc(h->slot, (h->cap ? h->cap * 2 : 16) * sizeof *nv);
		if (nv == NULL)
			return NULL;
		h->slot = nv;
		h->cap = h->cap ? h->cap * 2 : 16;
	}
	compact(h);
	c = calloc(1, sizeof *c);
	if (c == NULL || (c->code = malloc(len + 1)) == NULL) {
		free(c);
		return NULL;
	}
	memcpy(c->code, code, len);
	c->code[len] = '\0';
	c->code_len = len;
	c->summary = dup_or_null(summary);
	c->source = dup_or_null(source);
	c->n = (uint32_t)h->n;
	c->generated_by = generated_by;
	c->generated_at = c->started_at = loop_wall();
	c->t0_us = loop_now_us();
	c->status = CELL_RUNNING;
	c->exit_code = c->term_signal = -1;
	capture_init(&c->out, h->output_limit);
	memset(&h->slot[h->n], 0, sizeof h->slot[h->n]);
	h->slot[h->n++].rec = c;
	return c;
}

static void
finish_time(struct cell *c)
{
	c->finished_at = loop_wall();
	c->duration_us = loop_now_us() - c->t0_us;
}

void
cells_finish_done(struct cell *c, const struct msg_done *d)
{
	static const enum cell_status map[] = {
		[DONE_OK] = CELL_OK, [DONE_ERROR] = CELL_ERROR,
		[DONE_INTERRUPTED] = CELL_INTERRUPTED,
		[DONE_EXITED] = CELL_EXITED,
	};

	finish_time(c);
	c->status = map[d->status];
	c->kind = c->status == CELL_ERROR ? KIND_EXCEPTION : KIND_NONE;
	if (d->exception_type.len > 0)
		c->exception_type = strdup(d->exception_type.ptr);
	if (d->traceback.len > 0)
		c->traceback = strdup(d->traceback.ptr);
}

void
cells_finish_dead(struct cell *c, enum cell_kind kind, const char *detail,
    int exit_code, int term_signal)
{
	finish_time(c);
	c->status = CELL_ERROR;
	c->kind = kind;
	c->namespace_lost = 1;
	free(c->detail);
	c->detail = dup_or_null(detail);
	c->exit_code = exit_code;
	c->term_signal = term_signal;
}

void
cells_set_detail(struct cell *c, const char *detail)
{
	free(c->detail);
	c->detail = dup_or_null(detail);
}

void
cells_set_usage(struct cell *c, uint64_t cpu_us, long peak_kb)
{
	c->cpu_us = cpu_us;
	c->maxrss_kb = peak_kb;
}

const char *
cells_status_name(enum cell_status s)
{
	static const char *const names[] = {
		[CELL_RUNNING] = "running", [CELL_OK] = "ok",
		[CELL_ERROR] = "error", [CELL_INTERRUPTED] = "interrupted",
		[CELL_EXITED] = "exited",
	};

	return names[s];
}

const char *
cells_kind_name(enum cell_kind k)
{
	static const char *const names[] = {
		[KIND_NONE] = NULL, [KIND_EXCEPTION] = "exception",
		[KIND_NO_SUCCESSOR] = "no_successor",
		[KIND_TIMEOUT] = "timeout", [KIND_MEMORY] = "memory",
		[KIND_CRASHED] = "crashed", [KIND_PROTOCOL] = "protocol",
		[KIND_RESTART] = "restart",
	};

	return names[k];
}

static char *
restore_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? strdup(s) : NULL;
}

/* The output as it was kept, with its totals (older journals lack them). */
static void
restore_capture(struct cell *c, const json_t *text, const json_t *out)
{
	const json_t *total = json_object_get(out, "output_bytes");
	const json_t *dropped = json_object_get(out, "output_dropped");
	size_t len = json_string_length(text);

	(void)capture_restore(&c->out, json_string_value(text), len,
	    json_is_integer(total) ? (uint64_t)json_integer_value(total) : len,
	    json_is_integer(dropped) ? (uint64_t)json_integer_value(dropped) :
	    0);
}

static void
restore_output(struct cell *c, const json_t *out)
{
	const char *st = json_string_value(json_object_get(out, "status"));
	const char *kind = json_string_value(json_object_get(out, "kind"));
	const json_t *text = json_object_get(out, "output");
	int i;

	for (i = CELL_OK; i <= CELL_EXITED; i++)
		if (st != NULL && strcmp(st, cells_status_name(i)) == 0)
			c->status = (enum cell_status)i;
	for (i = KIND_EXCEPTION; i <= KIND_RESTART; i++)
		if (kind != NULL && strcmp(kind, cells_kind_name(i)) == 0)
			c->kind = (enum cell_kind)i;
	if (c->status == CELL_RUNNING)	/* unknown name: say so */
		c->status = CELL_ERROR;
	c->exception_type = restore_str(out, "exception_type");
	c->traceback = restore_str(out, "traceback");
	c->detail = restore_str(out, "detail");
	if (json_is_string(text))
		restore_capture(c, text, out);
	c->finished_at = json_real_value(json_object_get(out, "finished_at"));
	c->duration_us = (uint64_t)json_integer_value(json_object_get(out,
	    "duration_us"));
	c->namespace_lost = 1;	/* whatever it was, that worker is gone */
	c->calls_cancelled = (unsigned)json_integer_value(json_object_get(out,
	    "model_calls_cancelled"));
}

struct cell *
cells_restore(struct cells *h, const json_t *in, const json_t *out)
{
	const json_t *code = json_object_get(in, "code");
	const json_t *by = json_object_get(in, "generated_by");
	struct cell *c;

	if (!json_is_string(code)) {
		errno = EINVAL;
		return NULL;
	}
	c = cells_begin(h, json_string_value(code), json_string_length(code),
	    json_string_value(json_object_get(in, "summary")), NULL,
	    json_is_integer(by) ? json_integer_value(by) : -1);
	if (c == NULL)
		return NULL;
	c->generated_at = json_real_value(json_object_get(in, "generated_at"));
	c->started_at = json_real_value(json_object_get(in, "started_at"));
	if (out != NULL) {
		restore_output(c, out);
		return c;
	}
	c->finished_at = c->started_at;
	cells_finish_dead(c, KIND_RESTART, "the supervisor restarted while "
	    "this cell ran: its worker and namespace are gone", -1, -1);
	return c;
}

/* A JSON string from arbitrary bytes; JSON null for NULL. */
static json_t *
jstr(const char *s, size_t n)
{
	size_t len;
	char *clean;
	json_t *j;

	if (s == NULL)
		return json_null();
	clean = utf8_sanitize(s, n, &len);
	if (clean == NULL)
		return json_null();
	j = json_stringn_nocheck(clean, len);
	free(clean);
	return j;
}

static json_t *
jcstr(const char *s)
{
	return jstr(s, s != NULL ? strlen(s) : 0);
}

static json_t *
jint_or_null(long long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

static void
add_output(json_t *o, const struct cell *c)
{
	size_t len = 0;
	char *text = capture_text(&c->out, &len);

	(void)json_object_set_new(o, "output", jstr(text, len));
	free(text);
	(void)json_object_set_new(o, "output_bytes",
	    json_integer((json_int_t)c->out.total));
	(void)json_object_set_new(o, "output_dropped",
	    json_integer((json_int_t)capture_dropped(&c->out)));
}

json_t *
cells_inputs_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "code", jstr(c->code, c->code_len));
	(void)json_object_set_new(o, "summary", jcstr(c->summary));
	(void)json_object_set_new(o, "generated_at",
	    json_real(c->generated_at));
	(void)json_object_set_new(o, "started_at", json_real(c->started_at));
	(void)json_object_set_new(o, "generated_by",
	    jint_or_null(c->generated_by));
	return o;
}

static void
add_limits(json_t *o, const struct cell *c)
{
	(void)json_object_set_new(o, "exit_code", jint_or_null(c->exit_code));
	(void)json_object_set_new(o, "signal", jint_or_null(c->term_signal));
	(void)json_object_set_new(o, "peak_rss_kb",
	    jint_or_null(c->maxrss_kb > 0 ? c->maxrss_kb : -1));
	(void)json_object_set_new(o, "cpu_us", c->status == CELL_RUNNING ?
	    json_null() : json_integer((json_int_t)c->cpu_us));
	(void)json_object_set_new(o, "memory_peak", c->memory_peak > 0 ?
	    json_integer((json_int_t)c->memory_peak) : json_null());
	(void)json_object_set_new(o, "namespace", c->status == CELL_RUNNING ?
	    json_null() : json_string(c->namespace_lost ? "lost" : "kept"));
	(void)json_object_set_new(o, "stack", jcstr(c->stack));
	(void)json_object_set_new(o, "model_calls_cancelled",
	    json_integer((json_int_t)c->calls_cancelled));
	if (c->timeout_stage != NULL)
		(void)json_object_set_new(o, "timeout", json_pack("{s:s, s:f, "
		    "s:o}", "stage", c->timeout_stage, "deadline_to_ready_ms",
		    c->deadline_to_ready_ms, "kill_to_ready_ms",
		    c->kill_to_ready_ms > 0 ? json_real(c->kill_to_ready_ms) :
		    json_null()));
}

json_t *
cells_outputs_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "status",
	    json_string(cells_status_name(c->status)));
	(void)json_object_set_new(o, "kind", jcstr(cells_kind_name(c->kind)));
	(void)json_object_set_new(o, "exception_type",
	    jcstr(c->exception_type));
	(void)json_object_set_new(o, "traceback", jcstr(c->traceback));
	(void)json_object_set_new(o, "detail", jcstr(c->detail));
	add_output(o, c);
	(void)json_object_set_new(o, "finished_at", c->status == CELL_RUNNING ?
	    json_null() : json_real(c->finished_at));
	(void)json_object_set_new(o, "duration_us",
	    json_integer((json_int_t)c->duration_us));
	(void)json_object_set_new(o, "worker_pid", c->worker_pid > 0 ?
	    json_integer(c->worker_pid) : json_null());
	add_limits(o, c);
	return o;
}

json_t *
cells_json(const struct cell *c)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	(void)json_object_set_new(o, "cell", json_integer(c->n));
	(void)json_object_set_new(o, "source", jcstr(c->source));
	(void)json_object_update_new(o, cells_inputs_json(c));
	(void)json_object_update_new(o, cells_outputs_json(c));
	return o;
}
