"""The terminal UI: a status bar on a TTY, plain lines otherwise."""
import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time

from model_server import ModelServer

from agentz_util import AGENTZ

SCRIPT = [
    {"match": "Submit the first Python cell",
     "next_cell": {"code": "import time\nprint('working')\ntime.sleep(0.5)\n"
                           "r = call_me(input='second')\nquit()\n",
                   "summary": "Work a little."}},
    {"text": "ok"},
    {"match": "second", "delay": 0.03, "text": "streaming " * 10},
]


def env():
    e = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    e["TERM"] = "xterm"
    return e


def test_status_bar_on_a_tty(tmp_path):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with ModelServer(SCRIPT) as srv:
        p = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "task"],
                             cwd=tmp_path, env=env(), stdin=slave,
                             stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        out = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 1)
            if not r:
                if p.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:         # EIO: the slave side closed
                break
            if not chunk:
                break
            out += chunk
        p.wait(timeout=30)
        os.close(master)
    assert p.returncode == 0, out[-2000:]
    text = out.decode("utf-8", "replace")
    assert "\x1b[1;23r" in text                   # scroll region above the bar
    assert "\x1b[24;1H" in text                   # the bar on the last row
    assert "cell 1: Work a little." in text
    assert re.search(r"total [1-9][0-9]* tokens", text)  # exact, from usage
    assert "request ~" in text                    # live estimate while streaming
    assert text.count("\x1b7") >= 3               # redrawn by the 0.1 s timer
    assert "\x1b[r" in text                       # region dropped at exit
    assert "working" in text


def test_no_escape_codes_without_a_tty(tmp_path):
    with ModelServer(SCRIPT) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "task"],
                           cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert b"\x1b" not in p.stdout and b"\x1b" not in p.stderr
    assert b"working" in p.stdout
