"""Plays the supervisor against the real build/agentz-worker, with no
agentz involved: proto/proto.h's framing (8-byte header + msgpack array,
the few msgpack types it uses encoded here by hand), the worker's fds
placed as agentz places them (3 channel, 1-2 output pipes, 4 dump pipe, 5
spare SOCK_SEQPACKET socket), its capabilities dropped as agentz drops
them, and the promotion of a snapshot (struct promote_msg + SCM_RIGHTS).
"""
import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import time

from agentz_util import WORKER

READY, EXEC, DONE, REQUEST, REPLY, EVENT, SHUTDOWN, SNAP, SNAPPED, PIPES = range(1, 11)
PROMOTE_MAGIC = 0x415A5052
WEXIT_PROTOCOL = 66
TIMEOUT = 30
LIBC = ctypes.CDLL(None, use_errno=True)

# --- msgpack, the few types the protocol uses --------------------------------


def pack(v):
    if isinstance(v, int):
        for lim, head, fmt in ((0x80, b"", "B"), (1 << 8, b"\xcc", "B"),
                               (1 << 16, b"\xcd", ">H"), (1 << 32, b"\xce", ">I")):
            if v < lim:
                return head + struct.pack(fmt, v)
        return b"\xcf" + struct.pack(">Q", v)
    if isinstance(v, str):
        b = v.encode()
        n = len(b)
        if n < 32:
            return bytes([0xA0 | n]) + b
        return (b"\xd9" + struct.pack("B", n) if n < 256 else
                b"\xda" + struct.pack(">H", n) if n < 65536 else
                b"\xdb" + struct.pack(">I", n)) + b
    if isinstance(v, bytes):
        n = len(v)
        return (b"\xc4" + struct.pack("B", n) if n < 256 else
                b"\xc5" + struct.pack(">H", n) if n < 65536 else
                b"\xc6" + struct.pack(">I", n)) + v
    assert len(v) < 16
    return bytes([0x90 | len(v)]) + b"".join(pack(x) for x in v)


def unpack(b, i=0):
    t = b[i]
    if t < 0x80:
        return t, i + 1
    if 0x90 <= t <= 0x9F:
        out, i = [], i + 1
        for _ in range(t & 15):
            x, i = unpack(b, i)
            out.append(x)
        return out, i
    if 0xA0 <= t <= 0xBF:
        n = t & 31
        return b[i + 1:i + 1 + n].decode(), i + 1 + n
    sizes = {0xcc: ("B", 1), 0xcd: (">H", 2), 0xce: (">I", 4), 0xcf: (">Q", 8),
             0xd9: ("B", 1), 0xda: (">H", 2), 0xdb: (">I", 4),
             0xc4: ("B", 1), 0xc5: (">H", 2), 0xc6: (">I", 4)}
    fmt, k = sizes[t]
    (n,) = struct.unpack_from(fmt, b, i + 1)
    if 0xcc <= t <= 0xcf:
        return n, i + 1 + k
    s = b[i + 1 + k:i + 1 + k + n]
    return (s.decode() if t >= 0xd9 else s), i + 1 + k + n


def frame(mtype, fields):
    """One frame: the 8-byte header and the msgpack array."""
    body = pack(fields)
    return struct.pack(">IHH", len(body), mtype, 0) + body


# --- the worker, its descriptors and the frames ------------------------------


def _high(fd):
    """fd moved above the worker's layout (and closed at its old number)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 20)
    os.close(fd)
    return new


class Ends:
    """One worker's descriptors: ours, and the ones it gets at 3, 1, 2, 4, 5."""

    def __init__(self, spare=True):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.chan = ours
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.dump_r, dump_w = os.pipe()
        for fd in (self.out_r, self.err_r):
            os.set_blocking(fd, False)
        self.spare = None
        spare_w = None
        if spare:
            self.spare, sw = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            spare_w = _high(sw.detach())
        # order of proto.h's promotion: channel, stdout, stderr, dump, spare
        self.theirs = [_high(theirs.detach()), _high(out_w), _high(err_w),
                       _high(dump_w), spare_w]

    def close_theirs(self):
        for fd in self.theirs:
            if fd is not None:
                os.close(fd)
        self.theirs = []


def _drop_caps_and_place(theirs):
    def child():
        for fd, to in zip(theirs, (3, 1, 2, 4, 5)):
            if fd is not None:
                os.dup2(fd, to)
        for cap in range(64):  # as agentz does before exec
            LIBC.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    return child


