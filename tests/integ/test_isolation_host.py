"""Real isolation, the host under the view (issue 8; SPEC section 7): the
engine's binaries cannot be replaced, kernel settings and cgroups are out of
reach, and the supervisor and the host's processes (SysV memory, kill,
SIGIO) are invisible and unreachable.

Each case runs as root and as a plain user through isolation_util's ctx
fixture; the safety rules are in isolation_util's docstring.
"""
import ctypes
import hashlib
import os
import random
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from agentz_util import BUILD, read_proc
from isolation_util import (CRASH_CELL, DENIED, NOT_MOVABLE, OK_CELL, PRELUDE,
                            UNREADABLE, assert_denied, assert_fresh,
                            assert_ok, assert_same_worker, brief, probe,
                            safe_rmtree)
from isolation_util import ctx, who  # noqa: F401 (fixtures)


# --- the engine's binaries ---------------------------------------------------

def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_binaries_cannot_be_replaced(ctx, where):
    if where == "outside":
        agentz = ctx.agentz
    else:
        d = ctx.mkdir(os.path.join(ctx.ws, "bin"))
        for name in ("agentz", "agentz-worker"):
            shutil.copy2(os.path.join(BUILD, name), d)
            ctx.who.own(os.path.join(d, name))
        agentz = os.path.join(d, "agentz")
    bindir = os.path.dirname(agentz)
    ctx.cleanups.append(lambda: safe_rmtree(bindir + ".moved"))
    orig = {n: _sha(os.path.join(BUILD, n)) for n in ("agentz",
                                                      "agentz-worker")}
    code = PRELUDE + f'''
D, ws = {bindir!r}, {ctx.ws!r}
r = {{}}
for name in ('agentz', 'agentz-worker'):
    p = D + '/' + name
    r['write:' + name] = t(wr, p, b'EVIL', 'wb')      # O_TRUNC
    r['append:' + name] = t(wr, p, b'EVIL', 'ab')
    r['truncate:' + name] = t(os.truncate, p, 0)
    r['chmod:' + name] = t(os.chmod, p, 0o777)
    for src_name, src in (('same', D), ('ws', ws), ('tmp', '/tmp')):
        evil = '%s/evil-%s-%s' % (src, name, src_name)
        made = t(wr, evil, b'#!/bin/sh\\nexit 97\\n')
        r['rename:%s:%s' % (src_name, name)] = \\
            t(os.rename, evil, p) if made == 'OK' else 'nocreate:' + made
        t(os.unlink, evil)
    r['unlink:' + name] = t(os.unlink, p)
r['rename_dir'] = t(os.rename, D, D + '.moved')
report(**r)
'''
    r = ctx.run([code, CRASH_CELL, OK_CELL], agentz=agentz, expect_rc=1)
    a, crash, c = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    # outside the workspace the binaries are not in the (minimal) view at
    # all: every attack finds nothing (ENOENT), a stronger promise
    absent = ("ENOENT",) if where == "outside" else ()
    if where == "outside":
        # (renaming the folder: EROFS from the view's read-only root above
        # it, before the kernel looks for the folder)
        found = {k: v for k, v in res.items()
                 if v not in ("ENOENT", "nocreate:ENOENT") and
                 not (k == "rename_dir" and v == "EROFS")}
        assert not found, found
    bad = {}
    for k, v in sorted(res.items()):
        if k.startswith("append:"):
            # open(2) without O_TRUNC checks "text busy" before the mount's
            # read-only flag: ETXTBSY there says nothing either way
            ok = v in DENIED + ("ETXTBSY",) + absent
        elif k.startswith(("write:", "truncate:", "chmod:")):
            # O_TRUNC, truncate(2) and chmod ask the mount first: EROFS on
            # a read-only bind; ETXTBSY would mean a writable file that
            # merely runs right now (and the rename attacks are next)
            ok = v in DENIED + absent
        elif k.startswith("rename:") and v.startswith("nocreate:"):
            ok = v[9:] in DENIED + absent
        else:
            ok = v in NOT_MOVABLE + absent
        if not ok:
            bad[k] = v
    assert not bad, "attacks on the binaries that were not refused: %r" % bad
    assert crash["kind"] == "crashed", brief(crash)
    assert_ok(c)                      # the run's next worker still starts
    assert_fresh(crash, c)
    assert not os.path.exists(bindir + ".moved")
    for name, sha in orig.items():
        assert _sha(os.path.join(bindir, name)) == sha, name
    assert not [n for n in os.listdir(bindir) if n.startswith("evil-")]


