"""agentz@.service under a real, booted systemd (issue 9, item 7):
`make check-systemd`, not part of `make check` (a minute or two).

One Debian 12 root (scripts/systemd-root) gets agentz by `make install
DESTDIR=ROOT` and is booted with `systemd-nspawn -b` (sharing the host's
network, so units reach a ModelServer on the host's 127.0.0.1); each test
runs its own instance of the shipped unit (agentz@demo, agentz@wd, ...)
against its own scripted model, and checks what systemctl, the unit's log
and the run's journal say:

- READY and STATUS seen by systemctl; the key read through
  LoadCredential= (sent to the model) and not reachable from a cell;
- the watchdog restarting a SIGSTOPped supervisor, which resumes and
  ends by quit();
- a SIGKILLed supervisor resumed by Restart=, running the registered
  successor as the model's cell;
- a budget stop (exit 4) not restarted;
- `systemctl stop` ending the whole worker tree;
- `agentz ctl` reaching the unit's control socket (hidden from its cells),
  `systemctl reload` re-reading the budgets, and an operator stop (exit 6)
  not restarted.

Like an operator would, the tests shorten the unit's timers with a drop-in
(/etc/systemd/system/agentz@.service.d/): WatchdogSec=5 and RestartSec=1
instead of 120 and 10; everything else is the shipped unit as installed.

Every wait is bounded; the container, its cgroups and the root are removed
when the module ends.
"""
import json
import os
import re
import secrets
import time

import pytest

import nspawn
from model_server import ModelServer

from agentz_util import SAN

WATCHDOG_SEC = 5
RESTART_SEC = 1
DROPIN = """# An operator's override, for the test: quicker watchdog and restart.
[Service]
WatchdogSec=%d
RestartSec=%d
""" % (WATCHDOG_SEC, RESTART_SEC)

RUN_TIMEOUT = 45        # a unit start to the end of its run
GO_WAIT = 60            # how long a cell waits for the test's go file

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root (systemd-nspawn, debootstrap)"),
    pytest.mark.skipif(SAN, reason="checks the unit, not memory safety"),
]


@pytest.fixture(scope="module")
def booted(tmp_path_factory):
    """One booted container with agentz installed by make install."""
    root = nspawn.new_root()
    ct = None
    try:
        nspawn.make_install(root)
        d = os.path.join(root, "etc/systemd/system/agentz@.service.d")
        os.makedirs(d)
        with open(os.path.join(d, "test-timers.conf"), "w") as f:
            f.write(DROPIN)
        os.makedirs(os.path.join(root, "etc/agentz"), mode=0o755,
                    exist_ok=True)
        log = str(tmp_path_factory.mktemp("nspawn") / "console.log")
        ct = nspawn.Container(root, nspawn.machine_name(), log)
        ct.boot()
        yield ct
    finally:
        try:
            if ct is not None:
                ct.stop()
        finally:
            nspawn.remove_root(root)


