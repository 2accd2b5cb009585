"""The rollback cannot be forged (issue 20, item 4).

A cell's code runs in the worker, which holds the channel to the
supervisor: it can write a SNAPPED frame naming a child of its own choosing
(a "fake worker" that, promoted, answers every later cell with FORGED). The
snapshot must be born with no cell code run first (no at-fork hook around
its fork), the supervisor must take only the snapshot it asked for, and a
record may claim a rollback only when the real snapshot took over.

Every case, as root and as a plain user (test_rollback's run_as): the cell
after the killed one runs in a genuine worker (never FORGED: the namespace
rolled back, or a fresh one), no forged child is left alive, the
supervisor lives. Safe when broken: every forged child lives in the run's
jail, which dies with the run, and exits on the channel's EOF or SHUTDOWN.
"""
import pytest

from hostile_util import brief
from test_rollback import run_as  # noqa: F401 (a fixture)

# KILLED dies at its deadline (the ladder's kill is what spares the
# snapshot it was told of); 2 s leaves the other cells room on a loaded
# machine.
ARGS = ["--snapshot", "always", "--cell-timeout", "2", "--grace", "0.5"]

# The forged snapshot: waits on the spare socket (fd 5) as a snapshot does;
# promoted, it says READY and answers every EXEC with FORGED.
FAKE = r'''
import os, socket, struct, array
def _pk(v):
    if isinstance(v, int):
        if v < 0x80:
            return bytes([v])
        return b'\xce' + struct.pack('>I', v)
    b = v.encode()
    return bytes([0xa0 | len(b)]) + b
def _frame(t, fields):
    body = bytes([0x90 | len(fields)]) + b''.join(_pk(f) for f in fields)
    return struct.pack('>IHH', len(body), t, 0) + body
def _uint(b, i):
    t = b[i]
    if t < 0x80:
        return t
    n = {0xcc: 1, 0xcd: 2, 0xce: 4}[t]
    return int.from_bytes(b[i + 1:i + 1 + n], 'big')
def _fake_worker():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, b'forgedsnap', 0, 0, 0)  # PR_SET_NAME
        os.setsid()
        s = socket.socket(fileno=5)
        fds = array.array('i')
        msg, anc, flags, addr = s.recvmsg(16, socket.CMSG_SPACE(8 * 4))
        for level, typ, data in anc:
            fds.frombytes(data[:len(data) - len(data) % 4])
        chan, out = fds[0], fds[1]
        os.write(chan, _frame(1, [1, os.getpid(), '3.11.2', 'forged']))
        buf = b''
        while True:
            d = os.read(chan, 65536)
            if not d:
                break
            buf += d
            while len(buf) >= 8:
                n, t, _ = struct.unpack('>IHH', buf[:8])
                if len(buf) < 8 + n:
                    break
                body, buf = buf[8:8 + n], buf[8 + n:]
                if t == 2:        # EXEC: FORGED, DONE
                    os.write(out, b'FORGED\n')
                    os.write(chan, _frame(3, [_uint(body, 1), 0, '', '']))
                elif t == 8:      # SNAP: none
                    os.write(chan, _frame(9, [_uint(body, 1), 0, '',
                                              'forged']))
                elif t == 7:      # SHUTDOWN
                    break
    finally:
        os._exit(0)
'''

# The next cell: the namespace it finds, and the forged children alive.
CHECK = r'''
import os
alive = []
for p in os.listdir('/proc'):
    try:
        comm = open('/proc/%s/comm' % p).read().strip()
        st = open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        continue
    if comm == 'forgedsnap' and st != 'Z':
        alive.append(int(p))
print(globals().get('x'), 'y' in globals(), alive)
'''

KILLED = ("y = 2\nimport signal, time\n"
          "signal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)")

# An os.register_at_fork hook (before, or after_in_parent) forks the
# fake worker at the snapshot's fork and names it in a SNAPPED for cell 1.
HOOK = FAKE + r'''
x = 1
_fired = []
def _forge():
    if _fired:
        return
    _fired.append(1)
    pid = os.fork()
    if pid == 0:
        _fake_worker()
    os.write(3, _frame(9, [1, pid, '', '']))
os.register_at_fork(@WHO@=_forge)
'''