# --- kernel settings and cgroups ---------------------------------------------

def test_proc_sys_is_read_only(ctx):
    code = PRELUDE + '''
def open_only(path):
    os.close(os.open(path, os.O_WRONLY))     # never written
report(core_pattern=write_back('/proc/sys/kernel/core_pattern'),
       overcommit=write_back('/proc/sys/vm/overcommit_memory'),
       sysrq=t(open_only, '/proc/sysrq-trigger'))
'''
    before = (read_proc("/proc/sys/kernel/core_pattern"),
              read_proc("/proc/sys/vm/overcommit_memory"))
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    for k in ("core_pattern", "overcommit"):
        assert res[k].startswith("write:"), (k, res[k])     # readable
        assert_denied(res[k][6:], DENIED, k)
    assert_denied(res["sysrq"], DENIED + ("ENOENT",),
                  "open /proc/sysrq-trigger")
    assert (read_proc("/proc/sys/kernel/core_pattern"),
            read_proc("/proc/sys/vm/overcommit_memory")) == before
    assert_ok(b)


CGROUP_PROBE = r'''
import ctypes
TAG = %(tag)r
FILES = {'memory': ['memory.limit_in_bytes', 'memory.memsw.limit_in_bytes'],
         'pids': ['pids.max'], 'freezer': ['freezer.state'],
         'unified': ['memory.max', 'pids.max', 'cgroup.freeze',
                     'cgroup.max.descendants']}
files = {}
for line in open('/proc/self/cgroup'):
    _, ctrls, path = line.rstrip('\n').split(':', 2)
    for ctl in (ctrls.split(',') if ctrls else ['unified']):
        if ctl not in FILES:
            continue
        base = ('/sys/fs/cgroup/' + ctl + path).rstrip('/')
        for fn in FILES[ctl]:
            files[base + '/' + fn] = write_back(base + '/' + fn)
        d = base + '/agentz-iso-' + TAG
        mk = t(os.mkdir, d)
        if mk == 'OK':
            t(os.rmdir, d)
        files['mkdir:' + d] = mk
libc = ctypes.CDLL(None, use_errno=True)
mnt = %(ws)r + '/cgmnt'
os.makedirs(mnt, exist_ok=True)
def mount(fstype, data):
    r = libc.mount(fstype.encode(), mnt.encode(), fstype.encode(), 0, data)
    if r == 0:
        libc.umount2(mnt.encode(), 2)          # MNT_DETACH: leave nothing
        return 'OK'
    return _errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
report(ls=ls('/sys/fs/cgroup'), files=files, mount2=mount('cgroup2', None),
       mount1=mount('cgroup', b'memory'))
'''


def test_no_cgroup_filesystem_and_cgroup_files_unwritable(ctx):
    code = PRELUDE + CGROUP_PROBE % {"tag": uuid.uuid4().hex[:8],
                                     "ws": ctx.ws}
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["ls"] == [] or res["ls"] in UNREADABLE, res["ls"]
    for path, v in res["files"].items():
        if path.startswith("mkdir:"):
            assert v != "OK", (path, v)
        elif v.startswith("read:"):
            assert v[5:] in UNREADABLE, (path, v)
        else:
            assert_denied(v[6:], DENIED, path)
    for k in ("mount1", "mount2"):
        assert_denied(res[k], ("EPERM", "EACCES"), k)
    assert_ok(b)


def _thaw_and_remove(group):
    """Cleanup of a freezer group a broken view let the cell make."""
    if not group or not os.path.isdir(group):
        return
    try:
        with open(group + "/freezer.state", "w") as f:
            f.write("THAWED")
    except OSError:
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pids = read_proc(group + "/cgroup.procs").split()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)          # cleanup only: the kernel reaping them
    try:
        os.rmdir(group)
    except OSError:
        pass


@pytest.mark.serial(
    "the cell must end by deadline + grace + 1 s (wall clock)")
