"""What a cell leaves behind must not hurt the operator (issue 18 section 5).

Each case lets a hostile cell leave its trap in the workspace, as root and
as a plain user (nobody, through setpriv-style uid switching of the test
harness, as the test_isolation tests do), and then checks what the operator
does next: a set-id file left there, a `.env` read by the next agentz in
that folder, a `.git` whose config the operator's `git status` runs.

Safety: the protection under test may be broken.
- The copy of python3 a cell tries to make set-id lives in a folder only
  its owner may enter (0700), and the test takes every set-id bit off and
  removes the workspace afterwards.
- The model server a trap would send the key to is the test's own, on
  127.0.0.1; the key is a fake made here. A run that goes to the default
  base URL goes through a proxy on a closed local port: it never leaves
  the machine.
- The git hook a trap plants only creates a file in a folder of the test.
- Every run has a hard timeout after which its process group is killed.
"""
import os
import stat
import subprocess
import uuid

import pytest

from agentz_util import wait_file
from model_server import ModelServer
from isolation_util import (DENIED, OK_CELL, PRELUDE, RUN_TIMEOUT,
                            assert_denied, assert_unreadable, brief, data_tag,
                            probe, secret_bytes)
from isolation_util import ctx, who  # noqa: F401 (the fixtures)

MARKER = ".agentz-workspace"
SETID = stat.S_ISUID | stat.S_ISGID



def setid_files(top):
    """Every path under top (top included) with a set-id bit."""
    found = [top] if os.lstat(top).st_mode & SETID else []
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(d, name)
            if os.lstat(p).st_mode & SETID:
                found.append(p)
    return found


def defuse(top):
    """Takes every set-id bit off (cleanup if the protection failed)."""
    for p in setid_files(top):
        try:
            os.chmod(p, os.lstat(p).st_mode & 0o777)
        except OSError:
            pass


def mount_opts(mountinfo, path):
    """The per-mount options of the mount at path in a mountinfo text."""
    for line in mountinfo.splitlines():
        f = line.split()
        if len(f) > 5 and f[4] == path:
            return set(f[5].split(","))
    return None


# --- set-id files ------------------------------------------------------------

SETID_CELL = PRELUDE + r'''
import shutil, stat, subprocess
os.mkdir('priv', 0o700)
shutil.copy('/usr/bin/python3', 'priv/py')
os.mkdir('priv/d', 0o755)
r = {}
r['chmod'] = t(os.chmod, 'priv/py', 0o6755)
r['chmod_gid'] = t(os.chmod, 'priv/py', 0o2755)
fd = os.open('priv/py', os.O_RDONLY)
r['fchmod'] = t(os.fchmod, fd, 0o4755)
os.close(fd)
dfd = os.open('priv', os.O_RDONLY)
r['fchmodat'] = t(os.chmod, 'py', 0o4755, dir_fd=dfd)
os.close(dfd)
r['dir_setgid'] = t(os.chmod, 'priv/d', 0o2755)
r['open_creat'] = t(os.open, 'priv/c1', os.O_CREAT | os.O_WRONLY, 0o4755)
r['mknod'] = t(os.mknod, 'priv/c2', stat.S_IFREG | 0o6755)
r['mkdir'] = t(os.mkdir, 'priv/d2', 0o2755)
r['xattr_cap'] = t(os.setxattr, 'priv/py', 'security.capability',
                   b'\x01\x00\x00\x02' + b'\xff' * 16)
r['xattr_user'] = t(os.setxattr, 'priv/py', 'user.x', b'1')
p = subprocess.run(['/bin/chmod', 'u+s,g+s', 'priv/py'],
                   capture_output=True)
r['chmod_cmd'] = p.returncode
p = subprocess.run(['/usr/bin/install', '-m', '4755', '/usr/bin/python3',
                    'priv/py2'], capture_output=True)
r['install_cmd'] = p.returncode
r['plain'] = t(os.chmod, 'priv/py', 0o750)
r['copy2'] = t(shutil.copy2, '/usr/bin/python3', 'priv/py3')
r['mountinfo'] = open('/proc/self/mountinfo').read()
r['left'] = [n for n in os.listdir('priv')
             if os.lstat('priv/' + n).st_mode & 0o6000]
report(**r)
'''


