"""Worker lifecycle seen from an agent run: death between cells, and the
cells' threads keep running between cells."""
import os
import subprocess

from model_server import ModelServer

from agentz_util import AGENTZ


def test_worker_death_between_cells_is_detected_and_respawned(tmp_path):
    # Cell 1 fails and leaves a timer that kills the worker 0.2 s later,
    # while the supervisor waits for a slow repair request: the worker dies
    # with no cell running. The repair cell must run in a fresh worker.
    cell1 = ("import os, threading\nx = 5\n"
             "threading.Timer(0.2, os._exit, [7]).start()\n"
             "raise ValueError('boom')\n")
    repair = ("import os\nprint('repair sees x:', 'x' in dir())\n"
              "print('pid', os.getpid())\nquit()\n")
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "fail, then die"}},
        {"text": "ok"},
        {"match": "Repair the failed cell", "delay": 0.1,
         "text": "slowly thinking about the repair " * 4,
         "next_cell": {"code": repair, "summary": "x"}},
        {"text": "repair registered"},
    ]
    with ModelServer(script) as srv:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "task"],
                           cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "worker died between cells (worker exited with code 7)" in p.stderr
    assert "repair sees x: False" in p.stdout      # a fresh namespace
    assert "[agentz] cell 2: exited" in p.stderr


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
