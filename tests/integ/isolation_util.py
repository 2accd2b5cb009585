"""Shared machinery of the isolation tests (issue 8; SPEC section 7;
/work/isolation-design.md): the constants and PRELUDE the cells use, the
runs (Ctx, Who, Gate, the ctx/who fixtures) and the assertions, imported by
test_isolation*.py, test_view.py, test_network.py and test_traps.py.

Every case drives the real binary (`agentz exec --json -`, once the agent
mode for the journal) from a fresh workspace (its cwd) and asserts three
things: the attack fails the way the design says, the supervisor survives
(it exits with its normal code, never by a signal), and a following cell
works. Each case runs as root and as a plain user (`nobody`, through copies
of the binaries any user can run and a workspace and HOME owned by nobody).

Safety: the protection under test may be broken; the test must then fail
without harming the machine.
- Every agentz run is a session leader with a hard timeout after which the
  test SIGKILLs its process group and fails.
- Writes aimed at kernel or supervisor settings write back the value just
  read (core_pattern, vm.overcommit_memory, oom_score_adj, cgroup limits);
  /proc/sysrq-trigger and clear_refs are only opened, never written.
- SysV segments are the test's own (made and removed here); binaries under
  attack are copies (binaries_for_any_user(), or copies inside the
  workspace), never build/; secrets are fakes the test creates and removes.
- Every process a cell starts carries a unique marker (argv or environ);
  the test SIGKILLs every marked process on the host afterwards.
- A freezer group a broken view would let the cell make is thawed, emptied
  and removed by the test; nothing but the worker itself is ever moved.
- Workspaces are removed only after anything mounted below them (a broken
  view could leave a mount there) is detached.
- No sleep is used to order events: FIFOs, pipes and process exits are.
"""
import ctypes
import hashlib
import json
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest

from agentz_util import (SAN, binaries_for_any_user, cells, kill_marked,
                         marked_processes, new_marker)

IS_ROOT = os.geteuid() == 0
NOBODY = pwd.getpwnam("nobody")
# Fixtures the cell must be able to see live outside /tmp (the worker's /tmp
# is private): /var/tmp is part of the read-only root in the view.
VISIBLE = "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()
RUN_TIMEOUT = 90 if SAN else 30
OK_CELL = "print('ok')"
CRASH_CELL = "import os\nos.kill(os.getpid(), 9)"
JAIL_UID_BASE = 1900000000
DENIED = ("EACCES", "EPERM", "EROFS")            # a write the view refuses
UNREADABLE = ("EACCES", "EPERM", "ENOENT")       # a masked path
NOT_MOVABLE = ("EBUSY", "EROFS", "EACCES", "EPERM", "EXDEV")
DEFAULT_MASKED = [".ssh", ".aws", ".azure", ".config/gcloud", ".kube",
                  ".docker", ".netrc", ".gnupg", ".git-credentials",
                  ".config/gh", ".npmrc", ".pypirc", ".password-store"]
MASKED_FILES = {".netrc", ".git-credentials", ".npmrc", ".pypirc"}


# --- what the cells use ------------------------------------------------------

PRELUDE = r'''
import errno as _errno, hashlib as _hashlib, json as _json, os
def _code(e):
    if isinstance(e, OSError) and e.errno:
        return _errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__
def t(f, *a, **k):
    try:
        f(*a, **k)
        return 'OK'
    except Exception as e:
        return _code(e)
def rd(path):
    try:
        with open(path, 'rb') as f:
            data = f.read(1 << 20)
    except Exception as e:
        return _code(e)
    return 'DATA:%d:%s' % (len(data), _hashlib.sha256(data).hexdigest())
def ls(path):
    try:
        return sorted(os.listdir(path))
    except Exception as e:
        return _code(e)
def wr(path, data, mode='wb'):
    with open(path, mode) as f:
        f.write(data)
def write_back(path):
    """Writes what path holds back into it: no change even if it works."""
    try:
        with open(path, 'rb') as f:
            cur = f.read()
    except Exception as e:
        return 'read:' + _code(e)
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, cur)
        finally:
            os.close(fd)
    except Exception as e:
        return 'write:' + _code(e)
    return 'write:OK'
def report(**kw):
    print('PROBE ' + _json.dumps(kw, sort_keys=True), flush=True)
'''

