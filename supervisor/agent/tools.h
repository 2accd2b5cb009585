/*
 * tools.h - the host tools, the agent's policy (SPEC section 3):
 * set_next_cell_code registers the next cell's code with the run,
 * get_history_cells reads the cell records. Given to the model client as
 * a struct host_tools (model/hosttools.h), which recognises their calls,
 * runs them through it and keeps their outputs.
 */
#ifndef AGENTZ_TOOLS_H
#define AGENTZ_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/cells/cells.h"
#include "supervisor/model/hosttools.h"

#define SUMMARY_MAX 256

/* What registering a next cell came to (the run's answer). */
enum submit_result {
	SUBMIT_OK,
	SUBMIT_REPAIR,		/* registered as the repair cell */
	SUBMIT_ALREADY,		/* the cell already has a successor */
	SUBMIT_INACTIVE		/* the cell has finished */
};

/* What the host tools act on. */
struct agent_tools {
	/* the cell records get_history_cells reads (set before a call) */
	struct cells *history;
	/* registers code (len bytes) as the cell after cell */
	enum submit_result (*submit)(void *ctx, uint32_t cell,
	    const char *code, size_t len, const char *summary);
	void *ctx;
};

/* The host tools over t (borrowed: it outlives the model client). */
struct host_tools agent_tools_host(struct agent_tools *t);

#endif
