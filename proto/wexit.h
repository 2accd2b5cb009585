/*
 * wexit.h - agentz-worker's exit codes: API between the two binaries,
 * apart from the protocol (a worker ends before or outside any frame).
 */
#ifndef AGENTZ_PROTO_WEXIT_H
#define AGENTZ_PROTO_WEXIT_H

/*
 * The supervisor classifies a worker death from this code or the signal
 * alone (SIGSYS = seccomp violation, SIGKILL = our kill or the OOM
 * killer).
 */
enum worker_exit {
	WEXIT_OK = 0,		/* SHUTDOWN received, or channel closed idle */
	WEXIT_USAGE = 64,	/* bad arguments or fd layout */
	WEXIT_CHANNEL = 65,	/* control channel closed or failed mid-run */
	WEXIT_PROTOCOL = 66,	/* the supervisor sent a malformed frame */
	WEXIT_PYINIT = 67,	/* CPython failed to initialise */
	WEXIT_SANDBOX = 68,	/* seccomp or rlimit set-up failed */
	WEXIT_EXEC = 127,	/* execve of agentz-worker failed (child side) */
	/* stopped by the debug SIGSYS handler (128 + SIGSYS, what a shell
	 * shows for a real SIGSYS death): a seccomp violation, like SIGSYS */
	WEXIT_SECCOMP = 159
};

#endif
