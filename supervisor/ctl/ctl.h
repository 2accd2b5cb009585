/*
 * ctl.h - the control socket of an agent run: the operator asks for the
 * run's status, leaves a note for the model, stops, pauses or resumes it,
 * or kills the running cell (README "Steering a run").
 *
 * Protocol: one request a line of text, "COMMAND [ARG]\n", at most
 * CTL_LINE_MAX bytes with its newline; one reply a line, a JSON object
 * with "ok" (true, or false and "error"). A line that is too long, not
 * UTF-8 text or not a command gets an error reply and the connection is
 * closed. Only the run's own uid and root may connect, never a process of
 * another PID namespace (the run's workers live in one) or one of the
 * supervisor's descendants.
 *
 * The server lives on the run's event loop: every socket is non-blocking,
 * a client's input is held within CTL_LINE_MAX and its unread replies
 * within CTL_OUT_MAX (a client that does not read is dropped), and at most
 * CTL_CONNS clients are connected at once, so no client can stall the run.
 */
#ifndef AGENTZ_CTL_H
#define AGENTZ_CTL_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

#include "supervisor/loop/loop.h"

#define CTL_LINE_MAX	4096		/* a request, its newline included */
#define CTL_OUT_MAX	(64 * 1024)	/* unread replies of one client */
#define CTL_CONNS	8		/* clients connected at once */
#define CTL_IDLE_MS	30000		/* a client silent this long is closed */

/* --- the request line (ctlline.c) ---------------------------------------- */

enum ctl_cmd {
	CTL_STATUS, CTL_NOTE, CTL_STOP, CTL_STOP_NOW, CTL_PAUSE, CTL_RESUME,
	CTL_KILL_CELL, CTL_BUDGETS, CTL_ALLOW, CTL_DENY, CTL_NETWORK,
	CTL_APPROVE, CTL_REJECT
};

struct ctl_req {
	enum ctl_cmd cmd;
	/* CTL_NOTE: the text; CTL_ALLOW, CTL_DENY: the entry; CTL_APPROVE:
	 * "[--always] ID"; CTL_REJECT: "ID"; CTL_BUDGETS:
	 * the options, maybe none (arg points into the line, arg_len 0);
	 * else NULL */
	const char *arg;
	size_t arg_len;
};

/*
 * Parses one request line of n bytes (its newline, and a '\r' before it,
 * already cut off). 0, or -1 with what is wrong in err (naming the
 * offending value, printable).
 */
int ctl_parse(const char *line, size_t n, struct ctl_req *q, char *err,
    size_t errlen);
/* "status", "note", "stop", "stop --now", ... */
const char *ctl_cmd_name(enum ctl_cmd cmd);

/* --- where the socket lives (ctlpath.c) ------------------------------------ */

/*
 * The run's name: $AGENTZ_RUN (the systemd unit sets its instance name),
 * else the journal's file name without its extension, else "agentz-PID".
 * malloc'ed, NULL on ENOMEM.
 */
char *ctl_run_name(const char *journal);
/*
 * The folder for the run's socket, made when it is ours to make:
 * $RUNTIME_DIRECTORY, else /run/agentz (root), else $XDG_RUNTIME_DIR/agentz,
 * else the journal's folder. *dedicated is 1 for a folder that holds only
 * control sockets (the worker's view masks it whole). malloc'ed, or NULL
 * with errno (ENOENT: no folder fits).
 */
char *ctl_socket_dir(const char *journal, int *dedicated);
/*
 * The folders `agentz runs` and `agentz ctl NAME` search, in order:
 * $RUNTIME_DIRECTORY, /run/agentz, $XDG_RUNTIME_DIR/agentz (those set).
 * Fills dirs (each malloc'ed), returns how many (at most 3).
 */
size_t ctl_search_dirs(char *dirs[3]);

/* --- who may connect (ctlpeer.c) -------------------------------------------- */

struct ucred;

/*
 * NULL when the peer u (SO_PEERCRED) may talk to the run whose workers'
 * PID namespace is the one of jail_pid (0: no jail), else why not, in buf.
 */
const char *ctl_peer_refusal(pid_t jail_pid, const struct ucred *u,
    char *buf, size_t n);

/* --- the server (ctl.c) ---------------------------------------------------- */

struct ctl;

/*
 * One request: fills a reply (malloc'ed, a JSON object on one line, no
 * newline) or returns NULL when out of memory (the client gets an error).
 */
typedef char *ctl_handle_fn(void *ctx, const struct ctl_req *q);

/*
 * Listens on path (mode 0600; a stale socket there is replaced, a live
 * one or anything else is EADDRINUSE/EEXIST). NULL with errno.
 */
struct ctl *ctl_new(struct loop *l, const char *path, ctl_handle_fn *fn,
    void *ctx);
/* The run's worker PID namespace is the one of init_pid (jail.h). */
void ctl_set_jail(struct ctl *c, pid_t init_pid);
/* The same, asked of fn(ctx) at each connection: the run's namespaces
 * may be rebuilt (a new init) while it lives. */
void ctl_set_jail_fn(struct ctl *c, pid_t (*fn)(const void *ctx),
    const void *ctx);
/* Closes every connection and unlinks the socket (if still ours). NULL ok. */
void ctl_free(struct ctl *c);

/* sa for the socket at path. 0, or -1 with ENAMETOOLONG. */
int ctl_sockaddr(const char *path, struct sockaddr_un *sa);

#endif
