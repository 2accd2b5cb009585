/*
 * agent.h - `agentz "task"`: the run where the model writes the loop.
 * Cell 0 asks the model for the first cell; every next cell is the code
 * the model submitted with set_next_cell_code from inside the current
 * one; a failed cell is followed by a repair cell (SPEC §6).
 */
#ifndef AGENTZ_AGENT_H
#define AGENTZ_AGENT_H

/* Returns the process exit status (config.h EXIT_*). */
int agent_main(int argc, char **argv);

#endif
