"""A plain user's run is as bounded as root's (issue 20, item 3).

Root's run has a cgroup per worker (memory, pids). A plain user's has none
on a machine that delegates none (cgroup v1 here, or no delegated v2
subtree), so the supervisor falls back to what the kernel gives any user:
RLIMIT_NPROC (counted for the worker's uid in the run's user namespace),
RLIMIT_AS at the cgroup's ceiling besides the worker's RLIMIT_DATA, /tmp
and /dev/shm sized to half of --memory-limit each, and no SysV IPC (its
shared memory outlives every process and no rlimit counts it). Every
record and the start line say which ceilings hold.

Each attack runs as root and as a plain user (isolation_util's Ctx) and
asserts it is stopped, the supervisor lives (a normal exit) and the next
cell works.

Safety: every attack bounds itself (a process budget above the 1024
ceiling, at most 1 GiB of memory in 16 MiB steps) so a broken limit fails
the test instead of hurting the machine; the forked children wait on a
pipe and exit when the cell closes it (or dies), and the run's PID
namespace ends whatever is left with the run.
"""
import grp

import pytest

from agentz_util import SAN
from isolation_util import (IS_ROOT, OK_CELL, PRELUDE, assert_ok, brief, ctx,  # noqa
                            probe, who)                               # noqa

MEM = ["--memory-limit", "256M", "--cell-timeout", "60"]

# The flood runs in a plain /usr/bin/python3 the cell starts (the same
# uid, cgroup and RLIMIT_NPROC count as the worker's): a thousand forks
# of a sanitizer build's worker cost seconds of page-table copies, and
# what is tested is the ceiling, not which program meets it.
FORKS = r'''
import subprocess
FLOOD = r"""
import errno, json, os, sys
r, w = os.pipe()
kids, why = [], 'budget'
for i in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError as e:
        why = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
os.close(w)
for k in kids:
    os.waitpid(k, 0)
print(json.dumps({'made': len(kids), 'why': why}))
"""
p = subprocess.run(['/usr/bin/python3', '-c', FLOOD, '%(budget)d'],
                   stdin=subprocess.DEVNULL, capture_output=True, text=True)
report(**_json.loads(p.stdout))
'''

# 16 MiB steps up to 1 GiB: what one process can hold of a kind
HOLD = r'''
import ctypes, mmap, os
held, why = 0, 'all'
keep = []
def shm_file():
    f = open('/dev/shm/fill', 'wb')
    keep.append(f)
    return lambda: f.write(b'x' * (16 << 20))
def tmp_file():
    f = open('/tmp/fill', 'wb')
    keep.append(f)
    return lambda: f.write(b'x' * (16 << 20))
def anon():
    def step():
        m = mmap.mmap(-1, 16 << 20)
        m.write(b'x' * (16 << 20))
        keep.append(m)
    return step
def sysv():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    def step():
        sid = libc.shmget(0, 16 << 20, 0o1600)
        if sid < 0:
            raise OSError(ctypes.get_errno(), 'shmget')
        a = libc.shmat(sid, None, 0)
        if a is None or a == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), 'shmat')
        ctypes.memset(a, 1, 16 << 20)
        libc.shmdt(ctypes.c_void_p(a))    # held with nothing attached
    return step
step = %(kind)s()
try:
    while held < (1 << 30):
        step()
        held += 16 << 20
except Exception as e:
    why = _code(e)
report(held_mib=held >> 20, why=why)
'''


def limits_of(rec):
    return rec["worker"]["limits"]


def has_cgroup(rec):
    return "cgroup" in rec["worker"]["containment"]


def test_the_record_says_which_ceilings_hold(ctx):
    r = ctx.run([OK_CELL], args=MEM)
    a, = r.recs
    lim = limits_of(a)
    if has_cgroup(a):
        assert lim.startswith("memory cgroup 352 MiB (RLIMIT_DATA 256 "
                              "MiB)"), lim
        assert "processes cgroup and RLIMIT_NPROC 1024" in lim, lim
        assert "/tmp and /dev/shm 1024 MiB each" in lim, lim
    else:
        assert lim.startswith("memory per process only (no cgroup)") or \
            (SAN and lim.startswith("memory none (no cgroup")), lim
        assert "no SysV IPC" in lim, lim
        assert "processes RLIMIT_NPROC 1024" in lim, lim
        assert "/tmp and /dev/shm 128 MiB each (half of --memory-limit" \
            in lim, lim
    assert_ok(a)


