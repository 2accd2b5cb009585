#!/usr/bin/python3
"""agentz benchmarks: print figures side by side; never a test.

    /usr/bin/python3 bench/run.py [BUILD_DIR] [--section all|latency|timeout]
                                  [--cells N] [--jupyter-n N] [--spawn-n N]
                                  [--agent-cells N] [--baseline BUILD_DIR]

--baseline BUILD_DIR (another build, say main's in a worktree of its own):
its agentz rows (round trip, spawn-to-ready, agent cells) are measured in
the same run, alternating with this build's, and printed beside them.

`make bench` runs it as `/usr/bin/python3 bench/run.py build` after
`scripts/install-deps bench` (python3-ipykernel, python3-jupyter-client,
ipython3). Only the stdlib and those Debian packages are used, and every
Python involved is /usr/bin/python3 (the script re-executes itself under
it if started by another interpreter; the Jupyter kernel is launched from
a kernel spec built on the fly with that interpreter, never an installed
one).

Section "latency" -- one table, medians and p90 per call:

  1. agentz round trip of `x = 1`: `agentz exec --json -` fed --cells
     cells separated by `# %%` lines; the figure is the records'
     duration_us (supervisor dispatches the exec frame -> receives the
     worker's done frame), first WARMUP cells dropped. An extra row gives
     the cadence (finished_at deltas), which adds the supervisor's JSON
     output and stdin parsing.
  2. in-process exec(compile("x = 1", "<cell>", "exec"), ns) in this
     interpreter, timeit-style: batches of 1000 calls, the per-call mean of
     each batch is one sample.
  3. IPython InteractiveShell.instance().run_cell("x = 1",
     store_history=False) with ast_node_interactivity="none", silent=False
     (post-execute hooks run, as in a kernel; no history database writes,
     as with agentz which keeps none), each call timed on its own.
  4. Jupyter: jupyter_client KernelManager + blocking client, execute("x =
     1", store_history=False), timed until both the execute_reply and the
     iopub idle status for that request have arrived. Kernel shut down at
     the end, also on error.
  5. bare C pipe ping-pong of 64 bytes between two processes
     (bench/pingpong.c, built with cc -O2 into BUILD_DIR/bench/): the floor
     for any two-process round trip here. Unpinned (the figure used in the
     ratios, as agentz runs unpinned), plus both processes pinned to one
     CPU and to two CPUs: on a small VM the unpinned median swings between
     those two depending on where the scheduler wakes the peer.
  6. start-up: agentz worker spawn-to-ready (worker.spawn_ready_us, fork ->
     ready frame) over --spawn-n separate `agentz exec` runs, the whole
     `agentz exec` process wall time for one cell, Py_InitializeEx in a
     bare embedding program (bench/embed_init.c, linked with pkg-config
     python3-embed: the system libpython), and `/usr/bin/python3 -c pass`
     wall time (as seen from here: includes fork/exec from Python).
     Py_InitializeEx is also run once between the spawn samples: that
     figure is the spawn target's anchor (the load on a shared VM moves
     between rows measured minutes apart).

  7. agent cells: agent runs of --agent-cells cells `x = 1;
     call_me(input='next')` against tests/integ/model_server.py (each answer
     names the next cell; two requests per cell), with --snapshot auto and
     never, two runs each, alternating: the cells' duration_us, and the
     supervisor's time between cells (finished_at -> the next started_at:
     record, journal, successor). The anchor: os.fork() of the worker timed
     in a cell (`agentz exec`), the child exiting at once.

  Then the ratios the project cares about, each with PASS/MISS against its
  target, its anchor measured in the same run: agentz round trip faster than
  IPython run_cell, and <= half of it (issue 23); >= 50x faster than a
  Jupyter round trip; spawn-to-ready <= 12 ms and <= 1.5x Py_InitializeEx
  (issue 23: 12 ms against 8 ms); --snapshot auto adds to an agent cell no
  more than the fork plus one channel round trip. Plus informational ratios
  (the supervisor's time per agent cell, the model excluded).

Section "timeout" -- a stuck cell and the recovery:

  agentz: `agentz exec --json --cell-timeout 1 --grace 1 -` with cells
  `while True: pass` then `x = 1` (interruptible), and
  `sum(range(10**11))` then `x = 1` (a C loop: SIGINT is never looked at,
  so it must be killed). The timed-out cell's record may carry
  "timeout": {"stage": "interrupted"|"killed", "deadline_to_ready_ms": ..};
  missing fields print "n/a". The next cell shows the worker generation
  it ran in.
  Jupyter: interrupt latency for `while True: pass` (interrupt_kernel()
  call -> execute_reply with status error), an interrupt attempt on
  `sum(range(10**11))` (bounded wait; expected: no reply), and
  restart_kernel(now=True) on a kernel stuck in it, timed until a fresh
  client gets an execute_reply again.

The machinery is in bench/bench_common.py (shared helpers),
bench/bench_latency.py, bench/bench_timeout.py (the sections' measurements,
mixed into Bench here) and bench/bench_kernel.py (the Jupyter kernel).

Missing agentz binaries are not an error: their rows print "agentz: not
built". Exit status is 0 whenever the figures were produced, MISS or not;
1 only if a measurement itself failed (an exception, a peer that did not
answer in time, agentz records that are not "ok" where they must be); 2 on
bad usage. Every wait is bounded and a global watchdog aborts the run; no
kernel or child process is left behind.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

SYS_PY = "/usr/bin/python3"
WATCHDOG_S = 360       # the whole run; a normal one takes 60-120 s

# Re-exec under the system interpreter: the `python3` on PATH may be another
# build, and every figure here is about /usr/bin/python3's libpython.
if os.path.realpath(sys.executable) != os.path.realpath(SYS_PY) \
        and os.environ.get("AGENTZ_BENCH_REEXEC") != "1":
    os.environ["AGENTZ_BENCH_REEXEC"] = "1"
    os.execv(SYS_PY, [SYS_PY] + sys.argv)


# The machinery, in bench/bench_*.py; imported after the re-exec above.
# (fmt_us, first_line, kill_group and pct are also bench/isolation.py's,
# which imports them from run.)
from bench_common import REPO, WARMUP, BenchAbort, NotBuilt, Row  # noqa: E402
from bench_common import _abort, progress, run_child  # noqa: E402
from bench_common import (first_line, fmt_us, kill_group,  # noqa: E402,F401
                          pct)
from bench_latency import LatencyRows  # noqa: E402
from bench_timeout import TimeoutSection  # noqa: E402


class Bench(LatencyRows, TimeoutSection):
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.agentz = os.path.join(self.build, "agentz")
        self.worker = os.path.join(self.build, "agentz-worker")
        self.bindir = os.path.join(self.build, "bench")
        self.base_agentz = None
        if args.baseline:
            self.base_agentz = os.path.join(os.path.abspath(args.baseline),
                                            "agentz")
            if not os.access(self.base_agentz, os.X_OK):
                raise SystemExit(f"bench: --baseline: no {self.base_agentz}")
        self.tmp = tempfile.mkdtemp(prefix="agentz-bench-")
        # Keep IPython and Jupyter away from the user's profile/runtime.
        os.environ["IPYTHONDIR"] = os.path.join(self.tmp, "ipython")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(self.tmp, "runtime")
        os.environ["JUPYTER_CONFIG_DIR"] = os.path.join(self.tmp, "jconfig")
        self.results = {}       # key -> median (us)
        self.errors = []
        self.kernels = []

    # --------------------------------------------------------- plumbing

    def agentz_built(self):
        return os.access(self.agentz, os.X_OK) and \
            os.access(self.worker, os.X_OK)

    def need_agentz(self):
        if not self.agentz_built():
            raise NotBuilt()

    def builds(self):
        """(tag, agentz) of this build, then of --baseline's if given."""
        b = [("", self.agentz)]
        if self.base_agentz:
            b.append((" (baseline)", self.base_agentz))
        return b

    def agentz_exec(self, cells, extra_args=(), timeout=60, agentz=None):
        """Run `agentz exec --json [extra] -` on the given cells; return
        (rc, records, stderr, wall_s)."""
        text = "\n# %%\n".join(cells) + "\n"
        rc, out, err, wall = run_child(
            [agentz or self.agentz, "exec", "--json", *extra_args, "-"],
            timeout, input_text=text)
        recs = []
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
        return rc, recs, err, wall

    def compile_c(self, src, out, extra_cflags=(), extra_libs=()):
        os.makedirs(self.bindir, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        cmd = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", *extra_cflags,
               "-o", out, os.path.join(REPO, "bench", src), *extra_libs]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: "
                               f"{first_line(r.stderr)}")
        return out

    def measure(self, rows, fn, label):
        """Run one measurement; turn failures into an error row."""
        try:
            rows.extend(fn())
        except NotBuilt:
            rows.append(Row(label, text="agentz: not built",
                            note=f"no {self.args.build}/agentz or "
                                 f"{self.args.build}/agentz-worker"))
        except BenchAbort:
            raise
        except Exception as e:   # a figure failed; the rest still run
            self.errors.append(f"{label}: {e!r}")
            rows.append(Row(label, text="error", note=str(e)[:200]))
            if os.environ.get("AGENTZ_BENCH_DEBUG"):
                traceback.print_exc()

    # ------------------------------------------------------ machine facts

    def machine_facts(self):
        def ver(mod):
            try:
                return __import__(mod).__version__
            except Exception:
                return "missing"
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        cpu = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        try:
            aff = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            aff = os.cpu_count()
        cc = "?"
        try:
            cc = first_line(subprocess.run(
                [os.environ.get("CC", "cc"), "--version"],
                capture_output=True, text=True, timeout=10).stdout)
        except Exception:
            pass
        u = platform.uname()
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        facts = [
            ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
            ("cpu", f"{cpu}; nproc {aff} (online {os.cpu_count()})"),
            ("kernel", f"{u.system} {u.release} {u.machine}"),
            ("python", f"{SYS_PY} {platform.python_version()} "
                       f"({platform.python_implementation()}, "
                       f"{sys.version.split('(', 1)[-1].split(')')[0]})"),
            ("peers", f"IPython {ver('IPython')}, ipykernel "
                      f"{ver('ipykernel')}, jupyter_client "
                      f"{ver('jupyter_client')}, pyzmq {ver('zmq')}"),
            ("cc", cc),
            ("load avg", load),
            ("agentz", self.agentz if self.agentz_built()
             else f"not built ({self.agentz})"),
        ]
        print("agentz bench")
        for k, v in facts:
            print(f"  {k:<9} {v}")
        print()

    # ------------------------------------------------------------ report

    def print_table(self, title, rows):
        print(title)
        hdr = f"  {'':<36} {'median':>10} {'p90':>10} {'n':>6}  notes"
        print(hdr)
        print("  " + "-" * (len(hdr) + 20))
        for r in rows:
            if r.text is not None:
                print(f"  {r.name:<36} {r.text:>28}  {r.note}")
            else:
                n = "" if r.n is None else str(r.n)
                p90 = "" if r.p90 is None else fmt_us(r.p90)
                print(f"  {r.name:<36} {fmt_us(r.med):>10} {p90:>10} "
                      f"{n:>6}  {r.note}")
        print()

    def print_ratios(self):
        R = self.results
        print("Ratios (medians)")
        az = R.get("agentz")
        lines = []

        def target(label, ok, value, goal):
            mark = "--  " if ok is None else ("PASS" if ok else "MISS")
            lines.append(f"  {mark}  {label:<40} {value:<28} target {goal}")

        def info(label, value):
            lines.append(f"  info  {label:<40} {value}")

        why = "agentz: not built" if not self.agentz_built() else "n/a"
        for key, label, goal, need in (
                ("ipython", "agentz vs IPython run_cell", "> 1x", 1.0),
                ("jupyter", "agentz vs Jupyter round trip", ">= 50x", 50.0)):
            if az and R.get(key):
                x = R[key] / az
                target(label, x >= need if need > 1 else x > need,
                       f"{x:.1f}x faster" if x >= 1
                       else f"{1 / x:.1f}x slower", goal)
            else:
                target(label, None, why if not az else f"{key}: n/a", goal)
        if az and R.get("ipython"):
            x = az / R["ipython"]
            target("round trip <= 1/2 IPython run_cell", x <= 0.5,
                   f"{fmt_us(az)} = {x:.2f}x of {fmt_us(R['ipython'])}",
                   "<= 0.5x (same run)")
        if R.get("agentz_base") and R.get("ipython"):
            info("  baseline round trip", f"{fmt_us(R['agentz_base'])} = "
                 f"{R['agentz_base'] / R['ipython']:.2f}x of IPython")
        sp = R.get("spawn")
        target("agentz spawn-to-ready", None if sp is None else sp <= 12000,
               fmt_us(sp) if sp is not None else why, "<= 12 ms")
        emb = R.get("embed_paired") or R.get("embed")
        if sp is not None and emb:
            x = sp / emb
            target("spawn-to-ready vs Py_InitializeEx", x <= 1.5,
                   f"{x:.2f}x of {fmt_us(emb)}",
                   "<= 1.5x (12 ms / 8 ms; alternating runs)")
        if R.get("spawn_base") is not None:
            info("  baseline spawn-to-ready", fmt_us(R["spawn_base"]))
        if R.get("agent_auto") and R.get("agent_never") and R.get("fork"):
            add = R["agent_auto"] - R["agent_never"]
            bound = R["fork"] + (az or 0)
            target("--snapshot auto, added per agent cell", add <= bound,
                   f"{fmt_us(add)} (fork {fmt_us(R['fork'])})",
                   "<= the fork + one round trip")
        if R.get("agent_gap") is not None:
            info("supervisor per agent cell, model excluded",
                 f"{fmt_us(R['agent_gap'])} between cells"
                 + (f" (baseline {fmt_us(R['agent_gap_base'])})"
                    if R.get("agent_gap_base") is not None else ""))
        if az and R.get("exec"):
            info("agentz vs in-process exec",
                 f"{az / R['exec']:.1f}x ({fmt_us(az - R['exec'])} "
                 f"overhead per cell)")
        if az and R.get("pingpong"):
            info("agentz / C pipe ping-pong (unpinned)",
                 f"{az / R['pingpong']:.2f}x")
        if sp is not None and emb:
            info("spawn-to-ready minus Py_InitializeEx",
                 fmt_us(sp - emb))
        if R.get("ipython") and R.get("exec"):
            info("IPython run_cell vs in-process exec",
                 f"{R['ipython'] / R['exec']:.1f}x")
        for line in lines:
            print(line)
        print()

    def run_latency(self):
        rows = []
        steps = [
            ("agentz exec round trip", self.b_agentz_rt),
            ("in-process exec(compile())", self.b_exec),
            ("IPython run_cell", self.b_ipython),
            ("Jupyter kernel execute round trip", self.b_jupyter),
            ("C pipe ping-pong, 64 B", self.b_pingpong),
            ("agentz worker spawn-to-ready", self.b_spawn),
            ("agent cells, --snapshot auto / never", self.b_agent_cells),
            ("Py_InitializeEx(0), bare embed", self.b_embed),
            ("/usr/bin/python3 -c pass", self.b_python_c),
        ]
        for label, fn in steps:
            progress(label)
            self.measure(rows, fn, label)
        self.print_table("Latency of `x = 1` and start-up", rows)
        self.print_ratios()


