/*
 * exitcodes.h - the exit statuses of agentz (the supervisor process), as
 * README.md's "Running an agent" lists them; every command (agent runs,
 * exec, ctl, report) ends with one.
 */
#ifndef AGENTZ_EXITCODES_H
#define AGENTZ_EXITCODES_H

#define EXIT_OK		0
#define EXIT_FAILED	1	/* a cell failed / the run stopped on errors */
#define EXIT_USAGE	2
#define EXIT_WORKER	3	/* the worker cannot be started */
#define EXIT_BUDGET	4	/* a hard stop: cells, deadline, tokens, cost,
				 * repeats */
#define EXIT_JOURNAL	5	/* the journal cannot be written: disk full,
				 * read-only */
#define EXIT_OPERATOR	6	/* the operator stopped the run (agentz ctl) */
#define EXIT_SIGINT	130

#endif
