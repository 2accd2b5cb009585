/*
 * store.h - where the records evicted from memory go (cells.h): the
 * journal when it holds both parts of the cell, else the spill file.
 * Reading a part back is cells_part (record_json.h).
 */
#ifndef AGENTZ_STORE_H
#define AGENTZ_STORE_H

#include <stddef.h>

#include "supervisor/cells/cells.h"

/* Writes cell i's record to the spill file, unless the journal has it:
 * 0, or -1 (said once in the log; the record stays in memory). */
int cells_store(struct cells *h, size_t i);

#endif