def main():
    ap = argparse.ArgumentParser(
        description="agentz benchmarks (figures, not a test)")
    ap.add_argument("build", nargs="?", default="build",
                    help="build directory holding agentz and agentz-worker")
    ap.add_argument("--section", choices=("all", "latency", "timeout"),
                    default="all")
    ap.add_argument("--cells", type=int, default=2000,
                    help="cells for the agentz and IPython round trips")
    ap.add_argument("--jupyter-n", type=int, default=200)
    ap.add_argument("--spawn-n", type=int, default=20)
    ap.add_argument("--agent-cells", type=int, default=20,
                    help="cells per agent run (target 4's rows)")
    ap.add_argument("--baseline", metavar="BUILD_DIR",
                    help="another build (say main's): its agentz rows are "
                         "measured alternately with this one's")
    args = ap.parse_args()
    if args.cells <= WARMUP + 1 or args.jupyter_n < 2 or args.spawn_n < 1:
        ap.error(f"--cells must exceed {WARMUP + 1}, --jupyter-n >= 2, "
                 f"--spawn-n >= 1")

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, _abort)
    signal.alarm(int(os.environ.get("AGENTZ_BENCH_WATCHDOG", WATCHDOG_S)))

    b = Bench(args)
    rc = 0
    t0 = time.perf_counter()
    try:
        b.machine_facts()
        if args.section in ("all", "latency"):
            b.run_latency()
        if args.section in ("all", "timeout"):
            b.run_timeout()
    except (BenchAbort, KeyboardInterrupt) as e:
        what = "watchdog" if str(e) == "SIGALRM" else (str(e) or "SIGINT")
        print(f"\nbench: aborted ({what}) after "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        rc = 1
    finally:
        signal.alarm(0)
        for k in list(b.kernels):
            k.close()
        shutil.rmtree(b.tmp, ignore_errors=True)
    if b.errors:
        print("Errors (the figures above are incomplete):")
        for e in b.errors:
            print(f"  {e}")
        rc = 1
    print(f"bench: done in {time.perf_counter() - t0:.1f} s "
          f"(exit {rc}; PASS/MISS never changes the exit status)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