def test_a_frozen_freezer_group_cannot_delay_the_kill(ctx):
    # The attack of the issue: a freezer group holding the worker, frozen,
    # so the SIGKILL never lands. Only the worker itself is ever moved.
    where = os.path.join(ctx.ws, "freezer-path")
    ctx.cleanups.append(lambda: _thaw_and_remove(read_proc(where).decode()))
    code = PRELUDE + f'''
import signal, time
base = None
for line in open('/proc/self/cgroup'):
    _, ctrls, path = line.rstrip('\\n').split(':', 2)
    if 'freezer' in ctrls.split(','):
        base = '/sys/fs/cgroup/freezer' + path.rstrip('/')
g = (base or '/sys/fs/cgroup/freezer') + '/agentz-iso-{uuid.uuid4().hex[:8]}'
with open({where!r}, 'w') as f:
    f.write(g)
mk = t(os.mkdir, g)
print('mkdir', mk, flush=True)
signal.signal(signal.SIGINT, signal.SIG_IGN)
if mk == 'OK':
    print('move', t(wr, g + '/cgroup.procs', str(os.getpid()).encode()),
          flush=True)
    print('freeze', t(wr, g + '/freezer.state', b'FROZEN'), flush=True)
time.sleep(1e6)
'''
    r = ctx.run(["x = 1", code, OK_CELL],
                args=["--cell-timeout", "1", "--grace", "1"], expect_rc=1)
    a, frozen, c = r.recs
    assert frozen["kind"] == "timeout", brief(frozen)
    assert frozen["timeout"]["stage"] == "killed", brief(frozen)
    assert frozen["duration_us"] <= (1 + 1 + 1) * 1e6, brief(frozen)
    words = frozen["output"].split()
    assert words[:1] == ["mkdir"] and words[1] != "OK", brief(frozen)
    assert_ok(c)
    assert_fresh(a, c)


# --- the supervisor and the host's processes ---------------------------------

def test_supervisor_and_host_processes_are_invisible(ctx):
    mark = ctx.marker()
    host = subprocess.Popen([mark, "1000"], executable="/bin/sleep",
                            env={"MARK": mark})
    ctx.cleanups.append(lambda: (host.kill(), host.wait()))
    tag = "agentzcanary" + uuid.uuid4().hex[:8]
    canary = tag + "-" + uuid.uuid4().hex
    code = PRELUDE + f'''
sup = int(os.environ['SUP'])
def text(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', 'replace').strip()
    except Exception as e:
        return 'ERR:' + _code(e)
def scan(path, needle):
    try:
        with open(path, 'rb') as f:
            return needle.encode() in f.read()
    except Exception:
        return False
pids = sorted(int(d) for d in os.listdir('/proc') if d.isdigit())
def open_only(path):
    os.close(os.open(path, os.O_WRONLY))
report(sup_exists=os.path.exists('/proc/%d' % sup),
       sup_comm=text('/proc/%d/comm' % sup),
       sup_canary=scan('/proc/%d/environ' % sup, {tag!r}),
       sup_oom=write_back('/proc/%d/oom_score_adj' % sup),
       sup_clear_refs=t(open_only, '/proc/%d/clear_refs' % sup),
       test_cmdline=text('/proc/{os.getpid()}/cmdline'),
       pids=pids,
       marker=[p for p in pids if scan('/proc/%d/cmdline' % p, {mark!r})
               or scan('/proc/%d/environ' % p, {mark!r})],
       canary=[p for p in pids if scan('/proc/%d/environ' % p, {tag!r})
               or scan('/proc/%d/cmdline' % p, {tag!r})])
'''
    r = ctx.run([code, OK_CELL], sup_env=True, env={"MY_API_KEY": canary})
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    # the supervisor's pid names nothing, or one of the run's own processes
    assert not res["sup_exists"] or res["sup_comm"] not in ("agentz", "sh"), \
        res
    assert not res["sup_canary"], res
    assert "pytest" not in res["test_cmdline"], res       # the test's pid
    assert res["marker"] == [], "a host process is visible: %r" % res
    assert res["canary"] == [], "the supervisor's environment: %r" % res
    assert 1 in res["pids"] and len(res["pids"]) <= 16, res["pids"]
    assert canary not in r.stdout
    assert_ok(b)


SHM_PROBE = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmdt.argtypes = [ctypes.c_void_p]
def err():
    return _errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
r = {}
for name, key, sid, token in %(segs)r:
    r['get:' + name] = 'OK' if libc.shmget(key, 0, 0) >= 0 else err()
    addr = libc.shmat(sid, None, 0o10000)              # SHM_RDONLY
    if addr in (None, ctypes.c_void_p(-1).value):
        r['at:' + name] = err()
    else:
        seen = token.encode() in ctypes.string_at(addr, 64)
        libc.shmdt(addr)
        r['at:' + name] = 'ATTACHED:%%s' %% seen
