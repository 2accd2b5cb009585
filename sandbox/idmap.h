/*
 * idmap.h - the worker's uid as root, internal to sandbox/ (jail.c).
 */
#ifndef AGENTZ_IDMAP_H
#define AGENTZ_IDMAP_H

#include <sys/types.h>

/*
 * Takes a free uid slot for this run (0 .. JAIL_UID_SLOTS-1): an abstract
 * socket name "agentz-uid-N" held by *fd_out for the run (it goes with
 * us when we die). -1 with errno (EAGAIN: every slot is taken).
 */
int idmap_take_slot(int *fd_out);

/*
 * A user namespace mapping our (the invoking user's) ids to the
 * worker's: through an id-mapped bind, the worker's files land as ours.
 * Its ns/user descriptor, or -1 with errno. With netfd non-NULL, also a
 * network namespace owned by it, lo up (what net_ns_new makes), in
 * *netfd (ns/net).
 */
int idmap_userns(uid_t ours, gid_t ourg, uid_t theirs, gid_t theirg,
    int *netfd);

#endif
