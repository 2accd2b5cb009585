"""The shipped unit under a real, booted systemd (issue 8, item 7).

A fresh Debian 12 root from scripts/systemd-root gets this build's
binaries, the unit from systemd/, /etc/agentz/t.env and /etc/agentz/t.key;
`systemd-nspawn -b` boots it (sharing the host's network, so the unit
reaches a model server on the host's 127.0.0.1), `systemctl start
agentz@t` runs a two-cell agent run to its quit(), and the test checks
what the unit and its cells saw: the key came through LoadCredential=,
the journal lies beside the workspace and not in it, a cell can read
neither the credential, the key file nor the journal, runs as a uid
other than 0, and what it writes in its cwd (the workspace) lands on disk
as root; the view was built whole (the journal's isolation record names
every part, Landlock included: a call the unit's filter refused would
only be missing from it) and nothing died of SIGSYS.

Every wait is bounded; the container, its cgroups and the root copy are
removed in a finally; names are unique, so two runs can overlap.
"""
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, ROOT, SAN, WORKER

sys.path.insert(0, os.path.join(ROOT, "tests", "systemd"))
from nspawn import (Container, new_root as _new_root,  # noqa: E402
                    remove_root as _remove_root, run as _run)

UNIT = os.path.join(ROOT, "systemd", "agentz@.service")
INSTANCE = "t"
STATE = "/var/lib/agentz/" + INSTANCE
WORKSPACE = STATE + "/workspace"
CREDENTIAL = "/run/credentials/agentz@%s.service/openai_api_key" % INSTANCE

# Bounds (seconds). scripts/systemd-root runs debootstrap the first time
# (about a minute here); afterwards it unpacks a tarball (0.5-5 s). The
# boot takes under a second, the run (start to its end) about one.
RUN_TIMEOUT = 45

pytestmark = [
    pytest.mark.early("the first call of scripts/systemd-root on a fresh "
                      "machine runs debootstrap (about a minute)"),
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root (systemd-nspawn, debootstrap)"),
    pytest.mark.skipif(SAN, reason="checks the unit, not memory safety; "
                       "the plain pass ran it"),
]

# Cell 1 tries what a hostile cell would and records what happened; its
# call_me() brings cell 2, which writes a file in its cwd and quits.
PROBE = r'''
import errno, json, os
cred = os.environ.get("CREDENTIALS_DIRECTORY") or %(creddir)r
res = {"read": {}, "write": {}}
for p in (cred + "/openai_api_key", "/etc/agentz/%(inst)s.key",
          "%(state)s/journal.jsonl"):
    try:
        with open(p, "rb") as f:
            res["read"][p] = "READ %%d bytes" %% len(f.read())
    except OSError as e:
        res["read"][p] = type(e).__name__
for p in ("%(state)s/journal.jsonl",):
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
        res["write"][p] = "OPENED"
    except OSError as e:
        res["write"][p] = errno.errorcode.get(e.errno, str(e.errno))
res["uid"], res["euid"], res["gid"] = os.getuid(), os.geteuid(), os.getgid()
res["cwd"] = os.getcwd()
res["isolation"] = RUNTIME_INFO.get("isolation")
res["network"] = RUNTIME_INFO.get("network")
# listening TCP sockets the cell sees (the model server's is the host's)
res["listening"] = 0
for p in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        with open(p) as f:
            res["listening"] += sum(ln.split()[3] == "0A"
                                    for ln in f.readlines()[1:])
    except OSError:
        pass
print("PROBE " + json.dumps(res, sort_keys=True))
r = call_me(input="probes done, write the file")
''' % {"creddir": os.path.dirname(CREDENTIAL), "inst": INSTANCE,
       "state": STATE}

WRITE = r'''
import json, os
with open("written-by-cell.txt", "w") as f:
    f.write("hello from the cell\n")
print("WROTE " + json.dumps({"cwd": os.getcwd(), "uid": os.getuid()}))
quit()
'''

SCRIPT = [
    {"match": "Submit the first Python cell",
     "next_cell": {"code": PROBE, "summary": "Probe the view."}},
    {"text": "ok"},
    {"match": "probes done",
     "next_cell": {"code": WRITE, "summary": "Write a file, then stop."}},
    {"text": "ok"},
]

NO_SIGSYS = ("SIGSYS", "seccomp blocked", "status=31/SYS", "Bad system call")


