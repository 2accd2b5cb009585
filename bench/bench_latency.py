"""bench/run.py's "latency" rows, as methods mixed into its Bench: the agentz
round trip, in-process exec, IPython run_cell, the Jupyter round trip, the C
pipe ping-pong, spawn-to-ready, a bare embed's Py_InitializeEx and
`/usr/bin/python3 -c pass` (the docstring of run.py says how each is taken).
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

from bench_common import (JUPYTER_WARMUP, REPO, Row, SYS_PY, WARMUP,
                          first_line, fmt_us, pct, run_child)
from bench_kernel import Kernel


class LatencyRows:
    """The b_* measurements of Bench's latency section."""

    # ----------------------------------------------------- latency rows

    def b_agentz_rt(self):
        self.need_agentz()
        n = self.args.cells
        d, fin, walls = {}, {}, {}
        # with --baseline: alternating runs, two each, samples pooled
        for _ in range(2 if self.base_agentz else 1):
            for tag, exe in self.builds():
                rc, recs, err, wall = self.agentz_exec(["x = 1"] * n,
                                                       timeout=120,
                                                       agentz=exe)
                if len(recs) != n:
                    raise RuntimeError(f"agentz{tag} exec rc={rc}: "
                                       f"{len(recs)}/{n} records; "
                                       f"{first_line(err)}")
                bad = [r for r in recs if r.get("status") != "ok"]
                if bad:
                    raise RuntimeError(f"{len(bad)} cells not ok, first: "
                                       f"{bad[0].get('status')} "
                                       f"{bad[0].get('exception_type')}")
                d.setdefault(tag, []).extend(
                    float(r["duration_us"]) for r in recs[WARMUP:])
                f = [float(r["finished_at"]) for r in recs[WARMUP:]]
                fin.setdefault(tag, []).extend(
                    (b - a) * 1e6 for a, b in zip(f, f[1:]))
                walls.setdefault(tag, []).append(wall)
        rows = []
        for tag, _ in self.builds():
            med = statistics.median(d[tag])
            self.results["agentz" + ("_base" if tag else "")] = med
            rows.append(Row(f"agentz exec round trip{tag}", med,
                            pct(d[tag], 90), len(d[tag]),
                            f"duration_us; {n} cells on stdin, first "
                            f"{WARMUP} dropped"))
            cad = fin[tag]
            rows.append(Row(f"  agentz cell cadence{tag}",
                            statistics.median(cad), pct(cad, 90), len(cad),
                            f"finished_at deltas: + JSON out, stdin parse; "
                            f"whole run {statistics.median(walls[tag]) * 1000:.0f} ms"))
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

        def one(mode, rounds, spin_us=0):
            rc, out, err, _ = run_child([exe, str(rounds), mode,
                                         str(spin_us)], timeout=60)
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
        # what a bounded spin before blocking buys and costs (issue 23's
        # idea, tried and dropped: see docs/internals.md)
        for mode in ("same", "cross", "none")[:3 if ncpu >= 2 else 1]:
            r = one(mode, 10000, 50)
            rows.append(Row(f"  ping-pong, {mode}, 50 us spin",
                            r["median_us"], r["p90_us"], r["n"],
                            "poll(0) + sched_yield for up to 50 us, then "
                            "a blocking read"))
        return rows

    def b_spawn(self):
        self.need_agentz()
        n = self.args.spawn_n
        ready, walls, w, embed = {}, {}, {}, []
        emb = self.embed_exe()
        self.embed_once(emb)    # cold page cache
        for _ in range(n):
            # the anchor, Py_InitializeEx, alternating with the spawns
            embed.append(self.embed_once(emb)["init_us"])
            for tag, exe in self.builds():   # alternating with --baseline
                rc, recs, err, wall = self.agentz_exec(["x = 1"], timeout=30,
                                                       agentz=exe)
                if rc != 0 or not recs or recs[0].get("status") != "ok":
                    raise RuntimeError(f"agentz{tag} exec rc={rc}, "
                                       f"{len(recs)} records; "
                                       f"{first_line(err)}")
                w = recs[0].get("worker") or {}
                if w.get("spawn_ready_us") is None:
                    raise RuntimeError("record lacks worker.spawn_ready_us")
                ready.setdefault(tag, []).append(float(w["spawn_ready_us"]))
                walls.setdefault(tag, []).append(wall * 1e6)
        cont = w.get("containment") or "none reported"
        if isinstance(cont, list):
            cont = ",".join(cont)
        rows = []
        for tag, _ in self.builds():
            med = statistics.median(ready[tag])
            self.results["spawn" + ("_base" if tag else "")] = med
            rows += [Row(f"agentz worker spawn-to-ready{tag}", med,
                         pct(ready[tag], 90), n,
                         f"worker.spawn_ready_us (fork -> ready frame); "
                         f"containment: {cont}"),
                     Row(f"  agentz exec, 1 cell, process wall{tag}",
                         statistics.median(walls[tag]), pct(walls[tag], 90),
                         n, "whole `agentz exec` run as seen from here")]
        self.results["embed_paired"] = statistics.median(embed)
        rows.append(Row("  Py_InitializeEx, between the spawns",
                        statistics.median(embed), pct(embed, 90), n,
                        "bench/embed_init, run alternately with the "
                        "spawns above (the target's anchor)"))
        return rows

    def agent_run(self, exe, n, snapshot):
        """An agent run of n cells `x = 1; call_me(...)` against the local
        test model server (each model answer names the next cell), then
        quit(); the journal's records of cells 1..n."""
        sys.path.insert(0, os.path.join(REPO, "tests", "integ"))
        from model_server import ModelServer
        cell = {"code": "x = 1\ncall_me(input='next')\n", "summary": "c"}
        turns = [{"match": "Submit the first Python cell",
                  "next_cell": cell}, {"text": "ok"}]
        for _ in range(n - 1):
            turns += [{"next_cell": cell}, {"text": "ok"}]
        turns += [{"next_cell": {"code": "quit()", "summary": "q"}},
                  {"text": "ok"}]
        top = tempfile.mkdtemp(dir=self.tmp, prefix="agent-")
        ws = os.path.join(top, "ws")
        os.mkdir(ws)
        journal = os.path.join(top, "journal.jsonl")
        with ModelServer(turns) as srv:
            rc, _, err, _ = run_child(
                [exe, "--base-url", srv.base_url, "--journal", journal,
                 "--snapshot", snapshot, "bench"], timeout=120,
                env={"PATH": "/usr/bin:/bin", "HOME": ws,
                     "LANG": "C.UTF-8"}, cwd=ws)
        if rc != 0:
            raise RuntimeError(f"agent run rc={rc}: {first_line(err)}")
        recs = {}
        with open(journal) as f:
            for line in f:
                r = json.loads(line)
                if r.get("type") in ("input", "output"):
                    recs.setdefault(r["cell"], {}).update(r)
        cells = [recs[i] for i in sorted(recs) if 1 <= i <= n]
        if len(cells) != n or any(c.get("status") != "ok" for c in cells):
            raise RuntimeError(f"agent run: {len(cells)}/{n} cells, not "
                               f"all ok")
        return cells

    def b_agent_cells(self):
        """Target 4: what --snapshot auto adds to an agent cell, against the
        fork itself, and the supervisor's own time between agent cells."""
        self.need_agentz()
        n = self.args.agent_cells
        dur, gap = {}, {}
        for _ in range(2):          # alternating: auto/never, builds
            for tag, exe in self.builds():
                for snap in ("auto", "never"):
                    cells = self.agent_run(exe, n, snap)
                    if snap == "auto" and any(c.get("snapshot") != "taken"
                                              for c in cells):
                        raise RuntimeError("--snapshot auto: an agent cell "
                                           "without a snapshot")
                    k = tag + "/" + snap
                    dur.setdefault(k, []).extend(
                        float(c["duration_us"]) for c in cells[1:])
                    gap.setdefault(k, []).extend(
                        (float(b["started_at"]) - float(a["finished_at"]))
                        * 1e6 for a, b in zip(cells, cells[1:]))
        # the anchor: os.fork() of a worker (its child exits at once)
        src = ("import os, time\nts = []\nfor _ in range(40):\n"
               "    t = time.perf_counter()\n    pid = os.fork()\n"
               "    if pid == 0:\n        os._exit(0)\n"
               "    ts.append(time.perf_counter() - t)\n"
               "    os.waitpid(pid, 0)\n"
               "ts.sort()\nprint('FORK', ts[len(ts) // 2] * 1e6)\n")
        rc, recs, err, _ = self.agentz_exec([src], timeout=60)
        out = (recs[0].get("output") or "") if recs else ""
        if rc != 0 or "FORK" not in out:
            raise RuntimeError(f"fork cell rc={rc}: {first_line(err)}")
        fork = float(out.split("FORK", 1)[1].split()[0])
        self.results["fork"] = fork
        rows = []
        for tag, _ in self.builds():
            for snap in ("auto", "never"):
                k = tag + "/" + snap
                m = statistics.median(dur[k])
                self.results["agent_" + snap + ("_base" if tag else "")] = m
                rows.append(Row(f"agent cell, --snapshot {snap}{tag}", m,
                                pct(dur[k], 90), len(dur[k]),
                                "duration_us of `x = 1; call_me()` (two "
                                "requests to a local test model server)"))
            k = tag + "/auto"
            m = statistics.median(gap[k])
            self.results["agent_gap" + ("_base" if tag else "")] = m
            rows.append(Row(f"  supervisor between agent cells{tag}", m,
                            pct(gap[k], 90), len(gap[k]),
                            "finished_at -> next started_at (record, "
                            "journal, successor), --snapshot auto"))
        rows.append(Row("  os.fork() of the worker, in a cell", fork, None,
                        40, "fork returns in the parent (child exits); "
                            "the anchor of --snapshot auto's cost"))
        return rows

    def embed_exe(self):
        """bench/embed_init.c built against the system libpython."""
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "python3-embed"],
            capture_output=True, text=True, timeout=30)
        if flags.returncode != 0:
            raise RuntimeError("pkg-config python3-embed: "
                               + first_line(flags.stderr))
        parts = flags.stdout.split()
        cflags = [p for p in parts if not p.startswith(("-l", "-L"))]
        libs = [p for p in parts if p.startswith(("-l", "-L"))]
        return self.compile_c("embed_init.c", os.path.join(
            self.bindir, "embed_init"), cflags, libs)

    def embed_once(self, exe):
        rc, out, err, _ = run_child([exe], timeout=30)
        if rc != 0:
            raise RuntimeError(f"embed_init rc={rc}: {first_line(err)}")
        return json.loads(out.strip().splitlines()[-1])

    def b_embed(self):
        exe = self.embed_exe()
        n = 15
        init, total, version = [], [], ""
        for _ in range(n + 1):
            r = self.embed_once(exe)
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
