#!/usr/bin/python3
"""Death soak (issue 18, section 2): SIGKILL the run's processes -- the
supervisor, the worker, the worker's whole tree, the namespace init, the
worker's spawner, the snapshot, the standby -- at random moments of
20-cell agent runs, and check what survived.

    /usr/bin/python3 bench/death_soak.py [BUILD] [--seed N] [--runs N]
        [--kills N] [--cells N]

The run and its scripted model are crash_soak.py's (step k appends one
line to steps.txt and calls call_me(input="step k done"); the last step
calls quit()), with --snapshot always so there are snapshots to kill, and
each cell first writes its pid (as its namespace sees it) to `who`, which
tells the worker running the cells from the standby. The soak waits for
a cell that ends well (the agent stops after three failed cells in a
row, by design), then for a random number of new journal lines (0-3) and
a random delay (0-150 ms),
then picks a target at random among those alive at that moment:

  supervisor   the run is resumed (--journal J --resume), as crash_soak
  worker       the process running the cells
  tree         that worker and its children (its snapshot) at once
  init         PID 1 of the run's namespaces (everything in them dies)
  spawner      the supervisor's child that forked the worker
  snapshot     the running cell's snapshot (a child of the worker)
  standby      the warm standby worker

and goes on until the run's share of kills is spent; then it lets the
run end. Only a supervisor kill restarts the supervisor: every other
death must be survived by the run itself.

It prints, over all runs: runs ended by quit() (exit 0, the journal ends
with the stop record {"exit": 0}), records lost, records duplicated,
cells whose side effect ran twice (as crash_soak.py counts them), and the
kills per target with how many namespace rebuilds the supervisors
reported. Exit status 0 when every run ended by quit() and nothing was
lost, duplicated or run twice. --seed fixes the random choices (the
moments still depend on timing). Bounded: each start has a timeout.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import crash_soak  # noqa: E402
from crash_soak import ModelServer, check, _lines  # noqa: E402

START_TIMEOUT = 90
TARGETS = ("supervisor", "worker", "tree", "init", "spawner", "snapshot",
           "standby")


class Model(crash_soak.Model):
    """crash_soak's model; each cell writes its pid to `who` first."""

    def __call__(self, rec):
        t = super().__call__(rec)
        if "next_cell" in t:
            t["next_cell"]["code"] = (
                "import os as _o\n"
                "open('who.tmp', 'w').write(str(_o.getpid()))\n"
                "_o.rename('who.tmp', 'who')\n" + t["next_cell"]["code"])
        return t


def _ok_cells(journal):
    """Output records of cells that ended well, in the journal now."""
    n = 0
    try:
        with open(journal, "rb") as f:
            for ln in f:
                if b'"type":"output"' in ln and b'"status":"ok"' in ln:
                    n += 1
    except OSError:
        pass
    return n


