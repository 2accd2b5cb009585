"""Model calls tied to their cell (issue 10, item 3).

A cell that is killed (its timeout ran out and it ignored the interrupt) or
whose worker dies takes its model calls with it: the supervisor closes the
HTTP connection at once (the server sees the client go away long before
--request-timeout) and the cell's record says so (model_calls_cancelled and
its detail). A cell that ends normally lets a call still in flight from one
of its threads finish, but a host-only answer is no longer continued (SPEC
§3: Cell N has finished). Host-tool outputs kept for a caller's
continuation are dropped once their cell is over.

Every wait is gated on an event (a request reaching the server, a FIFO the
cell opens, a disconnect the server records), never on a sleep; the hold
gates of tests/integ/model_server.py keep answers back until then.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, SAN  # noqa: E402
from model_server import ModelServer  # noqa: E402

SLOW = 4 if SAN else 1
REQUEST_TIMEOUT = 300           # a cut call must end long before this
RECOVERY_PREFIX = ("Repair the failed cell and continue the original task. "
                   "Existing side effects are not rolled back.\n")
TOOLS = [{"type": "function", "name": "my_tool",
          "parameters": {"type": "object", "properties": {}}}]


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def start(srv, cwd, args=(), task="task"):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
           "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            env[k] = os.environ[k]
    cmd = [AGENTZ, "--base-url", srv.base_url, "--request-timeout",
           str(REQUEST_TIMEOUT), *args, task]
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out, err


def show(p, out, err):
    return f"exit {p.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


def index_of(srv, text):
    """Index of the first request whose input is exactly text."""
    for r in srv.requests:
        if r["body"] and r["body"].get("input") == text:
            return r["index"]
    return None


def asks(body, q):
    """body is the request q or a supervisor continuation of it."""
    inp = (body or {}).get("input")
    if isinstance(inp, list) and inp and isinstance(inp[0], dict):
        inp = inp[0].get("content")
    return inp == q


def poke(fifo):
    """Open the FIFO a cell waits on (bounded: fails if it never opens)."""
    t = threading.Thread(target=lambda: fifo.write_text("x"), daemon=True)
    t.start()
    t.join(60 * SLOW)
    assert not t.is_alive(), f"the cell never opened {fifo}"


def dying_cell(request):
    """Cell code calling the model with input request while another
    thread ends the worker (os._exit(7)) once the FIFO 'die' is poked."""
    return code(f"""
        import os, threading
        def die():
            open('die').read()
            os._exit(7)
        threading.Thread(target=die, daemon=True).start()
        call_me(input={request!r})
        """)


def cut_held_call(srv, tmp_path, args, why, fifo=None, while_=None):
    """Runs agentz until the server holds cell 1's HELD-CALL, pokes fifo
    (when given), and waits for that request's connection to close (why:
    the message when it does not). Returns p, out, err, the request's
    index; the repair answer is released either way."""
    p = start(srv, tmp_path, args)
    try:
        # the call is at the server, then the cut: well before the
        # request timeout (REQUEST_TIMEOUT)
        assert srv.wait_for_requests(3, timeout=60 * SLOW), srv.requests
        held = index_of(srv, "HELD-CALL")
        assert held is not None, srv.requests
        if fifo is not None:
            poke(fifo)
        assert srv.wait_for_disconnects(1, timeout=30 * SLOW), why
        assert srv.disconnects[0]["index"] == held
        if while_ is not None:
            assert srv.disconnects[0]["while"] == while_
    finally:
        srv.release("repair")
        out, err = finish(p)
    return p, out, err, held



def repair_record(srv):
    for r in srv.requests:
        inp = (r["body"] or {}).get("input")
        if isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX):
            return json.loads(inp[len(RECOVERY_PREFIX):])
    return None


# The cut call's answer: held back at a gate, or a stream that would take
# 100 s (2000 events, 50 ms apart).
HELD = {"hold": "never", "text": "never sent"}
STREAMING = {"text": "y" * 2000, "delta_size": 1, "delay": 0.05}


def killed_script(cell1, answer=None):
    return [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "call and get cut"}},
        {"match": "Submit the first Python cell", "text": "ok"},
        dict(answer or HELD, match="HELD-CALL"),
        # held until the test saw the disconnect: the run (and with it
        # every connection) goes on until then
        {"match": "Repair the failed cell", "hold": "repair",
         "next_cell": {"code": "quit()\n", "summary": "stop"}},
        {"match": "Repair the failed cell", "text": "ok"},
    ]


def check_cancelled(srv, held_index, want_kind):
    rec = repair_record(srv)
    assert rec is not None, srv.requests
    assert rec["cell"] == 1 and rec["kind"] == want_kind, rec
    assert rec["model_calls_cancelled"] == 1, rec
    assert "1 model call in flight was cancelled" in rec["detail"], rec
    # nothing of the cut call was asked again
    assert [r for r in srv.requests
            if r["body"] and r["body"].get("input") == "HELD-CALL"
            and r["index"] != held_index] == []


@pytest.mark.parametrize("answer", ["held", "streaming"])
def test_timed_out_cell_killed_cancels_its_call(tmp_path, answer):
    # The cell ignores the interrupt, so after --grace it is killed; its
    # call_me is held by the server all along, or streams slowly.
    cell1 = code("""
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        call_me(input='HELD-CALL')
        """)
    script = killed_script(cell1, HELD if answer == "held" else STREAMING)
    # the cell must reach its call_me before its deadline: 4 s under ASan
    # on a loaded machine (1 s was missed in a fresh root)
    with ModelServer(script) as srv:
        p, out, err, held = cut_held_call(
            srv, tmp_path, ["--cell-timeout", str(SLOW), "--grace", "0.5"],
            "the killed cell's request was not closed",
            while_="held" if answer == "held" else "sending")
    assert p.returncode == 0, show(p, out, err)
    check_cancelled(srv, held, "timeout")
    assert "cell 1: 1 model call in flight cancelled" in err


def test_worker_death_cancels_the_cells_call(tmp_path):
    # Another thread of the cell ends the worker (os._exit) while call_me
    # is held by the server.
    fifo = tmp_path / "die"
    os.mkfifo(fifo)
    cell1 = dying_cell('HELD-CALL')
    with ModelServer(killed_script(cell1)) as srv:
        p, out, err, held = cut_held_call(
            srv, tmp_path, ["--cell-timeout", "600"],
            "the dead worker's request was not closed", fifo=fifo)
    assert p.returncode == 0, show(p, out, err)
    check_cancelled(srv, held, "crashed")
    assert "worker exited with code 7" in repair_record(srv)["detail"]


def test_normal_end_lets_the_call_finish_without_continuation(tmp_path):
    # Cell 1 starts two threads whose calls the server holds, waits until
    # both reached the server, and ends normally (it submits cell 2). Cell
    # 2 tells the test it runs (cell 1 is over), the test releases the
    # answers: a plain answer reaches its thread; a host-only answer (a
    # late set_next_cell_code) is not continued: its thread gets
    # ModelError "Cell 1 has finished" and no continuation request is
    # made.
    go, running = tmp_path / "go", tmp_path / "running"
    os.mkfifo(go)
    os.mkfifo(running)
    cell1 = code("""
        import threading
        res = {}
        def work(q):
            try:
                res[q] = ('ok', call_me(input=q).output_text)
            except Exception as e:
                res[q] = ('err', type(e).__name__, str(e))
        ts = [threading.Thread(target=work, args=(q,), daemon=True)
              for q in ('LATE-TEXT', 'LATE-HOST')]
        for t in ts:
            t.start()
        open('go').read()
        call_me(input='NEXT-PLEASE')
        """)
    cell2 = code("""
        open('running', 'w').write('x')
        for t in ts:
            t.join(120)
        print('RES', sorted(res.items()))
        quit()
        """)
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "threads"}},
        {"match": "Submit the first Python cell", "text": "ok"},
        {"match": "LATE-TEXT", "hold": "late", "text": "late answer"},
        {"match": "LATE-HOST", "hold": "late",
         "next_cell": {"code": "print('LATE CELL RAN')\n", "summary": "late"}},
        {"match": "NEXT-PLEASE",
         "next_cell": {"code": cell2, "summary": "wait for the threads"}},
        {"match": "NEXT-PLEASE", "text": "ok"},
    ]
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, ["--cell-timeout", "600"])
        try:
            assert srv.wait_for_requests(4, timeout=60 * SLOW), srv.requests
            poke(go)
            # cell 2 runs: cell 1 is over
            t = threading.Thread(target=running.read_text, daemon=True)
            t.start()
            t.join(60 * SLOW)
            assert not t.is_alive(), "cell 2 never ran"
            srv.release("late")
        finally:
            out, err = finish(p)
    assert p.returncode == 0, show(p, out, err)
    res = dict(eval(out.split("RES ", 1)[1].splitlines()[0]))  # noqa: S307
    assert res["LATE-TEXT"] == ("ok", "late answer"), res
    kind, etype, msg = res["LATE-HOST"]
    assert (kind, etype) == ("err", "ModelError"), res
    assert "Cell 1 has finished" in msg, res
    assert "LATE CELL RAN" not in out
    # the host-only answer was not continued: one request each
    for q in ("LATE-TEXT", "LATE-HOST"):
        asked = [r for r in srv.requests if asks(r["body"], q)]
        assert len(asked) == 1, [r["body"] for r in asked]
    assert srv.disconnects == []


def test_host_outputs_outlive_their_cell_only_as_lines(tmp_path):
    # A response mixing a host call (get_history_cells) with the caller's
    # own tool is handed back; continuing it from the same cell gets the
    # stored host output whole; continuing it from the next cell still
    # answers the host call (the API wants every call answered), but the
    # history went when cell 1 ended: only a note saying so is left.
    cell1 = code("""
        tools = %r
        r = call_me(input='MIXED', tools=tools)
        rid = r.id
        call_me(input=[{'type': 'function_call_output', 'call_id': 'ext1',
                        'output': 'SAME-CELL-OUT'}],
                previous_response_id=rid, tools=tools)
        """ % (TOOLS,))
    cell2 = code("""
        call_me(input=[{'type': 'function_call_output', 'call_id': 'ext1',
                        'output': 'NEXT-CELL-OUT'}],
                previous_response_id=rid, tools=tools)
        quit()
        """)
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "mixed calls"}},
        {"match": "Submit the first Python cell", "text": "ok"},
        {"match": "MIXED", "calls": [
            {"name": "get_history_cells", "arguments": {"start": 0, "end": 1},
             "call_id": "h1"},
            {"name": "my_tool", "arguments": {}, "call_id": "ext1"}]},
        {"match": "SAME-CELL-OUT",
         "next_cell": {"code": cell2, "summary": "continue later"}},
        {"match": "SAME-CELL-OUT", "text": "ok"},
        {"match": "NEXT-CELL-OUT", "text": "ok"},
    ]
    with ModelServer(script) as srv:
        # cell 0 (the one h1 reads) holds the task: a history of kilobytes
        p = start(srv, tmp_path, ["--cell-timeout", "600"],
                  task="BIG-" * 1000)
        out, err = finish(p)
    assert p.returncode == 0, show(p, out, err)

    def outputs(marker):
        # the cell's request (a continuation of it follows)
        (body,) = [r["body"] for r in srv.requests
                   if r["body"].get("previous_response_id")
                   and all(it.get("type") == "function_call_output"
                           for it in r["body"]["input"])
                   and marker in json.dumps(r["body"]["input"])]
        return {it["call_id"]: it["output"] for it in body["input"]
                if it.get("type") == "function_call_output"}

    same, nxt = outputs("SAME-CELL-OUT"), outputs("NEXT-CELL-OUT")
    assert set(same) == set(nxt) == {"ext1", "h1"}
    assert "BIG-" * 100 in same["h1"]
    assert "not kept after cell 1 ended" in nxt["h1"], nxt["h1"]


def test_worker_death_ends_an_outage_wait(tmp_path):
    # The cell's call meets an outage (503 every time, no quick retries):
    # the call waits it out on a timer. The worker dies during the wait:
    # the wait ends with it, and the record says the call was cancelled.
    fifo = tmp_path / "die"
    os.mkfifo(fifo)
    cell1 = dying_cell('OUTAGE-CALL')
    script = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": cell1, "summary": "call into an outage"}},
        {"match": "Submit the first Python cell", "text": "ok"},
        # the repair request quotes the cell: matched first
        {"match": "Repair the failed cell",
         "next_cell": {"code": "quit()\n", "summary": "stop"}},
        {"match": "Repair the failed cell", "text": "ok"},
        {"match": "OUTAGE-CALL", "kind": "http_error", "status": 503,
         "repeat": "forever"},
    ]
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, ["--cell-timeout", "600", "--max-retries",
                                  "0"])
        try:
            # the first try and one try after a wait: the call waits
            assert srv.wait_for_requests(4, timeout=60 * SLOW), srv.requests
            poke(fifo)
        finally:
            out, err = finish(p)
    assert p.returncode == 0, show(p, out, err)
    rec = repair_record(srv)
    assert rec is not None and rec["kind"] == "crashed", srv.requests
    assert rec["model_calls_cancelled"] == 1, rec
    assert "stopped waiting for the model: cell 1 was killed" in err, err


def test_interrupted_timeout_cancels_a_threads_call(tmp_path):
    # The cell times out and the interrupt is enough (the worker lives on):
    # the call of its thread, held by the server, is cancelled all the
    # same, and the thread is told.
    go = tmp_path / "go"
    os.mkfifo(go)
    cell1 = code("""
        import signal, threading, time
        res = []
        def work():
            try:
                call_me(input='HELD-CALL')
            except Exception as e:
                res.append((type(e).__name__, str(e)))
        t = threading.Thread(target=work, daemon=True)
        t.start()
        # the interrupt waits until the call is at the server
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        open('go').read()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        time.sleep(600)
        """)
    repair = "t.join(60)\nprint('RES', res)\nquit()\n"
    script = killed_script(cell1)
    script[3]["next_cell"]["code"] = repair
    with ModelServer(script) as srv:
        p, out, err, held = cut_held_call(
            srv, tmp_path, ["--cell-timeout", "1", "--grace", "600"],
            "the timed-out cell's request was not closed", fifo=go)
    assert p.returncode == 0, show(p, out, err)
    check_cancelled(srv, held, "timeout")
    assert "namespace was kept" in repair_record(srv)["detail"]
    assert ("RES [('ModelError', 'cell 1 exceeded its timeout: its model "
            "call was cancelled')]") in out, show(p, out, err)
