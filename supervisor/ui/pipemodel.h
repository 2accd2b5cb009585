/*
 * pipemodel.h - the model of a pipe's slots, for out.c's streams of whole
 * lines (out_lines): which writes a pipe nobody reads will take whole.
 */
#ifndef AGENTZ_PIPEMODEL_H
#define AGENTZ_PIPEMODEL_H

#include <stddef.h>

/*
 * Linux holds a pipe as F_GETPIPE_SZ / page size pages, not bytes, and a
 * write's remainder goes behind the last page only when it fits there, so
 * free bytes overstate the room. The model follows the pages of the bytes one writer wrote on
 * fd (a pipe it writes without O_DIRECT; NULL: not one, or no memory),
 * from the first time the pipe is seen empty on.
 *   look: FIONREAD says what the reader took; call it before fits.
 *   fits: a write of n bytes would be taken whole, and then a write of
 *         keep bytes too (0 no, -1 not known now: bytes not ours, or
 *         the pipe not yet seen empty).
 *   room: bytes that go in whole pages, keep's pages left.
 *   wrote: a write of n bytes took r (>0); -1 when that is not what the
 *         model said would happen: it is off from then on.
 *   used: slots used (the most of its layouts), UINT_MAX not known.
 */
struct pipe_model;
struct pipe_model *pipe_model_new(int fd);
void pipe_model_free(struct pipe_model *m);
int pipe_model_look(struct pipe_model *m);
int pipe_model_fits(const struct pipe_model *m, size_t n, size_t keep);
size_t pipe_model_room(const struct pipe_model *m, size_t keep);
int pipe_model_wrote(struct pipe_model *m, size_t n, size_t r);
unsigned pipe_model_used(const struct pipe_model *m);
unsigned pipe_model_slots(const struct pipe_model *m);
size_t pipe_model_page(const struct pipe_model *m);

#endif
