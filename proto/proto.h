/*
 * proto.h - the control channel between agentz (supervisor) and
 * agentz-worker.
 *
 * A frame is an 8-byte big-endian header { u32 body_len, u16 type,
 * u16 zero } followed by body_len bytes of msgpack: one array holding the
 * message's fields in the fixed order given below. Decoding is strict: the
 * header size is checked against the limit before any buffer grows, every
 * field must have exactly its wire type (str or bin or uint), the array must
 * have exactly the listed count, and nothing may follow it. Any violation is
 * a clean -1 with errno set, never a crash.
 *
 * This module never logs and never exits (it is fuzzed).
 */
#ifndef AGENTZ_PROTO_H
#define AGENTZ_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"

#define PROTO_VERSION		1
#define PROTO_HEADER_SIZE	8
#define PROTO_MAX_FRAME_DEFAULT ((size_t)64 << 20)	/* body bytes */

/* Direction flags for the dispatch tables. */
#define MSG_W2S 1	/* worker -> supervisor */
#define MSG_S2W 2	/* supervisor -> worker */

/*
 * X(NAME, wire number, direction).  Field order on the wire:
 *  READY    [version:uint, pid:uint, python_version:str, sandbox:str]
 *  EXEC     [cell:uint, code:bin]
 *  DONE     [cell:uint, status:uint, exception_type:str, traceback:str]
 *  REQUEST  [id:uint, cell:uint, method:str, body:bin]
 *  REPLY    [id:uint, status:uint, body:bin]
 *  EVENT    [id:uint, body:bin]
 *  SHUTDOWN []
 *  SNAP     [cell:uint]
 *  SNAPPED  [cell:uint, pid:uint, threads:str, error:str]
 *  PIPES    []
 *
 * PIPES (between cells): the worker takes the output pipes waiting on
 * WORKER_OUT_FD now, before anything after it (struct outpipes_msg); the
 * supervisor sends it after a DONE when the cell may have left a process
 * holding the old ones.
 *
 * SNAP (between cells, before the EXEC of `cell`): the worker forks a
 * frozen copy of itself, the snapshot, which waits on WORKER_SPARE_FD to
 * be promoted should the cell be killed (struct promote_msg). SNAPPED
 * answers it: pid is the snapshot's pid as the worker sees it, 0 when
 * none was made (error says why); threads names the worker's other
 * threads alive at the fork, comma-separated: the snapshot has none of
 * them.
 */
#define MSG_LIST(X)				\
	X(READY,	1, MSG_W2S)		\
	X(EXEC,		2, MSG_S2W)		\
	X(DONE,		3, MSG_W2S)		\
	X(REQUEST,	4, MSG_W2S)		\
	X(REPLY,	5, MSG_S2W)		\
	X(EVENT,	6, MSG_S2W)		\
	X(SHUTDOWN,	7, MSG_S2W)		\
	X(SNAP,		8, MSG_S2W)		\
	X(SNAPPED,	9, MSG_W2S)		\
	X(PIPES,	10, MSG_S2W)

enum msg_type {
#define X(name, num, dir) MSG_##name = num,
	MSG_LIST(X)
#undef X
};

/*
 * The worker's fd layout: 0 /dev/null, 1-2 output pipes, 3 the control
 * channel, 4 the write end of the stack-dump pipe (5 and 6: below). The
 * supervisor sends SIGRTMIN + WORKER_DUMP_SIGNAL_OFFSET before a kill; the
 * worker's faulthandler then writes every thread's stack to fd 4 (from the
 * signal handler, so it works while a thread sits in C code). The
 * supervisor takes the channel's bytes only from the worker process itself
 * (SO_PASSCRED: a copy of the worker holding fd 3 cannot speak for it).
 */
#define WORKER_CHAN_FD 3
#define WORKER_DUMP_FD 4
#define WORKER_DUMP_SIGNAL_OFFSET 3

/*
 * fd 5: the spare socket (AF_UNIX, SOCK_SEQPACKET; absent = no
 * snapshots). Only a snapshot reads it; nobody writes it from the
 * worker's side. To promote a snapshot the supervisor sends one datagram:
 * struct promote_msg, with SCM_RIGHTS carrying exactly PROMOTE_NFDS
 * descriptors in this order: the new control channel, stdout pipe,
 * stderr pipe, dump pipe and spare socket (placed at 3, 1, 2, 4, 5).
 * The promoted snapshot then sends READY on the new channel and is the
 * worker. EOF on the spare socket ends a waiting snapshot. REQUEST ids
 * carry the worker's generation in their high 32 bits (--generation N at
 * start, promote_msg.generation after a promotion).
 */
