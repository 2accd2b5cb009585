#!/usr/bin/python3
"""agentz benchmarks: print figures side by side; never a test.

    /usr/bin/python3 bench/run.py [BUILD_DIR] [--section all|latency|timeout]
                                  [--cells N] [--jupyter-n N] [--spawn-n N]

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

  Then the ratios the project cares about, each with PASS/MISS against its
  target: agentz round trip faster than IPython run_cell; >= 50x faster than
  a Jupyter round trip; spawn-to-ready < 40 ms. Plus informational ratios.

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

Missing agentz binaries are not an error: their rows print "agentz: not
built". Exit status is 0 whenever the figures were produced, MISS or not;
1 only if a measurement itself failed (an exception, a peer that did not
answer in time, agentz records that are not "ok" where they must be); 2 on
bad usage. Every wait is bounded and a global watchdog aborts the run; no
kernel or child process is left behind.
"""

import argparse
import json
import math
import os
import platform
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import traceback

SYS_PY = "/usr/bin/python3"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 50            # agentz / IPython cells dropped
JUPYTER_WARMUP = 20
WATCHDOG_S = 240       # the whole run; a normal one takes well under 60 s

# Re-exec under the system interpreter: the `python3` on PATH may be another
# build, and every figure here is about /usr/bin/python3's libpython.
if os.path.realpath(sys.executable) != os.path.realpath(SYS_PY) \
        and os.environ.get("AGENTZ_BENCH_REEXEC") != "1":
    os.environ["AGENTZ_BENCH_REEXEC"] = "1"
    os.execv(SYS_PY, [SYS_PY] + sys.argv)


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


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.agentz = os.path.join(self.build, "agentz")
        self.worker = os.path.join(self.build, "agentz-worker")
        self.bindir = os.path.join(self.build, "bench")
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

    def agentz_exec(self, cells, extra_args=(), timeout=60):
        """Run `agentz exec --json [extra] -` on the given cells; return
        (rc, records, stderr, wall_s)."""
        text = "\n# %%\n".join(cells) + "\n"
        rc, out, err, wall = run_child(
            [self.agentz, "exec", "--json", *extra_args, "-"], timeout,
            input_text=text)
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

    # ----------------------------------------------------- latency rows

    def b_agentz_rt(self):
        self.need_agentz()
        n = self.args.cells
        rc, recs, err, wall = self.agentz_exec(["x = 1"] * n, timeout=120)
        if len(recs) != n:
            raise RuntimeError(f"agentz exec rc={rc}: {len(recs)}/{n} "
                               f"records; {first_line(err)}")
        bad = [r for r in recs if r.get("status") != "ok"]
        if bad:
            raise RuntimeError(f"{len(bad)} cells not ok, first: "
                               f"{bad[0].get('status')} "
                               f"{bad[0].get('exception_type')}")
        d = [float(r["duration_us"]) for r in recs[WARMUP:]]
        med = statistics.median(d)
        self.results["agentz"] = med
        rows = [Row("agentz exec round trip", med, pct(d, 90), len(d),
                    f"duration_us; {n} cells on stdin, first {WARMUP} "
                    f"dropped")]
        try:
            fin = [float(r["finished_at"]) for r in recs[WARMUP:]]
            cad = [(b - a) * 1e6 for a, b in zip(fin, fin[1:])]
            if cad:
                rows.append(Row("  agentz cell cadence", statistics.median(
                    cad), pct(cad, 90), len(cad),
                    f"finished_at deltas: + JSON out, stdin parse; "
                    f"whole run {wall * 1000:.0f} ms"))
        except (KeyError, TypeError, ValueError):
            pass
        return rows

    def b_exec(self):
        src = "x = 1"
        ns = {}
        number, repeat = 1000, 60
        t = timeit.Timer("exec(compile(src, '<cell>', 'exec'), ns)",
                         globals={"src": src, "ns": ns})
        t.timeit(2000)  # warm-up
        per = [x / number * 1e6 for x in t.repeat(repeat=repeat,
                                                   number=number)]
        med = statistics.median(per)
        self.results["exec"] = med
        return [Row("in-process exec(compile())", med, pct(per, 90), repeat,
                    f"timeit: {repeat} batches x {number} calls, "
                    f"per-call mean per batch")]

    def b_ipython(self):
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
        cfg = Config()
        cfg.HistoryManager.enabled = False   # no sqlite file, no writes
        shell = InteractiveShell.instance(config=cfg)
        shell.ast_node_interactivity = "none"
        n = self.args.cells
        pc = time.perf_counter_ns
        d = []
        for i in range(n + WARMUP):
            t0 = pc()
            r = shell.run_cell("x = 1", store_history=False, silent=False)
            t1 = pc()
            if i == 0 and not r.success:
                raise RuntimeError(f"run_cell failed: {r.error_in_exec!r}")
            if i >= WARMUP:
                d.append((t1 - t0) / 1000.0)
        med = statistics.median(d)
        self.results["ipython"] = med
        return [Row("IPython run_cell", med, pct(d, 90), len(d),
                    "store_history=False, ast_node_interactivity=none, "
                    "silent=False")]

    def b_jupyter(self):
        k = Kernel(self)
        try:
            t0 = time.perf_counter()
            k.start()
            start_s = time.perf_counter() - t0
            n = self.args.jupyter_n
            d = []
            for i in range(n + JUPYTER_WARMUP):
                t0 = time.perf_counter()
                reply = k.execute_wait("x = 1", timeout=10)
                t1 = time.perf_counter()
                if reply["content"].get("status") != "ok":
                    raise RuntimeError(f"execute_reply {reply['content']}")
                if i >= JUPYTER_WARMUP:
                    d.append((t1 - t0) * 1e6)
        finally:
            k.close()
        med = statistics.median(d)
        self.results["jupyter"] = med
        self.results["jupyter_start"] = start_s * 1e6
        return [Row("Jupyter kernel execute round trip", med, pct(d, 90),
                    len(d), f"execute_reply + idle, store_history=False; "
                            f"first {JUPYTER_WARMUP} dropped"),
                Row("  Jupyter kernel start to ready", start_s * 1e6, None,
                    1, "start_kernel + wait_for_ready (one sample)")]

    def b_pingpong(self):
        exe = self.compile_c("pingpong.c", os.path.join(self.bindir,
                                                         "pingpong"),
                             ["-I", REPO],
                             [os.path.join(REPO, "common", "fdio.c")])

        def one(mode, rounds):
            rc, out, err, _ = run_child([exe, str(rounds), mode], timeout=60)
            if rc != 0:
                raise RuntimeError(f"pingpong {mode} rc={rc}: "
                                   f"{first_line(err)}")
            return json.loads(out.strip().splitlines()[-1])
        r = one("none", 20000)
        self.results["pingpong"] = r["median_us"]
        rows = [Row("C pipe ping-pong, 64 B", r["median_us"], r["p90_us"],
                    r["n"], f"two processes, two pipes, unpinned; min "
                            f"{fmt_us(r['min_us'])}")]
        try:
            ncpu = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            ncpu = 1
        for mode, note in (("same", "both pinned to one CPU"),
                           ("cross", "pinned to two different CPUs")):
            if mode == "cross" and ncpu < 2:
                continue
            r = one(mode, 10000)
            rows.append(Row(f"  ping-pong, {mode} CPU", r["median_us"],
                            r["p90_us"], r["n"], note))
        return rows

    def b_spawn(self):
        self.need_agentz()
        n = self.args.spawn_n
        ready, walls = [], []
        for _ in range(n):
            rc, recs, err, wall = self.agentz_exec(["x = 1"], timeout=30)
            if rc != 0 or not recs or recs[0].get("status") != "ok":
                raise RuntimeError(f"agentz exec rc={rc}, "
                                   f"{len(recs)} records; {first_line(err)}")
            w = recs[0].get("worker") or {}
            if w.get("spawn_ready_us") is None:
                raise RuntimeError("record lacks worker.spawn_ready_us")
            ready.append(float(w["spawn_ready_us"]))
            walls.append(wall * 1e6)
        med = statistics.median(ready)
        self.results["spawn"] = med
        cont = w.get("containment") or "none reported"
        if isinstance(cont, list):
            cont = ",".join(cont)
        return [Row("agentz worker spawn-to-ready", med, pct(ready, 90), n,
                    f"worker.spawn_ready_us (fork -> ready frame); "
                    f"containment: {cont}"),
                Row("  agentz exec, 1 cell, process wall",
                    statistics.median(walls), pct(walls, 90), n,
                    "whole `agentz exec` run as seen from here")]

    def b_embed(self):
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "python3-embed"],
            capture_output=True, text=True, timeout=30)
        if flags.returncode != 0:
            raise RuntimeError("pkg-config python3-embed: "
                               + first_line(flags.stderr))
        parts = flags.stdout.split()
        cflags = [p for p in parts if not p.startswith(("-l", "-L"))]
        libs = [p for p in parts if p.startswith(("-l", "-L"))]
        exe = self.compile_c("embed_init.c", os.path.join(
            self.bindir, "embed_init"), cflags, libs)
        n = 15
        init, total, version = [], [], ""
        for _ in range(n + 1):
            rc, out, err, _ = run_child([exe], timeout=30)
            if rc != 0:
                raise RuntimeError(f"embed_init rc={rc}: {first_line(err)}")
            r = json.loads(out.strip().splitlines()[-1])
            init.append(r["init_us"])
            total.append(r["total_us"])
            version = r.get("version", "")
        init, total = init[1:], total[1:]  # first run: cold page cache
        med = statistics.median(init)
        self.results["embed"] = med
        same = version.split()[0] == platform.python_version()
        return [Row("Py_InitializeEx(0), bare embed", med, pct(init, 90), n,
                    f"libpython {version.split()[0] if version else '?'}"
                    f"{'' if same else ' (differs from /usr/bin/python3!)'};"
                    f" +x=1+Py_FinalizeEx "
                    f"{fmt_us(statistics.median(total))}")]

    def b_python_c(self):
        n = 15
        walls = []
        for i in range(n + 1):
            rc, _, err, wall = run_child([SYS_PY, "-c", "pass"], timeout=30)
            if rc != 0:
                raise RuntimeError(f"python3 -c pass rc={rc}: "
                                   f"{first_line(err)}")
            if i:
                walls.append(wall * 1e6)
        med = statistics.median(walls)
        self.results["python_c"] = med
        return [Row("/usr/bin/python3 -c pass", med, pct(walls, 90), n,
                    "process wall incl. fork/exec from Python")]

    # ----------------------------------------------------- timeout rows

    def t_agentz(self, code):
        """Returns a dict of figures for one stuck cell followed by x = 1."""
        self.need_agentz()
        rc, recs, err, wall = self.agentz_exec(
            [code, "x = 1"], ["--cell-timeout", "1", "--grace", "1"],
            timeout=45)
        if not recs:
            raise RuntimeError(f"agentz exec rc={rc}, no records; "
                               f"{first_line(err)}")
        c0 = recs[0]
        to = c0.get("timeout") if isinstance(c0.get("timeout"), dict) \
            else {}
        c1 = recs[1] if len(recs) > 1 else {}
        g0 = (c0.get("worker") or {}).get("generation")
        g1 = (c1.get("worker") or {}).get("generation")
        dtr = to.get("deadline_to_ready_ms")
        ktr = to.get("kill_to_ready_ms")
        et = c0.get("exception_type")
        return {
            "stage": to.get("stage") or "n/a",
            "deadline_to_ready_ms": dtr if isinstance(dtr, (int, float))
            else None,
            "kill_to_ready_ms": ktr if isinstance(ktr, (int, float))
            else None,
            "cell0": f"{c0.get('status')}{'/' + et if et else ''}, "
                     f"{fmt_us(c0.get('duration_us'))}",
            "cell1": (f"{c1.get('status')}, {fmt_us(c1.get('duration_us'))}, "
                      f"generation {g0}->{g1}") if c1 else "no record",
            "wall_s": wall, "rc": rc,
        }

    def t_rollback(self, snapshot, n=5):
        """SIGKILL -> ready of a C loop's kill, with --snapshot on/off:
        median of n kills in one run, and whether the namespace stayed."""
        self.need_agentz()
        codes = ["keep = 41"]
        for _ in range(n):
            codes += ["sum(range(10**11))", "print(keep + 1)"]
        rc, recs, err, wall = self.agentz_exec(
            codes, ["--snapshot", snapshot, "--cell-timeout", "1",
                    "--grace", "0.2"], timeout=30 + 10 * n)
        ktr = [r["timeout"]["kill_to_ready_ms"] for r in recs
               if isinstance(r.get("timeout"), dict)
               and r["timeout"].get("kill_to_ready_ms") is not None]
        kept = all(r.get("output") == "42\n" for r in recs[2::2])
        if not ktr:
            raise RuntimeError(f"rc={rc}, no kill records; {first_line(err)}")
        return {"med": statistics.median(ktr), "max": max(ktr), "n": len(ktr),
                "kept": kept and len(recs) == 1 + 2 * n}

    def t_snap_overhead(self, mib, snapshot, n=30):
        """Median duration of `x = 1` in a namespace of mib MiB."""
        self.need_agentz()
        build = (f"big = bytearray({mib} << 20)\n"
                 f"big[::4096] = b'\\1' * len(range(0, {mib} << 20, 4096))")
        rc, recs, err, wall = self.agentz_exec(
            [build] + ["x = 1"] * n,
            ["--snapshot", snapshot, "--memory-limit", "4G"], timeout=120)
        durs = [r["duration_us"] for r in recs[1:] if r.get("status") == "ok"]
        if len(durs) < n // 2:
            raise RuntimeError(f"rc={rc}; {first_line(err)}")
        return statistics.median(durs[2:] or durs)

    def run_rollback(self, jr):
        """Issue 12's table: deadline kill -> ready, namespace kept."""
        print("Kill -> ready and the namespace (C loop killed at its "
              "deadline; median of 5)")
        print(f"  {'':34} {'SIGKILL->ready':>16} {'namespace kept':>16}")
        for label, snap in (("agentz, snapshot promoted", "always"),
                            ("agentz, standby only (exec auto)", "auto"),
                            ("agentz, respawn (--snapshot never)", "never")):
            progress(f"rollback: --snapshot {snap}")
            try:
                r = self.t_rollback(snap)
                print(f"  {label:34} {fmt_ms(r['med']):>16} "
                      f"{'yes' if r['kept'] else 'no':>16}"
                      f"   (max {fmt_ms(r['max'])}, n={r['n']})")
                self.results["rollback_" + snap] = r["med"]
            except BenchAbort:
                raise
            except Exception as e:
                self.errors.append(f"rollback {snap}: {e!r}")
                print(f"  {label:34} error: {str(e)[:80]}")
        if not isinstance(jr, str):
            jm = statistics.median(jr["restart"])
            print(f"  {'Jupyter restart_kernel(now=True)':34} "
                  f"{fmt_ms(jm):>16} {'no':>16}   (restart -> answer)")
            snap = self.results.get("rollback_always")
            if snap:
                print(f"  {'PASS' if jm / snap >= 200 else 'MISS'}  snapshot "
                      f"promotion vs Jupyter restart: {jm / snap:.0f}x "
                      f"faster{'':8}target >= 200x")
        print()
        print("Overhead per cell of a snapshot (`x = 1`, median duration)")
        for mib in (10, 1024):
            vals = {}
            for snap in ("never", "always"):
                progress(f"snapshot overhead: {mib} MiB, {snap}")
                try:
                    vals[snap] = self.t_snap_overhead(mib, snap)
                except BenchAbort:
                    raise
                except Exception as e:
                    self.errors.append(f"overhead {mib} {snap}: {e!r}")
            if len(vals) == 2:
                print(f"  {mib:>5} MiB namespace: never "
                      f"{fmt_us(vals['never'])}, always "
                      f"{fmt_us(vals['always'])} (+"
                      f"{fmt_us(vals['always'] - vals['never'])} a cell); "
                      f"auto in exec = never for quick cells, agent cells "
                      f"= always")
        progress("copy-on-write: a cell rewriting 1 GiB")
        cow = {}
        for snap in ("never", "always"):
            try:
                cow[snap] = self.t_cow(snap)
            except BenchAbort:
                raise
            except Exception as e:
                self.errors.append(f"cow {snap}: {e!r}")
        if len(cow) == 2:
            print(f"  copy-on-write: a cell rewriting every page of 1 GiB: "
                  f"never {fmt_us(cow['never'])}, always "
                  f"{fmt_us(cow['always'])} (the pages it writes are "
                  f"copied and charged to the same memory ceiling)")
        print()

    def t_cow(self, snapshot):
        """Duration of a cell that rewrites a 1 GiB namespace."""
        self.need_agentz()
        build = ("big = bytearray(1 << 30)\n"
                 "big[::4096] = b'\\1' * len(range(0, 1 << 30, 4096))")
        rewrite = "big[::4096] = b'\\2' * len(range(0, 1 << 30, 4096))"
        rc, recs, err, wall = self.agentz_exec(
            [build, rewrite, rewrite],
            ["--snapshot", snapshot, "--memory-limit", "4G"], timeout=120)
        durs = [r["duration_us"] for r in recs[1:] if r.get("status") == "ok"]
        if len(durs) != 2:
            raise RuntimeError(f"rc={rc}; {first_line(err)}")
        return statistics.median(durs)

    def t_jupyter(self):
        """Interrupt latency (while True) and restart-to-answer (stuck in a
        C loop). Returns a dict of figures."""
        res = {"interrupt": [], "c_interrupt": None, "restart": [],
               "restart_call": []}
        k = Kernel(self)
        try:
            k.start()
            for _ in range(3):
                msg_id = k.send("while True: pass")
                k.wait_busy(msg_id, timeout=10)
                time.sleep(0.2)
                t0 = time.perf_counter()
                k.km.interrupt_kernel()
                reply, t1 = k.wait_reply(msg_id, timeout=10)
                c = reply["content"]
                if c.get("status") != "error":
                    raise RuntimeError(f"interrupted execute_reply: {c}")
                res["interrupt"].append((t1 - t0) * 1000.0)
                res["interrupt_ename"] = c.get("ename")
                k.wait_idle(msg_id, timeout=10)
                k.execute_wait("x = 1", timeout=10)   # still alive
            for i in range(3):
                msg_id = k.send("sum(range(10**11))")
                # The C loop holds the GIL, so ipykernel's iopub thread may
                # never get to publish "busy": wait for it briefly only.
                try:
                    k.wait_busy(msg_id, timeout=2)
                except TimeoutError:
                    pass
                time.sleep(0.3)
                if i == 0:
                    # SIGINT is only noticed between bytecodes: expect none.
                    k.km.interrupt_kernel()
                    try:
                        reply, t1 = k.wait_reply(msg_id, timeout=3)
                        res["c_interrupt"] = reply["content"].get("status")
                    except TimeoutError:
                        res["c_interrupt"] = "no reply within 3 s"
                t0 = time.perf_counter()
                k.km.restart_kernel(now=True)
                t_call = time.perf_counter()
                k.reconnect(timeout=60)
                reply = k.execute_wait("x = 1", timeout=30)
                t1 = time.perf_counter()
                if reply["content"].get("status") != "ok":
                    raise RuntimeError(f"after restart: {reply['content']}")
                res["restart"].append((t1 - t0) * 1000.0)
                res["restart_call"].append((t_call - t0) * 1000.0)
        finally:
            k.close()
        return res

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
        sp = R.get("spawn")
        target("agentz spawn-to-ready", None if sp is None else sp < 40000,
               fmt_us(sp) if sp is not None else why, "< 40 ms")
        if az and R.get("exec"):
            info("agentz vs in-process exec",
                 f"{az / R['exec']:.1f}x ({fmt_us(az - R['exec'])} "
                 f"overhead per cell)")
        if az and R.get("pingpong"):
            info("agentz / C pipe ping-pong (unpinned)",
                 f"{az / R['pingpong']:.2f}x")
        if sp is not None and R.get("embed"):
            info("spawn-to-ready minus Py_InitializeEx",
                 fmt_us(sp - R["embed"]))
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
            ("Py_InitializeEx(0), bare embed", self.b_embed),
            ("/usr/bin/python3 -c pass", self.b_python_c),
        ]
        for label, fn in steps:
            progress(label)
            self.measure(rows, fn, label)
        self.print_table("Latency of `x = 1` and start-up", rows)
        self.print_ratios()

    def run_timeout(self):
        results = {}
        for key, code in (("loop", "while True: pass"),
                          ("cloop", "sum(range(10**11))")):
            progress(f"agentz timeout: {code}")
            try:
                results[key] = self.t_agentz(code)
            except NotBuilt:
                results[key] = "agentz: not built"
            except BenchAbort:
                raise
            except Exception as e:
                self.errors.append(f"agentz timeout {code}: {e!r}")
                results[key] = f"error: {str(e)[:120]}"
        progress("Jupyter interrupt / restart")
        try:
            jr = self.t_jupyter()
        except BenchAbort:
            raise
        except Exception as e:
            self.errors.append(f"Jupyter timeout: {e!r}")
            jr = f"error: {str(e)[:120]}"
            if os.environ.get("AGENTZ_BENCH_DEBUG"):
                traceback.print_exc()

        print("Timeout / kill  (agentz: --cell-timeout 1 --grace 1)")
        for key, code in (("loop", "while True: pass"),
                          ("cloop", "sum(range(10**11))")):
            r = results[key]
            print(f"  agentz  `{code}` then `x = 1`")
            if isinstance(r, str):
                print(f"      {r}")
                continue
            extra = (f"; SIGKILL->fresh worker ready "
                     f"{fmt_ms(r['kill_to_ready_ms'])}"
                     if r.get("kill_to_ready_ms") is not None else "")
            print(f"      timed-out cell: {r['cell0']}; stage {r['stage']}; "
                  f"deadline->ready {fmt_ms(r['deadline_to_ready_ms'])} "
                  f"(includes the 1 s grace when killed){extra}")
            print(f"      next cell: {r['cell1']}; whole run "
                  f"{r['wall_s']:.2f} s, exit {r['rc']}")
        if isinstance(jr, str):
            print(f"  Jupyter  {jr}")
        else:
            iv, rv = jr["interrupt"], jr["restart"]
            print("  Jupyter  `while True: pass`: interrupt_kernel() -> "
                  f"execute_reply error ({jr.get('interrupt_ename')}): "
                  f"median {fmt_ms(statistics.median(iv))}, max "
                  f"{fmt_ms(max(iv))}, n={len(iv)}")
            print(f"  Jupyter  `sum(range(10**11))`: interrupt_kernel() -> "
                  f"{jr['c_interrupt']}")
            print("  Jupyter  `sum(range(10**11))`: restart_kernel(now=True)"
                  f" -> execute answered: median "
                  f"{fmt_ms(statistics.median(rv))}, max {fmt_ms(max(rv))}, "
                  f"n={len(rv)} (restart call itself "
                  f"{fmt_ms(statistics.median(jr['restart_call']))})")
        print()
        # Side by side: recovery from the stuck cell to a usable worker.
        print("  Recovery, side by side          agentz (deadline->ready)"
              "   Jupyter")

        def az(key):
            r = results[key]
            if isinstance(r, str):
                return "not built" if "not built" in r else "error"
            return f"{fmt_ms(r['deadline_to_ready_ms'])} ({r['stage']})"
        jl = jc = "error"
        if not isinstance(jr, str):
            jl = (f"{fmt_ms(statistics.median(jr['interrupt']))} "
                  f"(interrupt->reply)")
            jc = (f"{fmt_ms(statistics.median(jr['restart']))} "
                  f"(restart->reply)")
        print(f"    {'while True: pass':<30} {az('loop'):<26} {jl}")
        print(f"    {'sum(range(10**11))':<30} {az('cloop'):<26} {jc}")
        print()
        self.run_rollback(jr)
        # Targets: the kill path (our grace is policy, Jupyter's
        # restart(now=True) kills at once) and the interrupt latency.
        cl, lp = results.get("cloop"), results.get("loop")
        if not isinstance(jr, str) and isinstance(cl, dict) and \
                cl.get("kill_to_ready_ms"):
            ratio = statistics.median(jr["restart"]) / cl["kill_to_ready_ms"]
            print(f"  {'PASS' if ratio >= 30 else 'MISS'}  C loop: SIGKILL->"
                  f"ready {fmt_ms(cl['kill_to_ready_ms'])} vs Jupyter "
                  f"restart(now=True)->answer: {ratio:.0f}x faster"
                  f"{'':8}target >= 30x")
        if isinstance(lp, dict) and lp.get("deadline_to_ready_ms"):
            v = lp["deadline_to_ready_ms"]
            print(f"  {'PASS' if v < 5 else 'MISS'}  interrupt latency, "
                  f"pure-Python loop (deadline->cell done): {fmt_ms(v)}"
                  f"{'':8}target < 5 ms")
        print()


