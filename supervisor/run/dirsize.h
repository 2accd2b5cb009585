/*
 * dirsize.h - what a folder's tree takes on disk, measured a slice at a
 * time (the supervisor's event loop walks on between its other work).
 *
 * The walk opens folders only (O_NOFOLLOW: a symlink is counted, never
 * followed), stays on the root's filesystem (what is mounted inside is
 * neither counted nor walked into) and counts what each entry holds on
 * disk (st_blocks), a file with n hard links 1/n at each: a tree whose
 * links are all inside it is counted once. The tree may change under the
 * walk; what it reports is what the entries held as they were read.
 *
 * Functions return -1 with errno and never log.
 */
#ifndef AGENTZ_DIRSIZE_H
#define AGENTZ_DIRSIZE_H

#include <stddef.h>
#include <stdint.h>

struct dirsize;

/*
 * A walk of the tree at root (a folder, which it opens: ENOTDIR, EACCES,
 * ... else), at most max_depth folders deep (each level holds one open
 * descriptor while its entries are read). With DIRSIZE_READABLE a folder
 * below root that cannot be opened for want of its owner's read and
 * search bits gets them back (fchmodat, the walker being its owner), so
 * that what is in it is counted. NULL with errno.
 */
#define DIRSIZE_READABLE 1
struct dirsize *dirsize_start(const char *root, unsigned max_depth,
    int flags);
/*
 * Walks on over at most n entries: 1 when the walk is done (the totals
 * are final), 0 when there is more, -1 with errno when it cannot go on:
 * ELOOP (a folder deeper than max_depth), EACCES or another error of a
 * folder that exists and cannot be opened or read (dirsize_where names
 * it). An entry gone before it was read is not an error.
 */
int dirsize_step(struct dirsize *d, unsigned n);
/* Bytes on disk counted so far (the root's own included). */
uint64_t dirsize_bytes(const struct dirsize *d);
/* The entry the walk failed at (its name, relative to its folder), or
 * "" when none. */
const char *dirsize_where(const struct dirsize *d);
/* Accepts NULL. */
void dirsize_free(struct dirsize *d);

#endif