def install(root, unit_text, env_text, key):
    bindir = os.path.join(root, "usr/local/bin")
    os.makedirs(bindir, exist_ok=True)
    for src in (AGENTZ, WORKER):
        shutil.copy(src, bindir)
        os.chmod(os.path.join(bindir, os.path.basename(src)), 0o755)
    with open(os.path.join(root, "etc/systemd/system/agentz@.service"),
              "w") as f:
        f.write(unit_text)
    etc = os.path.join(root, "etc/agentz")
    os.makedirs(etc, mode=0o755, exist_ok=True)
    with open(os.path.join(etc, INSTANCE + ".env"), "w") as f:
        f.write(env_text)
    fd = os.open(os.path.join(etc, INSTANCE + ".key"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (key + "\n").encode())
    os.close(fd)
    # Every library the binaries need is in the root (a clear error here,
    # not a unit that dies at exec).
    for b in ("agentz", "agentz-worker"):
        p = _run(["chroot", root, "ldd", "/usr/local/bin/" + b], timeout=30)
        missing = [ln for ln in p.stdout.splitlines() if "not found" in ln]
        assert p.returncode == 0 and not missing, \
            "%s in the root: %s%s (add the package to scripts/systemd-root)" \
            % (b, p.stderr, missing)


def boot_and_run(unit_text, script, opts, tmp_path):
    """Boots a fresh root with the unit, runs agentz@t to its end; returns
    what the checks need. The container and the root are gone after."""
    machine = "agentz-%d-%s" % (os.getpid(), secrets.token_hex(4))
    key = "sk-agentz-boot-" + secrets.token_hex(16)
    out = {"key": key, "machine": machine}
    t0 = time.monotonic()
    root = _new_root()
    out["root_seconds"] = time.monotonic() - t0
    ct = None
    try:
        with ModelServer(script) as srv:
            env_text = ('AGENTZ_TASK="probe the view the unit builds"\n'
                        'OPENAI_BASE_URL=%s\nAGENTZ_OPTS="%s"\n'
                        % (srv.base_url, opts))
            install(root, unit_text, env_text, key)
            ct = Container(root, machine, str(tmp_path / "console.log"))
            t1 = time.monotonic()
            ct.boot()
            out["boot_seconds"] = time.monotonic() - t1
            out["system_state"] = ct.state
            unit = "agentz@%s.service" % INSTANCE
            t2 = time.monotonic()
            deadline = t2 + RUN_TIMEOUT
            # Returns at READY=1 (the first cell runs) or when it failed.
            try:
                p = ct.run(["systemctl", "start", unit], timeout=RUN_TIMEOUT)
                out["start"] = (p.returncode, p.stderr.strip())
            except subprocess.TimeoutExpired:
                out["start"] = (None, "not started in %d s" % RUN_TIMEOUT)
            props = {}
            while time.monotonic() < deadline:
                p = ct.run(["systemctl", "show", "-p", "ActiveState,SubState,"
                            "Result,ExecMainCode,ExecMainStatus,NRestarts",
                            unit], timeout=30)
                props = dict(ln.split("=", 1)
                             for ln in p.stdout.splitlines() if "=" in ln)
                if props.get("ActiveState") in ("inactive", "failed") or \
                        props.get("SubState") == "auto-restart":
                    break
                time.sleep(0.2)
            out["run_seconds"] = time.monotonic() - t2
            out["props"] = props
            # The unit's output reaches the journal through a stream that
            # journald may not have read to its end yet: wait for the last
            # thing the run prints (bounded), then take everything.
            deadline = time.monotonic() + 10
            while True:
                j = ct.run(["journalctl", "-u", unit, "-o", "cat",
                            "--no-pager"], timeout=30).stdout
                if "WROTE " in j or time.monotonic() > deadline or \
                        props.get("Result") != "success":
                    break
                time.sleep(0.2)
            out["unit_log"] = j
            out["full_log"] = ct.run(["journalctl", "-b", "--no-pager",
                                      "-o", "short-monotonic"],
                                     timeout=30).stdout
            out["requests"] = list(srv.requests)
            st = os.path.join(root, STATE.lstrip("/"))
            jpath = os.path.join(st, "journal.jsonl")
            out["journal"] = open(jpath).read() if os.path.exists(jpath) \
                else None
            wfile = os.path.join(root, WORKSPACE.lstrip("/"),
                                 "written-by-cell.txt")
            if os.path.exists(wfile):
                s = os.stat(wfile)
                out["written"] = (open(wfile).read(), s.st_uid, s.st_gid)
            else:
                out["written"] = None
            out["state_listing"] = sorted(
                os.path.relpath(os.path.join(d, f), st)
                for d, ds, fs in os.walk(st) for f in fs + ds)
    finally:
        try:
            if ct is not None:
                ct.stop()
        finally:
            _remove_root(root)
    return out


def _diag(r):
    return "\n--- unit log ---\n%s\n--- boot log (tail) ---\n%s" % (
        r.get("unit_log", "")[-6000:],
        "\n".join(r.get("full_log", "").splitlines()[-60:]))


def test_the_unit_runs_an_agent_in_a_booted_systemd(tmp_path):
    unit_text = open(UNIT).read()
    r = boot_and_run(unit_text, SCRIPT, "--cell-timeout 60 --deadline 90 "
                     "--max-cells 4", tmp_path)
    print("systemd-root %.1f s, boot %.1f s (%s), run %.1f s" % (
        r["root_seconds"], r["boot_seconds"], r["system_state"],
        r["run_seconds"]))
    props = r["props"]
    # The run ended with quit(): exit 0, never restarted.
    assert r["start"][0] == 0, r["start"][1] + _diag(r)
    # systemd forgets a unit that ended well at once (its properties then
    # read as a clean slate whatever happened): its log says how it ended.
    log = r["unit_log"]
    assert props.get("ActiveState") in ("inactive", "failed"), \
        repr(props) + _diag(r)
    assert "Deactivated successfully" in log, _diag(r)
    assert "Scheduled restart job" not in log and \
        "Main process exited" not in log, _diag(r)
    for bad in NO_SIGSYS:
        assert bad not in log and bad not in r["full_log"], bad + _diag(r)
    # The supervisor got the key from LoadCredential= (it is sent), and
    # the key never shows anywhere else.
    auth = [q.get("authorization") for q in r["requests"]]
    assert auth and all(a == "Bearer " + r["key"] for a in auth), auth
    for q in r["requests"]:
        assert r["key"] not in json.dumps(q.get("body")), "key in a request"
    assert r["key"] not in log
    # The journal lies in the state folder, beside the workspace, and
    # holds the whole run.
    assert r["journal"] is not None, \
        "no %s/journal.jsonl; state folder: %r" % (STATE, r["state_listing"])
    assert "workspace/journal.jsonl" not in r["state_listing"]
    assert r["key"] not in r["journal"]
    recs = [json.loads(ln) for ln in r["journal"].splitlines()]
    kinds = [(x["type"], x.get("cell")) for x in recs]
    assert kinds[0] == ("run", None), kinds
    for c in (1, 2):        # cell 0 is the engine's, asking for cell 1
        assert ("input", c) in kinds and ("output", c) in kinds, kinds
    assert kinds[-1] == ("stop", None) and recs[-1].get("exit") == 0, recs[-1]
    # The view was built, with everything the unit must allow: no user
    # namespace (root), the worker's own uid, the id-mapped workspace and
    # Landlock (refused by a filter, it would only be missing).
    isolation = [x["isolation"] for x in recs if "isolation" in x]
    assert isolation, "no isolation in the journal's records: %r" % kinds
    active = isolation[0].split(",")
    for want in ("mountns", "pidns", "ipcns", "utsns", "view", "netns",
                 "idmap"):
        assert want in active, (want, isolation[0])
    assert any(a.startswith("uid=") for a in active), isolation[0]
    assert any(a.startswith("landlock=") for a in active), isolation[0]
    assert "[agentz] isolation: " + isolation[0] in log or \
        "agentz: isolation: " + isolation[0] in log, log
    # What cell 1 saw.
    m = re.search(r"^PROBE (.*)$", log, re.M)
    assert m, "no PROBE line in the unit's log" + _diag(r)
    probe = json.loads(m.group(1))
    for path, what in probe["read"].items():
        assert what in ("PermissionError", "FileNotFoundError"), \
            "a cell read %s: %s (%r)" % (path, what, probe)
    for path, what in probe["write"].items():
        assert what in ("EACCES", "EPERM", "EROFS", "ENOENT"), \
            "a cell opened %s for writing: %s (%r)" % (path, what, probe)
    assert probe["uid"] != 0 and probe["euid"] != 0, probe
    assert "uid=%d" % probe["uid"] in active, (probe, isolation[0])
    assert probe["cwd"] == WORKSPACE, probe
    if probe["isolation"] is not None:
        assert probe["isolation"] == isolation[0], probe
    # Its own network: loopback only, nothing of the host's listening;
    # the one listener is the run's egress proxy (agent runs' default,
    # nothing allowed).
    assert probe["network"] == "proxy http://127.0.0.1:3128 (allow: " \
        "nothing)" and probe["listening"] == 1, probe
    assert [x.get("network") for x in recs if "isolation" in x] == \
        ["proxy"], recs
    # What cell 2 wrote in its cwd belongs to root on disk.
    assert r["written"] is not None, \
        "no file from the cell in %s; state folder: %r" % (
            WORKSPACE, r["state_listing"])
    assert r["written"] == ("hello from the cell\n", 0, 0), r["written"]