class Kernel:
    """An ipykernel under /usr/bin/python3 from a kernel spec made on the
    fly, with bounded waits and a shutdown that always happens."""

    NAME = "agentz-bench-py3"

    def __init__(self, bench):
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        self.bench = bench
        kdir = os.path.join(bench.tmp, "kernels")
        spec = os.path.join(kdir, self.NAME)
        os.makedirs(spec, exist_ok=True)
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({
                "argv": [SYS_PY, "-m", "ipykernel_launcher", "-f",
                         "{connection_file}"],
                "display_name": "agentz bench (/usr/bin/python3)",
                "language": "python",
                "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1"},
            }, f)
        ksm = KernelSpecManager(kernel_dirs=[kdir])
        self.km = KernelManager(kernel_name=self.NAME,
                                kernel_spec_manager=ksm)
        self.kc = None
        self.log = open(os.path.join(bench.tmp, "kernel.log"), "ab")
        bench.kernels.append(self)

    def start(self):
        self.km.start_kernel(env=child_env(
            PYDEVD_DISABLE_FILE_VALIDATION="1"),
            stdout=self.log, stderr=self.log)
        self.reconnect(timeout=60)

    def reconnect(self, timeout):
        if self.kc is not None:
            self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=timeout)
        except RuntimeError as e:
            raise TimeoutError(f"kernel not ready: {e}") from None

    def send(self, code):
        return self.kc.execute(code, silent=False, store_history=False)

    def _get(self, chan, deadline):
        rem = deadline - time.monotonic()
        if rem <= 0:
            raise TimeoutError
        try:
            return chan(timeout=rem)
        except queue.Empty:
            raise TimeoutError from None

    def wait_reply(self, msg_id, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._get(self.kc.get_shell_msg, deadline)
            except TimeoutError:
                raise TimeoutError(f"no execute_reply within {timeout} s") \
                    from None
            if m["parent_header"].get("msg_id") == msg_id:
                return m, time.perf_counter()

    def _wait_status(self, msg_id, state, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._get(self.kc.get_iopub_msg, deadline)
            except TimeoutError:
                raise TimeoutError(f"no '{state}' status within {timeout} s")\
                    from None
            if m["msg_type"] == "status" and \
                    m["parent_header"].get("msg_id") == msg_id and \
                    m["content"].get("execution_state") == state:
                return

    def wait_busy(self, msg_id, timeout):
        self._wait_status(msg_id, "busy", timeout)

    def wait_idle(self, msg_id, timeout):
        self._wait_status(msg_id, "idle", timeout)

    def execute_wait(self, code, timeout):
        t_end = time.monotonic() + timeout
        msg_id = self.send(code)
        reply, _ = self.wait_reply(msg_id, timeout)
        self.wait_idle(msg_id, max(0.1, t_end - time.monotonic()))
        return reply

    def close(self):
        pid = None
        try:
            prov = getattr(self.km, "provisioner", None)
            proc = getattr(prov, "process", None) if prov else None
            pid = proc.pid if proc is not None else None
        except Exception:
            pass
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:
            pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        if pid is not None:   # belt and braces: the kernel's own group
            for target in (lambda: os.killpg(pid, signal.SIGKILL),
                           lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        try:
            self.km.cleanup_resources()
        except Exception:
            pass
        try:
            self.log.close()
        except Exception:
            pass
        if self in self.bench.kernels:
            self.bench.kernels.remove(self)


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
