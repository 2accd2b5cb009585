"""Issue 10: output never blocks the loop, and one gate for what is shown.

- stdout a pipe nobody reads, or a terminal nobody reads (a paused pty):
  the cell deadline still fires within grace + 1 s and the process ends;
- a stalled reader loses live output at line boundaries, counted in one
  notice once it reads again;
- -v (code, summary, task), the status bar, sd_notify STATUS=, `agentz
  exec` output, tracebacks and --json are redacted with the agent's
  secret set; model text has its control characters made visible;
- a secret split across two streamed deltas never reaches a
  call_me(stream=True) consumer;
- cell output on a terminal keeps SGR colours and loses other escapes
  (a window title, a forged "\\r[agentz] cell 9: ok"); on a pipe it passes
  byte-exact.
"""
import fcntl
import json
import os
import re
import select
import socket
import struct
import subprocess
import termios
import textwrap
import time

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, SAN, kill_marked, new_marker, pty_run

SLOW = 4 if SAN else 1
SECRET = "sk-gate-Q7x9SECRETvalue2718"
GRACE = 1


def base_env(tmp_path, **extra):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
         "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(extra)
    return e


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


class Lines:
    """Lines of a binary pipe read with a deadline (no buffered file
    object: select() on it would miss what its buffer holds)."""

    def __init__(self, f):
        self.fd = f.fileno()
        self.buf = b""

    def until(self, pred, deadline):
        """Lines until pred(line); returns (that line or None, lines)."""
        lines = []
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                lines.append(line + b"\n")
                if pred(lines[-1]):
                    return lines[-1], lines
            left = deadline - time.monotonic()
            if left <= 0:
                return None, lines
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                return None, lines
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None, lines
            self.buf += chunk

    def rest(self):
        while True:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return self.buf
            self.buf += chunk


# ---------------------------------------------------------------------------
# a stalled reader does not stall the supervisor
# ---------------------------------------------------------------------------

FLOOD = code("""
    import sys
    sys.stderr.write('FLOOD-START\\n'); sys.stderr.flush()
    while True:
        print('x' * 99)
    """)


def check_deadline_fires(tmp_path, stdout):
    """agentz exec --cell-timeout 2 printing forever to stdout (nobody
    reads it): the timeout line comes within timeout + grace + 1 s of the
    cell's start, and the process ends."""
    marker = new_marker()
    (tmp_path / "flood.py").write_text(FLOOD)
    p = subprocess.Popen(
        [AGENTZ, "exec", "--cell-timeout", "2", "--grace", str(GRACE),
         "flood.py"], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=stdout,
        stderr=subprocess.PIPE, env=base_env(tmp_path, AGENTZ_MARK=marker))
    try:
        end = time.monotonic() + 30 * SLOW
        err = Lines(p.stderr)
        start, _ = err.until(lambda l: b"FLOOD-START" in l, end)
        assert start is not None
        t0 = time.monotonic()
        line, lines = err.until(lambda l: l.startswith(b"[agentz] cell 0"),
                                end)
        took = time.monotonic() - t0
        assert line is not None, lines
        assert b"timeout" in line, line
        assert took < 2 + GRACE + 1 + (2 if SAN else 0), took
        # the exit flush waits a bounded time for the stalled reader
        assert p.wait(timeout=10 * SLOW) == 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_marked(marker)


@pytest.mark.serial(
    "the timeout line must come by timeout + grace + 1 s")
def test_unread_stdout_pipe_deadline_fires(tmp_path):
    r, w = os.pipe()
    try:
        check_deadline_fires(tmp_path, w)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.serial(
    "the timeout line must come by timeout + grace + 1 s")
def test_unread_stream_socket_deadline_fires(tmp_path):
    # journald's stdout stream is a socket: it cannot be reopened, it
    # takes send(MSG_DONTWAIT)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        check_deadline_fires(tmp_path, b.fileno())
    finally:
        a.close()
        b.close()


@pytest.mark.serial(
    "the timeout line must come by timeout + grace + 1 s")
def test_paused_pty_deadline_fires(tmp_path):
    # the test holds the master and never reads: the terminal is paused
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        check_deadline_fires(tmp_path, slave)
    finally:
        os.close(slave)
        os.close(master)