class Instance:
    """agentz@NAME in the booted container, against a ModelServer."""

    def __init__(self, ct, name, srv, opts="", task="a unit test task"):
        self.ct, self.name, self.srv = ct, name, srv
        self.unit = "agentz@%s.service" % name
        self.key = "sk-agentz-unit-" + secrets.token_hex(16)
        self.state = "/var/lib/agentz/" + name
        root = ct.root
        etc = os.path.join(root, "etc/agentz")
        with open(os.path.join(etc, name + ".env"), "w") as f:
            f.write('AGENTZ_TASK="%s"\nOPENAI_BASE_URL=%s\n'
                    'AGENTZ_OPTS="--cell-timeout 90 %s"\n'
                    % (task, srv.base_url, opts))
        fd = os.open(os.path.join(etc, name + ".key"),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (self.key + "\n").encode())
        os.close(fd)

    def host(self, path):
        """The host's path of a path in the container."""
        return os.path.join(self.ct.root, path.lstrip("/"))

    def start(self):
        """systemctl start: returns at READY=1 (Type=notify) or failure."""
        p = self.ct.run(["systemctl", "start", self.unit],
                        timeout=RUN_TIMEOUT)
        return p.returncode, p.stderr.strip()

    def show(self):
        p = self.ct.run(["systemctl", "show", "-p",
                         "ActiveState,SubState,Result,ExecMainCode,"
                         "ExecMainStatus,NRestarts,MainPID,StatusText",
                         self.unit], timeout=30)
        return dict(ln.split("=", 1) for ln in p.stdout.splitlines()
                    if "=" in ln)

    def wait(self, pred, what, timeout=RUN_TIMEOUT):
        """Polls systemctl show until pred(props); fails with the logs."""
        end = time.monotonic() + timeout
        while True:
            props = self.show()
            if pred(props):
                return props
            if time.monotonic() > end:
                pytest.fail("%s: not %s in %d s: %r%s" % (
                    self.unit, what, timeout, props, self.diag()))
            time.sleep(0.1)

    def wait_ended(self, timeout=RUN_TIMEOUT):
        return self.wait(lambda p: p.get("ActiveState") in
                         ("inactive", "failed"), "ended", timeout)

    def log(self):
        return self.ct.run(["journalctl", "-u", self.unit, "-o", "cat",
                            "--no-pager"], timeout=30).stdout

    def wait_log(self, text, timeout=15):
        """The unit's output reaches the journal through journald, which
        may lag: wait (bounded) for text."""
        end = time.monotonic() + timeout
        while True:
            j = self.log()
            if text in j or time.monotonic() > end:
                return j
            time.sleep(0.2)

    def restarts(self, log):
        """Restarts systemd scheduled (from the log: an inactive unit is
        unloaded at once, and `systemctl show` of an unloaded unit has
        NRestarts=0, Result=success and ExecMainStatus=0 whatever
        happened)."""
        return log.count("Scheduled restart job")

    def ended_ok(self, log):
        """The last start's main process exited 0 (systemd 252 says
        "Deactivated successfully" only then)."""
        last = log.rsplit("Starting " + self.unit, 1)[-1]
        return "Deactivated successfully" in last and \
            "Main process exited" not in last and \
            "Failed with result" not in last

    def journal(self):
        path = self.host(self.state + "/journal.jsonl")
        if not os.path.exists(path):
            return []
        return [json.loads(ln) for ln in open(path)]

    def go(self):
        """Lets a cell waiting in WAIT_GO go on."""
        with open(self.host(self.state + "/workspace/go"), "w") as f:
            f.write("go\n")

    def diag(self):
        return "\n--- %s log ---\n%s\n--- journal ---\n%s" % (
            self.unit, self.log()[-5000:],
            "\n".join(json.dumps(r)[:300] for r in self.journal()))


def first(code, summary):
    return {"match": "Submit the first Python cell",
            "next_cell": {"code": code, "summary": summary}}


OK = {"text": "ok"}

# A cell that prints MARKER and waits (bounded) for the test's go file in
# its cwd, the workspace.
WAIT_GO = r'''
import os, time
print(%(marker)r, flush=True)
for _ in range(%(n)d):
    if os.path.exists("go"):
        break
    time.sleep(0.1)
'''


def wait_go(marker):
    return WAIT_GO % {"marker": marker, "n": GO_WAIT * 10}


def final_quit(recs):
    return recs and recs[-1].get("type") == "stop" and \
        recs[-1].get("exit") == 0


# -- READY, STATUS, LoadCredential= ---------------------------------------