# A thread the cell leaves behind holds the import lock (the worker's fork
# waits for it), sees the worker's main thread wait for that lock (the SNAP
# for cell 1 came), and names
# in a SNAPPED a process of its choosing (a child it forked before the SNAP
# or after it, one whose parent thread ended so that it is the main
# thread's, the worker itself, the jail's init, a pid its namespace
# does not have - the worker's parent is outside it), before letting the
# worker's own fork go - or never (the worker gives up on the lock).
THREAD = FAKE + r'''
import _imp, ctypes, threading, time
x = 1
_LIBC_GIL = ctypes.PyDLL(None)
def _fork():
    pid = os.fork()
    if pid == 0:
        _fake_worker()
    return pid
def _raw_fork():
    # libc's fork, the GIL held (os.fork would wait for the import lock)
    pid = _LIBC_GIL.fork()
    if pid == 0:
        _fake_worker()
    return pid
def _orphan():
    # forked by a thread that then ends: the main thread's child now
    box = []
    th = threading.Thread(target=lambda: box.append(_raw_fork()))
    th.start()
    th.join()
    # the kernel hands the child over once the thread's task is gone
    task = '/proc/self/task/%d' % th.native_id
    end = time.monotonic() + 5
    while os.path.exists(task) and time.monotonic() < end:
        time.sleep(0.001)
    return box[0]
def _main_waits():
    # in futex (the lock, or the GIL) or nanosleep (waiting for the lock)
    try:
        with open('/proc/self/task/%d/syscall' % os.getpid()) as f:
            return f.read().split()[0] in ('202', '230')
    except (OSError, IndexError):
        return False
def _attack(who):
    pid = _fork() if who == 'before' else 0
    _imp.acquire_lock()
    waiting = 0                   # the main thread waits for the lock:
    while waiting < 5:            # it got the SNAP for cell 1
        time.sleep(0.001)
        waiting = waiting + 1 if _main_waits() else 0
    pid = {'before': pid, 'after': _fork() if who == 'after' else 0,
           'orphan': _orphan() if who.startswith('orphan') else 0,
           'self': os.getpid(), 'init': 1, 'other': 4194000}[
               'orphan' if who.startswith('orphan') else who]
    os.write(3, _frame(9, [1, pid, '', '']))
    if who == 'orphan_for_good':
        return                    # the lock stays held: no fork ever
    time.sleep(0.3)
    _imp.release_lock()
threading.Thread(target=_attack, args=('@WHO@',), daemon=True).start()
'''

# A thread that writes SNAPPED frames at random moments, each naming a
# fresh child of its own, across the cells that follow.
RANDOM = FAKE + r'''
import random, threading, time
x = 1
def _spray():
    time.sleep(0.3)       # after this cell's DONE
    for i in range(60):
        time.sleep(random.random() * 0.05)
        pid = os.fork()
        if pid == 0:
            _fake_worker()
        os.write(3, _frame(9, [1 + i % 2, pid, '', '']))
threading.Thread(target=_spray, daemon=True).start()
'''

