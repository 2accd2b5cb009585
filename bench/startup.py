#!/usr/bin/python3
"""A one-shot `agentz exec` as a whole process, against its anchors (issue
23, target 1).

    /usr/bin/python3 bench/startup.py [BUILD_DIR] [--n N] [--base DIR]

Figures side by side, medians and p90; never a test. Each row is one
command started from here (subprocess, Popen -> exit, wall), the cell
`x = 1`, run in a folder of its own under /var/tmp; the pairs:

  exec             `agentz exec one.py` (the default: --isolation
                   required as root, --snapshot auto) against `bwrap
                   --unshare-all --die-with-parent --ro-bind / / --dev /dev
                   --proc /proc --tmpfs /tmp python3 -I -c 'x = 1'`
  exec, never      the same with --snapshot never, against the same bwrap
  exec, off        `agentz exec --isolation off --snapshot never one.py`
                   against `python3 -I -c 'x = 1'`
  --version        `agentz --version` against `true`: the binary's own
                   start (the dynamic loader and what it maps)

Then where an exec's time goes, from the same rounds of `agentz exec
--json` (the default and --snapshot never, each also a command of the
rounds): Popen -> the cell dispatched (the record's started_at: the
process's start, the jail, the first worker's spawn), of which the
worker's spawn -> READY (spawn_ready_us), the first cell (duration_us)
and the cell's end -> exit (finished_at -> Popen's return: the output,
the teardown).

Every command of every pair runs once per round, in a shuffled order per
round, so drift on a shared machine hits them alike. The ratio column is
the median of the per-round ratios A/B. With --base DIR the same agentz
rows are timed for the binaries in DIR as well, in the same rounds (a
before/after of a change). bwrap missing (Debian package bubblewrap,
`scripts/install-deps bench`): its rows say so. Exit 0 when the figures
were produced, 1 if a run failed, 2 on bad usage.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SYS_PY = "/usr/bin/python3"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 1.3
RUN_TIMEOUT = 30
BWRAP = ["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
         "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
CELL = "x = 1"


def pct(xs, p):
    s = sorted(xs)
    return s[max(0, -(-p * len(s) // 100) - 1)]


def run_once(argv, cwd, phases=None):
    """Wall ms of one run; with phases (a dict of lists), argv is an
    `agentz exec --json` whose record's times are split into it."""
    t0, w0 = time.perf_counter(), time.time()
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE if phases is not None
                       else subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=RUN_TIMEOUT, check=False)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')[-300:]}")
    if phases is not None:
        rec = json.loads(p.stdout)
        for k, v in (("start -> cell sent", rec["started_at"] - w0),
                     ("worker spawn -> READY",
                      rec["worker"]["spawn_ready_us"] / 1e6),
                     ("first cell", rec["duration_us"] / 1e6),
                     ("cell done -> exit", w0 + dt - rec["finished_at"])):
            phases.setdefault(k, []).append(v * 1e3)
    return dt * 1e3


def commands(build, tag):
    az = os.path.join(build, "agentz")
    return {
        f"exec{tag}": [az, "exec", "one.py"],
        f"exec --json{tag}": [az, "exec", "--json", "one.py"],
        f"exec --json, never{tag}": [az, "exec", "--json", "--snapshot",
                                     "never", "one.py"],
        f"exec, never{tag}": [az, "exec", "--snapshot", "never", "one.py"],
        f"exec, off{tag}": [az, "exec", "--isolation", "off",
                            "--snapshot", "never", "one.py"],
        f"--version{tag}": [az, "--version"],
    }


def anchors():
    bw = shutil.which("bwrap")
    out = {"python3 -I -c": [SYS_PY, "-I", "-c", CELL],
           "true": [shutil.which("true") or "/bin/true"]}
    if bw is not None:
        out["bwrap + python3"] = [bw] + BWRAP + [SYS_PY, "-I", "-c", CELL]
    return out


PAIRS = (("exec", "bwrap + python3"), ("exec, never", "bwrap + python3"),
         ("exec, off", "python3 -I -c"), ("--version", "true"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    ap.add_argument("--n", type=int, default=40, help="rounds (40)")
    ap.add_argument("--base", help="a baseline build folder, timed too")
    a = ap.parse_args()
    if a.n < 3:
        ap.error("--n must be at least 3")
    cmds = commands(os.path.abspath(a.build), "")
    if a.base:
        cmds.update(commands(os.path.abspath(a.base), " (base)"))
    for argv in cmds.values():
        if not os.access(argv[0], os.X_OK):
            print(f"startup: {argv[0]} is not built (make all)",
                  file=sys.stderr)
            return 2
    cmds.update(anchors())
    root = "/var/tmp" if os.path.isdir("/var/tmp") else None
    work = tempfile.mkdtemp(prefix="agentz-bench-startup-", dir=root)
    try:
        with open(os.path.join(work, "one.py"), "w", encoding="utf-8") as f:
            f.write(CELL + "\n")
        return measure(cmds, a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(cmds, a, work):
    names = list(cmds)
    times = {k: [] for k in names}
    phases = {k: {} for k in names if "--json" in k}
    rng = random.Random(23)
    try:
        for _ in range(2):                        # warm-up, not counted
            for k in names:
                run_once(cmds[k], work)
        for _ in range(a.n):
            rng.shuffle(names)
            for k in names:
                times[k].append(run_once(cmds[k], work, phases.get(k)))
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"startup: {e}", file=sys.stderr)
        return 1
    load = os.getloadavg()[0]
    print(f"one-shot start-up, {a.n} rounds, wall ms per process "
          f"(load average {load:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'command':<26}{'median':>9}{'p90':>9}   "
          f"{'anchor':<18}{'median':>9}{'p90':>9}{'ratio':>8}")
    tags = [""] + ([" (base)"] if a.base else [])
    for tag in tags:
        for left, right in PAIRS:
            show(times, left + tag, right)
    print("\nwhere an exec's time goes (agentz exec --json), ms, "
          "median / p90")
    for k, ph in phases.items():
        if not ph:
            continue
        if k == next(iter(phases)):
            print(f"{'':<26}" + "".join(f"{n:>24}" for n in ph))
        print(f"{k:<26}" + "".join(
            f"{statistics.median(v):>15.1f} / {pct(v, 90):6.1f}"
            for v in ph.values()))
    if "bwrap + python3" not in times:
        print("bwrap: not installed (Debian package bubblewrap): no "
              "bubblewrap anchor")
    return 0


def show(times, left, right):
    xs = times[left]
    line = f"{left:<26}{statistics.median(xs):9.1f}{pct(xs, 90):9.1f}   "
    if right not in times:
        print(line + f"{right:<18}{'n/a':>9}")
        return
    ys = times[right]
    ratio = statistics.median(x / y for x, y in zip(xs, ys))
    goal = f"  (target {TARGET}x)" if right == "bwrap + python3" or \
        right == "python3 -I -c" else ""
    print(line + f"{right:<18}{statistics.median(ys):9.1f}"
          f"{pct(ys, 90):9.1f}{ratio:7.2f}x{goal}")


if __name__ == "__main__":
    sys.exit(main())
