"""What bench/run.py's sections share: the constants (the system interpreter,
the repository, warm-up counts), the abort exceptions, percentile and
formatting helpers, child processes run with a bounded wait and killed as a
group, and a table Row. bench/isolation.py uses some of them through run.
"""
import math
import os
import signal
import subprocess
import sys
import time


SYS_PY = "/usr/bin/python3"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 50            # agentz / IPython cells dropped
JUPYTER_WARMUP = 20


class BenchAbort(BaseException):
    """Watchdog expiry or a termination signal: unwind, clean up, exit."""


class NotBuilt(Exception):
    pass


def _abort(signum, _frame):
    raise BenchAbort(signal.Signals(signum).name)


# --------------------------------------------------------------- helpers

def pct(xs, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(xs)
    k = max(0, math.ceil(p / 100.0 * len(s)) - 1)
    return s[k]


def fmt_us(v):
    if v is None:
        return "n/a"
    if v < 10:
        return f"{v:.2f} us"
    if v < 1000:
        return f"{v:.1f} us"
    if v < 1e6:
        return f"{v / 1000:.2f} ms"
    return f"{v / 1e6:.2f} s"


def fmt_ms(v):
    return "n/a" if v is None else fmt_us(v * 1000.0)


def child_env(**extra):
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV",
              "PYENV_VERSION", "AGENTZ_BENCH_REEXEC"):
        env.pop(k, None)
    env.update(extra)
    return env


def progress(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def kill_group(p):
    """End a child started with start_new_session=True, and its group."""
    if p.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass


def run_child(cmd, timeout, input_text=None, env=None, cwd=REPO):
    """Run cmd in its own session with a hard timeout; return
    (rc, stdout, stderr, wall_s)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input_text is not None
                         else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, cwd=cwd,
                         env=env if env is not None else child_env())
    try:
        out, err = p.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.communicate()
        raise TimeoutError(f"{os.path.basename(cmd[0])} still running "
                           f"after {timeout} s (killed)")
    except BaseException:
        kill_group(p)
        raise
    wall = time.perf_counter() - t0
    return p.returncode, out, err, wall


def first_line(s):
    s = (s or "").strip()
    return s.splitlines()[0][:160] if s else ""


class Row:
    def __init__(self, name, med=None, p90=None, n=None, note="",
                 text=None):
        self.name, self.med, self.p90, self.n = name, med, p90, n
        self.note, self.text = note, text