def test_a_cell_leaves_no_set_id_file(ctx):
    """chmod 06755 on a copy of python3 (and every other way to a set-id
    bit or a file capability) fails in the cell; after the run no file in
    the workspace is set-id; the workspace is bound nosuid,nodev."""
    try:
        r = ctx.run([SETID_CELL, OK_CELL])
        found = setid_files(ctx.ws)
    finally:
        defuse(ctx.ws)
    a, b = r.recs
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    for k in ("chmod", "chmod_gid", "fchmod", "fchmodat", "dir_setgid",
              "open_creat", "mknod", "mkdir"):
        assert res[k] == "EPERM", (k, res[k])
    assert res["xattr_cap"] in ("ENOTSUP", "EOPNOTSUPP", "EPERM"), res["xattr_cap"]
    assert res["chmod_cmd"] != 0 and res["install_cmd"] != 0, res
    # plain modes and copies still work
    assert res["plain"] == "OK" and res["copy2"] == "OK", res
    assert res["left"] == [], res["left"]
    assert found == [], "set-id files left in the workspace: %r" % found
    opts = mount_opts(res["mountinfo"], ctx.ws)
    assert opts is not None and {"nosuid", "nodev"} <= opts, opts
    assert b["status"] == "ok", brief(b)


# --- .env --------------------------------------------------------------------

def agent_argv(ctx, *extra):
    return [ctx.agentz, "--max-retries", "0", "--outage-patience", "0",
            "--max-cells", "1", "--cell-timeout", "30", *extra,
            "Summarise the folder."]


def run_agent(ctx, cwd, env):
    p, f = ctx.start(agent_argv(ctx), env=env, cwd=cwd)
    out, err = ctx.communicate(p, RUN_TIMEOUT)
    f.close()
    return p.returncode, out, err


def test_a_dotenv_a_cell_wrote_is_not_loaded_by_the_next_run(ctx):
    """A cell writes WORKSPACE/.env (and sub/.env) pointing
    OPENAI_BASE_URL at its own server: the operator's next interactive
    agentz there does not load it (says so) and the key goes nowhere."""
    key = "sk-fake-" + uuid.uuid4().hex
    with ModelServer([{"text": "trap"}] * 4) as trap:
        plant = PRELUDE + f'''
body = b"OPENAI_BASE_URL={trap.base_url}\\nTRAP_LOADED=1\\n"
os.makedirs('sub', exist_ok=True)
r = dict(root=t(wr, '.env', body), sub=t(wr, 'sub/.env', body))
# a marker of its own beside sub/.env, naming it as agentz would
st = os.lstat('sub/.env')
line = 'dotenv %d %d %d %d.%09d\\n' % (st.st_dev, st.st_ino, st.st_size,
                                       st.st_ctime_ns // 10**9,
                                       st.st_ctime_ns % 10**9)
r['forged'] = t(wr, 'sub/.agentz-workspace', line.encode())
report(**r)
'''
        r = ctx.run([plant])
        res = probe(r.recs[0])
        assert res == {"root": "OK", "sub": "OK", "forged": "OK"}, res
        assert os.path.exists(os.path.join(ctx.ws, MARKER))
        env = {"OPENAI_API_KEY": key,
               # the default base URL: through a closed local port only
               "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": None,
               "no_proxy": None, "NO_PROXY": None}
        for cwd in (ctx.ws, os.path.join(ctx.ws, "sub")):
            rc, out, err = run_agent(ctx, cwd, env)
            assert "not loading %s/.env" % cwd in err, err[-2000:]
            assert "workspace of an agentz run" in err, err[-2000:]
        # and `agentz exec` (its cells see what .env would have set)
        rc, out, err = ctx.run_raw(["--pass-env", "TRAP_LOADED", "-"],
                                   "import os\n"
                                   "print('LOADED', os.environ.get("
                                   "'TRAP_LOADED'))\n")
        assert "LOADED None" in out, (out, err[-2000:])
        assert trap.requests == [], \
            "the trap's server was called: %r" % [
                q.get("authorization") for q in trap.requests]


