"""Model outages are waited out, not failed on (issue 9, item 6).

After the quick HTTP retries (--max-retries) a retryable failure (connection
refused, 429, 5xx) makes the call wait with capped exponential backoff (1 s
doubling to 60 s) for --outage-patience; only then does the cell see the
error. The cell's own timeout and SIGTERM still end things at once.

Each test runs the real build/agentz against tests/integ/model_server.py.
Orderings are gated on what agentz logs ("waiting for the model"), never on
sleeps; the only timing asserted is a lower bound on the backoff and an
upper bound on how long an ended wait may linger.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, PROBE, SAN, beside  # noqa: E402
from model_server import ModelServer  # noqa: E402

SLOW = 4 if SAN else 1
TASK = "Compute the answer to the test question."
RECOVERY_PREFIX = "Repair the failed cell and continue the original task."
WAITING = "waiting for the model:"



def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def submit(src, reply="ok"):
    """The model submits src as the next cell, then answers the invisible
    continuation of that host-only response."""
    return [{"next_cell": {"code": code(src), "summary": "Next cell."}},
            {"text": reply}]


def env():
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    return e


def command(base_url, args):
    return [AGENTZ, "--base-url", base_url, "--cell-timeout", "60",
            "--max-retries", "1", *args, TASK]


def run_agent(srv, cwd, args=(), timeout=30):
    e = env()
    e["HOME"] = str(cwd)
    t0 = time.monotonic()
    p = subprocess.run(command(srv.base_url, args), cwd=cwd, env=e,
                       capture_output=True, text=True, timeout=timeout * SLOW)
    p.elapsed = time.monotonic() - t0
    return p


class Agent:
    """agentz in the background; stderr read line by line so a test can
    wait for a line (an event) before acting."""

    def __init__(self, base_url, cwd, args=()):
        e = env()
        e["HOME"] = str(cwd)
        self.p = subprocess.Popen(command(base_url, args), cwd=cwd, env=e,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)     # EOF
            self.cond.notify_all()

    def wait_line(self, text, timeout=20):
        def seen():
            return any(ln is None or text in ln for ln in self.lines)
        with self.cond:
            assert self.cond.wait_for(seen, timeout * SLOW), self.stderr()
            assert any(ln is not None and text in ln for ln in self.lines), \
                self.stderr()

    def finish(self, timeout=30):
        # not communicate(): the reader thread owns stderr
        out = self.p.stdout.read()
        self.p.wait(timeout=timeout * SLOW)
        self.reader.join(5)
        return out

    def stderr(self):
        return "".join(ln for ln in self.lines if ln is not None)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def show(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def probes(srv):
    return [r for r in srv.requests
            if r["body"] and r["body"].get("input") == "PROBE-REQ"]


def repairs(srv):
    return [r for r in srv.requests if r["body"] and
            isinstance(r["body"].get("input"), str) and
            r["body"]["input"].startswith(RECOVERY_PREFIX)]


def free_port():
    """A port nothing listens on (reserved, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------------------

def test_503_outage_is_waited_out(tmp_path):
    # 2 quick attempts (--max-retries 1), then tries 1 s and 2 s apart
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 503, "repeat": 3,
             "error": {"message": "Overloaded, try later."}},
            {"text": "AFTER-OUTAGE"}]) as srv:
        p = run_agent(srv, tmp_path, ["--outage-patience", "30"])
    assert p.returncode == 0, show(p)
    assert "RESULT AFTER-OUTAGE" in p.stdout, show(p)
    assert not repairs(srv), "an outage is no failed cell"
    pr = probes(srv)
    assert len(pr) == 4, show(p)
    assert pr[2]["time"] - pr[1]["time"] >= 0.95
    assert pr[3]["time"] - pr[2]["time"] >= 1.95
    assert p.stderr.count(WAITING) == 2, show(p)
    assert "Overloaded, try later." in p.stderr
    assert "next try in 1.0 s" in p.stderr and "next try in 2.0 s" in p.stderr
    assert "the model answers again" in p.stderr, show(p)


def test_unreachable_endpoint_is_waited_out(tmp_path):
    port = free_port()
    a = Agent(f"http://127.0.0.1:{port}/v1", tmp_path,
              ["--outage-patience", "30"])
    srv = ModelServer(submit("print('RESULT', 'UP')\nquit()"), port=port)
    try:
        a.wait_line(WAITING)
        srv.start()
        out = a.finish()
    finally:
        a.kill()
        srv.stop()
    err = a.stderr()
    assert a.p.returncode == 0, err
    assert "RESULT UP" in out, err
    assert not repairs(srv)
    assert f"127.0.0.1 port {port}" in err or "onnect" in err, err
    assert "the model answers again" in err, err


@pytest.mark.serial("the run must end within a wall-clock bound (10 s)")
def test_patience_bounds_the_wait(tmp_path):
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 503, "repeat": "forever",
             "error": {"message": "Overloaded, try later."}}]) as srv:
        p = run_agent(srv, tmp_path, ["--outage-patience", "1"])
    assert p.returncode == 0, show(p)      # the cell caught it and quit()
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("MODELERROR")]
    assert line, show(p)
    assert "HTTP 503" in line[0] and "Overloaded, try later." in line[0]
    assert "unavailable for" in line[0], line[0]
    assert len(probes(srv)) == 3, show(p)   # 2 quick, 1 after 1 s
    assert p.stderr.count(WAITING) == 1, show(p)
    assert "stopped waiting for the model" in p.stderr, show(p)
    assert p.elapsed < 10 * SLOW, p.elapsed


