#!/usr/bin/python3
"""Supervisor overhead per model call (make bench).

A local test model server streams the same long response (>= 10 MB of SSE,
many small output_text deltas) twice: once to `curl -N` writing to
/dev/null, once through agentz's call_me (HTTP + SSE parse + response
assembly + redaction + the reply to the worker). Side by side: wall time
and CPU time. The supervisor's CPU is read from /proc/<agentz>/stat while
the run ends, from /proc/<pid>/schedstat (the worker's CPU is not counted:
it is another process).
Target: agentz within 1.5x of curl's CPU time.

usage: bench/model_overhead.py [BUILD_DIR] [--mb N] [--runs N]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integ"))
from model_server import ModelServer  # noqa: E402



def proc_cpu(pid):
    """CPU seconds of pid's main thread in ns resolution (/proc/<pid>/stat
    only has 10 ms ticks); the supervisor does its work on that thread."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def run_curl(url, body):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(["curl", "-sS", "-N", "-o", "/dev/null", "-H",
                    "Content-Type: application/json", "--data-binary", body, url],
                   check=True, timeout=300)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_agentz(build, base_url, work):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    t0 = time.perf_counter()
    p = subprocess.Popen([os.path.join(build, "agentz"), "--base-url", base_url,
                          "bench"], cwd=work, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last = 0.0
    done = threading.Event()

    def sample():
        nonlocal last
        while not done.is_set():
            try:
                last = proc_cpu(p.pid)
            except (OSError, IndexError):
                return
            time.sleep(0.002)
    t = threading.Thread(target=sample)
    t.start()
    try:
        rc = p.wait(timeout=300)
    finally:
        done.set()
        t.join()
    wall = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"agentz exited {rc}: {p.stderr.read().decode()[-500:]}")
    return wall, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    big = {"kind": "big", "mb": a.mb, "delta_size": 16}
    tiny = {"text": "t"}
    # agentz: cell 0 gets cell 1, whose call_me receives the big stream
    # (without printing it: only the model call is measured), then quits.
    cell1 = ("r = call_me(input='big-run')\nprint(len(r.output_text))\n"
             "quit()\n")
    # curl's turns first: the unmatched "ok" turns would take its requests
    turns = [dict(big, match="curl-run") for _ in range(a.runs)]
    turns += [dict(tiny, match="curl-tiny") for _ in range(a.runs)]
    # per run: the big stream, then a baseline with a one-delta stream
    for _ in range(a.runs):
        for body in (big, tiny):
            turns += [{"match": "Submit the first Python cell",
                       "next_cell": {"code": cell1, "summary": "call"}},
                      {"text": "ok"}, dict(body, match="big-run")]
    with ModelServer(turns) as srv, tempfile.TemporaryDirectory() as work:
        rows_a, rows_c, base_a, base_c = [], [], [], []
        url = srv.base_url + "/responses"
        for _ in range(a.runs):
            rows_c.append(run_curl(url, '{"stream": true, "input": "curl-run"}'))
        for _ in range(a.runs):
            base_c.append(run_curl(url, '{"stream": true, "input": "curl-tiny"}'))
        for _ in range(a.runs):
            rows_a.append(run_agentz(a.build, srv.base_url, work))
            base_a.append(run_agentz(a.build, srv.base_url, work))
    stream_mb = a.mb
    print(f"Model call overhead: one streamed response of ~{stream_mb} MB of "
          f"output_text deltas (16-byte deltas) plus its done events")
    print(f"{'':34}{'wall (median)':>16}{'CPU (median)':>16}")
    cw = statistics.median(r[0] for r in rows_c)
    cc = statistics.median(r[1] for r in rows_c)
    aw = statistics.median(r[0] for r in rows_a)
    ac = statistics.median(r[1] for r in rows_a)
    print(f"  {'curl -N > /dev/null':<32}{cw:>14.3f} s{cc:>14.3f} s")
    print(f"  {'agentz call_me (supervisor)':<32}{aw:>14.3f} s{ac:>14.3f} s")
    bc = statistics.median(r[1] for r in base_c)
    ba = statistics.median(r[1] for r in base_a)
    print(f"  {'same, one-delta stream':<32}{'':>16}{bc:>12.3f} s curl, "
          f"{ba:.3f} s agentz (start-up, two cells)")
    ratio = ac / cc if cc > 0 else float("inf")
    print(f"  info  whole-process CPU, agentz / curl = {ratio:.2f}x")
    pc, pa = max(cc - bc, 1e-3), max(ac - ba, 0.0)
    ratio = pa / pc
    print(f"  {'PASS' if ratio <= 1.5 else 'MISS'}  per model call (minus the "
          f"one-delta run): agentz {pa:.3f} s / curl {pc:.3f} s CPU = "
          f"{ratio:.2f}x   target <= 1.5x")


main()
