"""Shared helpers of the control socket tests (test_ctl*.py): script
builders (first, on, gated, HANG, WORKER_PROBE), Run (a live agentz run and
the events it gives), ctl and the raw socket helpers.  Each test file has
its own rt fixture (a private runtime directory).
"""
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, SAN  # noqa: E402

SLOW = 4 if SAN else 1
EXIT_OPERATOR = 6


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def first(src, summary="first"):
    return [{"match": "Submit the first Python cell",
             "next_cell": {"code": code(src), "summary": summary}},
            {"text": "ok"}]


def on(word, src, summary="next"):
    """Turns: a request holding word gets src as its next cell."""
    return [{"match": word, "next_cell": {"code": code(src),
                                           "summary": summary}},
            {"text": "ok"}]


def gated(n, then="quit()"):
    """A cell that says C<n>, waits for the gate file go<n>, then runs
    then."""
    return code(f"""
        import os, time
        print('C{n}', flush=True)
        while not os.path.exists('go{n}'):
            time.sleep(0.01)
        """) + code(then)


HANG = code("""
    import time
    print('C1', flush=True)
    time.sleep(300)
    """)


class Run:
    """One agentz run in the background: its stdout and stderr collected
    by threads, waits on what it printed."""

    def __init__(self, srv, tmp_path, name, rt, args=(), env=None,
                 agentz=AGENTZ, prefix=(), owner=None, task="the task"):
        self.ws = tmp_path / ("ws-" + name)
        self.ws.mkdir(exist_ok=True)
        if owner is not None:
            os.chown(self.ws, owner, owner)
        self.journal = tmp_path / (name + ".jsonl")
        e = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        if rt is not None:
            e["RUNTIME_DIRECTORY"] = str(rt)
        else:   # the default folders, /run/agentz or $XDG_RUNTIME_DIR's
            e.pop("RUNTIME_DIRECTORY", None)
        e.update(env or {})
        self.sock = os.path.join(str(rt), name + ".sock") if rt else None
        self.p = subprocess.Popen(
            [*prefix, agentz, "--base-url", srv.base_url, "--journal",
             str(self.journal), "--cell-timeout", "60", *args, task],
            cwd=self.ws, env=e, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.cond = threading.Condition()
        self.out, self.err, self.eof = b"", b"", 0
        self.threads = [threading.Thread(target=self._read, args=(f, n))
                        for f, n in ((self.p.stdout, "out"),
                                     (self.p.stderr, "err"))]
        for t in self.threads:
            t.start()

    def _read(self, f, attr):
        while True:
            chunk = os.read(f.fileno(), 65536)
            with self.cond:
                if not chunk:
                    self.eof += 1
                    self.cond.notify_all()
                    return
                setattr(self, attr, getattr(self, attr) + chunk)
                self.cond.notify_all()

    def wait_out(self, marker, timeout=30, attr="out"):
        m = marker.encode()
        with self.cond:
            ok = self.cond.wait_for(lambda: m in getattr(self, attr)
                                    or self.eof == 2, timeout * SLOW)
            assert ok and m in getattr(self, attr), self.show()

    def wait_err(self, marker, timeout=30):
        self.wait_out(marker, timeout, "err")

    def wait(self, timeout=30):
        rc = self.p.wait(timeout=timeout * SLOW)
        for t in self.threads:
            t.join(timeout=10)
        return rc

    def gate(self, n):
        (self.ws / f"go{n}").write_text("go")

    def records(self, type_=None):
        recs = [json.loads(line) for line in open(self.journal)]
        return [r for r in recs if type_ is None or r["type"] == type_]

    def wait_record(self, pred, timeout=30):
        """Polls the journal (written before the step goes on) for a
        record matching pred."""
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end and self.p.poll() is None:
            if os.path.exists(self.journal) and \
                    any(pred(r) for r in self.records()):
                return
            time.sleep(0.005)
        raise AssertionError("no such journal record\n" + self.show())

    def show(self):
        return "--- stdout\n%s\n--- stderr\n%s" % (
            self.out.decode(errors="replace"),
            self.err.decode(errors="replace"))

    def ctl(self, *words, **kw):
        return ctl(self.sock, *words, **kw)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.wait()


def ctl(target, *words, env=None, prefix=(), agentz=AGENTZ):
    """agentz ctl TARGET WORDS...: (exit code, reply or None, stderr)."""
    p = subprocess.run([*prefix, agentz, "ctl", target, *words],
                       capture_output=True, text=True, env=env,
                       timeout=30 * SLOW)
    reply = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, reply, p.stderr


def set_deadline_now(rt):
    """`agentz ctl SOCK budgets --deadline 1` for the one run whose socket
    is in the runtime folder rt: 1 s after its start, so already past, the
    deadline stops the run at once. Tests call it once the model server
    saw the call the stop must cut (a --deadline fixed at start can pass
    before that call on a loaded machine)."""
    socks = list(rt.glob("*.sock"))
    assert len(socks) == 1, socks
    rc, _, err = ctl(str(socks[0]), "budgets", "--deadline", "1")
    assert rc == 0, err


def raw(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10 * SLOW)
    s.connect(path)
    return s


def read_reply(s):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf) if buf else None


def closed_by_server(s):
    """True once the server closed s (EOF or reset), reading what is left."""
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True


WORKER_PROBE = """
    import os, socket, time
    print('C1', flush=True)
    while not os.path.exists('link.sock'):
        time.sleep(0.01)
    def ask(path):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(path)
            try:
                s.sendall(b'stop --now\\n')
            except OSError:
                pass    # refused at once: the reason waits to be read
            return s.recv(4096).decode().strip()
        except OSError as e:
            return 'ERR ' + type(e).__name__
    print('DIRECT', ask(%(sock)r), flush=True)
    try:
        print('LIST', os.listdir(%(rt)r), flush=True)
    except OSError as e:
        print('LIST ERR', type(e).__name__, flush=True)
    print('VIA', ask('link.sock'), flush=True)
    quit()
    """
