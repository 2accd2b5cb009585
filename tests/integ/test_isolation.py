"""Real isolation, the view's masks (issue 8; SPEC section 7): the workspace's
.env, credentials, the unit key file, root-only files, HOME's secrets, the
journal and --mask are out of a cell's reach.

Each case runs as root and as a plain user through isolation_util's ctx
fixture; the safety rules are in isolation_util's docstring.
"""
import json
import os
import uuid

import pytest

from agentz_util import read_proc
from model_server import ModelServer
from isolation_util import (DEFAULT_MASKED, DENIED, IS_ROOT, MASKED_FILES,
                            NOT_MOVABLE, OK_CELL, PRELUDE, RUN_TIMEOUT,
                            UNREADABLE, Who, assert_denied, assert_ok,
                            assert_same_worker, assert_unreadable, brief,
                            data_tag, probe, safe_rmtree, secret_bytes)
from isolation_util import ctx, who  # noqa: F401 (fixtures)


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


