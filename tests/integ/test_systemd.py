"""systemd integration: the unit verifies, and Type=notify works for real."""
import os
import socket
import subprocess

from model_server import ModelServer

from agentz_util import AGENTZ

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_unit_file_verifies(tmp_path):
    unit = open(os.path.join(ROOT, "systemd", "agentz@.service")).read()
    path = tmp_path / "agentz@t.service"
    path.write_text(unit.replace("/usr/local/bin/agentz", AGENTZ))
    p = subprocess.run(["systemd-analyze", "verify", str(path)],
                       capture_output=True, text=True, timeout=60)
    # It exits 0 on unknown keys: any output at all is a failure.
    assert p.returncode == 0 and p.stderr.strip() == "" and \
        p.stdout.strip() == "", (p.stdout, p.stderr)


def notify_run(tmp_path, script, watchdog_usec=None):
    """Runs agentz against script with a notify socket of its own (as
    systemd gives a Type=notify unit); returns (exit code, datagrams)."""
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30)
    with ModelServer(script) as srv:
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        env.pop("OPENAI_API_KEY", None)
        env.pop("WATCHDOG_USEC", None)
        if watchdog_usec is not None:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        proc = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "t"],
                                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        msgs = []
        try:
            while not any(m.startswith("STOPPING=1") for m in msgs):
                msgs.append(sock.recv(4096).decode())
        finally:
            proc.wait(timeout=60)
            sock.close()
    return proc.returncode, msgs


def test_notify_ready_status_and_watchdog(tmp_path):
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "import time\ntime.sleep(0.6)\nquit()",
                       "summary": "Wait, then stop."}},
        {"text": "ok"},
    ]
    rc, msgs = notify_run(tmp_path, script, watchdog_usec=100000)
    assert rc == 0
    assert "READY=1" in msgs
    assert any(m.startswith("STATUS=cell 1: Wait, then stop.") for m in msgs)
    # 0.6 s of cell at a 50 ms ping interval
    assert sum(m == "WATCHDOG=1" for m in msgs) >= 5


def test_status_cannot_smuggle_other_assignments(tmp_path):
    # A model-written summary with a newline would start a new assignment
    # in the notify datagram (WATCHDOG=trigger, READY=1, MAINPID=...).
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "quit()",
                       "summary": "Stop.\nWATCHDOG=trigger\rMAINPID=1"}},
        {"text": "ok"},
    ]
    rc, msgs = notify_run(tmp_path, script)
    assert rc == 0
    status = [m for m in msgs if m.startswith("STATUS=cell 1:")]
    assert status, msgs
    for m in msgs:
        lines = m.split("\n")
        assert not any(x.startswith(("WATCHDOG=", "MAINPID=")) for x in lines), m
    assert "WATCHDOG=trigger" in status[0] and "\n" not in status[0]