try:
    with open('/proc/sysvipc/shm') as f:
        rows = [l.split()[:2] for l in f.read().splitlines()[1:]]
except OSError as e:
    rows = []
r['listed'] = [name for name, key, sid, _ in %(segs)r
               if [str(key), str(sid)] in rows]
report(**r)
'''


class _Shm:
    IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
        libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        libc.shmat.restype = ctypes.c_void_p
        libc.shmdt.argtypes = [ctypes.c_void_p]
        libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        self.libc = libc

    def make(self, mode, token):
        """A segment of ours holding token: (key, shmid)."""
        for _ in range(20):
            key = random.randint(1 << 20, (1 << 31) - 1)
            sid = self.libc.shmget(key, 4096,
                                   self.IPC_CREAT | self.IPC_EXCL | mode)
            if sid >= 0:
                break
        else:
            raise OSError(ctypes.get_errno(), "shmget")
        addr = self.libc.shmat(sid, None, 0)
        ctypes.memmove(addr, token.encode(), len(token))
        self.libc.shmdt(addr)
        return key, sid

    def remove(self, sid):
        self.libc.shmctl(sid, self.IPC_RMID, None)


def test_sysv_shared_memory_of_another_process_is_unreachable(ctx):
    shm = _Shm()
    segs = []
    for name, mode in (("private", 0o600), ("open", 0o666)):
        token = "shm-token-" + uuid.uuid4().hex
        key, sid = shm.make(mode, token)
        ctx.cleanups.append(lambda sid=sid: shm.remove(sid))
        segs.append((name, key, sid, token))
    r = ctx.run([PRELUDE + SHM_PROBE % {"segs": segs}, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    for name, _, _, _ in segs:
        assert_denied(res["get:" + name], ("ENOENT", "EACCES", "EPERM"),
                      "shmget of " + name)
        assert_denied(res["at:" + name], ("EINVAL", "EIDRM", "EACCES",
                                          "EPERM"), "shmat of " + name)
    assert res["listed"] == [], res
    assert_ok(b)


KILL_PROBE = PRELUDE + r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*a):
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r if r >= 0 else _errno.errorcode[ctypes.get_errno()]
sup = int(os.environ['SUP'])
pidfd = sc(434, sup, 0)                            # pidfd_open
report(kill=t(os.kill, sup, 9), killpg=t(os.killpg, sup, 9),
       kill0=t(os.kill, sup, 0),
       pidfd=pidfd if isinstance(pidfd, str) else
             ('OK', sc(424, pidfd, 9, 0, 0)))      # pidfd_send_signal
'''

SIGIO_PROBE = PRELUDE + r'''
import fcntl
sup = int(os.environ['SUP'])
F_SETSIG = 10
def arm(fd, owner):
    return [t(fcntl.fcntl, fd, fcntl.F_SETOWN, owner),
            t(fcntl.fcntl, fd, F_SETSIG, 9),
            t(lambda: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_ASYNC |
                                  fcntl.fcntl(fd, fcntl.F_GETFL)))]
res = []
pipes = []
for owner in (sup, -sup):
    pr, pw = os.pipe()
    res.append(arm(pr, owner))
    res.append(arm(pw, owner))
    os.write(pw, b'x')        # the read end is ready: SIGIO to its owner
    os.read(pr, 1)            # the write end is ready again
    pipes.append((pr, pw))
res.append(arm(3, sup))       # the channel: fires at the supervisor's write
report(res=res)
'''


def test_kill_and_sigio_never_reach_the_supervisor(ctx):
    r = ctx.run(["x = 1", KILL_PROBE, SIGIO_PROBE, "print(x)", OK_CELL],
                sup_env=True)
    # ctx.run asserted the supervisor ended normally with 0: any SIGKILL
    # that arrived (kill or SIGIO with F_SETSIG) would have been exit -9.
    a, k, s, c, d = r.recs
    assert k["status"] == "ok", brief(k)
    res = probe(k)
    for name in ("kill", "killpg", "kill0"):
        assert_denied(res[name], ("EPERM", "ESRCH"), name)
    assert res["pidfd"] in ("EPERM", "ESRCH") or \
        res["pidfd"][1] in ("EPERM", "ESRCH"), res
    assert s["status"] == "ok", brief(s)
    assert_ok(c, "1\n")
    assert_ok(d)
    assert_same_worker(a, d)


