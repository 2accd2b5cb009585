/*
 * report.h - `agentz report JOURNAL [-o FILE]`: a run's journal as one
 * self-contained HTML page (the task, a timeline of cells, memory and CPU
 * per cell, tokens over time, each cell's code, output and traceback,
 * stops, operator notes, every other record and every unreadable line).
 */
#ifndef AGENTZ_REPORT_H
#define AGENTZ_REPORT_H

/*
 * argv[0] is "report". Returns the exit status: 0 the page was written
 * (unreadable lines are shown in it and named on stderr), 1 the journal
 * cannot be read or the page cannot be written, 2 a usage error.
 */
int report_main(int argc, char **argv);

#endif
