"""Shared machinery of the hostile-cell suite (issue 4; SPEC section 7;
sandbox-notes 7.3): agentz_run (one `agentz exec --json -` run under a hard
timeout), brief and the assertions, imported by test_hostile*.py,
test_deaths.py, test_rollback.py and test_forged_snapshot.py.

Every case drives the real `agentz exec --json -` and asserts three things:
the outcome the spec promises, that the supervisor survived (it exits
normally with its documented code, never by a signal), and that a following
cell runs in a working worker.

Safety: each case must stay harmless even when the protection it tests is
broken.
- Every agentz run is a child in its own session, with a hard timeout after
  which the test SIGKILLs that whole process group and fails.
- The fork bomb limits itself (a process budget handed down the tree), so it
  makes at most FORK_BUDGET processes even with no pids cgroup; everything
  it makes carries a unique marker and is SIGKILLed by the test afterwards
  if agentz failed to do so. The setsid daemons are cleaned up the same way.
- `kill(-1, 9)` runs only inside a throwaway PID namespace made by the test
  (`unshare --pid --fork --kill-child --mount-proc`), where agentz is not
  that namespace's init, so a broken filter can only kill agentz there.
- Other kill probes aim at agentz itself (the test knows its pid), or at
  the worker's own group.
- Memory cases use --memory-limit 256M (the machine has 24 GB, no swap).
"""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from agentz_util import AGENTZ, SAN, cells

T = ["--cell-timeout", "1", "--grace", "0.5"]
OK_CELL = "print('ok')"
FORK_BUDGET = 1300          # > the 1024 pids.max agentz sets, still modest
SUPERVISOR_RSS_BOUND_KB = (128 if SAN else 64) * 1024


# --- helpers --------------------------------------------------------------

class Run:
    def __init__(self, recs, rc, stdout, stderr, elapsed, peak_rss_kb, pid):
        self.recs, self.rc, self.stdout, self.stderr = recs, rc, stdout, stderr
        self.elapsed, self.peak_rss_kb, self.pid = elapsed, peak_rss_kb, pid

    def __repr__(self):
        return "Run(rc=%r, recs=%s, stderr=%r)" % (
            self.rc, [brief(r) for r in self.recs], self.stderr[-3000:])


def brief(r):
    """A record without its bulky fields, for failure messages."""
    keep = ("cell", "status", "kind", "exception_type", "detail", "signal",
            "exit_code", "namespace", "duration_us", "cpu_us", "output_bytes",
            "output_dropped", "timeout")
    d = {k: r.get(k) for k in keep}
    d["output"] = (r.get("output") or "")[-300:]
    d["traceback"] = (r.get("traceback") or "")[-300:]
    d["worker"] = {k: r["worker"].get(k) for k in ("pid", "generation")} \
        if r.get("worker") else None
    return d


def _status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def agentz_run(codes, args=(), env=None, timeout=60, wrap=(), sup_env=False,
               sample_rss=False, expect_rc=None, agentz=AGENTZ, cwd=None):
    """Run cells through `agentz exec --json [args] -` as a session leader.

    wrap: a command prefix (e.g. unshare ...). sup_env: export SUP=<agentz
    pid> to the worker (agentz is exec'd by sh, so $$ is its pid).
    sample_rss: poll agentz's VmHWM/VmRSS while it runs. expect_rc: the
    exit code agentz must end with (checked here: the supervisor survived).
    agentz, cwd: another copy of the binary, the run's working directory.
    """
    cmd = [agentz, "exec", "--json", *args]
    if sup_env:
        cmd += ["--pass-env", "SUP"]
        cmd = ["/bin/sh", "-c", 'SUP=$$; export SUP; exec "$@"', "sh"] + cmd
    cmd = list(wrap) + cmd + ["-"]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=full_env, cwd=cwd,
                         start_new_session=True)
    peak = [0]
    stop = threading.Event()

    def sampler():
        while not stop.is_set() and p.poll() is None:
            peak[0] = max(peak[0], _status_kb(p.pid, "VmHWM"),
                          _status_kb(p.pid, "VmRSS"))
            time.sleep(0.005)

    th = None
    if sample_rss:
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
    try:
        out, err = p.communicate(cells(*codes).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("agentz did not finish within %s s (killed); stderr: %r; "
                    "stdout: %r" % (timeout, err[-3000:], out[-3000:]))
    finally:
        stop.set()
        if th is not None:
            th.join(5)
    elapsed = time.monotonic() - t0
    text = out.decode("utf-8", "replace")
    errtext = err.decode("utf-8", "replace")
    recs = []
    for line in text.splitlines():
        if line.strip():
            try:
                recs.append(json.loads(line))
            except ValueError:
                pytest.fail("agentz printed a non-JSON line: %r" % line[:500])
    run = Run(recs, p.returncode, text, errtext, elapsed, peak[0], p.pid)
    assert p.returncode >= 0, \
        "the supervisor died by signal %d: %r" % (-p.returncode, run)
    assert "AddressSanitizer" not in errtext and \
        "runtime error:" not in errtext, run
    if expect_rc is not None:
        assert p.returncode == expect_rc, run
    assert len(recs) == len(codes), run
    assert [r["cell"] for r in recs] == list(range(len(codes))), run
    return run


def assert_ok(rec, output="ok\n"):
    assert rec["status"] == "ok", brief(rec)
    if output is not None:
        assert rec["output"] == output, brief(rec)


def assert_fresh(before, after):
    """after ran in a new worker (the one of before was killed): a later
    generation (a standby worker may have taken one in between)."""
    assert after["worker"]["generation"] > before["worker"]["generation"], \
        (brief(before), brief(after))
    assert after["worker"]["pid"] != before["worker"]["pid"]


def assert_same_worker(before, after):
    assert after["worker"]["pid"] == before["worker"]["pid"], \
        (brief(before), brief(after))
    assert after["worker"]["generation"] == before["worker"]["generation"]


def assert_killed_on_time(rec, timeout_s=1.0, grace_s=0.5):
    """A timeout that ended in the kill stage, within deadline + grace + 1 s."""
    assert rec["status"] == "error" and rec["kind"] == "timeout", brief(rec)
    assert rec["timeout"]["stage"] == "killed", brief(rec)
    assert rec["namespace"] == "lost", brief(rec)
    assert timeout_s * 1e6 <= rec["duration_us"] <= \
        (timeout_s + grace_s + 1.0) * 1e6, brief(rec)
    assert rec["stack"] and "<cell-" in rec["stack"], brief(rec)


def has_rlimit_data(rec):
    """RLIMIT_DATA is on in this worker (the sanitizer pass turns it off and
    says "rlimit_data=off(asan)")."""
    return re.search(r"\brlimit_data\b(?!=off)",
                     rec["worker"].get("sandbox") or "") is not None
