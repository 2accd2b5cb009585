/*
 * py.h - the worker's embedded CPython, shared by worker/py_*.c only.
 * These files are the only users of <Python.h>; main.c sees plain C.
 */
#ifndef AGENTZ_WORKER_PY_H
#define AGENTZ_WORKER_PY_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/*
 * Initialises an isolated interpreter with our builtin module, loads the
 * embedded runtime and creates the persistent namespace. Fills *version
 * with a static "3.11.2" style string. 0, or -1 after printing the Python
 * error to stderr.
 */
int py_init(const char *argv0, const char **version);

/*
 * chan_wait_exec / chan_send with the GIL released, so that the cells'
 * threads keep running between cells and while a DONE is being written.
 */
int py_wait_exec(struct msg *m);
int py_send(const struct msg *m);

/*
 * Runs one cell in the persistent namespace. Fills out->status,
 * exception_type and traceback (malloc'ed, caller msg_clears the DONE),
 * each kept to limit bytes (head and tail, as the cell's output).
 * Never fails: an internal error is reported as a cell error.
 */
void py_run_cell(uint32_t cell, const struct bytes *code, size_t limit,
    struct msg_done *out);

/*
 * Snapshots (worker/py_fork.c, for worker/snap.c). py_snap_threads
 * flushes the cell output streams and returns the names of the threads
 * other than the main one, comma-separated (malloc'ed; NULL if out of
 * memory); it runs Python a cell may have changed, so only after the
 * fork. py_fork_before / py_fork_parent / py_fork_child bracket the fork
 * as os.fork does but run no at-fork hook around it (py_fork_child may
 * run long after the fork, before any other Python; it runs the
 * after_in_child hooks, in the promoted snapshot). py_promoted repairs the runtime in a promoted
 * snapshot (event loop, stdio). py_nogil runs fn with the GIL released.
 */
char *py_snap_threads(void);
/* py_fork_init (at start-up, before any cell; 0 or -1) keeps the import
 * lock's probe; py_import_lock_busy says whether a thread holds it (the
 * caller holds the GIL: py_fork_before then takes it at once). */
int py_fork_init(void);
int py_import_lock_busy(void);
void py_fork_before(void);
void py_fork_parent(void);
void py_fork_child(void);
void py_promoted(void);
void py_nogil(void (*fn)(void));

/* The embedded sources (generated at build time by scripts/embed.py). */
struct embedded_file {
	const char *name;
	const char *text;
	size_t len;
};
extern const struct embedded_file embedded_runtime[];
extern const size_t embedded_runtime_count;
/* The runtime files compiled at build time (marshal data), usable when
 * embedded_runtime_code_magic_bytes (4 bytes) is libpython's magic. */
extern const struct embedded_file embedded_runtime_code[];
extern const char *const embedded_runtime_code_magic_bytes;
/* ENGINE_SOURCE, joined at build time (scripts/embed.py; ASCII) */
extern const char *const embedded_engine_text;
extern const size_t embedded_engine_len;

#endif