# A setsid double-forked daemon carrying the marker; returns once the
# daemon's /proc/PID/cmdline shows it, not after a sleep. The CLOEXEC pipe
# brings the daemon's pid and reads EOF once its exec has begun; the kernel
# sets the new command line a little later in the exec, so a /proc scan
# right at EOF could still miss it (seen on a loaded machine): the wait
# goes on until the marker is there, bounded.
DAEMON = r'''
import os, time
MARK = %(marker)r
_r, _w = os.pipe()
_pid = os.fork()
if _pid == 0:
    try:
        os.close(_r)
        os.setsid()
        _g = os.fork()
        if _g == 0:
            os.execve('/bin/sleep', [MARK, '1000'], {'DAEMON_MARK': MARK})
        os.write(_w, b'%%d' %% _g)
    finally:
        os._exit(0)
os.close(_w)
os.waitpid(_pid, 0)
_g = b''
while True:
    _c = os.read(_r, 64)
    if not _c:
        break
    _g += _c
os.close(_r)
def _cmdline(pid):
    try:
        with open('/proc/%%d/cmdline' %% pid, 'rb') as f:
            return f.read()
    except OSError:
        return b''
_end = time.monotonic() + 60
while MARK.encode() not in _cmdline(int(_g)) and time.monotonic() < _end:
    time.sleep(0.001)
'''

# A child that ignores SIGINT, SIGTERM and SIGHUP: only a kill ends it.
STUBBORN_CHILD = r'''
import signal, subprocess
def _deaf():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
child = subprocess.Popen([%(marker)r, '1000'], executable='/bin/sleep',
                         env={'MARK': %(marker)r}, preexec_fn=_deaf)
'''


def data_tag(content):
    """What rd() in a cell reports for a file holding content."""
    return "DATA:%d:%s" % (len(content), hashlib.sha256(content).hexdigest())


def assert_unreadable(res, secret, what):
    assert res != data_tag(secret), "%s: the secret was read" % what
    assert res in UNREADABLE or str(res).startswith("DATA:0:"), \
        "%s: %r" % (what, res)


def assert_denied(res, allowed, what):
    assert res in allowed, "%s: %r (want one of %s)" % (what, res, allowed)


# --- runs --------------------------------------------------------------------

class Run:
    def __init__(self, recs, rc, stdout, stderr, pid):
        self.recs, self.rc, self.stdout, self.stderr = recs, rc, stdout, stderr
        self.pid = pid

    def __repr__(self):
        return "Run(rc=%r, recs=%s, stderr=%r)" % (
            self.rc, [brief(r) for r in self.recs], self.stderr[-3000:])


def brief(r):
    """A record without its bulky fields, for failure messages."""
    keep = ("cell", "status", "kind", "exception_type", "detail", "signal",
            "exit_code", "namespace", "duration_us", "timeout")
    d = {k: r.get(k) for k in keep}
    d["output"] = (r.get("output") or "")[-600:]
    d["traceback"] = (r.get("traceback") or "")[-400:]
    w = r.get("worker") or {}
    d["worker"] = {k: w.get(k) for k in ("pid", "generation", "isolation",
                                         "sandbox", "containment")}
    return d


def probe(rec):
    """The PROBE line a cell printed, as a dict."""
    for line in (rec.get("output") or "").splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    pytest.fail("the cell printed no PROBE line: %r" % brief(rec))


def assert_ok(rec, output="ok\n"):
    assert rec["status"] == "ok", brief(rec)
    if output is not None:
        assert rec["output"] == output, brief(rec)


def assert_fresh(before, after):
    assert after["worker"]["generation"] == \
        before["worker"]["generation"] + 1, (brief(before), brief(after))
    assert after["worker"]["pid"] != before["worker"]["pid"]


def assert_same_worker(before, after):
    assert after["worker"]["pid"] == before["worker"]["pid"], \
        (brief(before), brief(after))
    assert after["worker"]["generation"] == before["worker"]["generation"]


def wait_unmarked(marker, bound=3.0):
    """Marked processes left once the kernel finished tearing down a run's
    namespaces (polled with a bound: the teardown is asynchronous)."""
    deadline = time.monotonic() + bound
    left = marked_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = marked_processes(marker)
    return left


def _mounts_under(path):
    res = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp)
            if mp == path or mp.startswith(path.rstrip("/") + "/"):
                res.append(mp)
    return sorted(res, key=len, reverse=True)


