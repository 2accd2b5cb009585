/*
 * cells.c - cell records (see cells.h): begin and finish a record, and
 * keep the history within its memory budget by evicting the oldest
 * records to the store (store.c).
 */
#include "supervisor/cells/cells.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/cells/store.h"
#include "supervisor/loop/loop.h"

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
	free(c->ended_by);
	free(c->threads_lost);
	free(c->egress.last_refused);
	free(c->snapshot_why);
	free(c->ns_cells);
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
	    str_bytes(c->stack) + str_bytes(c->ended_by) +
	    str_bytes(c->egress.last_refused) +
	    capture_bytes(&c->out);
}

static int
evict(struct cells *h, size_t i)
{
	struct cell_slot *s = &h->slot[i];

	if (s->rec->status == CELL_RUNNING || cells_store(h, i) < 0)
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
	c->ns = NS_LOST;
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
cells_set_snapshot(struct cell *c, enum cell_snapshot s, const char *why)
{
	free(c->snapshot_why);
	c->snapshot_why = s == CSNAP_NONE ? dup_or_null(why) : NULL;
	c->snapshot = s;
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
		[KIND_RESTART] = "restart", [KIND_STOPPED] = "stopped",
	};

	return names[k];
}

const char *
cells_timeout_name(enum cell_timeout t)
{
	static const char *const names[] = {
		[TIMEOUT_NONE] = NULL, [TIMEOUT_INTERRUPTED] = "interrupted",
		[TIMEOUT_KILLED] = "killed",
	};

	return names[t];
}

enum cell_timeout
cells_timeout_parse(const char *s)
{
	if (s != NULL && strcmp(s, "interrupted") == 0)
		return TIMEOUT_INTERRUPTED;
	if (s != NULL && strcmp(s, "killed") == 0)
		return TIMEOUT_KILLED;
	return TIMEOUT_NONE;
}

const char *
cells_recovery_name(enum cell_recovery r)
{
	static const char *const names[] = {
		[RECOVERY_UNSET] = NULL, [RECOVERY_NONE] = "none",
		[RECOVERY_SNAPSHOT] = "snapshot",
		[RECOVERY_STANDBY] = "standby",
		[RECOVERY_FRESH] = "fresh worker",
	};

	return names[r];
}

#define NS_ROLLED	"rolled back"

const char *
cells_ns_text(const struct cell *c, char *buf, size_t len)
{
	if (c->status == CELL_RUNNING)
		return NULL;
	if (c->ns == NS_ROLLED_BACK) {
		(void)snprintf(buf, len, NS_ROLLED " to before cell %u", c->n);
		return buf;
	}
	return c->ns == NS_LOST ? "lost" : "kept";
}

enum cell_ns
cells_ns_parse(const char *s)
{
	if (s != NULL && strncmp(s, NS_ROLLED, strlen(NS_ROLLED)) == 0)
		return NS_ROLLED_BACK;
	if (s != NULL && strcmp(s, "lost") == 0)
		return NS_LOST;
	return NS_KEPT;
}

char *
cells_snapshot_text(const struct cell *c)
{
	static const char *const fixed[] = {
		[CSNAP_UNSET] = NULL, [CSNAP_TAKEN] = "taken",
		[CSNAP_NONE] = NULL,
		[CSNAP_KILLED] = "none: the snapshot was killed before it "
		    "was needed",
		[CSNAP_DIED] = "taken, but it died before it could take over "
		    "(killed by the cell?)",
		[CSNAP_WORLD_LOST] = "taken, but the run's namespace init "
		    "died, and the snapshot with it",
	};
	char *s;

	if (c->snapshot != CSNAP_NONE)
		return dup_or_null(fixed[c->snapshot]);
	if (asprintf(&s, "none: %s", c->snapshot_why != NULL ?
	    c->snapshot_why : "") < 0)
		return NULL;
	return s;
}
