/*
 * cells.h - the cell history: one record per cell, inputs written before
 * the cell runs and outputs after (SPEC section 2), with the output captured
 * under a head+tail cap. Plain structs: the record as JSON text is
 * cells_json_text below (the JSON values, cells/ only: record_json.h),
 * the store of evicted records store.h, the journal read back past.h.
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

/* The concrete kind of an error (SPEC section 6). */
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

/*
 * The record's states below are enums; their text (the record's JSON,
 * the journal, every output) is written at the edge by the *_name()
 * functions, and read back by the *_parse() ones (older journals).
 */

/* How far a cell's deadline ladder went (the record's "timeout"). */
enum cell_timeout {
	TIMEOUT_NONE,		/* no deadline reached: no "timeout" */
	TIMEOUT_INTERRUPTED,	/* "interrupted": SIGINT at the deadline */
	TIMEOUT_KILLED		/* "killed": the grace ran out (stack
				 * dump, then SIGKILL of the tree) */
};

/* What became of the worker's namespace (the record's "namespace"). */
enum cell_ns {
	NS_KEPT,		/* "kept" */
	NS_LOST,		/* "lost": the worker died, state is gone */
	NS_ROLLED_BACK		/* "rolled back to before cell N": the
				 * worker died but its snapshot took over */
};

/* The cell's snapshot (the record's "snapshot"). */
enum cell_snapshot {
	CSNAP_UNSET,		/* null: never decided */
	CSNAP_TAKEN,		/* "taken" */
	CSNAP_NONE,		/* "none: <snapshot_why>" */
	CSNAP_KILLED,		/* "none: the snapshot was killed before it
				 * was needed" (by a cell) */
	CSNAP_DIED,		/* "taken, but it died before it could take
				 * over (killed by the cell?)" */
	CSNAP_WORLD_LOST	/* "taken, but the run's namespace init
				 * died, and the snapshot with it" */
};

/* What took the place of the cell's dead worker ("recovered_by"). */
enum cell_recovery {
	RECOVERY_UNSET,		/* null: its worker did not die */
	RECOVERY_NONE,		/* "none": the run ended first */
	RECOVERY_SNAPSHOT,	/* "snapshot" */
	RECOVERY_STANDBY,	/* "standby" */
	RECOVERY_FRESH		/* "fresh worker" */
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
	pid_t worker_pid;		/* the worker running Python, host pid */
	unsigned worker_gen;
	int exit_code, term_signal;	/* -1: not applicable */
	long maxrss_kb;
	uint64_t cpu_us;
	uint64_t memory_peak;		/* cgroup peak, bytes (0: unknown) */
	/* limits */
	enum cell_timeout timeout_stage;	/* how far its deadline went */
	char *ended_by;		/* who ended it before its deadline (the
				 * operator's command), or NULL: its timeout */
	double deadline_to_ready_ms;	/* deadline -> DONE or fresh worker */
	double kill_to_ready_ms;	/* SIGKILL -> fresh worker ready */
	char *stack;			/* every thread's stack at the kill */
	enum cell_ns ns;		/* the namespace's fate */
	char *threads_lost;		/* comma-separated names, or NULL */
	enum cell_snapshot snapshot;
	char *snapshot_why;		/* CSNAP_NONE: why none, or NULL */
	char *ns_cells;			/* cells in the namespace, "1-3,5" */
	/* after its worker died: what took its place */
	enum cell_recovery recovered_by;
	/* model calls of the cell ended unfinished when it was killed */
	unsigned calls_cancelled;
	/* --network proxy: its connections (bytes of those that closed
	 * while it ran) and the last refusal's reason (or NULL) */
	struct cell_egress {
		unsigned allowed, refused;
		uint64_t up, down;
		char *last_refused;
	} egress;
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
/* The record's snapshot; why (copied) is kept for CSNAP_NONE only. */
void cells_set_snapshot(struct cell *c, enum cell_snapshot s,
    const char *why);
/* Accounting of a cell whose worker died: CPU since the cell began. */
void cells_set_usage(struct cell *c, uint64_t cpu_us, long peak_kb);

/* The record's texts: NULL where the JSON has null (or no member). */
const char *cells_status_name(enum cell_status s);
const char *cells_kind_name(enum cell_kind k);
const char *cells_timeout_name(enum cell_timeout t);
const char *cells_recovery_name(enum cell_recovery r);
/* "kept", "lost", "rolled back to before cell N" into buf; NULL while
 * the cell runs. */
const char *cells_ns_text(const struct cell *c, char *buf, size_t len);
/* "taken", "none: why", ...; malloc'ed (caller frees), NULL: unset. */
char *cells_snapshot_text(const struct cell *c);
/* Back from the text (unknown or NULL: TIMEOUT_NONE, NS_KEPT). */
enum cell_timeout cells_timeout_parse(const char *s);
/*
 * The whole record of c as compact JSON text (malloc'ed; *len its length
 * when len is not NULL): the fields before (text/jsonf.h, or NULL), the
 * record's ("cell", "source", inputs, outputs), the fields after. NULL
 * with errno (ENOMEM). The form agentz exec --json, the --json events and
 * the repair request show.
 */
struct jf;
char *cells_json_text(const struct cell *c, const struct jf *before,
    const struct jf *after, size_t *len);
enum cell_ns cells_ns_parse(const char *s);

#endif