@pytest.mark.parametrize("kind", ["fifo", "dev_zero_link", "link",
                                  "folder", "huge"])
def test_dotenv_is_read_only_from_a_small_regular_file(ctx, kind):
    """A FIFO or a /dev/zero link as .env hung the next run: now every
    .env that is not a small regular file is refused at once (exit 2),
    naming why."""
    d = ctx.visible_dir("agentz-dotenv-")
    path = os.path.join(d, ".env")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero_link":
        os.symlink("/dev/zero", path)
    elif kind == "link":
        target = ctx.write(os.path.join(d, "real.env"), b"X_FROM_LINK=1\n")
        os.symlink(target, path)
    elif kind == "folder":
        os.mkdir(path)
    else:
        ctx.write(path, b"X=" + b"y" * 70000 + b"\n")
    if os.path.lexists(path):
        ctx.who.own(path)
    p, f = ctx.start([ctx.agentz, "exec", "-"], OK_CELL + "\n", cwd=d)
    out, err = ctx.communicate(p, RUN_TIMEOUT)
    f.close()
    assert p.returncode == 2, (p.returncode, err[-2000:])
    want = {"fifo": ".env is a FIFO", "dev_zero_link": ".env is a symbolic "
            "link", "link": ".env is a symbolic link", "folder": ".env is a "
            "folder", "huge": "more than the 65536 a .env may have"}[kind]
    assert want in err, err[-2000:]
    assert "regular file" in err or kind == "huge", err[-2000:]
    assert not os.path.exists(os.path.join(d, MARKER)), "the run started"


def test_the_operators_dotenv_in_the_workspace_stays_loaded(ctx):
    """The .env that was in the workspace when a run loaded it (masked in
    the view since) is loaded by the next runs there; once it changed
    (what a cell could have done), it is refused."""
    ctx.write(os.path.join(ctx.ws, ".env"), b"MY_SETTING=one\n", 0o600)
    show = "import os\nprint('GOT', os.environ.get('MY_SETTING'))\n"
    for _ in range(2):
        rc, out, err = ctx.run_raw(["--pass-env", "MY_SETTING", "-"], show)
        assert rc == 0 and "GOT one" in out, (out, err[-2000:])
        assert "not loading" not in err, err[-2000:]
    ctx.write(os.path.join(ctx.ws, ".env"), b"MY_SETTING=two\n", 0o600)
    rc, out, err = ctx.run_raw(["--pass-env", "MY_SETTING", "-"], show)
    assert rc == 0 and "GOT None" in out, (out, err[-2000:])
    assert "not loading %s/.env" % ctx.ws in err, err[-2000:]


def test_cwd_dotenv_is_masked_when_the_workspace_is_elsewhere(ctx):
    """agentz loads ./.env from its working directory; with --workspace
    pointing elsewhere that .env is masked in the view too."""
    secret = secret_bytes()
    content = b"OPENAI_API_KEY=" + secret + b"\n"
    cwd = ctx.visible_dir("agentz-cwd-")
    # readable by others, as many are: only the mask keeps cells out
    ctx.write(os.path.join(cwd, ".env"), content, 0o644)
    code = PRELUDE + f'''
report(abs=rd({cwd + "/.env"!r}), append=t(wr, {cwd + "/.env"!r}, b'X=1',
       'ab'))
'''
    # the minimal view has no cwd outside the workspace (absent, ENOENT);
    # bound read-write, only the mask keeps the .env from cells
    r = ctx.run([code], args=("--workspace", ctx.ws), cwd=cwd)
    res = probe(r.recs[0])
    assert res["abs"] == "ENOENT" and res["append"] == "ENOENT", res
    r = ctx.run([code], args=("--workspace", ctx.ws, "--bind", cwd), cwd=cwd)
    res = probe(r.recs[0])
    assert_unreadable(res["abs"], content, "the cwd's .env")
    assert res["abs"] != data_tag(content)
    assert_denied(res["append"], DENIED, "append to the cwd's .env")
    with open(os.path.join(cwd, ".env"), "rb") as f:
        assert f.read() == content


# --- .git --------------------------------------------------------------------