def safe_rmtree(path):
    """rmtree, after detaching anything a broken view mounted below path
    (never recurse into a mounted cgroup or bind)."""
    if not os.path.lexists(path):
        return
    for mp in _mounts_under(os.path.realpath(path)):
        subprocess.run(["umount", "-l", mp], capture_output=True)
    if _mounts_under(os.path.realpath(path)):
        return                    # leave it rather than delete through it
    shutil.rmtree(path, ignore_errors=True)


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    r = libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0),
                     ctypes.c_long(1))
    return r if r > 0 else 0


class Who:
    """Who runs agentz: root, or a plain user (nobody when the test is
    root; the test's own uid otherwise)."""

    def __init__(self, name):
        self.name = name
        if name == "root":
            self.uid, self.gid = 0, 0
        elif IS_ROOT:
            self.uid, self.gid = NOBODY.pw_uid, NOBODY.pw_gid
        else:
            self.uid, self.gid = os.getuid(), os.getgid()

    def popen_kw(self):
        if self.name == "user" and IS_ROOT:
            # setgroups([]), setgid, setuid in the child
            return {"user": self.uid, "group": self.gid, "extra_groups": []}
        return {}

    def own(self, path):
        if IS_ROOT:
            os.lchown(path, self.uid, self.gid)


class Handle:
    def __init__(self, p, codes, stdin):
        self.p, self.codes, self.stdin = p, codes, stdin


class Ctx:
    """One test's world: workspace, HOME, binaries, cleanups."""

    def __init__(self, who):
        self.who = who
        self.cleanups = []
        self.markers = []
        self.procs = []
        self.ws = self.visible_dir("agentz-iso-ws-")
        self.home = self.visible_dir("agentz-iso-home-") \
            if who.name == "user" else "/root" if IS_ROOT else \
            os.environ.get("HOME", "/")
        self.agentz = self._binaries()

    # files
    def visible_dir(self, prefix, mode=0o755, base=VISIBLE, owner=None):
        d = tempfile.mkdtemp(prefix=prefix, dir=base)
        self.cleanups.append(lambda: safe_rmtree(d))
        os.chmod(d, mode)
        (owner or self.who).own(d)
        return d

    def write(self, path, data, mode=0o644, owner=None):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        (owner or self.who).own(path)
        return path

    def mkdir(self, path, mode=0o755, owner=None):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        (owner or self.who).own(path)
        return path

    def _binaries(self):
        """Copies of the binaries outside /tmp (so the view shows them),
        owned by whoever runs them, as the user's own install would be."""
        cm = binaries_for_any_user()
        old = tempfile.tempdir
        tempfile.tempdir = VISIBLE
        try:
            path = cm.__enter__()
        finally:
            tempfile.tempdir = old
        self.cleanups.append(lambda: cm.__exit__(None, None, None))
        d = os.path.dirname(path)
        for p in (d, path, os.path.join(d, "agentz-worker")):
            self.who.own(p)
        return path

    def marker(self):
        m = new_marker()
        self.markers.append(m)
        return m

    def env(self, extra=None):
        e = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:"
                     "/sbin",
             "HOME": self.home, "LANG": "C.UTF-8"}
        for k, v in os.environ.items():
            if k.startswith(("ASAN_", "UBSAN_", "LSAN_")):
                e[k] = v
        e.update(extra or {})
        return {k: v for k, v in e.items() if v is not None}

    # runs
    def start(self, argv, stdin_text="", env=None, cwd=None):
        f = tempfile.TemporaryFile()
        f.write(stdin_text.encode())
        f.seek(0)
        p = subprocess.Popen(argv, stdin=f, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env(env),
                             cwd=cwd or self.ws, start_new_session=True,
                             **self.who.popen_kw())
        self.procs.append(p)
        return p, f

    def start_exec(self, codes, args=(), env=None, sup_env=False,
                   agentz=None, cwd=None):
        cmd = [agentz or self.agentz, "exec", "--json", *args]
        if sup_env:
            cmd += ["--pass-env", "SUP"]
            cmd = ["/bin/sh", "-c", 'SUP=$$; export SUP; exec "$@"',
                   "sh"] + cmd
        cmd.append("-")
        p, f = self.start(cmd, cells(*codes), env=env, cwd=cwd)
        return Handle(p, codes, f)

    def communicate(self, p, timeout):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            pytest.fail("agentz did not finish within %s s (killed); stderr: "
                        "%r; stdout: %r" % (timeout, err[-3000:], out[-3000:]))
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        assert p.returncode >= 0, "the supervisor died by signal %d; " \
            "stderr: %r; stdout: %r" % (-p.returncode, err[-3000:],
                                        out[-3000:])
        assert "AddressSanitizer" not in err and "runtime error:" not in err, \
            err[-3000:]
        return out, err

    def finish(self, h, expect_rc=0, timeout=RUN_TIMEOUT):
        out, err = self.communicate(h.p, timeout)
        h.stdin.close()
        recs = []
        for line in out.splitlines():
            if line.strip():
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pytest.fail("agentz printed a non-JSON line: %r; stderr: "
                                "%r" % (line[:500], err[-2000:]))
        run = Run(recs, h.p.returncode, out, err, h.p.pid)
        if expect_rc is not None:
            assert run.rc == expect_rc, run
        assert len(recs) == len(h.codes), run
        assert [r["cell"] for r in recs] == list(range(len(h.codes))), run
        return run

    def run(self, codes, args=(), env=None, sup_env=False, expect_rc=0,
            timeout=RUN_TIMEOUT, agentz=None, cwd=None):
        h = self.start_exec(codes, args, env, sup_env, agentz, cwd)
        return self.finish(h, expect_rc, timeout)

    def run_raw(self, args, stdin_text="", env=None, timeout=RUN_TIMEOUT):
        """agentz exec with args; (rc, stdout, stderr), the supervisor
        having ended normally."""
        p, f = self.start([self.agentz, "exec", *args], stdin_text, env=env)
        out, err = self.communicate(p, timeout)
        f.close()
        return p.returncode, out, err

    def close(self):
        for m in self.markers:
            kill_marked(m)
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception:          # cleanup goes on
                pass