PROBE = r'''
import json, os
cred = "/run/credentials/agentz@demo.service"
res = {}
for p in (cred + "/openai_api_key", cred, "/etc/agentz/demo.key",
          "/var/lib/agentz/demo/journal.jsonl"):
    try:
        if os.path.isdir(p):
            res[p] = "LISTED %r" % os.listdir(p)
        else:
            with open(p, "rb") as f:
                res[p] = "READ %d bytes" % len(f.read())
    except OSError as e:
        res[p] = type(e).__name__
res["env"] = sorted(k for k in os.environ
                    if "KEY" in k or "CREDENTIALS" in k)
leak = [k for k, v in os.environ.items() if v.startswith("sk-agentz-unit-")]
res["leak"] = leak
print("PROBE " + json.dumps(res, sort_keys=True), flush=True)
''' + wait_go("PROBED") + '''
r = call_me(input="probe done")
'''


def test_ready_status_and_the_key_through_load_credential(booted):
    script = [first(PROBE, "Probe the credential."), OK,
              {"match": "probe done",
               "next_cell": {"code": "quit()", "summary": "Stop."}}, OK]
    with ModelServer(script) as srv:
        u = Instance(booted, "demo", srv)
        rc, err = u.start()
        # systemctl start of a Type=notify unit returns once READY=1 came.
        assert rc == 0, err + u.diag()
        props = u.show()
        assert props["ActiveState"] == "active" and \
            props["SubState"] == "running", repr(props) + u.diag()
        # READY=1 came once the first cell was dispatched (journaled).
        assert any(r.get("type") == "input" for r in u.journal()), u.diag()
        # STATUS= names the running cell (the engine's cell 0 asks for the
        # first cell; then cell 1 probes and waits for us).
        props = u.wait(lambda p: p.get("StatusText", "").startswith(
            "cell 1: "), "STATUS cell 1", timeout=20)
        assert "Probe the credential" in props["StatusText"], props
        u.go()
        props = u.wait_ended()
        log = u.wait_log("Deactivated successfully")
        requests = list(srv.requests)
    assert u.ended_ok(log) and u.restarts(log) == 0, u.diag()
    assert final_quit(u.journal()), u.diag()
    # The key came through LoadCredential=: it is what the model gets.
    auth = [q.get("authorization") for q in requests]
    assert auth and all(a == "Bearer " + u.key for a in auth), auth
    assert u.key not in log
    # ... and no cell can reach it.
    m = re.search(r"^PROBE (.*)$", log, re.M)
    assert m, "no PROBE line" + u.diag()
    probe = json.loads(m.group(1))
    for path in ("/run/credentials/agentz@demo.service/openai_api_key",
                 "/run/credentials/agentz@demo.service",
                 "/etc/agentz/demo.key",
                 "/var/lib/agentz/demo/journal.jsonl"):
        assert probe[path] in ("PermissionError", "FileNotFoundError"), \
            (path, probe)
    assert probe["env"] == [] and probe["leak"] == [], probe


# -- the watchdog ------------------------------------------------------------

def test_the_watchdog_restarts_a_stopped_supervisor(booted):
    script = [first(wait_go("WAITING") + "quit()\n", "Wait for go."), OK,
              {"match": "Repair the failed cell",
               "next_cell": {"code": "print('REPAIRED')\nquit()\n",
                             "summary": "Finish after the restart."}}, OK]
    with ModelServer(script) as srv:
        u = Instance(booted, "wd", srv)
        rc, err = u.start()
        assert rc == 0, err + u.diag()
        props = u.wait(lambda p: p.get("StatusText", "").startswith(
            "cell 1: "), "STATUS cell 1", timeout=20)
        # Pinged while the cell waits: longer than WatchdogSec, no restart.
        time.sleep(WATCHDOG_SEC + 1)
        props = u.show()
        assert props["NRestarts"] == "0" and \
            props["SubState"] == "running", repr(props) + u.diag()
        pid = props["MainPID"]
        t0 = time.monotonic()
        p = booted.run(["sh", "-c", "kill -STOP " + pid], timeout=10)
        assert p.returncode == 0, p.stderr
        log = u.wait_log("Scheduled restart job",
                         timeout=WATCHDOG_SEC + RESTART_SEC + 40)
        restarted_after = time.monotonic() - t0
        props = u.wait_ended()
        log = u.wait_log("Deactivated successfully")
    print("watchdog restart %.1f s after SIGSTOP" % restarted_after)
    assert "Watchdog timeout" in log and \
        "Failed with result 'watchdog'" in log, u.diag()
    assert u.ended_ok(log) and u.restarts(log) == 1, u.diag()
    recs = u.journal()
    assert final_quit(recs), u.diag()
    assert any(r.get("type") == "output" and r.get("cell") == 1 and
               r.get("kind") == "restart" for r in recs), u.diag()
    assert "REPAIRED" in log, u.diag()


