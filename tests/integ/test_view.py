"""The minimal view (issue 20, item 1): an empty root holding only what
the interpreter needs of the host, read-only (/usr, /bin, /sbin, /lib*, a
filtered /etc), its own /dev, /proc, /tmp and /dev/shm, the workspace, and
what --ro-bind / --bind add. Nothing else of the host: not the homes, /root,
/run, /var, /srv, /opt, /mnt, /sys.

Each case runs as root and as a plain user (isolation_util.py's Ctx: the
real binary, copies any user can run, a session leader with a hard
timeout), asserts the attack fails, the supervisor lives and the next cell
works. Secrets are fakes the test plants in folders it makes (under
/var/tmp or /tmp) and removes; nothing is written in the machine's real
/root, /home, /opt or /srv.
"""
import grp
import os
import socket
import tempfile
import uuid

import pytest

from agentz_util import cells
from isolation_util import (IS_ROOT, OK_CELL, PRELUDE, UNREADABLE,
                            assert_ok, assert_same_worker, brief, data_tag,
                            probe, secret_bytes)
from isolation_util import ctx, who  # noqa: F401 (fixtures)

ABSENT_TOP = ("home", "root", "run", "var", "srv", "opt", "mnt", "media",
              "boot", "sys")


def host_tops():
    """What the view keeps of the host's top level: /usr, and /bin, /sbin
    and every /lib* the host has."""
    keep = {"usr"}
    for n in os.listdir("/"):
        if n in ("bin", "sbin") or n.startswith("lib"):
            keep.add(n)
    return keep


def tmp_workspace(ctx):
    """A workspace under /tmp (made in the view's private /tmp): nothing
    of its path adds a top-level folder to the view."""
    return ctx.visible_dir("agentz-view-ws-", base=tempfile.gettempdir())


def test_only_what_the_interpreter_needs_is_in_the_view(ctx):
    ws = tmp_workspace(ctx)
    # secrets outside the workspace, in places the test makes and removes
    home = ctx.visible_dir("agentz-view-home-", 0o755)
    hist = ctx.write(os.path.join(home, ".bash_history"), secret_bytes())
    ctx.mkdir(os.path.join(home, ".config", "openai"))
    tok = ctx.write(os.path.join(home, ".config", "openai", "token"),
                    secret_bytes())
    vartmp = ctx.write(os.path.join(ctx.visible_dir("agentz-view-vt-"),
                                    "secret"), secret_bytes())
    optlike = ctx.visible_dir("agentz-view-opt-")
    proj = ctx.write(os.path.join(ctx.mkdir(os.path.join(optlike, "proj")),
                                  "main.c"), secret_bytes())
    secrets = [hist, tok, vartmp, proj, home, optlike]
    code = PRELUDE + f'''
import pwd
def entries(path):
    with open(path) as f:
        return [l.rstrip('\\n').split(':') for l in f if l.strip()]
report(top=ls('/'), sys=ls('/sys'),
       absent={{p: os.path.lexists(p) for p in {secrets!r}}},
       reads={{p: rd(p) for p in {secrets[:4]!r}}},
       tops={{n: os.path.lexists('/' + n) for n in {list(ABSENT_TOP)!r}}},
       passwd=entries('/etc/passwd'), group=entries('/etc/group'),
       shadow=rd('/etc/shadow'), uid=os.getuid(), gid=os.getgid(),
       me=pwd.getpwuid(os.getuid()).pw_uid, ws=os.getcwd())
'''
    r = ctx.run([code, OK_CELL], cwd=ws)
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    want = host_tops() | {"etc", "dev", "proc", "tmp"}
    assert set(res["top"]) == want, (sorted(res["top"]), sorted(want))
    assert res["sys"] in ("ENOENT", []), res["sys"]
    assert not any(res["absent"].values()), res["absent"]
    for p, got in res["reads"].items():
        assert got == "ENOENT", (p, got)
    assert not any(res["tops"].values()), res["tops"]
    assert {int(e[2]) for e in res["passwd"]} == {0, res["uid"]}, \
        res["passwd"]
    assert {int(e[2]) for e in res["group"]} == {0, res["gid"]}, res["group"]
    assert all(e[3] == "" for e in res["group"]), res["group"]
    assert res["me"] == res["uid"]
    assert res["shadow"] == "ENOENT", res["shadow"]
    assert res["ws"] == ws
    assert_ok(b)
    assert_same_worker(a, b)