def _stacks(pid):
    """Every thread's C stack of a silent worker (by gdb where there is
    one), for the failure message: a hang says where it waits."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    try:
        r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx",
                            "-ex", "thread apply all bt 30"],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "; gdb timed out"
    return "; its threads:\n" + r.stdout[-12000:]


class Worker:
    def __init__(self, ends, pid, proc=None):
        self.ends, self.pid, self.proc = ends, pid, proc
        self.pidfd = os.pidfd_open(pid)
        self.requests = []
        self.answer = lambda m: (REPLY, [m[0], 0, b"ok"])

    @classmethod
    def start(cls, *args, spare=True):
        ends = Ends(spare)
        proc = subprocess.Popen([WORKER, *args], stdin=subprocess.DEVNULL,
                                close_fds=False,
                                preexec_fn=_drop_caps_and_place(ends.theirs))
        ends.close_theirs()
        w = cls(ends, proc.pid, proc)
        w.ready = w.expect(READY)
        assert w.ready[1] == proc.pid
        return w

    def send(self, mtype, fields):
        self.ends.chan.sendall(frame(mtype, fields))

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            r, _, _ = select.select([self.ends.chan], [], [], TIMEOUT)
            assert r, "the worker said nothing for %d s%s" % (
                TIMEOUT, _stacks(self.pid))
            chunk = self.ends.chan.recv(n - len(buf))
            assert chunk, "channel closed"
            buf += chunk
        return buf

    def recv(self):
        n, mtype, zero = struct.unpack(">IHH", self._read(8))
        assert zero == 0
        fields, end = unpack(self._read(n))
        assert end == n
        return mtype, fields

    def expect(self, want):
        """Frames until one of type want; REQUESTs are answered meanwhile."""
        while True:
            mtype, m = self.recv()
            if mtype == want:
                return m
            self.handle(mtype, m)

    def handle(self, mtype, m):
        assert mtype == REQUEST, (mtype, m)
        if m[2] == "runtime_info":  # the first cell's
            self.send(REPLY, [m[0], 0, b"{}"])
            return
        self.requests.append(m)
        reply = self.answer(m)
        if reply is not None:
            self.send(*reply)

    def output(self):
        out = b""
        try:
            while True:
                chunk = os.read(self.ends.out_r, 65536)
                if not chunk:
                    break
                out += chunk
        except BlockingIOError:
            pass
        return out.decode()

    def run(self, cell, code):
        """EXEC and its DONE: (status, exception_type, traceback, stdout)."""
        self.send(EXEC, [cell, code.encode()])
        done = self.expect(DONE)
        assert done[0] == cell
        return done[1], done[2], done[3], self.output()

    def start_cell(self, cell, code, mark="started"):
        """EXEC of a cell that does not end; returns once it printed mark."""
        self.send(EXEC, [cell, code.encode()])
        buf = b""
        deadline = time.monotonic() + TIMEOUT
        while mark.encode() not in buf:
            r, _, _ = select.select([self.ends.out_r, self.ends.chan], [], [],
                                    max(0, deadline - time.monotonic()))
            assert r, "the cell never printed %r" % mark
            if self.ends.chan in r:
                self.handle(*self.recv())
            if self.ends.out_r in r:
                buf += os.read(self.ends.out_r, 65536)

    def snap(self, cell):
        self.send(SNAP, [cell])
        got = self.expect(SNAPPED)
        assert got[0] == cell
        return got  # [cell, pid, threads, error]

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        assert dead(self.pidfd, TIMEOUT)

    def close(self):
        if not dead(self.pidfd, 0):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            assert dead(self.pidfd, TIMEOUT)
        if self.proc is not None:
            self.proc.wait()
        os.close(self.pidfd)
        self.ends.chan.close()
        if self.ends.spare is not None:
            self.ends.spare.close()
        for fd in (self.ends.out_r, self.ends.err_r, self.ends.dump_r):
            os.close(fd)


def read_until(fd, want):
    """Reads fd (non-blocking) until want came; False if it never does."""
    os.set_blocking(fd, False)
    buf = b""
    while want not in buf:
        r, _, _ = select.select([fd], [], [], TIMEOUT)
        if not r:
            return False
        chunk = os.read(fd, 65536)
        if not chunk:
            return False
        buf += chunk
    return True


def at_eof(fd):
    """Reads fd (non-blocking) until EOF; False if it stays open."""
    os.set_blocking(fd, False)
    while True:
        r, _, _ = select.select([fd], [], [], TIMEOUT)
        if not r:
            return False
        try:
            if not os.read(fd, 65536):
                return True
        except BlockingIOError:
            pass


def dead(pidfd, timeout):
    r, _, _ = select.select([pidfd], [], [], timeout)
    return bool(r)


def promote(old, snap_pid, generation, payload=None, nfds=5):
    """Sends the promotion over old's spare socket; the promoted Worker (or
    None when a READY is not expected)."""
    ends = Ends()
    payload = payload or struct.pack("=II", PROMOTE_MAGIC, generation)
    pidfd = os.pidfd_open(snap_pid)
    try:
        socket.send_fds(old.ends.spare, [payload], ends.theirs[:nfds])
    except OSError:
        pass  # nobody holds the other end any more: the snapshot is gone
    ends.close_theirs()
    os.close(pidfd)
    return Worker(ends, snap_pid)


def exit_code(pid, pidfd):
    """The exit code of a dead, unreaped process that is not our child."""
    assert dead(pidfd, TIMEOUT)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    assert fields[0] == "Z"
    return int(fields[49]) >> 8  # field 52: exit_code, a wait status