#define WORKER_SPARE_FD 5
#define PROMOTE_MAGIC 0x415a5052u	/* "AZPR" */
#define PROMOTE_NFDS 5

struct promote_msg {
	uint32_t magic;
	uint32_t generation;
};

/*
 * fd 6: the output socket (AF_UNIX, SOCK_SEQPACKET; absent = every cell
 * writes into the pipes the worker started with). Each datagram the
 * supervisor sends on it is struct outpipes_msg with SCM_RIGHTS carrying
 * exactly OUTPIPES_NFDS descriptors: the write ends of a fresh stdout and
 * stderr pipe. The supervisor keeps one such datagram waiting. At a DONE
 * it reads the cell's pipes (what they hold then); when a process other
 * than the worker (and its spawner) may hold them - one is in the
 * worker's cgroup, or there is no cgroup to tell - it closes them and
 * sends PIPES, on which the worker takes the datagram and places its
 * pipes at 1 and 2: the next cell (and the time before it) writes into
 * pipes no earlier cell's process holds, and what the cell left running
 * writes into a closed pipe (EPIPE, SIGPIPE). Otherwise the pipes stay:
 * only the worker holds them (two pipes less to make, send and install a
 * cell: ~30 us of a cell's round trip). The waiting datagram and this
 * socket outlive a worker killed in a cell, so a promoted snapshot
 * (which shares the socket) takes the same datagram at its first PIPES.
 */
#define WORKER_OUT_FD 6
#define OUTPIPES_MAGIC 0x415a4f50u	/* "AZOP" */
#define OUTPIPES_NFDS 2

struct outpipes_msg {
	uint32_t magic;
};

/* DONE.status, on the wire. */
enum done_status {
	DONE_OK = 0,		/* ran to the end */
	DONE_ERROR = 1,		/* raised an exception */
	DONE_INTERRUPTED = 2,	/* KeyboardInterrupt or SystemExit */
	DONE_EXITED = 3,	/* AgentQuit: the run ends normally */
	DONE_STATUS_MAX = 3
};

/* REPLY.status: body is the result (OK) or a JSON error object. */
enum reply_status {
	REPLY_OK = 0,
	REPLY_ERROR = 1,
	REPLY_STATUS_MAX = 1
};

/*
 * A byte string owned by the message. ptr is always NUL-terminated (one
 * extra byte, not counted in len) so text fields can be printed, but len is
 * authoritative: bin fields may hold NUL bytes. An empty field has len 0 and
 * a valid ptr to "" after decoding; when encoding, ptr may be NULL if len is 0.
 */
struct bytes {
	char *ptr;
	size_t len;
};

struct msg_ready {
	uint32_t version;
	uint32_t pid;
	struct bytes python_version;
	struct bytes sandbox;	/* e.g. "seccomp=default,nnp" */
};

struct msg_exec {
	uint32_t cell;
	struct bytes code;
};

struct msg_done {
	uint32_t cell;
	uint32_t status;	/* enum done_status */
	struct bytes exception_type;
	struct bytes traceback;
};

struct msg_request {
	uint64_t id;
	uint32_t cell;
	struct bytes method;	/* e.g. "input", "call_me" */
	struct bytes body;	/* method-defined, usually JSON text */
};

struct msg_reply {
	uint64_t id;
	uint32_t status;	/* enum reply_status */
	struct bytes body;
};

struct msg_event {
	uint64_t id;
	struct bytes body;
};

struct msg_snap {
	uint32_t cell;
};

struct msg_snapped {
	uint32_t cell;
	uint32_t pid;		/* 0: no snapshot (error says why) */
	struct bytes threads;	/* comma-separated thread names */
	struct bytes error;
};

struct msg {
	enum msg_type type;
	union {
		struct msg_ready ready;
		struct msg_exec exec;
		struct msg_done done;
		struct msg_request request;
		struct msg_reply reply;
		struct msg_event event;
		struct msg_snap snap;
		struct msg_snapped snapped;
	} u;
};

/* "READY", "EXEC", ...; "?" for a number not in MSG_LIST. */
const char *msg_name(unsigned type);
/* MSG_W2S / MSG_S2W for a known type, 0 for an unknown one. */
int msg_direction(unsigned type);

