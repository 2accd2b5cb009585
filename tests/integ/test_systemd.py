"""systemd integration: the unit verifies, and Type=notify works for real."""
import os
import socket
import subprocess
import tempfile

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


def test_notify_ready_status_and_watchdog(tmp_path):
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "import time\ntime.sleep(0.6)\nquit()",
                       "summary": "Wait, then stop."}},
        {"text": "ok"},
    ]
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30)
    with ModelServer(script) as srv:
        env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="100000")
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "t"],
                                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        msgs = []
        try:
            while not any(m.startswith("STOPPING=1") for m in msgs):
                msgs.append(sock.recv(4096).decode())
        finally:
            proc.wait(timeout=60)
            sock.close()
    assert proc.returncode == 0
    assert "READY=1" in msgs
    assert any(m.startswith("STATUS=cell 1: Wait, then stop.") for m in msgs)
    # 0.6 s of cell at a 50 ms ping interval
    assert sum(m == "WATCHDOG=1" for m in msgs) >= 5