def git(ctx, cwd, *args, env=None):
    e = ctx.env({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    e.update(env or {})
    return subprocess.run(["git", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=60,
                          **ctx.who.popen_kw())


def hook_line(sentinel):
    return "[core]\n\tfsmonitor = touch %s\n" % sentinel


GIT_CELL = PRELUDE + r'''
import subprocess
line = LINE
r = {}
r['root_config'] = t(wr, '.git/config', line.encode(), 'ab')
r['root_hook'] = t(wr, '.git/hooks/post-checkout', b'#!/bin/sh\n', 'wb')
r['nested_config'] = t(wr, 'deep/er/nested/.git/config', line.encode(), 'ab')
r['root_rename'] = t(os.rename, '.git', 'git-moved')
r['marker'] = t(os.unlink, '.agentz-workspace')
p = subprocess.run(['git', 'init', '-q', 'sub'], capture_output=True)
r['init_sub'] = p.returncode
r['sub_config'] = t(wr, 'sub/.git/config', line.encode(), 'ab')
os.makedirs('gitfile', exist_ok=True)
r['gitfile'] = t(wr, 'gitfile/.git', b'gitdir: ../sub/.git\n')
report(**r)
'''


def test_git_is_read_only_and_a_repository_a_cell_makes_is_not_trusted(ctx):
    """core.fsmonitor appended to .git/config would run at the operator's
    next `git status` (shell prompts run it on cd): the workspace's .git
    is read-only in the view, and a repository a cell makes is renamed
    when the run ends, so the operator's prompt-style `git status` runs
    no hook anywhere."""
    spot = ctx.visible_dir("agentz-git-spot-")
    sentinel = os.path.join(spot, "hook-ran")
    assert git(ctx, ctx.ws, "init", "-q").returncode == 0
    nested = os.path.join(ctx.ws, "deep", "er", "nested")
    os.makedirs(nested)
    for d in ("deep", "deep/er", "deep/er/nested"):
        ctx.who.own(os.path.join(ctx.ws, d))
    assert git(ctx, nested, "init", "-q").returncode == 0
    with open(os.path.join(ctx.ws, ".git", "config"), "rb") as f:
        config = f.read()
    r = ctx.run([GIT_CELL.replace("LINE", repr(hook_line(sentinel))),
                 OK_CELL])
    a = r.recs[0]
    assert a["status"] == "ok", brief(a)
    res = probe(a)
    for k in ("root_config", "root_hook", "nested_config"):
        assert_denied(res[k], DENIED, k)
    assert res["root_rename"] in ("EBUSY", "EROFS", "EPERM", "EACCES"), res
    assert res["marker"] in ("EBUSY", "EROFS", "EPERM", "EACCES"), res
    assert res["init_sub"] == 0 and res["sub_config"] == "OK", res
    with open(os.path.join(ctx.ws, ".git", "config"), "rb") as f:
        assert f.read() == config, "the workspace's .git/config changed"
    # what the cell made is no repository to the operator's git any more
    assert not os.path.lexists(os.path.join(ctx.ws, "sub", ".git"))
    assert os.path.isdir(os.path.join(ctx.ws, "sub",
                                      ".git.agentz-untrusted"))
    assert not os.path.lexists(os.path.join(ctx.ws, "gitfile", ".git"))
    assert "renamed to" in r.stderr and "--writable-git" in r.stderr, \
        r.stderr[-2000:]
    # a shell prompt's `git status` in each folder, as the operator
    assert os.path.isdir(os.path.join(nested, ".git")), "the operator's lost"
    for d in (ctx.ws, nested, os.path.join(ctx.ws, "sub"),
              os.path.join(ctx.ws, "gitfile")):
        git(ctx, d, "status", "--porcelain")
    assert not os.path.exists(sentinel), "the cell's fsmonitor hook ran"


def test_git_in_a_fresh_workspace_made_by_a_cell_is_not_trusted(ctx):
    """No repository at the start: a cell's `git init .` in the workspace
    root is renamed too."""
    spot = ctx.visible_dir("agentz-git-spot-")
    sentinel = os.path.join(spot, "hook-ran")
    code = PRELUDE + r'''
import subprocess
p = subprocess.run(['git', 'init', '-q', '.'], capture_output=True)
report(init=p.returncode, cfg=t(wr, '.git/config', LINE.encode(), 'ab'))
'''.replace("LINE", repr(hook_line(sentinel)))
    r = ctx.run([code])
    assert probe(r.recs[0]) == {"init": 0, "cfg": "OK"}
    assert not os.path.lexists(os.path.join(ctx.ws, ".git"))
    git(ctx, ctx.ws, "status", "--porcelain")
    assert not os.path.exists(sentinel), "the cell's fsmonitor hook ran"


def test_writable_git_lets_cells_commit(ctx):
    """--writable-git: the workspace's .git is writable and a repository a
    cell makes is kept (for runs whose work is to commit)."""
    assert git(ctx, ctx.ws, "init", "-q").returncode == 0
    code = PRELUDE + r'''
import subprocess
env = dict(os.environ, GIT_AUTHOR_NAME='c', GIT_AUTHOR_EMAIL='c@x',
           GIT_COMMITTER_NAME='c', GIT_COMMITTER_EMAIL='c@x',
           GIT_CONFIG_NOSYSTEM='1', HOME='/tmp')
wr('f.txt', b'x\n')
a = subprocess.run(['git', 'add', 'f.txt'], capture_output=True, env=env)
c = subprocess.run(['git', '-c', 'safe.directory=*', 'commit', '-q', '-m',
                    'cell'], capture_output=True, env=env)
s = subprocess.run(['git', 'init', '-q', 'sub'], capture_output=True)
report(add=a.returncode, commit=c.returncode, err=c.stderr.decode()[-300:],
       sub=s.returncode)
'''
    r = ctx.run([code], args=("--writable-git",))
    res = probe(r.recs[0])
    assert res["commit"] == 0, res
    assert res["sub"] == 0, res
    assert os.path.isdir(os.path.join(ctx.ws, "sub", ".git"))
    log = git(ctx, ctx.ws, "-c", "safe.directory=*", "log", "--format=%s")
    assert log.stdout.strip() == "cell", (log.stdout, log.stderr)


def test_a_repository_made_before_a_supervisor_crash_is_renamed_next_run(ctx):
    """The supervisor killed mid-run never renames what its cells made:
    the marker still says a run is going on, and the next run there
    renames every .git that was not there when that run started (and
    keeps the operator's)."""
    spot = ctx.visible_dir("agentz-git-spot-")
    sentinel = os.path.join(spot, "hook-ran")
    assert git(ctx, ctx.ws, "init", "-q").returncode == 0
    assert git(ctx, ctx.ws, "init", "-q", "mine").returncode == 0
    ready = os.path.join(ctx.ws, "made")
    code = r'''
import subprocess, time
subprocess.run(['git', 'init', '-q', 'sub'], check=True)
with open('sub/.git/config', 'a') as f:
    f.write(LINE)
open('made', 'w').close()
time.sleep(3600)
'''.replace("LINE", repr(hook_line(sentinel)))
    h = ctx.start_exec([code])
    assert wait_file(ready, h.p, RUN_TIMEOUT), "the cell did not get there"
    os.kill(h.p.pid, 9)                  # the supervisor only
    h.p.wait(RUN_TIMEOUT)
    h.stdin.close()
    assert os.path.isdir(os.path.join(ctx.ws, "sub", ".git"))
    with open(os.path.join(ctx.ws, MARKER)) as f:
        assert "running\n" in f.read()
    r = ctx.run([OK_CELL])
    assert "did not end" in r.stderr, r.stderr[-2000:]
    assert not os.path.lexists(os.path.join(ctx.ws, "sub", ".git"))
    assert os.path.isdir(os.path.join(ctx.ws, "sub",
                                      ".git.agentz-untrusted"))
    assert os.path.isdir(os.path.join(ctx.ws, ".git"))
    assert os.path.isdir(os.path.join(ctx.ws, "mine", ".git"))
    with open(os.path.join(ctx.ws, MARKER)) as f:
        assert "running\n" not in f.read()
    git(ctx, os.path.join(ctx.ws, "sub"), "status", "--porcelain")
    assert not os.path.exists(sentinel), "the cell's fsmonitor hook ran"
