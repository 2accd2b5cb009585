/*
 * exitcodes.h - the exit statuses of agentz (the supervisor process), as
 * README.md's "Exit codes" lists them; every command (agent runs,
 * exec, ctl, report) ends with one.
 */
#ifndef AGENTZ_EXITCODES_H
#define AGENTZ_EXITCODES_H

enum exit_code {
	EXIT_OK = 0,
	EXIT_FAILED = 1,	/* a cell failed / the run stopped on errors */
	EXIT_USAGE = 2,
	EXIT_WORKER = 3,	/* the worker cannot be started */
	EXIT_BUDGET = 4,	/* a hard stop: cells, deadline, tokens, cost,
				 * repeats */
	EXIT_JOURNAL = 5,	/* the journal cannot be written: disk full,
				 * read-only */
	EXIT_OPERATOR = 6,	/* the operator stopped the run (agentz ctl) */
	EXIT_SIGINT = 130
};

#endif
