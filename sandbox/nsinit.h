/*
 * nsinit.h - PID 1 of the jail and what the supervisor and it say to each
 * other (internal to sandbox/; jail.c is the other side).
 *
 * The init reports once when its view is built (struct init_status),
 * waits for one byte "g" (the supervisor has opened its namespaces),
 * then serves requests on the same SOCK_SEQPACKET socket: one struct
 * init_req per message, one struct init_reply per answer. seq pairs them:
 * an answer that comes after its caller gave up is skipped by the next
 * caller, never taken for its own.
 */
#ifndef AGENTZ_SANDBOX_NSINIT_H
#define AGENTZ_SANDBOX_NSINIT_H

#include <stdint.h>

#include "sandbox/jail.h"

struct plan;

/* What the init reports when the view is up, or which op failed. */
struct init_status {
	int op;			/* an op's index, an enum view_step, or
				 * INIT_STEP_NET */
	int err;
};

/* The failed step was the network (joining it, or lo up). */
#define INIT_STEP_NET (-16)

/* The init's network, nsinit_main's net: the supervisor's; a namespace
 * the clone made, whose lo the init brings up; or (any descriptor >= 0)
 * one made in a user namespace of its own (idmap_userns or net_ns_new),
 * which the init joins. */
#define INIT_NET_HOST (-2)
#define INIT_NET_CLONED (-3)

enum init_op { INIT_KILL = 1, INIT_EXIT = 2 };

struct init_req {
	int32_t op;		/* enum init_op */
	uint32_t seq;
	int32_t n;		/* INIT_KILL: how many pids are spared */
	int32_t pid[JAIL_MAX_SPARE];	/* the spared; INIT_EXIT: [0] */
};

struct init_reply {
	uint32_t seq;
	int32_t err;		/* 0, or ESRCH, EBUSY, EINVAL */
	int32_t status;		/* INIT_EXIT: as wait4 gave it */
	uint64_t cpu_us;
	int64_t maxrss_kb;
};

/*
 * The clone child's whole life, from right after clone (system calls
 * only): sets up its network (net: INIT_NET_*, or a descriptor to join),
 * builds the view of p, reports on cmd, waits for "g", then serves
 * requests until cmd hangs up, when it kills everything in its namespace
 * and exits.
 */
_Noreturn void nsinit_main(const struct plan *p, int net, int cmd);

#endif