def test_stalled_reader_loses_whole_lines_counted(tmp_path):
    # 3 MB of 100-byte lines into a pipe the test does not read until the
    # cell says it printed them all: what did not fit is dropped whole
    # lines at a time, and one notice counts exactly the missing bytes.
    marker = new_marker()
    (tmp_path / "c.py").write_text(code("""
        import sys
        for i in range(30000):
            print('%098d' % i)
        sys.stdout.flush()
        sys.stderr.write('PRINTED\\n'); sys.stderr.flush()
        input()
        print('TAIL')
        """))
    p = subprocess.Popen(
        [AGENTZ, "exec", "c.py"], cwd=tmp_path, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=base_env(tmp_path, AGENTZ_MARK=marker))
    try:
        end = time.monotonic() + 60 * SLOW
        printed, lines = Lines(p.stderr).until(lambda l: b"PRINTED" in l,
                                               end)
        assert printed is not None, lines
        out = Lines(p.stdout)
        note, got = out.until(lambda l: l.startswith(b"[agentz] "), end)
        assert note is not None, got[-3:]
        p.stdin.write(b"go\n")
        p.stdin.close()
        rest = out.rest()
        assert p.wait(timeout=30 * SLOW) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_marked(marker)
    m = re.fullmatch(rb"\[agentz\] (\d+) bytes of live output dropped "
                     rb"\(the reader was too slow\)\n", note)
    assert m, note
    payload = got[:-1]
    assert all(len(l) == 99 and l.endswith(b"\n") for l in payload)
    nums = [int(l) for l in payload]
    assert nums == sorted(nums) and len(set(nums)) == len(nums)
    assert len(payload) < 30000                    # something was dropped
    assert len(payload) * 99 + int(m.group(1)) == 30000 * 99
    assert rest == b"TAIL\n"


# ---------------------------------------------------------------------------
# the redaction gate
# ---------------------------------------------------------------------------

def agent_run(srv, tmp_path, task, args=(), env=None):
    e = base_env(tmp_path, MY_API_KEY=SECRET, **(env or {}))
    return subprocess.run(
        [AGENTZ, "--base-url", srv.base_url, "--cell-timeout", "60", *args,
         task], cwd=tmp_path, env=e, capture_output=True, text=True,
        timeout=60 * SLOW, stdin=subprocess.DEVNULL)


def test_verbose_code_summary_task_redacted(tmp_path):
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": f"x = '{SECRET}'\nprint('\\x1b[2J')\nquit()\n",
                       "summary": f"Use {SECRET}\x1b]0;pwned\x07 now."}},
        {"text": "ok"},
    ]
    with ModelServer(script) as srv:
        p = agent_run(srv, tmp_path, f"the key is {SECRET}", args=["-v"])
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stderr and SECRET not in p.stdout
    # the task (in cell 0's code), the code and the summary, redacted
    assert "the key is [REDACTED]" in p.stderr
    assert "x = '[REDACTED]'" in p.stderr
    # model text: the escape is shown, not sent to the terminal
    assert "[agentz] cell 1: Use [REDACTED]\\x1b]0;pwned\\x07 now." in \
        p.stderr, p.stderr
    assert "\x1b" not in p.stderr


def test_status_bar_redacted(tmp_path):
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "import time\ntime.sleep(0.5)\nquit()\n",
                       "summary": f"Use {SECRET}\x1b[2J here."}},
        {"text": "ok"},
    ]
    e = base_env(tmp_path, MY_API_KEY=SECRET, TERM="xterm")
    with ModelServer(script) as srv:
        rc, text = pty_run([AGENTZ, "--base-url", srv.base_url, "task"],
                           tmp_path, e)
    assert rc == 0, text[-2000:]
    assert "cell 1: Use [REDACTED]\\x1b[2J here." in text
    assert SECRET not in text
    assert "\x1b[2J" not in text


def test_notify_status_redacted_and_one_assignment(tmp_path):
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(30 * SLOW)
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "quit()",
                       "summary": f"{SECRET}\nWATCHDOG=trigger\x1b]0;t\x07"}},
        {"text": "ok"},
    ]
    msgs = []
    with ModelServer(script) as srv:
        e = base_env(tmp_path, MY_API_KEY=SECRET, NOTIFY_SOCKET=sock_path)
        proc = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "t"],
                                cwd=tmp_path, env=e, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            while not any(m.startswith("STOPPING=1") for m in msgs):
                msgs.append(sock.recv(4096).decode())
        finally:
            proc.wait(timeout=60)
            sock.close()
    assert proc.returncode == 0
    status = [m for m in msgs if m.startswith("STATUS=cell 1:")]
    assert status == ["STATUS=cell 1: [REDACTED]\\nWATCHDOG=trigger"
                      "\\x1b]0;t\\x07"], msgs
    assert not any(SECRET in m for m in msgs)


