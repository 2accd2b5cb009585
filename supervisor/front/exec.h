/*
 * exec.h - `agentz exec`: a supervised, persistent Python interpreter
 * without a model. Each FILE is one cell in one worker ("-" reads cells
 * from stdin, separated by lines "# %%").
 */
#ifndef AGENTZ_EXEC_H
#define AGENTZ_EXEC_H

/* Returns the process exit status (EXIT_*, common/exitcodes.h). */
int exec_main(int argc, char **argv);

#endif
