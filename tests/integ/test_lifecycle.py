"""Worker lifecycle seen from an agent run: death between cells, and the
cells' threads keep running between cells."""
import os
import shutil
import subprocess
import threading

from model_server import ModelServer

from agentz_util import AGENTZ, binaries_for_any_user


def test_worker_death_between_cells_is_detected_and_respawned(tmp_path):
    # Cell 1 fails and leaves a thread that kills the worker once the test
    # opens a FIFO, which it does when the repair request has reached the
    # model server; the server holds its answer until the supervisor has
    # reported the death. So the worker dies with no cell running, ordered
    # by events, and the repair cell must run in a fresh worker.
    fifo = tmp_path / "die"
    os.mkfifo(fifo)
    cell1 = ("import os, threading\nx = 5\n"
             "def die():\n"
             "    open('die').read()\n"
             "    os._exit(7)\n"
             "threading.Thread(target=die, daemon=True).start()\n"
             "raise ValueError('boom')\n")
    repair = ("import os\nprint('repair sees x:', 'x' in dir())\n"
              "print('pid', os.getpid())\nquit()\n")
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "fail, then die"}},
        {"text": "ok"},
        {"match": "Repair the failed cell", "hold": "dead",
         "next_cell": {"code": repair, "summary": "x"}},
        {"text": "repair registered"},
    ]
    died = "worker died between cells (worker exited with code 7)"
    with ModelServer(script) as srv:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        p = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "task"],
                             cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            assert srv.wait_for_requests(3, timeout=60), srv.requests
            # The worker's thread exits once this open meets its own; the
            # join bounds the wait if the worker never got there.
            poke = threading.Thread(target=lambda: fifo.write_text("x"),
                                    daemon=True)
            poke.start()
            poke.join(60)
            assert not poke.is_alive(), "the worker never opened the FIFO"
            err = []
            # until the supervisor saw it (whatever it says the death was:
            # asserted below); should it never say so, the run is ended
            # and the loop meets EOF instead of waiting for good
            stop = threading.Timer(60, p.kill)
            stop.start()
            try:
                for line in p.stderr:
                    err.append(line)
                    if "died between cells" in line:
                        break
            finally:
                stop.cancel()
            srv.release("dead")
            out, rest = p.communicate(timeout=60)
        finally:
            srv.release("dead")
            if p.poll() is None:
                p.kill()
                p.wait()
        err = "".join(err) + rest
    assert p.returncode == 0, err
    assert died in err
    assert "repair sees x: False" in out      # a fresh namespace
    assert "[agentz] cell 2: exited" in err


def test_cell_threads_run_between_cells(tmp_path):
    # A thread started by cell 1 must make progress while no cell runs
    # (here: during the slow repair request after cell 1 fails). A worker
    # that held the GIL while waiting for the next cell would freeze it.
    cell1 = ("import threading, time\nticks = []\n"
             "def tick():\n    while True:\n"
             "        ticks.append(1); time.sleep(0.01)\n"
             "threading.Thread(target=tick, daemon=True).start()\n"
             "time.sleep(0.05)\nn_end = len(ticks)\nraise RuntimeError('x')\n")
    repair = ("print('ticks between cells:', len(ticks) - n_end > 20)\n"
              "quit()\n")
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "start a thread, fail"}},
        {"text": "ok"},
        {"match": "Repair the failed cell", "delay": 0.05, "text": "y" * 120,
         "next_cell": {"code": repair, "summary": "check"}},
        {"text": "ok"},
    ]
    with ModelServer(script) as srv:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "task"],
                           cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "ticks between cells: True" in p.stdout


def _marked(marker):
    """Pids of processes whose command line holds marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_supervisor_sigkill_takes_the_worker_tree_down(tmp_path):
    import signal
    import time
    marker = f"agentz-orphan-{os.getpid()}-{time.monotonic_ns()}"
    sleeper = "import time; time.sleep(300)"
    # the daemon's child says it runs through the pipe whose end it got
    daemon = ("import os, sys, time\nif os.fork() == 0:\n"
              "    os.write(int(sys.argv[2]), b'x')\n    time.sleep(300)")
    cell = ("import os, subprocess\n"
            "r, w = os.pipe()\n"
            # a child, and a setsid'd daemon whose parent exits at once
            f"subprocess.Popen(['/usr/bin/python3', '-c', {sleeper!r}, {marker!r}])\n"
            f"subprocess.Popen(['setsid', '/usr/bin/python3', '-c', {daemon!r}, "
            f"{marker!r}, str(w)], pass_fds=(w,))\n"
            "os.close(w)\n"
            "os.read(r, 1)\n"
            "print('started', flush=True)\n"
            "import time\ntime.sleep(300)\n")
    p = subprocess.Popen([AGENTZ, "exec", "--cell-timeout", "600", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.stdin.write(cell.encode())
        p.stdin.close()
        # both run now: the sleeper exec'd before Popen returned, the
        # daemon's child wrote to the pipe
        assert p.stdout.readline() == b"started\n"
        assert len(_marked(marker)) >= 2, (_marked(marker), p.poll())
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)          # polling the kernel's teardown
        assert _marked(marker) == []
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()


def test_runs_as_a_plain_user_with_what_it_can_use(tmp_path):
    """Without root there is no cgroup, and the bounding set cannot be
    dropped outside a user namespace: the worker must still start,
    sandboxed, in a world of its own (a user namespace maps the user)."""
    import pwd
    import tempfile
    import pytest
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    nobody = pwd.getpwnam("nobody")
    cell = ("import os\nprint(os.geteuid(), open('/proc/self/status')"
            ".read().count('NoNewPrivs:\\t1'))\nopen('mine', 'w')\n")

    def demote():
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    ws = tempfile.mkdtemp(prefix="agentz-user-ws-")
    try:
        os.chown(ws, nobody.pw_uid, nobody.pw_gid)
        with binaries_for_any_user() as agentz:
            p = subprocess.run([agentz, "exec", "--json", "-"], cwd=ws,
                               input=cell, preexec_fn=demote,
                               capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        import json
        rec = json.loads(p.stdout)
        assert rec["output"] == f"{nobody.pw_uid} 1\n"
        assert rec["worker"]["containment"] == \
            "pid-namespace,subreaper,process-group"
        assert rec["worker"]["isolation"].startswith(
            "userns,mountns,pidns,ipcns,utsns,view"), rec["worker"]
        assert rec["worker"]["sandbox"].startswith("seccomp=default")
        assert os.stat(os.path.join(ws, "mine")).st_uid == nobody.pw_uid
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def own_cgroup(controller):
    """This process's folder in the v1 hierarchy of controller, or None."""
    base = "/sys/fs/cgroup/" + controller
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return base + path.rstrip("/")
    return None


def test_stale_cgroups_of_a_dead_supervisor_are_removed(tmp_path):
    import pytest
    if os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/pids") or \
            os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        pytest.skip("needs root and cgroup v1")
    # agentz makes its groups below its own, which is ours.
    base = own_cgroup("pids")
    assert base is not None and os.path.isdir(base), base
    dead = subprocess.Popen(["true"])
    dead.wait()                       # its pid is now free
    stale = os.path.join(base, f"agentz-{dead.pid}")
    os.makedirs(os.path.join(stale, "worker-1"), exist_ok=True)
    try:
        p = subprocess.run([AGENTZ, "exec", "-"], input="x = 1\n", text=True,
                           capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert not os.path.exists(stale)
    finally:
        for d in (os.path.join(stale, "worker-1"), stale):
            if os.path.exists(d):
                os.rmdir(d)
