/*
 * hosttools.h - the host tools' mechanics and the continuation rules
 * (SPEC sections 3-4). Which tools there are and what a call of one does is the
 * agent's (agent/tools.c), given as struct host_tools.
 *
 * After a response completes, its host-tool calls are run and their
 * outputs kept by response id and call id. A response holding only host
 * calls is continued at once; one holding any other tool call goes back
 * to the caller, and when the caller continues (previous_response_id, or
 * the function_call items passed back in input) the stored host outputs
 * are added, replacing caller-written outputs with the same call_id
 * (hosttools_int.h, model/ only).
 *
 * The stored outputs are bounded: they belong to the cell that made the
 * call; once that cell is over an output larger than a line becomes a
 * short note saying it was not kept (a later cell may still continue the
 * response by previous_response_id, and the API wants an output for
 * every call), those of cells more than a few cells ago go, and all of
 * them stay within a byte budget, the oldest evicted first. They are not
 * dropped on first use: a caller running a stateless loop resends the
 * same function_call items with every request of its cell.
 */
#ifndef AGENTZ_HOSTTOOLS_H
#define AGENTZ_HOSTTOOLS_H

#include <stddef.h>
#include <stdint.h>

/* The host tools: the owner's policy, run by the model client. */
struct host_tools {
	/* A JSON array of their definitions (function tools), appended to
	 * every request; a function_call named like one of them is the
	 * host's to answer. Parsed by hosttools_new(). */
	const char *definitions;
	/*
	 * Runs the host tool name for a call made by cell, its arguments a
	 * JSON object's text. Returns the tool's output (malloc'ed), or
	 * NULL with *err (malloc'ed) to end the call with
	 * NextCellAlreadyScheduled in the cell.
	 */
	char *(*run)(void *ctx, uint32_t cell, const char *name,
	    const char *args, char **err);
	void *ctx;
};

struct hosttools;

/* The default budget of the stored outputs. */
#define HOSTTOOLS_STORE_BUDGET	(8u << 20)

/* t is copied; NULL when its definitions are not a JSON array, or ENOMEM. */
struct hosttools *hosttools_new(const struct host_tools *t);
void hosttools_free(struct hosttools *h);

/* Sets the byte budget of the stored outputs (evicting now if over). */
void hosttools_set_budget(struct hosttools *h, size_t bytes);
/* Bytes the stored outputs are counted as now (<= the budget). */
size_t hosttools_stored_bytes(const struct hosttools *h);
/*
 * Cells up to and including cell are over (cells run one at a time):
 * their large stored outputs become notes, and outputs of their calls
 * still in flight are no longer stored.
 */
void hosttools_cell_over(struct hosttools *h, uint32_t cell);

#endif
