"""A finished cell's leftover processes cannot write into a later cell's
output (issue 20, item 4): after a cell that leaves a process (the worker's
cgroup tells; without one, after every cell) the worker gets new pipes,
and the supervisor closes the cell's once it has read what they held at
its DONE; a cell that leaves none keeps them (issue 23: ~8 us a cell).

Every case starts, in one cell, a process that prints a marker in a loop
and outlives the cell (a child, on stdout or stderr; a forked copy of the
worker; a setsid double-forked daemon), then runs a cell that sleeps and
prints "ok": that cell's record holds exactly "ok\\n", the flood ends (its
pipe broke), the supervisor's RSS stays small, and cells that print and
wait for their own children still show everything, in order. Through
`agentz exec --json` and an agent run, as root and as a plain user.

Safety: every flood stops by itself (when its write fails, and after
FLOOD_S seconds at most: `timeout -s KILL`, or a deadline in the forked
copy), carries the test's marker (its argv, or its comm) and is SIGKILLed
by the test afterwards if still there; every run is a session leader with
a hard timeout (isolation_util's Ctx).
"""
import threading
import time

import pytest

from agentz_util import SAN, status_kb
from model_server import ModelServer
from isolation_util import RUN_TIMEOUT, brief, cell_ends, turns
from isolation_util import ctx, who  # noqa: F401 (the fixtures)

FLOOD_S = 20                     # the longest a flood can run
SLEEP_S = 1.0                    # how long the later cell listens for it
# Under ASan the peak also holds its quarantine of freed memory (256 MiB
# by default), which churn fills: 89 to 140 MiB measured for the same
# test; a flood kept would still be far above (it is hundreds of MiB).
RSS_BOUND_KB = (384 if SAN else 64) * 1024
KINDS = ["child_stdout", "child_stderr", "forked_worker", "setsid_daemon"]



# --- the floods --------------------------------------------------------------

def _loop(mark, fd):
    # stops when its write fails (its pipe broke); SIGPIPE ends it sooner
    return "while echo %s%s; do :; done" % (mark, " >&2" if fd == 2 else "")


def flood_code(kind, mark):
    """A cell starting a flood of mark lines that outlives it."""
    if kind in ("child_stdout", "child_stderr"):
        loop = _loop(mark, 2 if kind == "child_stderr" else 1)
        return ("import subprocess\n"
                "_flood = subprocess.Popen(['timeout', '-s', 'KILL', '%d', "
                "'sh', '-c', %r, %r])\n" % (FLOOD_S, loop, mark))
    if kind == "forked_worker":
        # a copy of the worker itself (no exec): it holds every fd the
        # worker had; named by its comm
        return ("import ctypes, os, time\n"
                "if os.fork() == 0:\n"
                "    try:\n"
                "        ctypes.CDLL(None).prctl(15, %r, 0, 0, 0)\n"
                "        _end = time.monotonic() + %d\n"
                "        while time.monotonic() < _end:\n"
                "            os.write(1, %r * 64)\n"
                "    finally:\n"
                "        os._exit(0)\n"
                % (mark.encode(), FLOOD_S, (mark + "\n").encode()))
    # setsid_daemon: double fork, setsid, exec; returns once it exec'd
    return ("import os\n"
            "_r, _w = os.pipe()\n"
            "_pid = os.fork()\n"
            "if _pid == 0:\n"
            "    try:\n"
            "        os.close(_r)\n"
            "        os.setsid()\n"
            "        if os.fork() == 0:\n"
            "            os.execv('/usr/bin/timeout', ['timeout', '-s', "
            "'KILL', '%d', 'sh', '-c', %r, %r])\n"
            "    finally:\n"
            "        os._exit(0)\n"
            "os.close(_w)\n"
            "os.waitpid(_pid, 0)\n"
            "os.read(_r, 1)\n"
            "os.close(_r)\n" % (FLOOD_S, _loop(mark, 1), mark))


def later_cell():
    return "import time\ntime.sleep(%s)\nprint('ok')\n" % SLEEP_S