# -- Restart= after SIGKILL ------------------------------------------------

SUCCESSOR = r'''
r = call_me(input="after the restart")
print("SUCCESSOR RAN", flush=True)
quit()
'''


def test_a_killed_supervisor_is_resumed_by_restart(booted):
    # Cell 1 registers its successor, then waits: SIGKILL the supervisor
    # there; the restarted unit runs the successor as the model's cell.
    script = [first('r = call_me(input="register the successor")\n' +
                    wait_go("WAITING"), "Register, then wait."), OK,
              {"match": "register the successor",
               "next_cell": {"code": SUCCESSOR, "summary": "The successor."}},
              OK,
              {"match": "after the restart", "text": "fine"}]
    with ModelServer(script) as srv:
        u = Instance(booted, "kill", srv)
        rc, err = u.start()
        assert rc == 0, err + u.diag()
        end = time.monotonic() + 20
        while not any(r.get("type") == "successor" and r.get("cell") == 1
                      for r in u.journal()):
            assert time.monotonic() < end, "no successor of cell 1" + \
                u.diag()
            time.sleep(0.1)
        props = u.show()
        p = booted.run(["sh", "-c", "kill -KILL " + props["MainPID"]],
                       timeout=10)
        assert p.returncode == 0, p.stderr
        u.wait_log("Scheduled restart job", timeout=RESTART_SEC + 20)
        props = u.wait_ended()
        log = u.wait_log("Deactivated successfully")
        last = srv.bodies[-1]
    assert "status=9/KILL" in log, u.diag()
    assert u.ended_ok(log) and u.restarts(log) == 1, u.diag()
    assert "SUCCESSOR RAN" in log, u.diag()
    recs = u.journal()
    assert final_quit(recs), u.diag()
    assert [r["type"] for r in recs].count("resume") == 1, u.diag()
    assert any(r.get("type") == "output" and r.get("cell") == 1 and
               r.get("kind") == "restart" for r in recs), u.diag()
    succ = [r for r in recs if r.get("type") == "input" and
            r.get("cell") == 2]
    assert len(succ) == 1 and succ[0]["summary"] == "The successor." and \
        succ[0]["generated_by"] == 1, succ
    # The successor's request tells the model the supervisor restarted.
    text = json.dumps(last["input"])
    assert "after the restart" in text and "restarted" in text and \
        "cell 1" in text and "partial" in text, text[-2000:]


# -- a budget stop is final ------------------------------------------------

def test_a_budget_stop_is_not_restarted(booted):
    more = {"next_cell": {"code": "r = call_me(input='more')\n",
                          "summary": "More."}}
    script = [first("r = call_me(input='more')\n", "More."), OK] + \
        [dict(more, match="more"), OK] * 10
    with ModelServer(script) as srv:
        u = Instance(booted, "budget", srv, opts="--max-cells 3")
        rc, err = u.start()
        props = u.wait_ended()
        # inactive or failed, not activating/auto-restart: systemd
        # decides on a restart as the main process exits, so none is
        # pending once the unit has ended
        props = u.show()
        log = u.log()
    assert props["ActiveState"] == "failed" and \
        props["Result"] == "exit-code" and \
        props["ExecMainStatus"] == "4" and props["NRestarts"] == "0", \
        repr(props) + u.diag()
    recs = u.journal()
    assert recs[-1].get("type") == "stop" and recs[-1].get("exit") == 4, \
        u.diag()
    assert [r["type"] for r in recs].count("resume") == 0, u.diag()
    assert "cells" in recs[-1].get("reason", ""), recs[-1]
    assert "status=4/" in log and "Scheduled restart" not in log, log
    print("budget stop: %s" % recs[-1]["reason"])


