"""Real isolation, reporting and options (issue 8; SPEC section 7): what the
worker says of its isolation, distinct worker uids, --isolation off, and
degrading honestly (required refuses, best-effort says why).

Each case runs as root and as a plain user through isolation_util's ctx
fixture; the safety rules are in isolation_util's docstring.
"""
import json
import os
import shutil
import subprocess
import uuid

import pytest

from agentz_util import BUILD, cells
from isolation_util import (Ctx, Gate, IS_ROOT, JAIL_UID_BASE, OK_CELL,
                            RUN_TIMEOUT, Who, assert_ok, brief, landlock_abi)
from isolation_util import ctx, who  # noqa: F401 (fixtures)


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
            "print(r, os.strerror(ctypes.get_errno()))\n"
            "for p in ('/var', '/home', '/root'):\n"
            "    try:\n"
            "        os.listdir(p)\n"
            "        print(p, 'listed')\n"
            "    except OSError as e:\n"
            "        print(e.strerror)\n"
            "open('written', 'w').write('x')\n"
            "print(open('/etc/hostname').read() != '')\n")
    p = _unshared(["--isolation", "best-effort"], tmp_path, code)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    # no view, but a Landlock domain keeps the cells to what it would show
    assert rec["worker"]["isolation"].startswith("landlock="), rec
    assert "(no view: cannot make the worker's namespaces" in \
        rec["worker"]["isolation"], rec
    assert "isolation incomplete" in p.stderr, p.stderr
    # the host's IPC namespace: SysV is refused by the seccomp profile
    assert "no-sysv" in rec["worker"]["sandbox"], rec["worker"]
    assert rec["output"] == "-1 Operation not permitted\n" + \
        "Permission denied\n" * 3 + "True\n", rec["output"]
    assert (tmp_path / "written").read_text() == "x"


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