def test_exec_redacts_env_and_dotenv_secrets(tmp_path):
    dot = "dotenv-Secret-Value-31415"
    (tmp_path / ".env").write_text(f"SERVICE_TOKEN={dot}\n")
    cell = code(f"""
        print('env {SECRET} dotenv {dot}')
        raise ValueError('{SECRET} {dot}')
        """)
    (tmp_path / "c.py").write_text(cell)
    e = base_env(tmp_path, MY_API_KEY=SECRET)
    for args in ([], ["--json"]):
        p = subprocess.run([AGENTZ, "exec", *args, "c.py"], cwd=tmp_path,
                           env=e, capture_output=True, text=True,
                           timeout=60 * SLOW)
        assert p.returncode == 1, p.stderr
        both = p.stdout + p.stderr
        assert SECRET not in both and dot not in both, both
        if args:
            rec = json.loads(p.stdout)
            assert rec["output"] == "env [REDACTED] dotenv [REDACTED]\n"
            assert "ValueError: [REDACTED] [REDACTED]" in rec["traceback"]
            assert "[REDACTED]" in rec["code"]
        else:
            assert p.stdout == "env [REDACTED] dotenv [REDACTED]\n"
            assert "ValueError: [REDACTED] [REDACTED]" in p.stderr


def test_split_secret_in_streamed_deltas(tmp_path):
    half = len(SECRET) // 2
    cell = code("""
        s = call_me(input='STREAM-PROBE', stream=True)
        text = ''.join(e.delta for e in s
                       if e.type == 'response.output_text.delta')
        # hex: the cell's output is redacted anyway, this is not
        print('DELTAS', text.encode().hex())
        quit()
        """)
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell, "summary": "Stream."}},
        {"text": "ok"},
        {"match": "STREAM-PROBE",
         "text": ["the key ", SECRET[:half], SECRET[half:], " is it"]},
    ]
    with ModelServer(script) as srv:
        p = agent_run(srv, tmp_path, "task")
    assert p.returncode == 0, p.stderr
    m = re.search(r"DELTAS ([0-9a-f]+)", p.stdout)
    assert m, p.stdout
    assert bytes.fromhex(m.group(1)).decode() == "the key [REDACTED] is it"


# ---------------------------------------------------------------------------
# cell output on a terminal
# ---------------------------------------------------------------------------

TERM_CELL = code("""
    print('A\\x1b]0;title\\x07B')
    print('\\r[agentz] cell 9: ok')
    print('\\x1b[31mRED\\x1b[0m \\x1b[2J\\x1b[HC\\x07')
    """)


def test_terminal_keeps_sgr_drops_other_escapes(tmp_path):
    (tmp_path / "t.py").write_text(TERM_CELL)
    rc, text = pty_run([AGENTZ, "exec", "t.py"], tmp_path,
                       base_env(tmp_path, TERM="xterm"))
    assert rc == 0, text
    assert "\x1b[31mRED\x1b[0m C" in text          # SGR kept
    assert "AB" in text and "title" not in text    # OSC dropped
    assert "\x1b]" not in text and "\x1b[2J" not in text and \
        "\x1b[H" not in text and "\x07" not in text
    # the lone \r is a line break: the forged line overwrites nothing
    assert re.search(r"[^\n]\r\[agentz\] cell 9", text) is None
    assert "\n[agentz] cell 9: ok" in text


def test_pipe_passes_cell_output_byte_exact(tmp_path):
    (tmp_path / "t.py").write_text(TERM_CELL)
    p = subprocess.run([AGENTZ, "exec", "t.py"], cwd=tmp_path,
                       env=base_env(tmp_path), capture_output=True,
                       timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (b"A\x1b]0;title\x07B\n\r[agentz] cell 9: ok\n"
                        b"\x1b[31mRED\x1b[0m \x1b[2J\x1b[HC\x07\n")


@pytest.mark.serial(
    "the next request must come within timeout + grace + 1 s")
def test_agent_on_a_paused_terminal_keeps_time(tmp_path):
    # An agent run whose terminal (stdout, stderr, status bar) nobody
    # reads: the flooding cell is still cut at its deadline, the model is
    # asked for a repair within timeout + grace + 1 s, and the run ends.
    marker = new_marker()
    flood = code("""
        call_me(input='FLOOD-STARTED')
        while True:
            print('y' * 99)
        """)
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": flood, "summary": "Flood."}},
        {"text": "ok"},
        {"match": "FLOOD-STARTED", "text": "go"},
        {"match": "Repair the failed cell", "next_cell": "quit()"},
        {"text": "ok"},
    ]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    with ModelServer(script) as srv:
        p = subprocess.Popen(
            [AGENTZ, "--base-url", srv.base_url, "--cell-timeout", "2",
             "--grace", str(GRACE), "task"], cwd=tmp_path, stdin=slave,
            stdout=slave, stderr=slave, close_fds=True,
            env=base_env(tmp_path, TERM="xterm", AGENTZ_MARK=marker))
        try:
            assert srv.wait_for_requests(3, timeout=30 * SLOW)
            t0 = time.monotonic()
            assert srv.wait_for_requests(4, timeout=2 + GRACE + 1 +
                                         (2 if SAN else 0)), \
                time.monotonic() - t0
            assert p.wait(timeout=10 * SLOW) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(slave)
            os.close(master)
            kill_marked(marker)