def gone_code(mark):
    """A cell printing 'gone 0' once no process carrying mark is left
    (polled, 10 s at most), as the worker sees /proc."""
    return ("import os, time\n"
            "def _marked(m):\n"
            "    n = 0\n"
            "    for d in os.listdir('/proc'):\n"
            "        if not d.isdigit() or int(d) == os.getpid():\n"
            "            continue\n"
            "        for what in ('cmdline', 'comm'):\n"
            "            try:\n"
            "                with open('/proc/%%s/%%s' %% (d, what), 'rb') "
            "as f:\n"
            "                    if m in f.read():\n"
            "                        with open('/proc/%%s/stat' %% d) as s:\n"
            "                            if s.read().rsplit(')', 1)[1]"
            ".split()[0] != 'Z':\n"
            "                                n += 1\n"
            "                        break\n"
            "            except OSError:\n"
            "                pass\n"
            "    return n\n"
            "_end = time.monotonic() + 10\n"
            "while _marked(%r) and time.monotonic() < _end:\n"
            "    time.sleep(0.05)\n"
            "print('gone', _marked(%r))\n" % (mark.encode(), mark.encode()))


# --- runs --------------------------------------------------------------------

class Peak:
    """Samples a process's VmHWM/VmRSS while it runs."""

    def __init__(self, pid):
        self.pid, self.kb = pid, 0
        self.stop = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                self.kb = max(self.kb, status_kb(self.pid, "VmHWM"),
                              status_kb(self.pid, "VmRSS"))
            except OSError:         # it ended (and was reaped)
                return
            time.sleep(0.01)

    def done(self):
        self.stop.set()
        self.th.join(5)
        return self.kb


def run_exec(ctx, codes):
    h = ctx.start_exec(codes)
    peak = Peak(h.p.pid)
    try:
        run = ctx.finish(h)
    finally:
        kb = peak.done()
    return run, kb


def assert_clean(rec, mark, what):
    """rec holds exactly what the later cell printed, nothing of mark."""
    assert rec["status"] == "ok", (what, brief(rec))
    assert mark not in (rec.get("output") or ""), (what, brief(rec))
    assert rec["output"] == "ok\n", (what, brief(rec))
    assert rec["output_bytes"] == 3 and rec["output_dropped"] == 0, \
        (what, rec["output_bytes"], rec["output_dropped"])


# --- agentz exec -------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_leftover_flood_stays_out_of_later_cells(ctx, kind):
    mark = ctx.marker()
    run, kb = run_exec(ctx, [flood_code(kind, mark), later_cell(),
                             later_cell(), gone_code(mark)])
    assert run.recs[0]["status"] == "ok", brief(run.recs[0])
    for rec in run.recs[1:3]:
        assert_clean(rec, mark, kind)
    # the flood ended by itself (its pipe broke), long before FLOOD_S
    assert run.recs[3]["output"] == "gone 0\n", brief(run.recs[3])
    assert 0 < kb < RSS_BOUND_KB, "supervisor peak RSS %d kB" % kb


def test_every_flood_at_once_and_the_cells_own_output_in_order(ctx):
    marks = [ctx.marker() for _ in KINDS]
    start = "".join(flood_code(k, m) for k, m in zip(KINDS, marks))
    own = ("import subprocess, sys\n"
           "print('a')\n"
           "subprocess.run(['echo', 'x'])\n"
           "print('b')\n"
           "subprocess.run(['sh', '-c', 'echo y'])\n"
           "print('c')\n")
    big = ("import subprocess\n"
           "print('L' * 300000)\n"
           "subprocess.run(['sh', '-c', 'head -c 200000 /dev/zero | "
           "tr \"\\\\0\" M'])\n"
           "print('end')\n")
    err = "import sys, subprocess\nsubprocess.run(['sh', '-c', 'echo e >&2'])\n"
    run, kb = run_exec(ctx, [start, later_cell(), own, big, err])
    assert run.recs[0]["status"] == "ok", brief(run.recs[0])
    assert_clean(run.recs[1], marks[0], "all")
    for rec in run.recs[2:]:
        assert rec["status"] == "ok", brief(rec)
        assert not any(m in (rec.get("output") or "") for m in marks), \
            brief(rec)
    assert run.recs[2]["output"] == "a\nx\nb\ny\nc\n", brief(run.recs[2])
    out = run.recs[3]["output"]
    assert run.recs[3]["output_bytes"] == 300001 + 200000 + 4, \
        run.recs[3]["output_bytes"]
    assert out == "L" * 300000 + "\n" + "M" * 200000 + "end\n", \
        brief(run.recs[3])
    assert run.recs[4]["output"] == "e\n", brief(run.recs[4])
    assert 0 < kb < RSS_BOUND_KB, "supervisor peak RSS %d kB" % kb