# -- systemctl stop ends the worker tree -----------------------------------

TREE = r'''
import subprocess
subprocess.Popen(["sh", "-c", "sleep 3117 & sleep 3117; : agentz-tree"],
                 start_new_session=True)
subprocess.Popen(["sleep", "3117"])
''' + wait_go("TREE STARTED")


def test_systemctl_stop_ends_the_worker_tree(booted):
    script = [first(TREE, "Start a tree."), OK]
    with ModelServer(script) as srv:
        u = Instance(booted, "stop", srv)
        rc, err = u.start()
        assert rc == 0, err + u.diag()
        u.wait_log("TREE STARTED")

        def tree():
            pids = nspawn.unit_pids(booted, u.unit)
            return {p: nspawn.host_cmdline(p) for p in pids}

        end = time.monotonic() + 20
        while True:
            t = tree()
            sleeps = [c for c in t.values() if c and "3117" in c]
            if len(sleeps) >= 4 or time.monotonic() > end:
                break
            time.sleep(0.1)
        assert len(sleeps) >= 4, (t, u.diag())
        assert any(c and "agentz-worker" in c for c in t.values()) or \
            len(t) > len(sleeps) + 1, t
        before = len(t)
        t0 = time.monotonic()
        p = booted.run(["systemctl", "stop", u.unit], timeout=60)
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        props = u.show()
        left = tree()
        # and nothing of it anywhere on the host (a process that left the
        # unit's cgroup would still hold the marker)
        stray = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                c = nspawn.host_cmdline(int(d))
                if c and ("sleep 3117" in c or "agentz-tree" in c):
                    stray.append((int(d), c))
    print("systemctl stop took %.1f s, ended %d processes" % (took, before))
    assert props["ActiveState"] in ("inactive", "failed"), props
    assert left == {}, left
    assert stray == [], stray


# -- the control socket under the unit (issue 13) ---------------------------

CTL_PROBE = r'''
import os
try:
    seen = repr(sorted(os.listdir("/run/agentz")))
except OSError as e:
    seen = type(e).__name__
print("SEEN " + seen, flush=True)
''' + wait_go("CTL WAITING")


def test_agentz_ctl_steers_the_unit_and_stop_is_not_restarted(booted):
    script = [first(CTL_PROBE, "Wait for go."), OK]
    with ModelServer(script) as srv:
        u = Instance(booted, "ctl", srv)
        rc, err = u.start()
        assert rc == 0, err + u.diag()
        log = u.wait_log("CTL WAITING")
        assert "SEEN ['ctl']" not in log and "SEEN " in log, log
        sock = "/run/agentz/ctl/ctl.sock"      # in the container's /run
        p = booted.run(["stat", "-c", "%a %F", sock])
        assert p.stdout.strip() == "600 socket", p.stdout + p.stderr
        p = booted.run(["agentz", "ctl", "ctl", "status"])
        assert p.returncode == 0, p.stderr + u.diag()
        st = json.loads(p.stdout)
        assert st["name"] == "ctl" and st["state"] == "running", st
        assert st["cell"]["n"] == 1 and st["pid"] == int(u.show()["MainPID"])
        # systemctl reload: the budgets of the options file as it is now
        env = os.path.join(booted.root, "etc/agentz/ctl.env")
        with open(env) as f:
            text = f.read()
        with open(env, "w") as f:
            f.write(text.replace('--cell-timeout 90', '--cell-timeout 90 '
                                 '--max-cells 7'))
        p = booted.run(["systemctl", "reload", u.unit], timeout=60)
        assert p.returncode == 0, p.stderr + u.diag()
        p = booted.run(["agentz", "ctl", "ctl", "status"])
        assert json.loads(p.stdout)["cells"]["max"] == 7, p.stdout
        p = booted.run(["agentz", "runs", "--json"])
        runs = [json.loads(ln) for ln in p.stdout.splitlines()]
        assert [r["socket"] for r in runs if r["name"] == "ctl"] == \
            ["/run/agentz/ctl/ctl.sock"], p.stdout
        p = booted.run(["agentz", "ctl", "ctl", "stop", "--now"])
        assert p.returncode == 0, p.stderr
        u.wait_ended()
        # inactive or failed, not activating/auto-restart: systemd
        # decides on a restart as the main process exits, so none is
        # pending once the unit has ended
        props = u.show()
        log = u.log()
    assert props["ExecMainStatus"] == "6" and props["NRestarts"] == "0", \
        repr(props) + u.diag()
    assert "Scheduled restart" not in log, log
    recs = u.journal()
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 6, u.diag()
    assert booted.run(["test", "-e", sock]).returncode == 1


