/*
 * cells.h - the cell history: one record per cell, inputs written before
 * the cell runs and outputs after (SPEC §2), with the output captured
 * under a head+tail cap. Plain structs: the record as JSON is
 * record_json.h, the store of evicted records store.h.
 */
#ifndef AGENTZ_CELLS_H
#define AGENTZ_CELLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "supervisor/cells/capture.h"

enum cell_status {
	CELL_RUNNING,
	CELL_OK,
	CELL_ERROR,
	CELL_INTERRUPTED,
	CELL_EXITED
};

/* The concrete kind of an error (SPEC §6). */
enum cell_kind {
	KIND_NONE,
	KIND_EXCEPTION,
	KIND_NO_SUCCESSOR,
	KIND_TIMEOUT,
	KIND_MEMORY,
	KIND_CRASHED,
	KIND_PROTOCOL,
	KIND_RESTART,		/* the supervisor restarted while it ran */
	KIND_STOPPED		/* the run stopped (a signal, a budget, the
				 * operator) while it ran or waited */
};

struct cell {
	uint32_t n;
	/* inputs */
	char *code;
	size_t code_len;
	char *summary;		/* NULL: none */
	char *source;		/* file it came from (agentz exec), or NULL */
	int64_t generated_by;	/* cell that submitted it; -1 = engine */
	double generated_at, started_at;
	/* outputs */
	enum cell_status status;
	enum cell_kind kind;
	char *exception_type, *traceback, *detail;
	struct capture out;
	double finished_at;
	uint64_t t0_us, duration_us;
	pid_t worker_pid;
	unsigned worker_gen;
	int exit_code, term_signal;	/* -1: not applicable */
	long maxrss_kb;
	uint64_t cpu_us;
	uint64_t memory_peak;		/* cgroup peak, bytes (0: unknown) */
	/* limits */
	const char *timeout_stage;	/* NULL, "interrupted" or "killed" */
	double deadline_to_ready_ms;	/* deadline -> DONE or fresh worker */
	double kill_to_ready_ms;	/* SIGKILL -> fresh worker ready */
	char *stack;			/* every thread's stack at the kill */
	int namespace_lost;		/* the worker died: state is gone */
	/* the worker died but its snapshot took over: the namespace is
	 * as before this cell (namespace_lost is 0 then) */
	int rolled_back;
	char *threads_lost;		/* comma-separated names, or NULL */
	char *snapshot;			/* "taken", or why none; NULL: never */
	char *ns_cells;			/* cells in the namespace, "1-3,5" */
	/* after its worker died: "snapshot", "standby" or "fresh worker" */
	const char *recovered_by;
	/* model calls of the cell ended unfinished when it was killed */
	unsigned calls_cancelled;
};

/*
 * The history stays flat in the length of the run: the newest records are
 * kept whole in memory (struct cell) within CELLS_MEMORY_BUDGET bytes and
 * CELLS_RESIDENT_MAX records, the rest only where they are durable: the
 * journal (cells_journaled says where) or, for a cell the journal does not
 * hold, an unlinked spill file. What stays of every cell is its slot.
 */
#define CELLS_MEMORY_BUDGET	((size_t)8 << 20)
#define CELLS_RESIDENT_MAX	64
#define CELLS_REPLY_MAX		((size_t)16 << 20)

struct journal;

enum cells_store { STORE_NONE, STORE_JOURNAL, STORE_SPILL };

struct cell_slot {
	struct cell *rec;		/* the whole record, or NULL */
	uint64_t in_off, out_off;	/* its parts in the store */
	uint32_t in_len, out_len;	/* 0: not there */
	uint8_t status;			/* enum cell_status, once evicted */
	uint8_t store;			/* enum cells_store */
};

struct cells {
	struct cell_slot *slot;
	size_t n, cap;
	size_t lo;			/* slots below hold no record */
	size_t output_limit;
	size_t budget;			/* bytes of records kept whole */
	size_t reply_max;		/* one reply to a cell or the model */
	const struct journal *journal;
	int spill_fd;			/* -1: none yet */
	uint64_t spill_size;
	int spill_failed;		/* said once */
};

enum cells_part { PART_INPUTS, PART_OUTPUTS, PART_ALL };

void cells_init(struct cells *h, size_t output_limit);
void cells_clear(struct cells *h);
/* The memory budget and the reply bound (0: keep the default). */
void cells_set_limits(struct cells *h, size_t budget, size_t reply_max);

/* Cell i's record if it is in memory (always the newest two), or NULL. */
struct cell *cells_get(struct cells *h, size_t i);
/* Cell i's status, in memory or not. */
enum cell_status cells_status(const struct cells *h, size_t i);
/*
 * Part of c's record (outputs or inputs) is the journal's record at off
 * (len bytes): once both are there, evicting the record frees it.
 */
void cells_journaled(struct cells *h, const struct cell *c, int outputs,
    const struct journal *j, uint64_t off, size_t len);

/*
 * Appends the record of a new cell (status RUNNING, started now). Copies
 * code/summary/source. NULL / ENOMEM.
 */
struct cell *cells_begin(struct cells *h, const char *code, size_t len,
    const char *summary, const char *source, int64_t generated_by);

/* Fills the outputs from a DONE frame. */
void cells_finish_done(struct cell *c, const struct msg_done *d);
/* Fills the outputs of a cell whose worker died; detail is a copied text. */
void cells_finish_dead(struct cell *c, enum cell_kind kind,
    const char *detail, int exit_code, int term_signal);
/* Replaces c->detail with a copy of detail. */
void cells_set_detail(struct cell *c, const char *detail);
/* Accounting of a cell whose worker died: CPU since the cell began. */
void cells_set_usage(struct cell *c, uint64_t cpu_us, long peak_kb);

const char *cells_status_name(enum cell_status s);
const char *cells_kind_name(enum cell_kind k);

#endif
