/*
 * pipes.h - the worker's output pipes, fresh after a cell that may have
 * left a process holding them: at the PIPES the supervisor sends after
 * such a cell's DONE, the worker takes the pipes the supervisor keeps
 * waiting on WORKER_OUT_FD and places them at 1 and 2 (proto.h), so a
 * process an earlier cell left running cannot write into a later cell's
 * output.
 */
#ifndef AGENTZ_WORKER_PIPES_H
#define AGENTZ_WORKER_PIPES_H

/* Notes whether fd 6 is the output socket (CLOEXEC then); without it
 * the pipes the worker started with serve every cell. Once, at start. */
void pipes_init(void);
/*
 * At a PIPES (main thread): the waiting pipes onto 1 and 2, the old
 * ones closed. Nothing waiting, or a datagram that is not the
 * supervisor's: the pipes stay as they are (its descriptors closed).
 */
void pipes_next(void);

#endif