ATTACKS = {
    "at_fork_before": HOOK.replace("@WHO@", "before"),
    "at_fork_after_in_parent": HOOK.replace("@WHO@", "after_in_parent"),
    "thread_child_from_before_the_snap": THREAD.replace("@WHO@", "before"),
    "thread_child_born_at_the_snap": THREAD.replace("@WHO@", "after"),
    "thread_child_orphaned_to_the_main_thread":
        THREAD.replace("@WHO@", "orphan"),
    "thread_child_orphaned_and_the_import_lock_held_for_good":
        THREAD.replace("@WHO@", "orphan_for_good"),
    "thread_names_the_worker": THREAD.replace("@WHO@", "self"),
    "thread_names_the_jail_init": THREAD.replace("@WHO@", "init"),
    "thread_names_a_pid_of_another_namespace":
        THREAD.replace("@WHO@", "other"),
    "random_moments": RANDOM,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_forged_snapshot_never_takes_over(run_as, attack):  # noqa: F811
    r = run_as([ATTACKS[attack], KILLED, CHECK, CHECK], args=ARGS,
               timeout=120)
    a, b, c, d = r.recs
    assert a["status"] == "ok", brief(a)
    assert b["status"] == "error", brief(b)
    for rec in (c, d):
        assert rec["status"] == "ok", brief(rec)
        assert "FORGED" not in rec["output"], (attack, brief(b), brief(rec))
    x, y, alive = c["output"].split(" ", 2)
    # no forged child outlived the kill of the cell's tree
    assert alive == "[]\n", (attack, brief(c))
    if attack == "random_moments":
        return      # (a SNAPPED between cells kills that worker first)
    if b["namespace"].startswith("rolled back"):
        # claimed: the real snapshot took over, a new process
        assert b["namespace"] == "rolled back to before cell 1", brief(b)
        assert (x, y) == ("1", "False"), (attack, brief(c))
        assert c["worker"]["generation"] > a["worker"]["generation"]
        assert c["worker"]["pid"] != a["worker"]["pid"]
    else:
        assert b["namespace"] == "lost", brief(b)
        assert (x, y) == ("None", "False"), (attack, brief(c))
    if attack.startswith("at_fork"):
        # no hook runs at the snapshot's fork: nothing was forged
        assert b["namespace"] == "rolled back to before cell 1", brief(b)
        assert b["snapshot"] == "taken", brief(b)
    if attack.startswith("thread"):
        # refused, said in the record and on stderr; the worker's own
        # SNAPPED then is a second one: a protocol error
        # (or the worker gave up on the lock first and said so)
        assert "refused" in b["snapshot"] or \
            "holds the import lock" in b["snapshot"], b["snapshot"]
        assert "refused" in r.stderr or \
            "holds the import lock" in b["snapshot"], r.stderr
        assert b["kind"] == "protocol", brief(b)


# A copy of the worker a cell forks (os.fork from the main thread, from a
# thread, multiprocessing's fork) holds none of the worker's descriptors
# to the supervisor: writing a frame on the channel, waiting on the spare
# socket or taking pipes from the output socket all fail with EBADF.
FORKED_FDS = r'''
import errno, os, threading
def _id(fd):
    try:
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino)
    except OSError as e:
        return errno.errorcode[e.errno]
OURS = {fd: _id(fd) for fd in (3, 4, 5, 6)}
def _probe():
    # the worker's own descriptor, or not (closed, or a number reused)
    return ','.join('ours' if _id(fd) == OURS[fd] else 'gone'
                    for fd in (3, 4, 5, 6))
def _child(w):
    os.write(w, _probe().encode())
    os._exit(0)
def fork_and_probe():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(w)
    os.close(w)
    got = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return got
res = {}
res['main'] = fork_and_probe()
t = threading.Thread(target=lambda: res.__setitem__('thread', fork_and_probe()))
t.start(); t.join()
import multiprocessing as mp
q = mp.get_context('fork').SimpleQueue()
p = mp.get_context('fork').Process(target=lambda: q.put(_probe()))
p.start(); p.join()
res['multiprocessing'] = q.get()
res['worker'] = _probe()
print(sorted(res.items()))
'''


def test_a_forked_copy_of_the_worker_holds_no_channel(run_as):  # noqa: F811
    # no cell here waits for its deadline: a long one, so that the forks
    # and multiprocessing of the first cell are not cut under load (a
    # fresh root's ASan pass: 2.09 s of a 2 s timeout)
    args = ["--snapshot", "always", "--cell-timeout", "60"]
    r = run_as([FORKED_FDS, "x = 1", "import os\nos.kill(os.getpid(), 9)",
                "print(x)"], args=args, expect_rc=1)
    a, b, c, d = r.recs
    assert a["status"] == "ok", brief(a)
    bad = "gone,gone,gone,gone"
    assert a["output"] == str(sorted({"main": bad, "thread": bad,
                                      "multiprocessing": bad,
                                      "worker": "ours,ours,ours,ours"}
                                     .items())) + "\n", brief(a)
    # the snapshot's own fork keeps them: the rollback still works
    assert c["namespace"].startswith("rolled back"), brief(c)
    assert d["status"] == "ok" and d["output"] == "1\n", brief(d)


# A raw clone (the clone system call through ctypes) runs no at-fork
# handler: its copy keeps the worker's descriptors, the channel included,
# and writes a DONE for the running cell as the worker would; the cell
# itself goes on for a second. The supervisor takes channel bytes from the
# worker process only (the kernel names the writer): the copy's frame is a
# protocol error that ends the worker, never an early "ok". The cell then
# waits 30 s, not to synchronise anything: the kill that the frame causes
# ends it long before (a broken check takes the forged DONE at once).
RAW_CLONE = r'''
import ctypes, os, struct, time
done = b'\x94\x01\x00\xa0\xa0'           # DONE [cell 1, ok, "", ""]
pid = ctypes.CDLL(None, use_errno=True).syscall(56, 17, 0, 0, 0, 0)
if pid == 0:                             # clone(SIGCHLD): the copy
    os.write(3, struct.pack('>IHH', len(done), 3, 0) + done)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(30)
print('the cell ran to its end')
'''


def test_a_raw_clone_cannot_speak_for_the_worker(run_as):  # noqa: F811
    r = run_as(["x = 1", RAW_CLONE, "print('after')"],
               args=["--cell-timeout", "60"], expect_rc=1)
    a, b, c = r.recs
    assert a["status"] == "ok", brief(a)
    assert b["status"] != "ok", brief(b)
    assert "not the worker" in (b.get("detail") or ""), brief(b)
    assert "ran to its end" not in (b.get("output") or ""), brief(b)
    assert c["status"] == "ok" and c["output"] == "after\n", brief(c)
