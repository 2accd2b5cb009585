"""The terminal UI: a status bar on a TTY, plain lines otherwise."""
import os
import re
import subprocess

from model_server import ModelServer

from agentz_util import AGENTZ, pty_run

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
    with ModelServer(SCRIPT) as srv:
        rc, text = pty_run([AGENTZ, "--base-url", srv.base_url, "task"],
                           tmp_path, env())
    assert rc == 0, text[-2000:]
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