def test_a_group_owned_socket_outside_the_view_is_unreachable(ctx):
    """A root:group 0660 socket (a docker.sock stand-in) where the user
    running agentz is in the group: not in the view, so not reachable."""
    if ctx.who.name == "user" and not IS_ROOT:
        pytest.skip("giving the plain user a supplementary group needs root")
    g = grp.getgrnam("users").gr_gid
    if ctx.who.name == "user":
        base_kw = ctx.who.popen_kw()
        ctx.who.popen_kw = lambda: dict(base_kw, extra_groups=[g])
    d = ctx.visible_dir("agentz-view-sock-", 0o755)
    path = os.path.join(d, "docker.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    ctx.cleanups.append(srv.close)
    if IS_ROOT:
        os.chown(path, 0, g)
    os.chmod(path, 0o660)
    code = PRELUDE + f'''
import socket
def conn(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
    finally:
        s.close()
report(connect=t(conn, {path!r}), groups=os.getgroups())
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["connect"] == "ENOENT", res
    assert_ok(b)


def test_the_usual_tools_work_in_the_view(ctx):
    code = r'''
import json, socket, ssl, subprocess, sys, sysconfig
import yaml
def run(*a):
    return subprocess.run(a, capture_output=True, text=True, timeout=20)
ls = run('ls', '/usr/bin')
git = run('git', '--version')
sh = run('sh', '-c', 'echo sh-ok')
py = run('python3', '-c', 'import json, ssl, sqlite3; print("py-ok")')
store = ssl.create_default_context().cert_store_stats()
addrs = {a[4][0] for a in socket.getaddrinfo('localhost', 80)}
print(json.dumps({'ls': ls.returncode == 0 and 'python3' in ls.stdout,
                  'git': git.stdout.startswith('git version'),
                  'sh': sh.stdout.strip(), 'py': py.stdout.strip(),
                  'certs': store['x509_ca'] > 0,
                  'localhost': '127.0.0.1' in addrs or '::1' in addrs,
                  'stdlib': sysconfig.get_paths()['stdlib'],
                  'yaml': yaml.safe_load('a: 1') == {'a': 1}}))
'''
    r = ctx.run([code, OK_CELL], args=["--cell-timeout", "30"])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    import json
    res = json.loads(a["output"])
    assert res["ls"] and res["git"] and res["certs"] and res["localhost"], res
    assert res["sh"] == "sh-ok" and res["py"] == "py-ok", res
    assert res["stdlib"].startswith("/usr/lib/python3"), res
    assert res["yaml"], res
    assert_ok(b)


def _bind_dirs(ctx):
    ro = ctx.visible_dir("agentz-view-ro-")
    ctx.write(os.path.join(ro, "data.txt"), b"ro-data\n")
    secret = secret_bytes()
    masked = ctx.write(os.path.join(ro, "secret.txt"), secret)
    rw = ctx.visible_dir("agentz-view-rw-")
    return ro, rw, masked, secret


def test_ro_bind_and_bind_add_paths(ctx):
    ro, rw, masked, secret = _bind_dirs(ctx)
    tag = uuid.uuid4().hex
    code = PRELUDE + f'''
ro, rw = {ro!r}, '/data/rw'
report(read=rd(ro + '/data.txt'), write=t(wr, ro + '/new', b'x'),
       masked=rd(ro + '/secret.txt'), moved=rd('/data/ro/secret.txt'),
       moved_read=rd('/data/ro/data.txt'),
       wrote=t(wr, rw + '/out.txt', {tag!r}.encode()),
       listing=ls(rw))
'''
    r = ctx.run([code, OK_CELL],
                args=["--ro-bind", ro, "--ro-bind", ro + ":/data/ro",
                      "--bind", rw + ":/data/rw", "--mask", masked])
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    assert res["read"] == data_tag(b"ro-data\n"), res
    assert res["moved_read"] == data_tag(b"ro-data\n"), res
    assert res["write"] in ("EROFS", "EACCES", "EPERM"), res
    assert res["masked"] != data_tag(secret), res
    assert res["moved"] != data_tag(secret), res
    assert res["masked"] in UNREADABLE or res["masked"].startswith("DATA:0:")
    assert res["moved"] in UNREADABLE or res["moved"].startswith("DATA:0:")
    assert res["wrote"] == "OK", res
    with open(os.path.join(rw, "out.txt")) as f:
        assert f.read() == tag
    assert not os.path.exists(os.path.join(ro, "new"))
    assert_ok(b)
    assert_same_worker(a, b)


@pytest.mark.parametrize("opt,path,why", [
    ("--ro-bind", "/", "the root"),
    ("--bind", "/proc", "/proc"),
    ("--ro-bind", "/sys", "/sys"),
    ("--ro-bind", "/dev", "/dev"),
    ("--bind", "/dev/shm", "/dev"),
    ("--ro-bind", "@RO@:/proc/x", "/proc"),
    ("--ro-bind", "@RO@:/", "the root"),
    ("--ro-bind", "@RO@:relative", "plain absolute"),
    ("--ro-bind", "@RT@", "control sockets"),
    ("--bind", "@RT@/inner", "control sockets"),
    ("--ro-bind", "/nonexistent-agentz-view", "no such"),
])
def test_refused_binds_are_usage_errors(ctx, opt, path, why):
    ro = ctx.visible_dir("agentz-view-ro-")
    rt = ctx.visible_dir("agentz-view-rt-", 0o700)
    ctx.mkdir(os.path.join(rt, "inner"))
    path = path.replace("@RO@", ro).replace("@RT@", rt)
    rc, out, err = ctx.run_raw(["--json", opt, path, "-"], cells("print(1)"),
                               env={"RUNTIME_DIRECTORY": rt})
    assert rc == 2, (rc, out, err)
    assert opt in err and "refused" in err and why in err, err
    assert out == "", out
    # the next run, without it, works
    r = ctx.run([OK_CELL])
    assert_ok(r.recs[0])


def test_the_journals_folder_cannot_be_bound(ctx):
    jdir = ctx.visible_dir("agentz-view-journal-")
    journal = os.path.join(jdir, "run.jsonl")
    p, f = ctx.start([ctx.agentz, "--journal", journal, "--ro-bind", jdir,
                      "a task"], env={"OPENAI_API_KEY": "sk-test-unused"})
    out, err = ctx.communicate(p, 30)
    f.close()
    assert p.returncode == 2, (out, err)
    assert "--ro-bind" in err and "journal" in err and "refused" in err, err
