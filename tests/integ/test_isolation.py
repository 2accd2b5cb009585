"""Real isolation (issue 8; SPEC section 7; /work/isolation-design.md).

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
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from agentz_util import (BUILD, COUNT_MARKED, SAN, binaries_for_any_user,
                         cells, kill_marked, marked_processes, new_marker,
                         read_proc)
from model_server import ModelServer

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
# daemon has exec'd (the CLOEXEC pipe reads EOF then), not after a sleep.
DAEMON = r'''
import os
MARK = %(marker)r
_r, _w = os.pipe()
_pid = os.fork()
if _pid == 0:
    try:
        os.close(_r)
        os.setsid()
        if os.fork() == 0:
            os.execve('/bin/sleep', [MARK, '1000'], {'DAEMON_MARK': MARK})
    finally:
        os._exit(0)
os.close(_w)
os.waitpid(_pid, 0)
os.read(_r, 1)
os.close(_r)
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


# --- secrets -----------------------------------------------------------------

def test_dotenv_of_the_workspace_is_masked(ctx):
    secret = secret_bytes()
    content = b"OPENAI_API_KEY=" + secret + b"\n"
    envp = ctx.write(os.path.join(ctx.ws, ".env"), content, 0o600)
    ws = ctx.ws
    code = PRELUDE + f'''
ws = {ws!r}
r = {{}}
r['rel'] = rd('.env')
r['abs'] = rd(ws + '/.env')
r['proc_cwd'] = rd('/proc/self/cwd/.env')
r['append'] = t(wr, ws + '/.env', b'INJECTED=1\\n', 'ab')
t(os.link, ws + '/.env', ws + '/env-link')
r['link_read'] = rd(ws + '/env-link')
t(os.symlink, ws + '/.env', ws + '/env-sym')
r['symlink_read'] = rd(ws + '/env-sym')
r['rename'] = t(os.rename, ws + '/.env', ws + '/env-moved')
r['renamed_read'] = rd(ws + '/env-moved')
r['rel_after'] = rd('.env')
report(**r)
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    for k in ("rel", "abs", "proc_cwd", "link_read", "symlink_read",
              "renamed_read", "rel_after"):
        assert_unreadable(res[k], content, k)
    assert_denied(res["append"], DENIED, "append to .env")
    assert secret.decode() not in r.stdout
    with open(envp, "rb") as f:
        assert f.read() == content, "the host's .env was changed or moved"
    assert_ok(b)
    assert_same_worker(a, b)


def test_credentials_directory_is_masked(ctx):
    secret = secret_bytes()
    creds = ctx.visible_dir("agentz-iso-creds-", 0o700)
    key = ctx.write(os.path.join(creds, "openai_api_key"), secret + b"\n",
                    0o400)
    code = PRELUDE + f'''
creds = {creds!r}
report(ls=ls(creds), key=rd(creds + '/openai_api_key'),
       rename=t(os.rename, creds, creds + '-moved'),
       moved=rd(creds + '-moved/openai_api_key'))
'''
    ctx.cleanups.append(lambda: safe_rmtree(creds + "-moved"))
    r = ctx.run([code, OK_CELL], env={"CREDENTIALS_DIRECTORY": creds,
                                      "OPENAI_API_KEY": None})
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["ls"] in UNREADABLE or res["ls"] == [], res
    assert_unreadable(res["key"], secret + b"\n", "the key")
    assert_unreadable(res["moved"], secret + b"\n", "the moved key")
    assert secret.decode() not in r.stdout
    with open(key, "rb") as f:
        assert f.read() == secret + b"\n"
    assert_ok(b)


def test_unit_key_file_in_etc_agentz_is_masked(ctx):
    if not IS_ROOT:
        pytest.skip("creating /etc/agentz needs root")
    made_dir = False
    if not os.path.isdir("/etc/agentz"):
        try:
            os.mkdir("/etc/agentz", 0o755)
            made_dir = True
        except OSError as e:
            pytest.skip("cannot create /etc/agentz: %s" % e)
    key = "/etc/agentz/agentz-test-%s.key" % uuid.uuid4().hex
    secret = secret_bytes()

    def cleanup():
        try:
            os.unlink(key)
        except OSError:
            pass
        if made_dir:
            try:
                os.rmdir("/etc/agentz")
            except OSError:
                pass
    ctx.cleanups.append(cleanup)
    # World-readable on purpose: only the mask (not the uid) may stop it.
    with open(key, "wb") as f:
        f.write(secret)
    os.chmod(key, 0o644)
    code = PRELUDE + f'''
report(ls=ls('/etc/agentz'), key=rd({key!r}),
       control=rd('/etc/os-release')[:5])
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["control"] == "DATA:", res        # /etc itself is visible
    assert res["ls"] in UNREADABLE or os.path.basename(key) not in res["ls"], \
        res
    assert_unreadable(res["key"], secret, "the unit key")
    assert_ok(b)


def test_shadow_and_root_only_files_are_unreadable(ctx):
    secret = secret_bytes()
    d = ctx.visible_dir("agentz-iso-rootonly-", 0o755, owner=Who("root"))
    rootfile = ctx.write(os.path.join(d, "secret"), secret, 0o600,
                         owner=Who("root"))
    shadow = read_proc("/etc/shadow")
    code = PRELUDE + f'''
report(shadow=rd('/etc/shadow'), gshadow=rd('/etc/gshadow'),
       rootfile=rd({rootfile!r}), passwd=rd('/etc/passwd')[:5])
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["passwd"] == "DATA:", res
    # (a "root-only" file made by a test that is not root is not one)
    # not in the minimal view at all (only passwd and group of /etc's
    # account files, made for the run): absent, a stronger promise
    for k in ("shadow", "gshadow", "rootfile"):
        assert res[k] == "ENOENT", (k, res[k])
    if shadow:
        assert res["shadow"] != data_tag(shadow)
    assert_ok(b)


def _home_with_secrets(ctx):
    """A HOME holding every entry of the default mask list: world-readable
    as root (only the mask may stop the worker), the user's own 0600/0700
    as a plain user. Returns (home, {path: content}, control)."""
    priv = ctx.who.name == "user"
    dmode, fmode = (0o700, 0o600) if priv else (0o755, 0o644)
    home = ctx.visible_dir("agentz-iso-h-", 0o755)
    ctx.mkdir(os.path.join(home, ".config"))
    files = {}
    for entry in DEFAULT_MASKED:
        p = os.path.join(home, entry)
        if entry in MASKED_FILES:
            target = p
        else:
            ctx.mkdir(p, dmode)
            target = os.path.join(p, "secret")
        content = secret_bytes("home-secret-")
        ctx.write(target, content, fmode)
        files[target] = content
    control = ctx.write(os.path.join(home, "notes.txt"), b"not a secret\n",
                        fmode)
    return home, files, control


def test_home_secrets_are_masked(ctx):
    home, files, control = _home_with_secrets(ctx)
    dirs = [os.path.join(home, e) for e in DEFAULT_MASKED
            if e not in MASKED_FILES]
    if ctx.who.name == "root":
        made = not os.path.isdir("/root/.ssh")
        if made:
            os.mkdir("/root/.ssh", 0o700)
        rootkey = "/root/.ssh/agentz-test-%s" % uuid.uuid4().hex
        content = secret_bytes("ssh-")
        ctx.write(rootkey, content, 0o600)
        files[rootkey] = content

        def cleanup():
            os.unlink(rootkey)
            if made:
                os.rmdir("/root/.ssh")
        ctx.cleanups.append(cleanup)
        dirs.append("/root/.ssh")
    code = PRELUDE + f'''
report(files={{p: rd(p) for p in {sorted(files)!r}}},
       dirs={{d: ls(d) for d in {dirs!r}}}, control=rd({control!r}))
'''
    # the minimal view has no home: the operator binds it, and the masks
    # hold inside what is bound
    r = ctx.run([code, OK_CELL], args=["--ro-bind", home],
                env={"HOME": home})
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["control"] == data_tag(b"not a secret\n"), res  # HOME visible
    for p, content in files.items():
        assert_unreadable(res["files"][p], content, p)
    for d, listing in res["dirs"].items():
        assert listing in UNREADABLE or listing == [], (d, listing)
    assert_ok(b)

    # --no-default-masks drops the list (the probe can read what the mask
    # hid), while the workspace's .env stays masked.
    envsecret = b"OPENAI_API_KEY=" + secret_bytes() + b"\n"
    ctx.write(os.path.join(ctx.ws, ".env"), envsecret, 0o600)
    ssh = os.path.join(home, ".ssh", "secret")
    code = PRELUDE + f"report(ssh=rd({ssh!r}), env=rd('.env'))"
    r = ctx.run([code, OK_CELL], args=["--no-default-masks", "--ro-bind",
                                       home], env={"HOME": home})
    a, b = r.recs
    res = probe(a)
    assert res["ssh"] == data_tag(files[ssh]), res
    assert_unreadable(res["env"], envsecret, ".env under --no-default-masks")
    assert_ok(b)


def test_journal_is_out_of_reach_of_cells(ctx):
    # The shipped unit used to keep journal.jsonl in the working directory,
    # where a cell could rewrite what --resume runs; a journal inside the
    # workspace is now refused (test_journal.py), one beside it is masked.
    journal = os.path.join(ctx.visible_dir("agentz-iso-journal-"),
                           "journal.jsonl")
    code = PRELUDE + f'''
J = {journal!r}
r = {{}}
r['read'] = rd(J)
INJ = b'INJ' + b'ECTED'          # not in the code the journal records
line = b'{{"type":"input","cell":99,"code":"' + INJ + b'"}}\\n'
r['append'] = t(wr, J, line, 'ab')
r['evil'] = t(wr, J + '.evil', b'{{"type":"run","task":"' + INJ + b'"}}\\n')
r['replace'] = t(os.replace, J + '.evil', J)
r['rename'] = t(os.rename, J, J + '.moved')
r['unlink'] = t(os.unlink, J)
report(**r)
call_me(input='probe done')
'''
    # cell 0 asks for the first cell (the probe, 1), which asks for the
    # next one (2): each call_me is a function call, then a text answer
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": code, "summary": "probe the journal"}},
              {"text": "ok"},
              {"match": "probe done",
               "next_cell": {"code": "print('after-ok')\nquit()\n",
                             "summary": "next"}},
              {"text": "ok"}, {"text": "ok"}]
    with ModelServer(script) as srv:
        p, f = ctx.start([ctx.agentz, "--base-url", srv.base_url, "--journal",
                          journal, "a task"],
                         env={"OPENAI_API_KEY": None})
        out, err = ctx.communicate(p, RUN_TIMEOUT)
        f.close()
    assert p.returncode == 0, (out[-2000:], err[-2000:])
    lines = out.splitlines()
    probes = [json.loads(x[6:]) for x in lines if x.startswith("PROBE ")]
    assert len(probes) == 1, (out[-2000:], err[-2000:])
    res = probes[0]
    # the journal's folder is not in the minimal view: absent (ENOENT), a
    # stronger promise than the mask it had in the host's view
    assert res["read"] == "ENOENT", res
    assert_denied(res["append"], DENIED + ("ENOENT",), "append to the "
                  "journal")
    for k in ("replace", "rename", "unlink"):
        assert_denied(res[k], NOT_MOVABLE + ("ENOENT",), k)
    assert "after-ok" in lines, out[-2000:]           # the next cell ran
    with open(journal) as jf:
        text = jf.read()
    assert "INJECTED" not in text
    recs = [json.loads(x) for x in text.splitlines()]
    kinds = [(x["type"], x.get("cell")) for x in recs]
    assert kinds[0] == ("run", None), kinds
    assert ("output", 1) in kinds and ("output", 2) in kinds, kinds
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 0, recs[-1]


def test_mask_option_masks_files_and_folders(ctx):
    out = ctx.visible_dir("agentz-iso-mask-")
    s_file, s_inner, s_ws = secret_bytes(), secret_bytes(), secret_bytes()
    f1 = ctx.write(os.path.join(out, "secret.txt"), s_file)
    d1 = ctx.mkdir(os.path.join(out, "secretdir"))
    f2 = ctx.write(os.path.join(d1, "inner.txt"), s_inner)
    plain = ctx.write(os.path.join(out, "plain.txt"), b"plain\n")
    d2 = ctx.mkdir(os.path.join(ctx.ws, "private"))
    f3 = ctx.write(os.path.join(d2, "notes.txt"), s_ws)
    public = ctx.write(os.path.join(ctx.ws, "public.txt"), b"public\n")
    code = PRELUDE + f'''
report(f1=rd({f1!r}), f2=rd({f2!r}), f3=rd({f3!r}), d1=ls({d1!r}),
       d2=ls({d2!r}), plain=rd({plain!r}), public=rd({public!r}),
       write=t(wr, {f3!r}, b'overwritten'), write1=t(wr, {f1!r}, b'x'))
'''
    # out is outside the workspace: in the minimal view only when bound
    r = ctx.run([code, OK_CELL], args=["--ro-bind", out, "--mask", f1,
                                       "--mask", d1, "--mask", d2])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["plain"] == data_tag(b"plain\n"), res       # not masked
    assert res["public"] == data_tag(b"public\n"), res
    assert_unreadable(res["f1"], s_file, "--mask file")
    assert_unreadable(res["f2"], s_inner, "file in a --mask folder")
    assert_unreadable(res["f3"], s_ws, "file in a --mask folder of the "
                      "workspace")
    for k in ("d1", "d2"):
        assert res[k] in UNREADABLE or res[k] == [], (k, res[k])
    assert_denied(res["write"], DENIED + ("ENOENT",), "write into a mask")
    assert_denied(res["write1"], DENIED, "write to a masked file")
    for path, content in ((f1, s_file), (f2, s_inner), (f3, s_ws)):
        with open(path, "rb") as f:
            assert f.read() == content, path
    assert_ok(b)


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


# --- processes a cell leaves behind ------------------------------------------

def test_setsid_daemon_does_not_outlive_the_run(ctx):
    m = ctx.marker()
    code = PRELUDE + COUNT_MARKED + DAEMON % {"marker": m} + \
        "print(count_marked(%r))" % m
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert_ok(a, "1\n")               # the daemon was running in the run
    assert_ok(b)
    left = wait_unmarked(m)
    assert not left, "the daemon outlived agentz: %r" % left


def test_interrupted_cell_leaves_no_process_and_keeps_the_namespace(ctx):
    m = ctx.marker()
    code = STUBBORN_CHILD % {"marker": m} + "while True:\n    pass\n"
    after = PRELUDE + COUNT_MARKED + (
        "import subprocess\n"
        "try:\n    rc = child.wait(timeout=3)\n"
        "except subprocess.TimeoutExpired:\n    rc = 'alive'\n"
        "print(rc, count_marked(%r), x)" % m)
    r = ctx.run(["x = 1", code, after, OK_CELL],
                args=["--cell-timeout", "1", "--grace", "2"], expect_rc=1)
    a, t_, c, d = r.recs
    assert t_["kind"] == "timeout", brief(t_)
    assert t_["timeout"]["stage"] == "interrupted", brief(t_)
    assert t_["exception_type"] == "KeyboardInterrupt", brief(t_)
    assert t_["namespace"] == "kept", brief(t_)
    assert c["status"] == "ok", brief(c)
    rc, n, x = c["output"].split()
    assert rc.startswith("-") and n == "0" and x == "1", \
        "the child survived the interrupt: %r" % brief(c)
    assert_same_worker(a, c)
    assert_ok(d)
    left = wait_unmarked(m)
    assert not left, left


def test_cell_ignoring_sigint_is_killed_on_time_with_its_children(ctx):
    m = ctx.marker()
    code = STUBBORN_CHILD % {"marker": m} + (
        "import time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "time.sleep(1e6)")
    after = PRELUDE + COUNT_MARKED + \
        "print(count_marked(%r), 'x' in globals())" % m
    r = ctx.run(["x = 1", code, after, OK_CELL],
                args=["--cell-timeout", "1", "--grace", "2"], expect_rc=1)
    a, k, c, d = r.recs
    assert k["kind"] == "timeout", brief(k)
    assert k["timeout"]["stage"] == "killed", brief(k)
    assert k["namespace"] == "lost", brief(k)
    assert 1e6 <= k["duration_us"] <= (1 + 2 + 1) * 1e6, brief(k)
    assert_ok(c, "0 False\n")
    assert_fresh(a, c)
    assert_ok(d)
    left = wait_unmarked(m)
    assert not left, left


# --- /tmp and /dev/shm -------------------------------------------------------

def test_tmp_and_dev_shm_are_private_and_survive_a_respawn(ctx):
    name = "agentz-iso-%s" % uuid.uuid4().hex
    host_only = "agentz-iso-host-%s" % uuid.uuid4().hex
    paths = ["/tmp/" + name, "/dev/shm/" + name]
    host_paths = ["/tmp/" + host_only, "/dev/shm/" + host_only]

    def cleanup():
        for p in paths + host_paths:
            try:
                os.unlink(p)
            except OSError:
                pass
    ctx.cleanups.append(cleanup)
    for p in host_paths:
        with open(p, "w") as f:
            f.write("host\n")
    gate = Gate(ctx, "tmp")
    write = PRELUDE + (
        "for p in %r:\n    wr(p, b'kept ' + p.encode())\n"
        "print([os.path.exists(p) for p in %r])\n" % (paths, host_paths)) + \
        gate.code()
    read = "print(*[open(p).read() for p in %r], sep='|')" % paths
    h = ctx.start_exec([write, CRASH_CELL, read, OK_CELL],
                       args=["--cell-timeout", "20"])
    gate.wait(h.p)
    during = [p for p in paths if os.path.exists(p)]
    gate.release()
    r = ctx.finish(h, expect_rc=1)
    after = [p for p in paths if os.path.exists(p)]
    a, crash, c, d = r.recs
    assert_ok(a, "[False, False]\n")          # the host's files are not seen
    assert during == [], "a cell's file reached the host: %r" % during
    assert after == [], "a cell's file reached the host: %r" % after
    assert crash["kind"] == "crashed", brief(crash)
    assert_ok(c, "|".join("kept " + p for p in paths) + "\n")
    assert_fresh(crash, c)
    assert_ok(d)


def test_tmp_size_caps_a_flood_across_workers(ctx):
    name = "agentz-flood-%s" % uuid.uuid4().hex
    flood = PRELUDE + r'''
def flood(path, mb):
    n = 0
    chunk = b'\1' * (1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(mb):
            n += os.write(fd, chunk)
    except OSError as e:
        return [_code(e), n]
    finally:
        os.close(fd)
    return ['OK', n]
'''

    def cleanup():
        for d in ("/tmp/", "/dev/shm/"):
            for suffix in ("-a", "-b"):
                try:
                    os.unlink(d + name + suffix)
                except OSError:
                    pass
    ctx.cleanups.append(cleanup)
    first = flood + "report(shm=flood('/dev/shm/%s-a', 100))" % name
    second = flood + ("report(shm=flood('/dev/shm/%s-b', 100), "
                      "tmp=flood('/tmp/%s-a', 100), "
                      "kept=os.path.getsize('/dev/shm/%s-a'))"
                      % (name, name, name))
    clean = ("import os\nfor p in %r:\n    os.unlink(p)\nprint('ok')"
             % ["/dev/shm/%s-a" % name, "/dev/shm/%s-b" % name,
                "/tmp/%s-a" % name])
    r = ctx.run([first, CRASH_CELL, second, clean, OK_CELL],
                args=["--tmp-size", "64M", "--cell-timeout", "20"],
                expect_rc=1)
    a, crash, b, c, d = r.recs
    cap = 64 << 20
    assert a["status"] == "ok", brief(a)
    res_a = probe(a)
    assert res_a["shm"][0] == "ENOSPC" and res_a["shm"][1] <= cap, res_a
    assert crash["kind"] == "crashed", brief(crash)
    assert b["status"] == "ok", brief(b)
    res_b = probe(b)
    # the cap holds for the run, not per worker: the first file is still
    # there and the two together stay under it
    assert res_b["kept"] == res_a["shm"][1], res_b
    assert res_b["shm"][0] == "ENOSPC", res_b
    assert res_b["shm"][1] + res_b["kept"] <= cap, res_b
    assert res_b["tmp"][0] == "ENOSPC" and res_b["tmp"][1] <= cap, res_b
    assert_ok(c)
    assert_ok(d)
    assert not os.path.exists("/dev/shm/%s-a" % name)


# --- what keeps working ------------------------------------------------------

@pytest.mark.parametrize("base", ["var", "tmp"])
def test_workspace_is_writable_and_files_belong_to_the_invoker(ctx, base):
    ws = ctx.ws if base == "var" else \
        ctx.visible_dir("agentz-iso-ws-", base=tempfile.gettempdir())
    outside = [os.path.join(VISIBLE, "agentz-iso-out-%s" % uuid.uuid4().hex),
               "/etc/agentz-iso-out-%s" % uuid.uuid4().hex]
    scratch = "/tmp/agentz-iso-scratch-%s" % uuid.uuid4().hex

    def cleanup():
        for p in outside + [scratch]:
            try:
                os.unlink(p)
            except OSError:
                pass
    ctx.cleanups.append(cleanup)
    code = PRELUDE + f'''
wr('out.txt', b'hello')
os.mkdir('sub')
wr('sub/f', b'deep')
report(cwd=os.getcwd(), outside=[t(wr, p, b'x') for p in {outside!r}],
       tmp=t(wr, {scratch!r}, b'x'))
'''
    r = ctx.run([code, OK_CELL], cwd=ws)
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["cwd"] == os.path.realpath(ws), res
    assert res["tmp"] == "OK", res
    for p in ("out.txt", "sub", "sub/f"):
        st = os.stat(os.path.join(ws, p))
        assert (st.st_uid, st.st_gid) == (ctx.who.uid, ctx.who.gid), \
            (p, st.st_uid, st.st_gid)
    with open(os.path.join(ws, "sub", "f"), "rb") as f:
        assert f.read() == b"deep"
    for p, v in zip(outside, res["outside"]):
        # a folder outside the view is absent: ENOENT, a stronger refusal
        assert_denied(v, DENIED + ("ENOENT",), "write " + p)
        assert not os.path.exists(p), p
    assert_ok(b)


def test_subprocesses_threads_asyncio_and_stdlib_work(ctx):
    m = ctx.marker()
    code = f'''
import asyncio, concurrent.futures, email, json, multiprocessing, os, sqlite3
import ssl, subprocess, tempfile, threading, zlib
out = subprocess.run(['/bin/sh', '-c', 'echo "$MARK" sub'],
                     env={{'MARK': {m!r}, 'PATH': '/usr/bin:/bin'}},
                     capture_output=True, text=True, check=True).stdout.split()
box = []
th = threading.Thread(target=lambda: box.append(sum(range(10))))
th.start()
th.join()
async def twice(v):
    await asyncio.sleep(0)
    return await asyncio.to_thread(lambda: v * 2)
aio = await asyncio.gather(twice(1), twice(2))
db = sqlite3.connect(':memory:')
db.execute('create table t(x)')
db.execute('insert into t values (41)')
(sq,) = db.execute('select x + 1 from t').fetchone()
tls = ssl.create_default_context().verify_mode == ssl.CERT_REQUIRED
msg = email.message_from_string('Subject: hi\\n\\nbody')
lock = multiprocessing.Lock()
lock.acquire()
lock.release()
fd, path = tempfile.mkstemp()
os.write(fd, b'x')
os.close(fd)
os.unlink(path)
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    s = sum(ex.map(abs, [-1, -2, 3]))
print(out == [{m!r}, 'sub'], box[0], aio, sq, tls, msg['Subject'],
      json.dumps({{'a': 1}}), zlib.crc32(b'x'), s, path.startswith('/tmp/'))
'''
    r = ctx.run([code, OK_CELL], args=["--cell-timeout", "20"])
    a, b = r.recs
    assert_ok(a, "True 45 [2, 4] 42 True hi {\"a\": 1} %d 6 True\n"
              % __import__("zlib").crc32(b"x"))
    assert_ok(b)
    assert_same_worker(a, b)


def test_network_to_a_local_server_works_under_default(ctx):
    # the seccomp profile allows it; the host's 127.0.0.1 is reached only
    # with the host's network (test_network.py: not by default)
    line = "hello-%s\n" % uuid.uuid4().hex
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(RUN_TIMEOUT)
    port = srv.getsockname()[1]
    served = []

    def serve():
        try:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(line.encode())
                served.append(True)
        except OSError:
            pass
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    ctx.cleanups.append(srv.close)
    code = ("import socket\n"
            "s = socket.create_connection(('127.0.0.1', %d), timeout=10)\n"
            "print(s.makefile().readline(), end='')\ns.close()" % port)
    r = ctx.run([code, OK_CELL], args=["--sandbox", "default",
                                       "--network", "host"])
    a, b = r.recs
    assert "seccomp=default" in a["worker"]["sandbox"]
    assert_ok(a, line)
    assert_ok(b)
    th.join(5)
    assert served


def test_dev_is_minimal(ctx):
    code = PRELUDE + r'''
import stat
kinds = {}
for n in os.listdir('/dev'):
    m = os.lstat('/dev/' + n).st_mode
    kinds[n] = 'chr' if stat.S_ISCHR(m) else 'blk' if stat.S_ISBLK(m) else \
        'dir' if stat.S_ISDIR(m) else 'lnk' if stat.S_ISLNK(m) else 'other'
with open('/dev/urandom', 'rb') as f:
    rnd = len(f.read(16))
with open('/dev/zero', 'rb') as f:
    zero = f.read(4)
with open('/dev/null', 'wb') as f:
    f.write(b'x')
report(kinds=kinds, tty=t(open, '/dev/tty', 'rb'), rnd=rnd,
       zero=zero == bytes(4))
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    kinds = res["kinds"]
    for n in ("null", "zero", "urandom"):
        assert kinds.get(n) == "chr", kinds
    devices = {n for n, k in kinds.items() if k in ("chr", "blk")}
    assert devices <= {"null", "zero", "full", "random", "urandom"}, devices
    assert "tty" not in kinds and "pts" not in kinds and \
        "console" not in kinds and "ptmx" not in kinds, kinds
    assert_denied(res["tty"], ("ENOENT", "ENXIO", "EACCES"), "/dev/tty")
    assert res["rnd"] == 16 and res["zero"], res
    assert_ok(b)


# --- reporting and options ---------------------------------------------------

IDENTITY = r'''
import json, os
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(),
                  'groups': os.getgroups(), 'cap': st['CapEff'].strip()}))
'''


def test_worker_isolation_names_the_active_mechanisms(ctx):
    r = ctx.run([IDENTITY, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    iso = a["worker"].get("isolation")
    assert iso, brief(a)
    tokens = iso.split(",")
    ident = json.loads(a["output"])
    assert ident["cap"] == "0000000000000000", ident
    want = {"mountns", "pidns", "ipcns", "utsns", "view", "netns"}
    if ctx.who.name == "root":
        assert want | {"idmap"} <= set(tokens), iso
        assert "userns" not in tokens, iso
        uids = [int(x[4:]) for x in tokens if x.startswith("uid=")]
        assert len(uids) == 1 and uids[0] >= JAIL_UID_BASE, iso
        assert ident["uid"] == uids[0] and ident["gid"] == uids[0], ident
        assert ident["groups"] == [], ident
    else:
        assert want | {"userns"} <= set(tokens), iso
        assert not [x for x in tokens if x.startswith("uid=")], iso
        assert "idmap" not in tokens, iso
        assert ident["uid"] == ctx.who.uid, ident
    abi = landlock_abi()
    levels = [int(x[9:]) for x in tokens if x.startswith("landlock=")]
    if abi:
        # scoped signals need ABI 6; never more than the kernel has
        assert len(levels) == 1 and min(abi, 6) <= levels[0] <= abi, iso
    assert_ok(b)
    assert b["worker"]["isolation"] == iso


def test_concurrent_runs_get_distinct_worker_uids():
    if not IS_ROOT:
        pytest.skip("dedicated worker uids are for root")
    c1, c2 = Ctx(Who("root")), Ctx(Who("root"))
    try:
        g1, g2 = Gate(c1, "slot"), Gate(c2, "slot")
        uid = "import os\nprint(os.getuid())"
        h1 = c1.start_exec([g1.code(), uid], args=["--cell-timeout", "20"])
        h2 = c2.start_exec([g2.code(), uid], args=["--cell-timeout", "20"])
        g1.wait(h1.p)
        g2.wait(h2.p)                 # both runs' workers are alive now
        g1.release()
        g2.release()
        r1, r2 = c1.finish(h1), c2.finish(h2)
    finally:
        c1.close()
        c2.close()
    u1, u2 = int(r1.recs[1]["output"]), int(r2.recs[1]["output"])
    assert u1 >= JAIL_UID_BASE and u2 >= JAIL_UID_BASE, (u1, u2)
    assert u1 != u2, "two concurrent runs share worker uid %d" % u1


def test_root_as_workspace_is_a_usage_error(ctx):
    # the same options with a real workspace run
    r = ctx.run([OK_CELL], args=["--isolation", "required", "--workspace",
                                 ctx.ws])
    assert_ok(r.recs[0])
    assert not r.recs[0]["worker"]["isolation"].startswith("none")
    rc, out, err = ctx.run_raw(["--json", "--isolation", "required",
                                "--workspace", "/", "-"], cells(OK_CELL))
    assert rc == 2 and out == "", (rc, out, err)
    assert "workspace" in err, err
    rc, out, err = ctx.run_raw(["--json", "--isolation", "bogus", "-"],
                               cells(OK_CELL))
    assert rc == 2 and out == "", (rc, out, err)


def test_isolation_off_reports_none_and_shows_the_host(ctx):
    host_only = "/tmp/agentz-iso-host-%s" % uuid.uuid4().hex
    with open(host_only, "w") as f:
        f.write("host\n")
    ctx.cleanups.append(lambda: os.unlink(host_only))
    code = "import os\nprint(os.path.exists(%r))" % host_only
    r = ctx.run([code, OK_CELL], args=["--isolation", "off"])
    a, b = r.recs
    assert a["worker"]["isolation"].startswith("none"), brief(a)
    assert_ok(a, "True\n")           # no view: the host's /tmp is there
    assert_ok(b)


# --- degrading honestly ------------------------------------------------------

def _unshared(args, cwd, code="print('ok')\n", map_root=False):
    """agentz exec inside a user namespace made by unshare(1): without a
    mapping our ids are unmapped there, so no further user namespace can
    be made (as where user namespaces are disabled); with map_root, uid 0
    inside is the host's root."""
    cmd = ["unshare", "--user"] + (["--map-root-user"] if map_root else []) \
        + [os.path.join(BUILD, "agentz"), "exec", "--json"] + args + ["-"]
    return subprocess.run(cmd, input=code, cwd=cwd, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_required_refuses_and_names_what_is_missing(tmp_path):
    p = _unshared(["--isolation", "required"], tmp_path)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert p.stdout == ""                       # no cell ran
    assert "isolation required but unavailable" in p.stderr, p.stderr
    assert "namespaces" in p.stderr and "Operation not permitted" in \
        p.stderr, p.stderr


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_best_effort_runs_says_why_and_still_denies_sysv(tmp_path):
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "r = libc.shmget(0, 4096, 0o1600)\n"     # IPC_PRIVATE|IPC_CREAT
            "print(r, os.strerror(ctypes.get_errno()))\n")
    p = _unshared(["--isolation", "best-effort"], tmp_path, code)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["worker"]["isolation"].startswith("none (cannot make the "
                                                 "worker's namespaces"), rec
    assert "isolation incomplete" in p.stderr, p.stderr
    # the host's IPC namespace: SysV is refused by the seccomp profile
    assert "no-sysv" in rec["worker"]["sandbox"], rec["worker"]
    assert rec["output"] == "-1 Operation not permitted\n", rec["output"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare(1)")
def test_root_of_a_user_namespace_is_still_the_hosts_root(tmp_path):
    # uid 0 mapped to the host's uid 0: the worker must not keep it, and
    # no other uid can be mapped from there, so required refuses.
    p = _unshared(["--isolation", "required"], tmp_path, map_root=True)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "id mapping" in p.stderr, p.stderr


def test_workspace_is_the_cwd_also_without_a_view(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    p = subprocess.run([os.path.join(BUILD, "agentz"), "exec", "--json",
                        "--isolation", "off", "--workspace", str(ws), "-"],
                       input="import os\nprint(os.getcwd())\n", cwd="/",
                       capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["output"] == "%s\n" % ws, rec
    assert rec["worker"]["isolation"] == "none (--isolation off)"