class Gate:
    """A cell waits here until the test lets it go: it writes to NAME.ready
    (a FIFO the test reads) and reads NAME.go (a FIFO the test writes)."""

    def __init__(self, ctx, name):
        self.ready = os.path.join(ctx.ws, name + ".ready")
        self.go = os.path.join(ctx.ws, name + ".go")
        for path in (self.ready, self.go):
            os.mkfifo(path)
            os.chmod(path, 0o666)
            ctx.who.own(path)
        self.rfd = os.open(self.ready, os.O_RDONLY | os.O_NONBLOCK)
        self.gfd = os.open(self.go, os.O_RDWR)     # never blocks the cell
        ctx.cleanups.append(self.close)

    def code(self):
        return ("with open(%r, 'w') as _g:\n    _g.write('r')\n"
                "with open(%r, 'rb', buffering=0) as _g:\n    _g.read(1)\n"
                % (self.ready, self.go))

    def wait(self, proc, bound=RUN_TIMEOUT):
        poller = select.poll()
        poller.register(self.rfd, select.POLLIN)
        deadline = time.monotonic() + bound
        while True:
            if poller.poll(100) and os.read(self.rfd, 16):
                return
            if proc.poll() is not None:
                pytest.fail("agentz ended (rc %r) before the cell reached the "
                            "gate: %r" % (proc.returncode,
                                          proc.stderr.read()[-2000:]))
            if time.monotonic() > deadline:
                pytest.fail("the cell did not reach the gate in %s s" % bound)

    def release(self):
        os.write(self.gfd, b"g")

    def close(self):
        for fd in (self.rfd, self.gfd):
            try:
                os.close(fd)
            except OSError:
                pass


# --- agent runs --------------------------------------------------------------

def turns(code_text, match):
    """A ModelServer script's turns: the request whose input holds match
    gets code_text as the next cell, then the continuation a text."""
    return [{"match": match, "next_cell": {"code": code_text,
                                           "summary": "step"}},
            {"text": "ok"}]


def cell_ends(out):
    """The records of an `agentz --json` run's cell_end events, by cell."""
    ends = {}
    for line in out.splitlines():
        ev = json.loads(line)
        if ev.get("type") == "cell_end":
            ends[ev["cell"]] = ev["record"]
    return ends


@pytest.fixture(params=["root", "user"])
def who(request):
    if request.param == "root" and not IS_ROOT:
        pytest.skip("the root case needs root")
    return Who(request.param)


@pytest.fixture
def ctx(who):
    c = Ctx(who)
    try:
        yield c
    finally:
        c.close()


def secret_bytes(prefix="sk-fake-"):
    return (prefix + uuid.uuid4().hex + uuid.uuid4().hex).encode()