def test_a_promoted_snapshot_gets_fresh_pipes_too(ctx):
    """A killed cell's snapshot takes over: it shares the worker's output
    socket, so the cells after it still write into pipes of their own."""
    mark = ctx.marker()
    crash = "import os\nprint('crashing', flush=True)\nos.kill(os.getpid(), 9)\n"
    run = ctx.run([flood_code("child_stdout", mark), crash, later_cell(),
                   later_cell(), gone_code(mark)],
                  args=("--snapshot", "always"), expect_rc=1)
    killed = run.recs[1]
    assert killed["status"] == "error", brief(killed)
    assert killed["namespace"] == "rolled back to before cell 1", \
        brief(killed)
    for rec in run.recs[2:4]:
        assert_clean(rec, mark, "after the promotion")
    assert run.recs[2]["worker"]["pid"] == run.recs[3]["worker"]["pid"]
    assert run.recs[4]["output"] == "gone 0\n", brief(run.recs[4])


def test_the_pipes_stay_while_only_the_worker_holds_them(ctx):
    """Fresh pipes cost ~30 us a cell: a cell that leaves no process keeps
    them (where the worker's cgroup can tell), one that leaves a process
    gets new ones after it, and so does every cell while it lives."""
    ino = "import os\nprint(os.fstat(1).st_ino)\n"
    # one process, no wrapper (a killed `timeout` would leave its sleep)
    child = ("import subprocess\n_c = subprocess.Popen(['sleep', '%d'])\n"
             % FLOOD_S)
    reap = "_c.kill(); _c.wait()\n"
    # no snapshot (a slow cell's next one gets one under `auto`): it is a
    # process of the worker's too, and not what is tested here
    run = ctx.run([ino, ino, child + ino, ino, reap + ino, ino],
                  args=("--snapshot", "never"))
    assert all(r["status"] == "ok" for r in run.recs), \
        [brief(r) for r in run.recs]
    got = [int(r["output"]) for r in run.recs]
    rotated = [got[i] != got[i - 1] for i in range(1, len(got))]
    if "cgroup" in run.recs[0]["worker"]["containment"]:
        # kept; kept (the child is made in cell 2); new, new (it lives at
        # cells 2 and 3's DONE); kept (cell 4 reaped it)
        assert rotated == [False, False, True, True, False], got
    else:
        assert all(rotated), got  # nothing tells: fresh after every cell


# --- an agent run ------------------------------------------------------------

def test_a_leftover_flood_stays_out_of_an_agent_runs_later_cell(ctx):
    marks = [ctx.marker() for _ in KINDS]
    cell1 = "".join(flood_code(k, m) for k, m in zip(KINDS, marks)) + \
        "call_me(input='NEXT-CELL')\n"
    cell2 = later_cell() + "call_me(input='LAST-CELL')\n"
    script = (turns(cell1, "Submit the first Python cell") +
              turns(cell2, "NEXT-CELL") + turns("quit()\n", "LAST-CELL"))
    with ModelServer(script) as srv:
        p, f = ctx.start([ctx.agentz, "--json", "--base-url", srv.base_url,
                          "--max-retries", "0", "--cell-timeout", "30",
                          "Flood, then print."])
        peak = Peak(p.pid)
        try:
            out, err = ctx.communicate(p, RUN_TIMEOUT)
        finally:
            kb = peak.done()
            f.close()
    assert p.returncode == 0, err[-3000:]
    ends = cell_ends(out)
    assert sorted(ends) == [0, 1, 2, 3], (sorted(ends), err[-2000:])
    assert ends[1]["status"] == "ok", brief(ends[1])
    rec = ends[2]
    assert rec["status"] == "ok", brief(rec)
    assert not any(m in (rec.get("output") or "") for m in marks), brief(rec)
    assert rec["output"] == "ok\n" and rec["output_bytes"] == 3, brief(rec)
    assert 0 < kb < RSS_BOUND_KB, "supervisor peak RSS %d kB" % kb