/* Frees the byte strings a decoded message owns. Accepts a zeroed msg. */
void msg_clear(struct msg *m);

/*
 * Appends one complete frame (header + body) for m to out.
 * Returns 0, or -1 with errno EINVAL (bad type or status) / ENOMEM /
 * EMSGSIZE (body larger than max_frame).
 */
int msg_encode(const struct msg *m, struct buf *out, size_t max_frame);

/*
 * Decodes one frame body of the given wire type into m (which the caller
 * then owns and must msg_clear). Returns 0, or -1 with errno:
 *  EPROTO   unknown type
 *  EBADMSG  malformed msgpack, wrong field type/count, trailing bytes,
 *           out-of-range status, or a uint too large for its field
 *  ENOMEM   allocation failure
 * On failure m is left cleared.
 */
int msg_decode(unsigned type, const void *body, size_t len, struct msg *m);

/*
 * Incremental frame reader for a non-blocking fd (supervisor side).
 */
struct frame_rx {
	struct buf in;		/* its read position: the bytes popped */
	size_t max_frame;
	size_t skip;		/* bytes of a skipped frame still to come */
};

void frame_rx_init(struct frame_rx *rx, size_t max_frame);
void frame_rx_clear(struct frame_rx *rx);
/*
 * One read(2) from fd into rx (at most 64 KiB per call, so the caller's
 * loop stays fair). Returns bytes read (> 0), 0 on EOF, -1 with errno
 * (EAGAIN/EINTR passed through).
 */
ssize_t frame_rx_fill(struct frame_rx *rx, int fd);
/*
 * frame_rx_fill through recvmsg(2) on a unix socket with SO_PASSCRED:
 * *sender gets the pid (in our PID namespace) of the process that wrote
 * the bytes read, 0 when the kernel attached none. One call returns one
 * writer's bytes only (the kernel does not join writes of processes with
 * different credentials); descriptors sent along are closed.
 */
ssize_t frame_rx_fill_cred(struct frame_rx *rx, int fd, pid_t *sender);
/* Appends bytes already read by the caller (tests, fuzzers). 0 / -1 ENOMEM. */
int frame_rx_feed(struct frame_rx *rx, const void *p, size_t n);
/*
 * Pops the next complete frame. Returns 1 with m filled (caller msg_clears),
 * 0 when more bytes are needed, -1 with errno: EMSGSIZE (header announces
 * more than max_frame), EPROTO (unknown type or non-zero reserved field),
 * EBADMSG / ENOMEM as msg_decode. After -1 the stream is unusable.
 */
int frame_rx_pop(struct frame_rx *rx, struct msg *m);

/*
 * The next frame's header once it is buffered: 1 with *type and *len (the
 * body length; *have gets the body bytes buffered so far, and *body
 * points at them), 0 when more bytes are needed, -1 with errno as
 * frame_rx_pop for a bad header. Nothing is consumed.
 */
int frame_rx_peek(const struct frame_rx *rx, unsigned *type, size_t *len,
    const uint8_t **body, size_t *have);
/*
 * Drops the next frame (its header must have been peeked): the bytes
 * buffered now, and the rest of its body as later frame_rx_fill calls
 * read it, so a refused frame never occupies memory.
 */
void frame_rx_skip(struct frame_rx *rx);

/*
 * The fixed fields of a REQUEST from the first bytes of its body: id,
 * cell and method (a malloc'ed copy the caller frees with msg_clear),
 * and the body's length (body.len; body.ptr NULL). 1 when decoded, 0 when more bytes are needed, -1
 * with EBADMSG / ENOMEM. For refusing a request by its method and size
 * before its body is buffered.
 */
int msg_request_head(const uint8_t *p, size_t have, struct msg *m);

/*
 * Blocking helpers (worker side; fd may be blocking).
 * frame_write: writes the whole frame, retrying on EINTR and short writes.
 *   0 or -1 with errno (from write, or msg_encode's).
 * frame_read: reads exactly one frame. 1 with m filled, 0 on clean EOF
 *   before any header byte, -1 with errno (EPIPE-like errors from read,
 *   ECONNRESET for EOF inside a frame, and msg_decode / frame_rx_pop's).
 */
int frame_write(int fd, const struct msg *m, size_t max_frame);
int frame_read(int fd, struct msg *m, size_t max_frame);

#endif
