"""The operator's control socket (issue 13, items 1, 2 and 5): agentz ctl
against live scripted runs (status and note, stop and stop --now, pause,
resume, kill-cell and the watchdog) and who may connect (the peer checks).

Each run's cells wait on gate files the test creates in the workspace, and
the test waits on events: a line on the run's stdout, a journal record, a
reply on the socket, the process's exit. No sleep stands in for one.
Helpers in ctl_util.py.
"""
import json
import os
import shutil
import socket
import sys
import tempfile
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import ROOT, binaries_for_any_user  # noqa: E402
from model_server import ModelServer  # noqa: E402
from ctl_util import (  # noqa: E402
    EXIT_OPERATOR, HANG, Run, SLOW, WORKER_PROBE, ctl, first, gated, on)


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


# --- status and note ----------------------------------------------------------

def test_status_fields_and_a_note_reaches_the_next_request(tmp_path, rt):
    secret = "sekrit-value-4711"
    script = first(gated(1, """
        r = call_me(input='ZQAFTERNOTE')
        print('GOT', r.output_text)
        quit()
        """), "wait for go1") + [{"match": "ZQAFTERNOTE", "text": "fine"}]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "st", rt, args=("--max-tokens", "1000000",
                                                 "--max-cells", "50"),
                  env={"MY_TOKEN": secret})
        try:
            run.wait_out("C1")
            rc, st, err = run.ctl("status")
            assert rc == 0 and st["ok"] is True, err
            assert st["name"] == "st" and st["state"] == "running"
            assert st["pid"] == run.p.pid and st["uid"] == os.geteuid()
            assert st["cell"]["n"] == 1
            assert st["cell"]["summary"] == "wait for go1"
            assert 0 <= st["cell"]["age_s"] < 60
            assert st["cell"]["timeout_s"] == 60
            assert 0 < st["cell"]["left_s"] <= 60
            assert st["cells"] == {"used": 2, "max": 50, "left": 48}
            assert st["tokens"]["used"] > 0
            assert st["tokens"]["max"] == 1000000
            assert st["tokens"]["left"] == 1000000 - st["tokens"]["used"]
            assert st["worker"]["pid"] > 0 and st["worker"]["rss_kb"] > 0
            assert st["last"] == "cell 0: ok" and st["last_error"] is None
            assert st["outage"] is None and st["paused"] is False
            assert st["stop"] is None and st["notes_pending"] == 0
            rc, r, err = run.ctl("note", "mind", secret, "and be brief")
            assert rc == 0 and r == {"ok": True, "notes_pending": 1}, err
            assert run.ctl("status")[1]["notes_pending"] == 1
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
        asked = [r["body"]["input"] for r in srv.requests if r["body"] and
                 isinstance(r["body"]["input"], str) and
                 "ZQAFTERNOTE" in r["body"]["input"]]
    inp = asked[0]
    assert inp.startswith("[agentz] A note from the operator of this run: "
                          "mind [REDACTED] and be brief\n\nZQAFTERNOTE"), inp
    notes = run.records("note")
    assert [(n["from"], n["text"]) for n in notes] == \
        [("operator", "mind [REDACTED] and be brief")]
    assert [r["notes"] for r in run.records("note_delivered")] == [1]
    assert secret not in open(run.journal).read()
    assert secret not in run.err.decode()
    assert "a note from the operator" in run.err.decode()
    # the socket is gone with the run
    assert not os.path.exists(run.sock)


# --- stop ----------------------------------------------------------------------

def test_stop_ends_the_run_after_the_cell_with_its_own_exit_code(tmp_path, rt):
    script = first(gated(1, """
        call_me(input='ZQNEXT')
        print('C1 END', flush=True)
        """)) + on("ZQNEXT", "print('C2', flush=True)\nquit()\n")
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "stop", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("stop")
            assert rc == 0 and r == {"ok": True, "stop": "after-cell"}, err
            st = run.ctl("status")[1]
            assert st["state"] == "stopping" and st["stop"] == "after-cell"
            assert st["cell"]["n"] == 1    # the cell goes on
            run.gate(1)
            assert run.wait() == EXIT_OPERATOR, run.show()
        finally:
            run.kill()
    assert b"C1 END" in run.out and b"C2" not in run.out
    outs = run.records("output")
    assert outs[-1]["cell"] == 1 and outs[-1]["status"] == "ok"
    assert [r["cell"] for r in run.records("input")] == [0, 1]
    stop = run.records()[-1]
    assert stop["type"] == "stop" and stop["exit"] == EXIT_OPERATOR
    assert "operator" in stop["reason"]
    unit = open(os.path.join(ROOT, "systemd", "agentz@.service")).read()
    prevent = [ln for ln in unit.splitlines()
               if ln.startswith("RestartPreventExitStatus=")]
    assert str(EXIT_OPERATOR) in prevent[0].split("=")[1].split()


