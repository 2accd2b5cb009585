#!/usr/bin/python3
"""Many runs on one host, to size a node (issue 24, item 4). (Not named
concurrent.py: bench/ is on the path of its scripts, and that name hides
the standard library's concurrent package from the Jupyter rows.)

    /usr/bin/python3 bench/many_runs.py [BUILD_DIR] [--idle 1,8,64]
                                          [--busy 8] [--cells 2000]

Figures, never a test. Two parts:

  idle N   N agent runs side by side against one local test model server,
           each with its first cell waiting in call_me for a model answer
           the server holds (an agent run's usual state: the model
           thinking). Once all N requests are in (counted at the server)
           and every run has its warm standby (two workers in its tree),
           memory is read: each run's process tree (supervisor, the
           jail's init, spawners, worker, standby) as PSS and RSS from
           /proc/PID/smaps_rollup,
           per run, and MemAvailable's drop from before the runs over N
           (what the kernel gave them: page tables, tmpfs, sockets too).
  busy N   N `agentz exec -` runs side by side, each of CELLS cells `x = 1`:
           cells per second over all runs (total cells / wall time from
           the first start to the last exit) and per run, and the CPU the
           runs' process trees used per cell.

Each run has its workspace and RUNTIME_DIRECTORY under a folder of its own
in /var/tmp, removed after. Exit 0 when the figures were produced, 1 if a
run failed, 2 on bad usage.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integ"))
from model_server import ModelServer  # noqa: E402

WAIT_S = 300            # a bound against a hang, not a measurement


def children():
    """{ppid: [pid, ...]} over the whole /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid, kids):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def rollup(pid):
    """(Pss, Rss) in kB of one process, or (0, 0) if it is gone."""
    pss = rss = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def cpu_s(pids):
    """User + system seconds of pids (their reaped children included)."""
    tick = os.sysconf("SC_CLK_TCK")
    t = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                f_ = f.read().rsplit(")", 1)[1].split()
            t += sum(int(x) for x in f_[11:15])
        except (OSError, ValueError, IndexError):
            pass
    return t / tick


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def workers_in(pids):
    n = 0
    for p in pids:
        try:
            with open("/proc/%d/comm" % p) as f:
                n += f.read().strip() == "agentz-worker"
        except OSError:
            pass
    return n


def mem_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def env_for(run_dir):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["RUNTIME_DIRECTORY"] = os.path.join(run_dir, "run")
    os.makedirs(env["RUNTIME_DIRECTORY"], mode=0o700)
    return env


def idle(build, n, base):
    def held(body):
        text = json.dumps(body)
        return "IDLE-WAIT" in text and "function_call_output" not in text

    def turn(record):
        """Each run: its first request gets a cell that calls the model
        again, the continuation of that host-only response a text, and
        the cell's call_me is held."""
        if held(record["body"]):
            return {"hold": "idle", "text": "ok"}
        if "function_call_output" in json.dumps(record["body"]):
            return {"text": "ok"}
        return {"next_cell": {"code": "x = 1\ncall_me(input='IDLE-WAIT')\n",
                              "summary": "wait"}}

    turns = [turn] * (4 * n)
    avail0 = mem_available_kb()
    procs = []
    with ModelServer(turns) as srv:
        try:
            for i in range(n):
                d = os.path.join(base, "idle-%d" % i)
                os.makedirs(d)
                procs.append(subprocess.Popen(
                    [os.path.join(build, "agentz"), "--base-url",
                     srv.base_url, "--max-retries", "0", "wait"],
                    cwd=d, env=env_for(d), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    start_new_session=True))
            end = time.monotonic() + WAIT_S
            while sum(held(b) for b in srv.bodies) < n:
                gone = [p for p in procs if p.poll() is not None]
                if gone:
                    raise RuntimeError("an idle run exited %d: %s" % (
                        gone[0].returncode,
                        gone[0].stderr.read().decode()[-600:]))
                if time.monotonic() > end:
                    raise RuntimeError("idle runs did not all reach the "
                                       "held model call")
                time.sleep(0.05)
            # the warm standby starts once a cell has run 200 ms: the
            # figures are of runs that have it (two workers a tree)
            end = time.monotonic() + 30
            while True:
                kids = children()
                if all(workers_in(tree(p.pid, kids)) >= 2 for p in procs):
                    break
                if time.monotonic() > end:
                    raise RuntimeError("idle runs have no standby worker")
                time.sleep(0.05)
            per = []
            for p in procs:
                pids = tree(p.pid, kids)
                pss = sum(rollup(q)[0] for q in pids)
                rss = sum(rollup(q)[1] for q in pids)
                per.append((pss, rss, len(pids)))
            avail1 = mem_available_kb()
        finally:
            for p in procs:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
            srv.release("idle")
            for p in procs:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
    pss = statistics.median(x[0] for x in per) / 1024
    rss = statistics.median(x[1] for x in per) / 1024
    nproc = statistics.median(x[2] for x in per)
    drop = (avail0 - avail1) / 1024 / n
    print("idle %3d  PSS %6.1f MiB a run (median), RSS %6.1f MiB, "
          "%d processes; MemAvailable %+.1f MiB a run (page cache moves "
          "it too)" % (n, pss, rss, nproc, -drop))


def busy(build, n, cells, base):
    code = "\n# %%\n".join(["x = 1"] * cells) + "\n"
    procs = []
    t0 = time.monotonic()
    for i in range(n):
        d = os.path.join(base, "busy-%d" % i)
        os.makedirs(d)
        procs.append(subprocess.Popen(
            [os.path.join(build, "agentz"), "exec", "-"], cwd=d,
            env=env_for(d), stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True))
    for p in procs:
        p.stdin.write(code.encode())
        p.stdin.close()
    walls = []
    for p in procs:
        rc = p.wait(timeout=WAIT_S)
        walls.append(time.monotonic() - t0)
        if rc != 0:
            raise RuntimeError("a busy run exited %d: %s" % (
                rc, p.stderr.read().decode()[-400:]))
    wall = max(walls)
    print("busy %3d  %7.0f cells/s over all runs, %6.0f a run; wall %.2f "
          "s for %d cells each" % (n, n * cells / wall, cells / wall, wall,
                                   cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--idle", default="1,8,64")
    ap.add_argument("--busy", type=int, default=8)
    ap.add_argument("--cells", type=int, default=2000)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    try:
        idles = [int(x) for x in a.idle.split(",") if x]
    except ValueError:
        ap.error("--idle: numbers separated by commas")
    if not os.access(os.path.join(a.build, "agentz"), os.X_OK):
        print("concurrent: %s/agentz is missing: make first" % a.build,
              file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix="agentz-concurrent-", dir="/var/tmp")
    try:
        for n in idles:
            d = os.path.join(base, "idle%d" % n)
            os.makedirs(d)
            idle(a.build, n, d)
        if a.busy > 0:
            d = os.path.join(base, "busy")
            os.makedirs(d)
            # the runs' CPU: what our reaped children used meanwhile (the
            # idle runs are reaped before)
            cpu0 = children_cpu()
            busy(a.build, a.busy, a.cells, d)
            cpu = children_cpu() - cpu0
            print("busy %3d  CPU %.1f us a cell (supervisors and workers "
                  "together)" % (a.busy, cpu / (a.busy * a.cells) * 1e6))
    except RuntimeError as e:
        print("concurrent: %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