def _nspid(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def _children(pid):
    kids = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return kids
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return kids


def victims(sup, ws):
    """{target: [pids]} of the run of supervisor sup, as alive now."""
    try:
        with open(os.path.join(ws, "who")) as f:
            me = int(f.read())
    except (OSError, ValueError):
        me = None
    out = {"supervisor": [sup]}
    for k in _children(sup):
        ns = _nspid(k)
        if len(ns) > 1 and ns[-1] == 1:
            out["init"] = [k]
            continue
        kids = _children(k)
        if not kids:
            continue
        w = kids[0]
        wns = _nspid(w)
        if not wns:
            continue
        if me is not None and wns[-1] == me:
            out["worker"] = [w]
            out["spawner"] = [k]
            snaps = _children(w)
            out["tree"] = [w] + snaps
            if snaps:
                out["snapshot"] = snaps
        else:
            out["standby"] = [w]
    return out


def one_run(agentz, rng, kills_wanted, cells, log, kills_by):
    d = tempfile.mkdtemp(prefix="agentz-dsoak-")
    os.chmod(d, 0o755)
    ws = os.path.join(d, "ws")
    os.mkdir(ws)
    os.chmod(ws, 0o777)
    journal = os.path.join(d, "journal.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    model = Model(cells)
    kills = starts = 0
    last_rc = None
    r = {}
    try:
        with ModelServer([model] * (cells * 60 + 600)) as srv:
            while True:
                starts += 1
                if starts > kills_wanted + 20:
                    raise SystemExit("death_soak: run did not end after %d "
                                     "starts (log %s)" % (starts, log))
                errf = open(log, "ab")
                errf.write(b"=== start %d\n" % starts)
                errf.flush()
                p = subprocess.Popen(
                    [agentz, "--base-url", srv.base_url, "--journal",
                     journal, "--resume", "--max-restarts", "0",
                     "--cell-timeout", "30", "--snapshot", "always",
                     "--workspace", ws, "a 20-step soak task"],
                    cwd=ws, env=env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=errf)
                restarted = False
                while kills < kills_wanted and p.poll() is None:
                    # a cell that ends well between two kills: the agent
                    # stops after 3 failed cells in a row, by design
                    ok0 = _ok_cells(journal)
                    end = time.monotonic() + START_TIMEOUT
                    while p.poll() is None and kills and \
                            _ok_cells(journal) <= ok0 and \
                            time.monotonic() < end:
                        time.sleep(0.003)
                    n0 = _lines(journal)
                    grow = rng.randint(0, 3)
                    while p.poll() is None and _lines(journal) < n0 + grow \
                            and time.monotonic() < end:
                        time.sleep(0.003)
                    time.sleep(rng.uniform(0, 0.15))
                    if p.poll() is not None:
                        break
                    alive = victims(p.pid, ws)
                    target = rng.choice(sorted(alive))
                    for pid in alive[target]:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    kills += 1
                    kills_by[target] = kills_by.get(target, 0) + 1
                    errf.write(b"=== killed %s %r\n" % (
                        target.encode(), alive[target]))
                    errf.flush()
                    if target == "supervisor":
                        p.wait(timeout=START_TIMEOUT)
                        crash_soak._left_behind(os.path.dirname(agentz))
                        restarted = True
                        break
                try:
                    last_rc = p.wait(timeout=START_TIMEOUT * 3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    errf.close()
                    raise SystemExit("death_soak: a start did not end in time"
                                     " (log %s)" % log)
                errf.close()
                if not restarted:
                    break
        r = check(journal, os.path.join(ws, "steps.txt"), cells,
                  last_rc, kills, starts)
        if not (r["quit"] and not (r["lost"] or r["dup"] or r["twice"])):
            r["kept"] = d
        return r
    finally:
        if "kept" not in r:
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(
        os.path.dirname(HERE), "build"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--cells", type=int, default=20)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    bindir = tempfile.mkdtemp(prefix="agentz-dsoak-bin-")
    os.chmod(bindir, 0o755)
    for name in ("agentz", "agentz-worker"):
        shutil.copy2(os.path.join(a.build, name), bindir)
    agentz = os.path.join(bindir, "agentz")
    log = os.path.join(tempfile.gettempdir(),
                       "agentz-death-soak-%d.log" % os.getpid())
    try:
        ok = soak(a, seed, rng, agentz, log)
    finally:
        shutil.rmtree(bindir, ignore_errors=True)
    sys.exit(0 if ok else 1)


def soak(a, seed, rng, agentz, log):
    per_run = -(-a.kills // a.runs)
    t0 = time.monotonic()
    results, kills_by = [], {}
    print("death soak: seed %d, %d-cell runs, %d kills over %d runs "
          "(agentz logs: %s)" % (seed, a.cells, a.kills, a.runs, log))
    for i in range(a.runs):
        r = one_run(agentz, rng, per_run, a.cells, log, kills_by)
        results.append(r)
        print("  run %d: %d kills, %d starts, %d cells, exit %s%s, lost %d, "
              "duplicated %d, run twice %d, steps redone %d" % (
                  i + 1, r["kills"], r["starts"], r["cells"], r["last_rc"],
                  " (quit)" if r["quit"] else "", r["lost"], r["dup"],
                  r["twice"], r["steps_redone"]))
        if r.get("kept"):
            print("    kept: " + r["kept"])
        for w in r["lost_what"][:10]:
            print("    lost: " + w)
    with open(log, "rb") as f:
        text = f.read()
    rebuilds = text.count(b"were made anew")
    n = len(results)
    quit_n = sum(r["quit"] for r in results)
    lost = sum(r["lost"] for r in results)
    dup = sum(r["dup"] for r in results)
    twice = sum(r["twice"] for r in results)
    print("%d kills over %d runs of %d cells (%.0f s, seed %d)" % (
        sum(kills_by.values()), n, a.cells, time.monotonic() - t0, seed))
    print("kills by target: " + ", ".join(
        "%s %d" % (t, kills_by.get(t, 0)) for t in TARGETS))
    print("namespace rebuilds reported:       %d" % rebuilds)
    print("runs ended by quit():              %d/%d" % (quit_n, n))
    print("records lost:                      %d" % lost)
    print("records duplicated:                %d" % dup)
    print("cells whose side effects ran twice: %d" % twice)
    ok = quit_n == n and lost == 0 and dup == 0 and twice == 0
    if ok and os.path.exists(log):
        os.unlink(log)
    return ok


if __name__ == "__main__":
    main()