def test_stop_now_interrupts_the_cell_then_stops(tmp_path, rt):
    with ModelServer(first(HANG)) as srv:
        run = Run(srv, tmp_path, "now", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("stop", "--now")
            assert rc == 0 and r == {"ok": True, "stop": "now"}, err
            assert run.wait() == EXIT_OPERATOR, run.show()
        finally:
            run.kill()
        asked = len(srv.requests)
    out = run.records("output")[-1]
    assert out["cell"] == 1 and out["kind"] == "timeout"
    assert "ended early by the operator (stop --now)" in out["detail"]
    assert run.records()[-1]["exit"] == EXIT_OPERATOR
    assert asked == 2       # no repair was asked for


# --- pause, resume, kill-cell, the watchdog ---------------------------------------

class Notify:
    """A notify socket (as systemd gives a Type=notify unit), read by a
    thread at once (a full queue would block the supervisor's sd_notify)."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.msgs = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                m = self.sock.recv(4096)
            except OSError:
                return
            with self.cond:
                self.msgs.append(m)
                self.cond.notify_all()

    def pings_after(self, start, n, timeout=10):
        """Waits for n WATCHDOG=1 after the first start messages."""
        with self.cond:
            return self.cond.wait_for(
                lambda: self.msgs[start:].count(b"WATCHDOG=1") >= n,
                timeout * SLOW)

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def test_pause_holds_the_next_cell_and_feeds_the_watchdog(tmp_path, rt):
    notify = Notify(str(tmp_path / "notify.sock"))
    script = first(gated(1, "call_me(input='ZQNEXT')\n")) + \
        on("ZQNEXT", "print('C2', flush=True)\nquit()\n", "the second")
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "pause", rt,
                  env={"NOTIFY_SOCKET": notify.path,
                       "WATCHDOG_USEC": "100000"})
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("pause")
            assert rc == 0 and r == {"ok": True, "paused": True}, err
            run.gate(1)
            run.wait_record(lambda r: r["type"] == "output" and
                            r["cell"] == 1)
            st = run.ctl("status")[1]
            assert st["state"] == "paused" and st["paused"] is True
            assert st["cell"] is None and st["held_cell"] == 2
            assert [r["cell"] for r in run.records("input")] == [0, 1]
            rc, r, err = run.ctl("kill-cell")
            assert rc == 1 and r == {"ok": False,
                                     "error": "no cell is running"}, err
            # nothing runs and no model call is open, yet the watchdog is
            # fed: pausing is progress (counted from now on: a ping sent
            # before the status reply is already in the list)
            with notify.cond:
                start = len(notify.msgs)
            assert notify.pings_after(start, 3)
            with notify.cond:
                assert b"STATUS=paused by the operator: no new cell " \
                    b"starts" in notify.msgs
            assert run.ctl("status")[1]["held_cell"] == 2
            assert b"C2" not in run.out
            rc, r, err = run.ctl("resume")
            assert rc == 0 and r == {"ok": True, "paused": False}, err
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
            notify.close()
    assert b"C2" in run.out
    ins = run.records("input")
    assert [r["cell"] for r in ins] == [0, 1, 2]
    assert ins[2]["summary"] == "the second" and ins[2]["generated_by"] == 1
    assert [r["command"] for r in run.records("operator")] == \
        ["pause", "resume"]


def test_kill_cell_gives_the_timeout_treatment(tmp_path, rt):
    script = first(HANG) + [{"match": "Repair the failed cell",
                             "next_cell": {"code": "quit()\n"}},
                            {"text": "ok"}]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "kill", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("kill-cell")
            assert rc == 0 and r == {"ok": True}, err
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    out = [r for r in run.records("output") if r["cell"] == 1][0]
    assert out["status"] == "error" and out["kind"] == "timeout"
    assert out["exception_type"] == "KeyboardInterrupt"
    assert "ended early by the operator (kill-cell)" in out["detail"]
    assert "[agentz] cell 1: error timeout" in run.err.decode()
    assert [r["command"] for r in run.records("operator")] == ["kill-cell"]


# --- who may connect ----------------------------------------------------------------

def test_another_uid_is_refused(tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    rtd = tempfile.mkdtemp(prefix="agentz-ctl-")
    os.chmod(rtd, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        with binaries_for_any_user() as agentz, ModelServer(first(HANG)) \
                as srv:
            run = Run(srv, tmp_path, "uid", rtd, agentz=agentz)
            try:
                run.wait_out("C1")
                assert os.stat(run.sock).st_mode & 0o777 == 0o600
                # the mode refuses first
                rc, r, err = ctl(run.sock, "status", prefix=nobody,
                                 agentz=agentz)
                assert rc == 2 and r is None and "Permission denied" in err
                # a mode that lets it connect: the peer check refuses
                os.chmod(run.sock, 0o666)
                rc, r, err = ctl(run.sock, "stop", "--now", prefix=nobody,
                                 agentz=agentz)
                assert rc == 1 and r["ok"] is False, err
                assert r["error"] == ("refused: uid 65534 is neither the "
                                      "run's (0) nor root")
                run.wait_err("refused a client (uid 65534")
                # the run is unaffected
                st = run.ctl("status")[1]
                assert st["state"] == "running" and st["cell"]["n"] == 1
                assert run.ctl("stop", "--now")[0] == 0
                assert run.wait() == EXIT_OPERATOR, run.show()
            finally:
                run.kill()
    finally:
        shutil.rmtree(rtd, ignore_errors=True)


def test_a_connection_from_inside_the_worker_is_refused(tmp_path, rt):
    sock = str(rt / "inside.sock")
    script = first(WORKER_PROBE % {"sock": sock, "rt": str(rt)})
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "inside", rt)
        try:
            run.wait_out("C1")
            # the socket is masked in the worker's view: reach it through a
            # hard link in the workspace, with a mode any uid may use
            os.chmod(sock, 0o666)
            os.link(sock, run.ws / "link.sock")
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    out = run.out.decode()
    direct = [ln for ln in out.splitlines() if ln.startswith("DIRECT")][0]
    assert direct.startswith("DIRECT ERR"), out
    assert "LIST ERR" in out or "LIST []" in out, out
    via = [ln for ln in out.splitlines() if ln.startswith("VIA")][0]
    reply = json.loads(via[4:])
    assert reply["ok"] is False, via
    assert "inside the run's worker PID namespace" in reply["error"]
    assert run.records()[-1]["exit"] == 0     # not stopped by the cell