# -- an egress approval under the unit (issue 21) -----------------------------

APPROVAL_CELL = r'''
import os, urllib.request, urllib.error
for k in ("no_proxy", "NO_PROXY"):     # the host's loopback is the test's
    os.environ.pop(k, None)
op = urllib.request.build_opener(urllib.request.ProxyHandler(
    {"http": os.environ["HTTP_PROXY"]}))
try:
    r = op.open("http://agentz-origin.test:%d/", timeout=60)
    print("GOT", r.status, r.read().decode().strip(), flush=True)
except urllib.error.HTTPError as e:
    print("GOT", e.code, flush=True)
quit()
'''


def test_an_egress_connection_waits_for_the_operators_approval(booted):
    """--network-ask under the unit: the connection is held, systemd's
    STATUS says so, `agentz ctl` in the container approves it, the cell
    gets its answer and the journal says who decided."""
    import socket
    import threading
    body = "origin-" + secrets.token_hex(8)
    srv_sock = socket.socket()
    srv_sock.bind(("127.0.0.1", 0))
    srv_sock.listen(4)
    port = srv_sock.getsockname()[1]

    def serve():
        try:
            c, _ = srv_sock.accept()
        except OSError:
            return
        with c:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(body),
                                                       body.encode()))
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    script = [first(APPROVAL_CELL % port, "Fetch."), OK]
    # a name for the test's origin, as an operator's /etc/hosts would
    # have it (the minimal root has no /etc/hosts at all)
    hosts = os.path.join(booted.root, "etc/hosts")
    with open(hosts, "a") as f:
        f.write("127.0.0.1 agentz-origin.test\n")
    try:
        with ModelServer(script) as srv:
            u = Instance(booted, "ap", srv, opts="--network-ask "
                         "--allow-host 127.0.0.0/8")
            rc, err = u.start()
            assert rc == 0, err + u.diag()
            props = u.wait(lambda p: "waiting for approval" in
                           p.get("StatusText", ""), "waiting for approval")
            assert "agentz-origin.test:%d" % port in props["StatusText"], \
                props
            p = booted.run(["agentz", "ctl", "ap", "status"])
            st = json.loads(p.stdout)
            held = st["waiting_for_approval"]
            assert held.endswith(" agentz-origin.test:%d" % port), st
            p = booted.run(["agentz", "ctl", "ap", "approve",
                            held.split()[0]])
            assert p.returncode == 0, p.stdout + p.stderr + u.diag()
            u.wait_ended()
            log = u.wait_log("GOT ")
            recs = u.journal()
    finally:
        srv_sock.close()
        th.join(5)
    assert "GOT 200 " + body in log, log
    eg = [(r["what"], r.get("by")) for r in recs if r["type"] == "egress"]
    assert eg[:2] == [("held", None), ("allowed", "operator")], eg
    assert final_quit(recs), u.diag()
