#!/usr/bin/python3
"""Crash soak (issue 9, "Done when"): SIGKILL the supervisor at random
moments of 30-cell runs and resume each time, then check what survived.

    /usr/bin/python3 bench/crash_soak.py [BUILD] [--seed N] [--runs N]
        [--kills N] [--cells N]

Each run is `agentz --journal J --resume --max-restarts 0 TASK` against a
scripted model (tests/integ/model_server.py). The model plays a 30-step
task: step k is a cell that appends one line to steps.txt in the
workspace (its side effect: the step, a token unique to the model's answer
that registered it, and the cell's number in the journal), then calls
call_me(input="step k done"), to which the model answers with step k+1;
step 30 calls quit(). The model remembers the highest step it was told
was done, so a repair cell after a crash redoes the step that was cut.

The soak starts (or resumes) the supervisor, waits for a random number of
new journal lines (0-3) and then a random delay (0-150 ms), and SIGKILLs
it -- during a model stream, a cell, a journal write or the resume itself
-- until the run's share of the kills is spent; then it lets the run end.
Runs go on until at least --kills (150) kills and --runs (5) runs are done.
After each kill it waits (2 s at most) for every process run from its copy
of the binaries to be gone before it resumes.

It prints, over all runs:
  runs ended by quit()      the last start exited 0 and the journal ends
                            with the stop record {"exit": 0}
  records lost              a cell below the last one without its input or
                            its output record, a side effect from a cell the
                            journal has no input for, a step never done
  records duplicated        a second input or output record of one cell
  cells run twice           one cell (journal number, or the model's answer
                            that registered it) whose side effect is in
                            steps.txt twice
and, for information, the steps redone because the cell doing them was cut
(at-least-once: the interrupted cell's side effect may be there, and the
repair cell does the step again -- by design, the model is told), the
kills by the journal's last record at that moment (input: a cell ran;
successor: the model had just registered the next one; output, usage:
between cells; isolation, resume: while resuming) and the kills after
which a process of the killed tree outlived the supervisor by 2 s.
Exit status 0 when every run ended by quit(), the three error figures are
0 and no process outlived a kill. --seed fixes the random choices (the
moments still depend on timing). Bounded: each start has a timeout; the
soak takes about 30 s here.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integ"))
from model_server import ModelServer  # noqa: E402

START_TIMEOUT = 60      # one start (or resume) to its end, unkilled
STEP_RE = re.compile(r"step (\d+) done")


class Model:
    """The scripted model, as a callable turn (stateful on purpose: it
    stands for a model that remembers what it was told)."""

    def __init__(self, cells):
        self.cells = cells
        self.done = 0           # highest step reported done
        self.answers = 0        # next_cell answers given (unique tokens)

    def __call__(self, rec):
        body = rec.get("body") or {}
        inp = body.get("input")
        last = inp[-1] if isinstance(inp, list) and inp else inp
        if isinstance(last, dict) and last.get("type") == \
                "function_call_output":
            return {"text": "ok", "delay": 0.001}
        for s in _strings(last if last is not None else body):
            for m in STEP_RE.finditer(s):
                self.done = max(self.done, int(m.group(1)))
        k = self.done + 1
        self.answers += 1
        code = ("import os, random, time\n"
                "time.sleep(random.random() * 0.03)\n"
                "with open('steps.txt', 'a') as f:\n"
                "    f.write('%d a%d %%d\\n' %% (len(CELL_INPUTS) - 1))\n"
                "    f.flush()\n"
                "    os.fsync(f.fileno())\n"
                "print('STEP %d', flush=True)\n" % (k, self.answers, k))
        if k >= self.cells:
            code += "quit()\n"
        else:
            # built at run time: the model must not read "step k done"
            # in the code of a cut cell that a repair request shows it
            code += "call_me(input='step %d' + ' done')\n" % k
        return {"next_cell": {"code": code, "summary": "step %d" % k},
                "delay": 0.001}


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def _lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def _last_type(journal):
    try:
        with open(journal, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return "no journal"
    if lines and lines[-1] != b"":
        return "torn line"
    for ln in reversed(lines):
        if ln:
            try:
                return json.loads(ln).get("type", "?")
            except ValueError:
                return "bad line"
    return "empty journal"


def _left_behind(bindir, timeout=2.0):
    """Processes run from our copy of the binaries (the killed supervisor's
    worker tree) still alive after timeout; [] when all went."""
    end = time.monotonic() + timeout
    while True:
        left = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                exe = os.readlink("/proc/%s/exe" % d)
            except OSError:
                continue
            if exe.startswith(bindir + "/"):
                left.append(int(d))
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.01)


def one_run(agentz, rng, kills_wanted, cells, log, phases):
    """One soak run; returns its figures."""
    d = tempfile.mkdtemp(prefix="agentz-soak-")
    os.chmod(d, 0o755)
    ws = os.path.join(d, "ws")
    os.mkdir(ws)
    os.chmod(ws, 0o777)
    journal = os.path.join(d, "journal.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    model = Model(cells)
    kills = starts = 0
    last_rc = None
    try:
        with ModelServer([model] * (cells * 40 + 400)) as srv:
            while True:
                starts += 1
                if starts > kills_wanted + 20:
                    raise SystemExit("crash_soak: run did not end after %d "
                                     "starts (log %s)" % (starts, log))
                errf = open(log, "ab")
                errf.write(b"=== start %d\n" % starts)
                errf.flush()
                p = subprocess.Popen(
                    [agentz, "--base-url", srv.base_url, "--journal", journal,
                     "--resume", "--max-restarts", "0", "--cell-timeout",
                     "30", "--workspace", ws, "a 30-step soak task"],
                    cwd=ws, env=env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=errf)
                if kills < kills_wanted:
                    n0 = _lines(journal)
                    grow = rng.randint(0, 3)
                    end = time.monotonic() + START_TIMEOUT
                    while p.poll() is None and _lines(journal) < n0 + grow \
                            and time.monotonic() < end:
                        time.sleep(0.003)
                    time.sleep(rng.uniform(0, 0.15))
                    if p.poll() is None:
                        os.kill(p.pid, signal.SIGKILL)
                        kills += 1
                        p.wait(timeout=START_TIMEOUT)
                        ph = _last_type(journal)
                        phases[ph] = phases.get(ph, 0) + 1
                        left = _left_behind(os.path.dirname(agentz))
                        if left:
                            phases["LEFT BEHIND"] = \
                                phases.get("LEFT BEHIND", 0) + 1
                            for pid in left:
                                try:
                                    os.kill(pid, signal.SIGKILL)
                                except ProcessLookupError:
                                    pass
                try:
                    last_rc = p.wait(timeout=START_TIMEOUT)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    errf.close()
                    raise SystemExit("crash_soak: a start did not end in %d s"
                                     " (log %s)" % (START_TIMEOUT, log))
                errf.close()
                if last_rc != -signal.SIGKILL:
                    break
        r = check(journal, os.path.join(ws, "steps.txt"), cells,
                  last_rc, kills, starts)
        ok = r["quit"] and not (r["lost"] or r["dup"] or r["twice"])
        if not ok:
            r["kept"] = d       # the journal and steps.txt, to look at
        return r
    finally:
        if "kept" not in locals().get("r", {}):
            shutil.rmtree(d, ignore_errors=True)


def check(journal, steps_path, cells, last_rc, kills, starts):
    recs = []
    with open(journal) as f:
        for ln in f:
            recs.append(json.loads(ln))
    inputs, outputs = {}, {}
    order_ok = True
    for i, r in enumerate(recs):
        if r.get("type") == "input":
            inputs.setdefault(r["cell"], []).append(i)
        elif r.get("type") == "output":
            outputs.setdefault(r["cell"], []).append(i)
    lost = dup = 0
    top = max(inputs) if inputs else -1
    lost_what = []
    for c in range(top + 1):
        ni, no = len(inputs.get(c, [])), len(outputs.get(c, []))
        if ni == 0 or no == 0:
            lost += 1
            lost_what.append("cell %d: %d input, %d output" % (c, ni, no))
        dup += max(0, ni - 1) + max(0, no - 1)
        if ni and no and inputs[c][0] > outputs[c][0]:
            order_ok = False
        if c and ni and inputs.get(c - 1) and inputs[c][0] < inputs[c - 1][0]:
            order_ok = False
    steps = []
    if os.path.exists(steps_path):
        for ln in open(steps_path):
            k, tok, c = ln.split()
            steps.append((int(k), tok, int(c)))
    by_cell, by_tok, by_step = {}, {}, {}
    for k, tok, c in steps:
        by_cell[c] = by_cell.get(c, 0) + 1
        by_tok[tok] = by_tok.get(tok, 0) + 1
        by_step[k] = by_step.get(k, 0) + 1
        if c not in inputs:
            lost += 1
            lost_what.append("side effect of cell %d (step %d), no input "
                             "record" % (c, k))
    for k in range(1, cells + 1):
        if k not in by_step:
            lost += 1
            lost_what.append("step %d never done" % k)
    # one cell (by its journal number, or by the answer that registered
    # it) with its side effect more than once, counted once
    twice = len({c for c, n in by_cell.items() if n > 1} |
                {c for k, tok, c in steps if by_tok[tok] > 1})
    restarts = sum(1 for r in recs if r.get("type") == "output"
                   and r.get("kind") == "restart")
    last = recs[-1] if recs else {}
    quit_ok = last_rc == 0 and last.get("type") == "stop" and \
        last.get("exit") == 0
    return {"quit": quit_ok, "last_rc": last_rc, "lost": lost, "dup": dup,
            "twice": twice, "order_ok": order_ok, "kills": kills,
            "starts": starts, "cells": top + 1, "restart_records": restarts,
            "steps_redone": sum(n - 1 for n in by_step.values() if n > 1),
            "lost_what": lost_what}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kills", type=int, default=150)
    ap.add_argument("--cells", type=int, default=30)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    # A copy of the binaries: the build may be rewritten while we run.
    bindir = tempfile.mkdtemp(prefix="agentz-soak-bin-")
    os.chmod(bindir, 0o755)
    for name in ("agentz", "agentz-worker"):
        shutil.copy2(os.path.join(a.build, name), bindir)
    agentz = os.path.join(bindir, "agentz")
    try:
        run_soak(a, seed, rng, agentz)
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


def run_soak(a, seed, rng, agentz):
    log = os.path.join(tempfile.gettempdir(),
                       "agentz-crash-soak-%d.log" % os.getpid())
    per_run = -(-a.kills // a.runs)
    t0 = time.monotonic()
    results = []
    total_kills = 0
    phases = {}
    print("crash soak: seed %d, %d-cell runs, >= %d kills over >= %d runs "
          "(agentz logs: %s)" % (seed, a.cells, a.kills, a.runs, log))
    while len(results) < a.runs or total_kills < a.kills:
        if len(results) >= a.runs + 10:
            break
        want = max(per_run, 0) if len(results) < a.runs else \
            a.kills - total_kills
        r = one_run(agentz, rng, want, a.cells, log, phases)
        results.append(r)
        total_kills += r["kills"]
        print("  run %d: %d kills, %d starts, %d cells, %d restart records, "
              "exit %s%s, lost %d, duplicated %d, run twice %d, steps redone "
              "%d%s" % (len(results), r["kills"], r["starts"], r["cells"],
                        r["restart_records"], r["last_rc"],
                        " (quit)" if r["quit"] else "", r["lost"], r["dup"],
                        r["twice"], r["steps_redone"],
                        "" if r["order_ok"] else ", OUT OF ORDER"))
        if r.get("kept"):
            print("    kept: " + r["kept"])
        for w in r["lost_what"][:10]:
            print("    lost: " + w)
    n = len(results)
    quit_n = sum(r["quit"] for r in results)
    lost = sum(r["lost"] for r in results)
    dup = sum(r["dup"] for r in results)
    twice = sum(r["twice"] for r in results)
    order = all(r["order_ok"] for r in results)
    print("supervisor SIGKILLed %d times over %d runs of %d cells "
          "(%.0f s, seed %d)" % (total_kills, n, a.cells,
                                 time.monotonic() - t0, seed))
    print("runs ended by quit():              %d/%d" % (quit_n, n))
    print("records lost:                      %d" % lost)
    print("records duplicated:                %d" % dup)
    print("cells whose side effects ran twice: %d" % twice)
    print("(steps redone after a cut cell, by design: %d; records in order: "
          "%s)" % (sum(r["steps_redone"] for r in results),
                   "yes" if order else "NO"))
    print("kills by the journal's last record at the kill: " + ", ".join(
        "%s %d" % kv for kv in sorted(phases.items(), key=lambda kv: -kv[1])))
    print("kills after which a process of the killed tree outlived it by "
          "2 s: %d" % phases.get("LEFT BEHIND", 0))
    ok = phases.get("LEFT BEHIND", 0) == 0 and quit_n == n and lost == 0 and dup == 0 and twice == 0 and order
    if ok:
        os.unlink(log) if os.path.exists(log) else None
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
