"""Issue 18, item 1: every stop path, in every state a run can be in when
the stop comes, ends cleanly (under ASan: no use-after-free, no leak).

Stop paths: `agentz ctl RUN stop`, `stop --now`, SIGTERM, SIGINT, the run
deadline (re-read through `ctl budgets` so it falls when the state is
reached, not at a time), and "the worker cannot be started". States: a
cell running, a call_me in flight (its answer held by the model server), a
repair request in flight (held), a model outage being waited out, the
worker starting.

The rule checked every time: the process ends with the stop's own exit
code and the journal's stop record has that code and the stop's reason
(the first decided stop, never "3 consecutive failures"); nothing started
after the stop (no second repair request, no new cell); every cell with an
input record has its output record, and the one the stop cut says so.

Each state is reached on an event (a line the cell printed, the server
seeing the request, a journal record); no sleep stands in for one.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, WORKER  # noqa: E402
from model_server import ModelServer  # noqa: E402
from ctl_util import SLOW, Run, code, first  # noqa: E402

EXIT = {"stop": 6, "stop_now": 6, "sigterm": 143, "sigint": 130,
        "deadline": 4, "fatal": 3}
REASON = {"stop": "(agentz ctl stop)", "stop_now": "stop --now",
          "sigterm": "SIGTERM", "sigint": "SIGINT",
          "deadline": "run deadline", "fatal": "cannot be started"}
REPAIR = "Repair the failed cell"

# Every cell prints C1 once it runs, then waits for its gate file go1
# (the stop-after-cell path opens it) or for its model call. The words the
# server and the test look for are built at run time: the cell's code
# itself travels in requests too.
CELL = code("""
    import os, time
    print('C1', flush=True)
    while not os.path.exists('go1'):
        time.sleep(0.01)
    print('C1 END', flush=True)
    """)
CALL = code("""
    print('C1', flush=True)
    r = call_me(input='HOLD-' + 'CALL')
    print('C1 END', flush=True)
    """)
FAIL = code("""
    print('C1', flush=True)
    raise ValueError('boom')
    """)
OUTAGE = code("""
    print('C1', flush=True)
    r = call_me(input='OUTAGE-' + 'CALL')
    """)

STATES = {
    "cell": (first(CELL), ()),
    "call_me": (first(CALL) + [{"match": "HOLD-CALL", "hold": "call",
                                "text": "late"}], ()),
    "repair": (first(FAIL) + [{"match": REPAIR, "hold": "repair",
                               "text": "no cell from me"}], ()),
    "outage": (first(OUTAGE) + [{"match": "OUTAGE-CALL", "kind":
                                 "http_error", "status": 503,
                                 "repeat": "forever"}],
               ("--max-retries", "0", "--outage-patience", "600")),
}


def seen(srv, word):
    return sum(1 for b in srv.bodies if word in json.dumps(b))


def wait_request(run, srv, word):
    """Waits for the server to receive a request holding word."""
    end = time.monotonic() + 30 * SLOW
    while seen(srv, word) == 0:
        assert time.monotonic() < end and run.p.poll() is None, \
            "no request with %s\n%s" % (word, run.show())
        time.sleep(0.005)


def reach(state, run, srv):
    run.wait_out("C1")
    if state == "call_me":
        wait_request(run, srv, "HOLD-CALL")
    elif state == "repair":
        wait_request(run, srv, REPAIR)
    elif state == "outage":
        run.wait_record(lambda r: r["type"] == "outage")


def stop(path, state, run, srv):
    if path in ("stop", "stop_now"):
        rc, r, err = run.ctl(*(["stop"] if path == "stop" else
                               ["stop", "--now"]))
        assert rc == 0 and r["ok"], (r, err)
        if path == "stop":      # the running cell finishes first
            run.gate(1)
            srv.release("call")
    elif path == "sigterm":
        run.p.send_signal(signal.SIGTERM)
    elif path == "sigint":
        run.p.send_signal(signal.SIGINT)
    elif path == "deadline":
        rc, r, err = run.ctl("budgets", "--deadline", "0.001")
        assert rc == 0, (r, err)


def check_journal(run, path):
    recs = run.records()
    last = recs[-1]
    assert last["type"] == "stop", recs[-3:]
    assert last["exit"] == EXIT[path], last
    assert REASON[path] in last["reason"], last
    assert "consecutive" not in last["reason"], last
    ins = [r["cell"] for r in recs if r["type"] == "input"]
    outs = [r["cell"] for r in recs if r["type"] == "output"]
    assert sorted(ins) == sorted(outs), (ins, outs)
    assert [r for r in recs if r["type"] == "stop"] == [last]
    return recs


def check_clean(run):
    err = run.err.decode(errors="replace")
    assert "AddressSanitizer" not in err and "runtime error" not in err, \
        err[-4000:]


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


# stop (after the cell) in an outage waits for the cell, which waits the
# outage out: stop --now is the way out there, so that pair is not one
PAIRS = [(p, s) for p in ("stop", "stop_now", "sigterm", "sigint",
                          "deadline")
         for s in ("cell", "call_me", "repair", "outage")
         if (p, s) != ("stop", "outage")]


@pytest.mark.parametrize("path,state", PAIRS)
def test_a_stop_in_every_state(tmp_path, rt, path, state):
    script, args = STATES[state]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "s", rt, args=args)
        try:
            reach(state, run, srv)
            stop(path, state, run, srv)
            assert run.wait() == EXIT[path], run.show()
        finally:
            run.kill()
        repairs = seen(srv, REPAIR)
    check_clean(run)
    recs = check_journal(run, path)
    # nothing started after the stop: no second repair, no new cell
    assert repairs == (1 if state == "repair" else 0), run.show()
    assert max(r["cell"] for r in recs if r["type"] == "input") == 1
    out1 = [r for r in recs if r["type"] == "output" and r["cell"] == 1][0]
    if state == "repair":       # cell 1 had ended before the stop
        assert out1["exception_type"] == "ValueError", out1
    elif path == "stop":        # the cell finished, then the run stopped
        assert out1["kind"] != "stopped", out1
    elif path == "stop_now":    # the deadline ladder, by the operator
        assert out1["kind"] == "timeout", out1
        assert "stop --now" in out1["detail"], out1
    else:                       # cut by the stop: its record says so
        assert out1["status"] == "error" and out1["kind"] == "stopped", out1
        assert REASON[path] in out1["detail"], out1
        assert "C1" in out1["output"], out1
    if state in ("call_me", "outage") and path != "stop":
        assert out1["model_calls_cancelled"] == 1, out1


# --- the worker cannot be started ------------------------------------------------

def worker_in(ws):
    """A copy of the worker in the workspace ws (made): the one folder of
    the test's that the worker's view shows wherever the checkout is (a
    clone under /tmp is hidden by the view's private /tmp), for wrappers
    that exec it by path."""
    ws.mkdir(exist_ok=True)
    copy = ws / "agentz-worker"
    shutil.copy2(WORKER, copy)
    return copy


def failing_worker(tmp_path):
    """A worker that never gets ready: it exits at once."""
    fake = tmp_path / "agentz-worker-fails"
    fake.write_text("#!/bin/sh\nexit 9\n")
    fake.chmod(0o755)
    return fake


def test_the_worker_cannot_be_started_while_cell_0_waits(tmp_path, rt):
    """Cell 0 is recorded, waiting for its worker, which never starts: the
    stop has its own code, and cell 0 gets an output saying it never ran."""
    with ModelServer([]) as srv:
        run = Run(srv, tmp_path, "w", rt,
                  args=("--worker", str(failing_worker(tmp_path))))
        try:
            assert run.wait() == EXIT["fatal"], run.show()
        finally:
            run.kill()
        asked = len(srv.requests)
    check_clean(run)
    recs = check_journal(run, "fatal")
    out0 = [r for r in recs if r["type"] == "output"][0]
    assert out0["cell"] == 0 and out0["kind"] == "stopped", out0
    assert "before this cell started" in out0["detail"], out0
    assert asked == 0


@pytest.mark.parametrize("state", ["cell", "call_me", "repair", "outage"])
def test_the_worker_cannot_be_started_again(tmp_path, rt, state):
    """In each state the worker is killed, and cannot be started again (its
    starts fail once a flag file exists in the workspace, which the
    worker's view shows; --snapshot never: no standby takes over): the run
    stops with exit 3, its record complete, and no repair is asked for
    after (the one in flight, if any, is cut)."""
    ws = tmp_path / "ws-wr"
    wrapper = tmp_path / "agentz-worker-wrapper"
    wrapper.write_text("#!/bin/sh\nif [ -e %s/fail-now ]; then exit 9; fi\n"
                       "exec %s \"$@\"\n" % (ws, worker_in(ws)))
    wrapper.chmod(0o755)
    script, args = STATES[state]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "wr", rt, args=(
            "--worker", str(wrapper), "--snapshot", "never", *args))
        try:
            reach(state, run, srv)
            (ws / "fail-now").write_text("")
            pid = run.ctl("status")[1]["worker"]["pid"]
            os.kill(pid, signal.SIGKILL)
            assert run.wait() == EXIT["fatal"], run.show()
        finally:
            run.kill()
        repairs = seen(srv, REPAIR)
    check_clean(run)
    recs = check_journal(run, "fatal")
    assert repairs == (1 if state == "repair" else 0), run.show()
    out1 = [r for r in recs if r["type"] == "output" and r["cell"] == 1][0]
    if state != "repair":
        assert out1["kind"] == "crashed" and \
            out1["recovered_by"] == "none", out1


# --- an operator's stop is final -------------------------------------------------

def resume(run, srv, rt):
    """agentz --resume of run's journal, in its workspace: the process."""
    e = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    e["RUNTIME_DIRECTORY"] = str(rt)
    return subprocess.run(
        [AGENTZ, "--base-url", srv.base_url, "--journal", str(run.journal),
         "--resume", "the task"], cwd=run.ws, env=e, capture_output=True,
        text=True, stdin=subprocess.DEVNULL, timeout=60 * SLOW)


def test_a_journal_ending_with_an_operator_stop_is_finished(tmp_path, rt):
    with ModelServer(first(CELL)) as srv:
        run = Run(srv, tmp_path, "fin", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("stop")
            assert rc == 0, err
            run.gate(1)
            assert run.wait() == 6, run.show()
        finally:
            run.kill()
        before = open(run.journal).read()
        asked = len(srv.requests)
        p = resume(run, srv, rt)
        assert p.returncode == 6, p.stderr
        assert "has already ended" in p.stderr, p.stderr
        assert len(srv.requests) == asked
    assert open(run.journal).read() == before
    check_clean(run)


def test_an_operator_stop_before_a_crash_holds_after_the_restart(tmp_path, rt):
    """The operator asked to stop after the running cell; the supervisor
    was killed before the cell ended (no stop record). The resumed run
    does not go on: it ends with the operator's stop, the cut cell gets
    its record, no model request is made."""
    with ModelServer(first(CELL) + first(CELL)) as srv:
        run = Run(srv, tmp_path, "crash", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("stop")
            assert rc == 0, err
            run.wait_record(lambda r: r["type"] == "operator")
            run.p.kill()
            run.wait()
        finally:
            run.kill()
        asked = len(srv.requests)
        p = resume(run, srv, rt)
        assert p.returncode == 6, p.stderr
        assert len(srv.requests) == asked
    assert "AddressSanitizer" not in p.stderr, p.stderr
    recs = check_journal(run, "stop")
    assert "before the supervisor restarted" in recs[-1]["reason"]
    out1 = [r for r in recs if r["type"] == "output" and r["cell"] == 1]
    assert out1[0]["kind"] == "restart", out1
    assert max(r["cell"] for r in recs if r["type"] == "input") == 1


# --- the worker starting -----------------------------------------------------------

@pytest.mark.parametrize("path", ["stop", "stop_now", "sigterm", "sigint",
                                  "deadline"])
def test_a_stop_while_the_worker_starts(tmp_path, rt, path):
    """The first worker is held before it starts (a wrapper waits for a
    gate file in the workspace, after saying it got there): cell 0 is
    recorded and waits for it when the stop comes. A stop that lets the
    cell finish (stop) or gives it the deadline ladder (stop --now) opens
    the gate; the others cut cell 0, whose record says it never started."""
    ws = tmp_path / "ws-ws"
    wrapper = tmp_path / "agentz-worker-held"
    wrapper.write_text("#!/bin/sh\ntouch %s/started\n"
                       "while [ ! -e %s/go ]; do sleep 0.01; done\n"
                       "exec %s \"$@\"\n" % (ws, ws, worker_in(ws)))
    wrapper.chmod(0o755)
    with ModelServer(first(CELL)) as srv:
        run = Run(srv, tmp_path, "ws", rt, args=("--worker", str(wrapper)))
        try:
            end = time.monotonic() + 30 * SLOW
            while not (ws / "started").exists():
                assert time.monotonic() < end and run.p.poll() is None, \
                    run.show()
                time.sleep(0.005)
            # the spawn may come before cell 0 is journaled (it was, by
            # a hair, on a loaded machine): cell 0 waiting is the event
            run.wait_record(lambda r: r["type"] == "input" and
                            r["cell"] == 0)
            assert [r["cell"] for r in run.records("input")] == [0]
            stop(path, "worker", run, srv)
            if path in ("stop", "stop_now"):
                (ws / "go").write_text("")
            assert run.wait() == EXIT[path], run.show()
        finally:
            (ws / "go").write_text("")
            run.kill()
    check_clean(run)
    recs = check_journal(run, path)
    out0 = [r for r in recs if r["type"] == "output" and r["cell"] == 0][0]
    if path == "stop":      # cell 0 ran, then the run stopped: no cell 1
        assert out0["status"] == "ok", out0
        assert [r["cell"] for r in recs if r["type"] == "input"] == [0]
    elif path == "stop_now":
        assert out0["kind"] == "timeout", out0
    else:
        assert out0["kind"] == "stopped", out0
        assert "before this cell started" in out0["detail"], out0
        assert REASON[path] in out0["detail"], out0


# --- a cut cell on --resume ------------------------------------------------------------

def test_a_cell_cut_by_sigterm_is_not_a_failure_on_resume(tmp_path, rt):
    """Cell 1 registers its successor, then waits; SIGTERM cuts it (kind
    stopped). --resume (what Restart= does after a SIGTERM from outside
    the unit) runs the successor as the model's cell, as after a crash:
    no repair, the cut cell is no failure of the model's code."""
    cell1 = code("""
        r = call_me(input='REGISTER-' + 'NEXT')
        print('C1', flush=True)
        import time
        time.sleep(600)
        """)
    script = first(cell1) + [
        {"match": "REGISTER-NEXT", "next_cell": {
            "code": "print('C2', flush=True)\nquit()\n",
            "summary": "The successor."}},
        {"text": "ok"}]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "cut", rt)
        try:
            run.wait_out("C1")
            run.p.send_signal(signal.SIGTERM)
            assert run.wait() == EXIT["sigterm"], run.show()
        finally:
            run.kill()
        p = resume(run, srv, rt)
        repairs = seen(srv, REPAIR)
    assert p.returncode == 0, p.stderr
    assert "C2" in p.stdout, p.stdout
    assert "AddressSanitizer" not in p.stderr, p.stderr
    check_clean(run)
    recs = run.records()
    out1 = [r for r in recs if r["type"] == "output" and r["cell"] == 1]
    assert len(out1) == 1 and out1[0]["kind"] == "stopped", out1
    in2 = [r for r in recs if r["type"] == "input" and r["cell"] == 2]
    assert len(in2) == 1 and in2[0]["summary"] == "The successor.", in2
    assert repairs == 0
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 0