def test_the_start_line_says_which_ceilings_hold(ctx):
    rc, out, err = ctx.run_raw(["-v", *MEM, "-"], "print('ok')\n")
    assert rc == 0, err
    line = [l for l in err.splitlines() if "isolation:" in l]
    assert line and "; limits: memory " in line[0], err
    assert "RLIMIT_NPROC 1024" in line[0], err


@pytest.mark.alone("a fork flood up to the 1024-process ceiling")
def test_a_fork_flood_stops_at_the_process_ceiling(ctx):
    # no memory ceiling: a thousand copies of a Python would meet it
    # first; the flood's own budget bounds it
    r = ctx.run([PRELUDE + FORKS % {"budget": 1300}, OK_CELL],
                args=["--memory-limit", "0", "--cell-timeout", "60"],
                timeout=120)
    a, b = r.recs
    res = probe(a)
    # the ceiling, not the attack's own budget, stopped it: EAGAIN
    assert res["why"] == "EAGAIN", (res, limits_of(a))
    assert 50 < res["made"] < 1024, res
    assert_ok(b)


def test_shared_anonymous_memory_is_bounded(ctx):
    if SAN and ctx.who.name == "user":
        pytest.skip("no RLIMIT_AS under AddressSanitizer")
    r = ctx.run([PRELUDE + HOLD % {"kind": "anon"}, OK_CELL], args=MEM,
                expect_rc=None, timeout=120)
    a, b = r.recs
    if a["status"] == "ok":                 # RLIMIT_AS: ENOMEM in the cell
        res = probe(a)
        assert res["why"] in ("ENOMEM", "MemoryError"), res
        assert res["held_mib"] <= 352, res
    else:                                   # the cgroup: an OOM kill
        assert has_cgroup(a) and a["kind"] == "memory", brief(a)
    assert_ok(b)


@pytest.mark.parametrize("kind", ["shm_file", "tmp_file"])
def test_memory_backed_files_are_bounded(ctx, kind):
    r = ctx.run([PRELUDE + HOLD % {"kind": kind}, OK_CELL], args=MEM,
                expect_rc=None, timeout=120)
    a, b = r.recs
    if a["status"] == "ok":
        res = probe(a)
        assert res["why"] == "ENOSPC", res
        assert res["held_mib"] <= (1024 if has_cgroup(a) else 128), res
        if not has_cgroup(a):
            assert res["held_mib"] >= 96, res   # the size, not less
    else:
        assert has_cgroup(a) and a["kind"] == "memory", brief(a)
    assert_ok(b)


def test_sysv_shared_memory_is_bounded(ctx):
    r = ctx.run([PRELUDE + HOLD % {"kind": "sysv"}, OK_CELL], args=MEM,
                expect_rc=None, timeout=120)
    a, b = r.recs
    if a["status"] == "ok":
        res = probe(a)
        assert not has_cgroup(a), res       # with one, it holds by cgroup
        assert (res["held_mib"], res["why"]) == (0, "EPERM"), res
    else:
        assert has_cgroup(a) and a["kind"] == "memory", brief(a)
    assert_ok(b)


def test_the_users_groups_do_not_reach_the_worker(ctx):
    # A plain user in the group `users` (a docker group stand-in): in the
    # run's user namespace, with setgroups denied, the kernel keeps the
    # group for permission checks but the worker cannot name it (it shows
    # as the overflow gid) and nothing of the host's owned by it is in
    # the view (test_view's 0660 socket); root's worker has none at all.
    users = grp.getgrnam("users").gr_gid
    if ctx.who.name == "user" and IS_ROOT:
        base = ctx.who.popen_kw()
        ctx.who.popen_kw = lambda: dict(base, extra_groups=[users])
    r = ctx.run([PRELUDE + "report(groups=os.getgroups(), "
                 "etc=open('/etc/group').read())", OK_CELL])
    a, b = r.recs
    res = probe(a)
    overflow = int(open("/proc/sys/kernel/overflowgid").read())
    assert set(res["groups"]) <= {overflow}, res
    assert users not in res["groups"] or users == overflow, res
    assert "users:" not in res["etc"], res
    assert_ok(b)
