/*
 * net.h - the worker's network: a namespace of its own with only the
 * loopback interface, up (internal to sandbox/: jail.c and nsinit.c use
 * it; jail.h's struct jail_config says which network a run gets).
 */
#ifndef AGENTZ_SANDBOX_NET_H
#define AGENTZ_SANDBOX_NET_H

/*
 * Brings "lo" of our network namespace up (needs CAP_NET_ADMIN over
 * it); the kernel gives it 127.0.0.1 and ::1. SYSTEM CALLS ONLY: it runs
 * in the jail's init right after clone. 0, or -1 with errno.
 */
int net_lo_up(void);

/*
 * As root: a new network namespace, its lo up, owned by a user namespace
 * of its own whose holder had every capability there (so no CAP_NET_ADMIN
 * of ours is needed: a systemd unit or a container may not grant it).
 * Runs in the supervisor; the jail's init joins the namespace. An open
 * descriptor of it (ns/net), or -1 with errno.
 */
int net_ns_new(void);

/*
 * A TCP socket listening on 127.0.0.1:port inside the network namespace
 * netns (joined through the user namespace userns first when it is not
 * -1: a plain user may enter their own namespaces only that way), made
 * in a forked child that does system calls only and sends it back: a
 * socket keeps the namespace it was made in. The descriptor
 * (close-on-exec, non-blocking), or -1 with errno.
 */
int net_listen_in(int userns, int netns, unsigned short port);

#endif
