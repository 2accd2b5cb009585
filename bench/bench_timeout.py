"""bench/run.py's "timeout" section, as methods mixed into its Bench: a stuck
cell and the recovery under agentz (interruptible and C loops), rollback and
snapshot costs, and the Jupyter interrupt and restart figures.
"""
import os
import statistics
import time
import traceback

from bench_common import (BenchAbort, NotBuilt, first_line, fmt_ms, fmt_us,
                          progress)
from bench_kernel import Kernel


class TimeoutSection:
    """The t_* measurements and run_timeout of Bench."""

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
