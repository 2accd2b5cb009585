#!/usr/bin/python3
"""Memory soak (issue 10, "Done when"): the supervisor's memory and
descriptors stay flat in the length of the run.

    /usr/bin/python3 bench/soak.py [BUILD] [--trivial N] [--big N]
        [--big-size BYTES] [--agent N]

Three runs, each sampled from /proc/<supervisor>/status (VmRSS, VmHWM) and
/proc/<supervisor>/fd while it is alive:
  1. `agentz exec -`: --trivial (10,000) cells `n += 1`, sampled every
     1,000 cells (when the supervisor has printed the cell's status line);
  2. `agentz exec -`: --big (2,000) cells printing --big-size (100 KB)
     each, sampled every 1,000 cells (and every 250 for the shape);
  3. an agent run with a journal against tests/integ/model_server.py:
     --agent (300) cells, each printing 10 KB and asking the model for the
     next, sampled every 50 cells (when the model has seen that many
     requests).
The verdict per run: flat when VmRSS grows less than 128 bytes per cell
from its first sample past cell 128 (the warm-up) to its last, or by no
more than two steps of glibc's heap (2 x 132 KiB: a short run cannot tell
those from a trend) (the records kept whole are bounded by
the history's budget, 8 MiB or 64 records, reached by the first sample;
what is left is the per-cell slot, 40 bytes, and its array's doubling)
and the descriptor count does not grow. For scale, before issue 10 the supervisor grew ~0.35 KB per trivial
cell and ~12 KB per cell printing 10 KB (~100 KB per cell printing 100 KB).
A benchmark: it prints figures, it asserts nothing.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integ"))
from model_server import ModelServer  # noqa: E402

# what a cell may leave in memory: its slot (40 bytes) and its share of
# the slot array's doubling
FLAT_PER_CELL = 128
# glibc's malloc grows its heap by at least 128 KiB (M_TOP_PAD) plus the
# request: a short run cannot tell two such steps from a trend
HEAP_STEPS = 2 * 132 * 1024
# cells before the bounded stores are full: not part of the verdict
WARM_CELLS = 128


def status(pid):
    """(VmRSS kB, VmHWM kB, open descriptors) of pid."""
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm, len(os.listdir(f"/proc/{pid}/fd"))


def env(d):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d,
         "LANG": "C.UTF-8", "TMPDIR": d}
    return e


def show(label, cells, s):
    print(f"  {label:>8} {cells:>6}  VmRSS {s[0] / 1024:7.1f} MiB  "
          f"VmHWM {s[1] / 1024:7.1f} MiB  fds {s[2]:3d}", flush=True)


def verdict(name, samples, ncells):
    # from the first sample past the warm-up (the history's 64 records and
    # the host-tool store of the last cells are full by then)
    warm = [x for x in samples if x[0] >= WARM_CELLS]
    (c0, s0), (c1, s1) = (warm if len(warm) > 1 else samples)[0], samples[-1]
    grown = (s1[0] - s0[0]) * 1024
    per = grown / max(1, c1 - c0)
    flat = (per < FLAT_PER_CELL or grown <= HEAP_STEPS) and s1[2] <= s0[2]
    print(f"  {name}: VmRSS {s0[0] / 1024:.1f} -> {s1[0] / 1024:.1f} MiB "
          f"from cell {c0} to {c1} ({per:+.1f} B/cell), fds {s0[2]} -> "
          f"{s1[2]}: {'FLAT' if flat else 'NOT FLAT'}", flush=True)
    return flat


def exec_soak(build, name, cell, n, every):
    """Runs n copies of cell through agentz exec; samples every `every`."""
    print(f"{name}: agentz exec, {n} cells", flush=True)
    samples = []
    with tempfile.TemporaryDirectory(prefix="agentz-soak-") as d:
        p = subprocess.Popen([os.path.join(build, "agentz"), "exec", "-"],
                             cwd=d, env=env(d), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # the last cell waits for the last sample (taken while alive)
        gate = os.path.join(d, "go")
        src = "n = 0\n" + "".join("\n# %%\n" + cell for _ in range(n - 1))
        src += ("\n# %%\nimport os, time\nwhile not os.path.exists("
                + repr(gate) + "):\n    time.sleep(0.01)\n")
        with tempfile.TemporaryFile() as f:
            f.write(src.encode())
            f.seek(0)
            feeder = subprocess.Popen(["cat"], stdin=f, stdout=p.stdin)
            p.stdin.close()
            t0 = time.monotonic()
            for line in p.stderr:
                if not line.startswith(b"[agentz] cell "):
                    continue
                k = int(line.split()[2]) + 1
                if k % every == 0 or k == n:
                    s = status(p.pid)
                    samples.append((k, s))
                    show("cells", k, s)
                if k == n:
                    open(gate, "w").close()
            feeder.wait()
        rc = p.wait()
    print(f"  exit {rc} in {time.monotonic() - t0:.1f} s", flush=True)
    return verdict(name, [x for x in samples if x[0] % 1000 == 0] or samples,
                   n)


def agent_cell(i, size):
    return f"print('z' * {size})\ncall_me(input='NEXT-{i}')\n"


def agent_soak(build, n, every, size=10_000):
    print(f"agent: {n} cells of {size} bytes, journaled, against "
          "model_server.py", flush=True)
    script = []
    for i in range(1, n):
        script += [{"next_cell": {"code": agent_cell(i, size),
                                  "summary": f"cell {i}"}}, {"text": "ok"}]
    script += [{"next_cell": {"code": "quit()\n", "summary": "end"}},
               {"text": "ok"}]
    samples = []
    with tempfile.TemporaryDirectory(prefix="agentz-soak-") as d, \
            ModelServer(script) as srv:
        ws = os.path.join(d, "ws")      # the journal beside it, never in it
        os.mkdir(ws)
        p = subprocess.Popen([os.path.join(build, "agentz"), "--base-url",
                              srv.base_url, "--journal",
                              os.path.join(d, "run.jsonl"), "soak"], cwd=ws,
                             env=env(d), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        # cell k (k >= 1) asks the model twice before cell k + 1 starts
        for k in range(every, n + 1, every):
            if not srv.wait_for_requests(2 * k, timeout=600) or \
                    p.poll() is not None:
                break
            s = status(p.pid)
            samples.append((k, s))
            show("cells", k, s)
        rc = p.wait(timeout=600)
    print(f"  exit {rc} in {time.monotonic() - t0:.1f} s", flush=True)
    return verdict("agent", samples, n) if len(samples) > 1 else False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trivial", type=int, default=10_000)
    ap.add_argument("--big", type=int, default=2_000)
    ap.add_argument("--big-size", type=int, default=100_000)
    ap.add_argument("--agent", type=int, default=300)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    ok = []
    if a.trivial > 0:
        ok.append(exec_soak(build, "trivial", "n += 1\n", a.trivial, 1000))
    if a.big > 0:
        ok.append(exec_soak(build, "big", f"print('x' * {a.big_size})\n",
                            a.big, 250))
    if a.agent > 0:
        ok.append(agent_soak(build, a.agent, 50))
    print("verdict: memory and descriptors "
          + ("flat in the length of the run" if all(ok) else
             "NOT flat (see above)"), flush=True)


if __name__ == "__main__":
    main()