def test_400_is_not_waited_on(tmp_path):
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 400,
             "error": {"message": "Invalid value for 'input'."}},
            {"text": "SHOULD-NOT-BE-RETRIED"}]) as srv:
        p = run_agent(srv, tmp_path, ["--outage-patience", "30"])
    assert p.returncode == 0, show(p)
    assert "MODELERROR" in p.stdout and "HTTP 400" in p.stdout, show(p)
    assert len(probes(srv)) == 1
    assert WAITING not in p.stderr, show(p)


def test_quota_429_is_not_waited_on(tmp_path):
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 429,
             "error": {"message": "You exceeded your current quota.",
                       "type": "insufficient_quota",
                       "code": "insufficient_quota"}},
            {"text": "SHOULD-NOT-BE-RETRIED"}]) as srv:
        p = run_agent(srv, tmp_path, ["--outage-patience", "30"])
    assert "MODELERROR" in p.stdout and "HTTP 429" in p.stdout, show(p)
    assert len(probes(srv)) == 1
    assert WAITING not in p.stderr, show(p)


def outage_router(after_repair):
    """Answers by input: PROBE-REQ is always 503; the task submits the
    probe; a repair request gets after_repair; continuations get "ok"."""
    script = {"task": submit(PROBE)[0], "repair": after_repair}

    def route(rec):
        inp = rec["body"]["input"]
        if inp == "PROBE-REQ":
            return {"kind": "http_error", "status": 503}
        if isinstance(inp, str) and inp.startswith(TASK):
            return script["task"]
        if isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX):
            return script["repair"]
        return {"text": "ok"}
    return [route] * 60


@pytest.mark.serial("the run must end within a wall-clock bound (12 s)")
def test_cell_timeout_cuts_the_wait(tmp_path):
    repair = {"next_cell": {"code": "print('REPAIRED')\nquit()\n",
                            "summary": "Repair."}}
    with ModelServer(outage_router(repair)) as srv:
        p = run_agent(srv, tmp_path, ["--outage-patience", "600",
                                      "--cell-timeout", "2", "--grace", "1"])
    assert p.returncode == 0, show(p)
    assert "REPAIRED" in p.stdout, show(p)
    assert WAITING in p.stderr, show(p)
    assert "cell 1: error timeout" in p.stderr, show(p)
    assert len(repairs(srv)) == 1
    # the cell ended at its own deadline, not the outage's patience
    assert p.elapsed < 12 * SLOW, (p.elapsed, show(p))


@pytest.mark.serial("SIGTERM must end the run within 3 s")
def test_sigterm_ends_the_wait_at_once(tmp_path):
    with ModelServer(outage_router({"text": "unused"})) as srv:
        a = Agent(srv.base_url, tmp_path, ["--outage-patience", "600"])
        try:
            a.wait_line(WAITING)
            t0 = time.monotonic()
            a.p.send_signal(signal.SIGTERM)
            a.finish(timeout=10)
            took = time.monotonic() - t0
        finally:
            a.kill()
    assert a.p.returncode == 128 + signal.SIGTERM, a.stderr()
    assert took < 3 * SLOW, took
    assert not repairs(srv)


def notify_socket():
    d = tempfile.mkdtemp(prefix="agentz-notify-")
    path = os.path.join(d, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    return s, path


def test_outage_is_journaled_and_notified(tmp_path):
    # needs prompt.c's outage observer (journal "outage", STATUS)
    journal = beside(tmp_path, "run.jsonl")
    sock, path = notify_socket()
    msgs = []
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 502, "repeat": 3},
            {"text": "AFTER-OUTAGE"}]) as srv:
        e = env()
        e.update({"HOME": str(tmp_path), "NOTIFY_SOCKET": path})
        p = subprocess.run(command(srv.base_url, [
            "--outage-patience", "30", "--journal", str(journal)]),
            cwd=tmp_path, env=e, capture_output=True, text=True,
            timeout=30 * SLOW)
    try:
        while True:
            msgs.append(sock.recv(65536).decode())
    except OSError:
        pass
    finally:
        sock.close()
        os.unlink(path)
        os.rmdir(os.path.dirname(path))
    assert p.returncode == 0, show(p)
    recs = [json.loads(ln) for ln in journal.read_text().splitlines()]
    out = [r for r in recs if r.get("type") == "outage"]
    assert len(out) == 2, recs
    assert [r["next_try_in"] for r in out] == [1.0, 2.0]
    assert all("HTTP 502" in r["reason"] or "502" in r["reason"]
               for r in out), out
    assert out[0]["since"] == out[1]["since"]
    assert abs(out[0]["since"] - time.time()) < 60
    status = [m for m in msgs if "STATUS=waiting for the model" in m]
    assert len(status) == 2, msgs


def test_the_status_bar_says_it_is_waiting(tmp_path):
    # On a terminal the bar (reverse video) names the outage while the
    # call waits.
    from agentz_util import pty_run
    with ModelServer(submit(PROBE) + [
            {"kind": "http_error", "status": 503, "repeat": 3,
             "error": {"message": "Overloaded, try later."}},
            {"text": "AFTER-OUTAGE"}]) as srv:
        e = env()
        e["HOME"] = str(tmp_path)
        e["TERM"] = "xterm"
        rc, text = pty_run(command(srv.base_url, ["--outage-patience", "30"]),
                           tmp_path, e, cols=200)
    assert rc == 0, text[-3000:]
    bars = re.findall(r"\x1b\[7m([^\x1b]*)\x1b\[0m", text)
    waiting = [b for b in bars if "waiting for the model" in b]
    assert waiting, bars[-5:]
    assert "Overloaded, try later." in waiting[0] or "503" in waiting[0]
