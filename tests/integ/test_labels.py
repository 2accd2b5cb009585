"""The report and events say what happened (issue 22): an operator's
kill-cell is the operator's in the cell's record, the kill events, the
report and the terminal line (a timeout keeps its own label); seconds are
written plainly (1.125 s, never 1.12 or 3.6e+03); a note's delivery is
shown as the delivery of that note, not a second note; an operator note
and a repair request reach the model apart; the budgets `ctl budgets`
sets are journaled, sent as an event, shown in the report and kept by
--resume; a usage error's events carry its reason.

Each live run waits on what it printed or journaled (ctl_util.Run), never
on a sleep.
"""
import html
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ  # noqa: E402
from model_server import ModelServer  # noqa: E402
from ctl_util import HANG, Run, SLOW, first, gated  # noqa: E402
from events_schema import check_stream, parse  # noqa: E402

REPAIR = [{"match": "Repair the failed cell",
           "next_cell": {"code": "quit()\n"}}, {"text": "ok"}]
GENTLE = "import time\nprint('C1', flush=True)\ntime.sleep(30)\n"


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


def env():
    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def report(journal, tmp_path):
    page = tmp_path / "report.html"
    p = subprocess.run([AGENTZ, "report", str(journal), "-o", str(page)],
                       env=env(), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    return page.read_text()


def text_of(page):
    """The page's text without its markup, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", page))


def inputs(srv, word):
    return [r["body"]["input"] for r in srv.requests if r["body"] and
            isinstance(r["body"]["input"], str) and
            word in r["body"]["input"]]


# --- kill-cell, a note and the repair ------------------------------------------

def test_kill_cell_is_the_operators_and_the_note_goes_apart(tmp_path, rt):
    # the interrupt ends time.sleep at once; the grace is long so that a
    # loaded machine finishing the cell after it is not a kill (run 2 of a
    # fresh root: the cell's DONE came after the default 3 s)
    with ModelServer(first(HANG) + REPAIR) as srv:
        run = Run(srv, tmp_path, "opkill", rt,
                  args=("--json", "--grace", "30"))
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("note", "mind ZQNOTE")
            assert rc == 0, err
            rc, r, err = run.ctl("kill-cell")
            assert rc == 0 and r == {"ok": True}, err
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
        repair = inputs(srv, "Repair the failed cell")
    events = parse(run.out.decode())
    check_stream(events)
    # the kill events: who, not a timeout
    kills = [e for e in events if e["type"] == "kill"]
    assert kills and all(k["ended_by"] == "the operator (kill-cell)" and
                         k["reason"] == "the cell was ended early by the "
                         "operator (kill-cell)" for k in kills), kills
    # the record
    out = [r for r in run.records("output") if r["cell"] == 1][0]
    assert out["timeout"]["ended_by"] == "the operator (kill-cell)", out
    assert "timeout" not in out["detail"].split(":")[0], out["detail"]
    # the repair request: the note, a blank line, then the repair
    assert len(repair) == 1
    assert repair[0].startswith("[agentz] A note from the operator of this "
                                "run: mind ZQNOTE\n\nRepair the failed "
                                "cell"), repair[0]
    delivered = run.records("note_delivered")
    assert [(d["notes"], d["cell"], d["purpose"]) for d in delivered] == \
        [(1, 1, "repair")], delivered
    # the report: one note, delivered; the operator's early end
    page = report(run.journal, tmp_path)
    text = text_of(page)
    assert page.count('<li class="note">') == 1, page
    assert "from ?" not in text
    assert re.search(r"from operator: mind ZQNOTE \(delivered to the model "
                     r"[^)]* with the repair request after cell 1, line \d+"
                     r"\)", text), text
    assert "Ended early by the operator (kill-cell) (not its timeout): " \
        "stage interrupted" in text, text
    assert "at its deadline" not in text


def test_kill_cell_on_the_terminal_line(tmp_path, rt):
    with ModelServer(first(HANG) + REPAIR) as srv:
        run = Run(srv, tmp_path, "opterm", rt)
        try:
            run.wait_out("C1")
            assert run.ctl("kill-cell")[0] == 0
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    line = [ln for ln in run.err.decode().splitlines()
            if ln.startswith("[agentz] cell 1: error")][0]
    assert "the cell was ended early by the operator (kill-cell)" in line, \
        line
    assert "exceeded" not in line


def test_kill_cell_says_so_to_a_cancelled_call(tmp_path, rt):
    # a thread's call_me, held by the server, is cancelled by kill-cell:
    # the thread's ModelError names the operator, not a timeout
    cell1 = """
        import threading, time
        res = []
        def work():
            try:
                call_me(input='HELD-CALL')
            except Exception as e:
                res.append((type(e).__name__, str(e)))
        t = threading.Thread(target=work, daemon=True)
        t.start()
        print('C1', flush=True)
        time.sleep(300)
        """
    script = first(cell1) + [
        {"match": "HELD-CALL", "hold": "never", "text": "never sent"},
        {"match": "Repair the failed cell", "next_cell": {
            "code": "t.join(60)\nprint('RES', res)\nquit()\n"}},
        {"text": "ok"}]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "opcall", rt)
        try:
            run.wait_out("C1")
            # cell 0's call and its follow-up, then the held call
            assert srv.wait_for_requests(3, timeout=30 * SLOW), srv.requests
            assert inputs(srv, "HELD-CALL"), srv.requests
            assert run.ctl("kill-cell")[0] == 0
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    assert "RES [('ModelError', 'cell 1 was ended early by the operator " \
        "(kill-cell): its model call was cancelled')]" in run.out.decode(), \
        run.show()


# --- a timeout keeps its label, its seconds written plainly ----------------------

def test_a_timeout_says_its_seconds_plainly(tmp_path, rt):
    with ModelServer(first(GENTLE) + REPAIR) as srv:
        run = Run(srv, tmp_path, "tmo", rt, args=("--json", "--cell-timeout",
                                                  "1.125"))
        try:
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    events = parse(run.out.decode())
    kills = [e for e in events if e["type"] == "kill"]
    assert [k["stage"] for k in kills] == ["interrupt"], kills
    assert kills[0]["reason"] == "the cell exceeded its 1.125 s timeout"
    assert kills[0]["ended_by"] is None
    out = [r for r in run.records("output") if r["cell"] == 1][0]
    assert out["detail"].startswith("the cell exceeded its 1.125 s "
                                    "timeout: interrupted"), out["detail"]
    assert out["timeout"]["ended_by"] is None
    text = text_of(report(run.journal, tmp_path))
    assert "Interrupted at its deadline: stage interrupted" in text
    assert "Ended early" not in text


# --- budgets set through ctl -------------------------------------------------------

def test_budgets_are_journaled_shown_and_kept_on_resume(tmp_path, rt):
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "budj", rt, args=("--json", "--max-cells",
                                                   "50"))
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("budgets", "--max-cells", "7",
                                 "--deadline", "3600", "--max-tokens",
                                 "900000")
            assert rc == 0 and r["max_cells"] == 7, (r, err)
            run.wait_out('"type":"budgets"')
            run.p.kill()    # SIGKILL: the run goes on with --resume
            run.wait()
        finally:
            run.kill()
    budgets = run.records("budgets")
    assert len(budgets) == 1
    b = budgets[0]
    assert b["by"] == "operator" and b["max_cells"] == 7 and \
        b["deadline"] == 3600 and b["max_tokens"] == 900000 and \
        b["max_cost"] == 0 and b["max_same_failure"] == 5, b
    lines = run.out.decode().splitlines()
    ev = [e for e in parse("\n".join(ln for ln in lines if '"budgets"' in
                                      ln)) if e["type"] == "budgets"]
    assert len(ev) == 1 and ev[0]["by"] == "operator", ev
    assert ev[0]["limits"]["max_cells"] == 7 and \
        ev[0]["limits"]["deadline"] == 3600 and \
        ev[0]["limits"]["max_tokens"] == 900000, ev
    text = text_of(report(run.journal, tmp_path))
    assert re.search(r"Budgets set during the run\s*line \d+, [^,]*, set by "
                     r"operator: max_cells=7 deadline=3600 s "
                     r"max_tokens=900000 max_cost=none max_same_failure=5",
                     text), text
    # --resume with the command line's --max-cells 50: the operator's 7
    # holds, and the run's start says so
    with ModelServer([{"match": "Repair the failed cell",
                       "next_cell": {"code": "quit()\n"}},
                      {"text": "ok"}]) as srv:
        p = subprocess.run([AGENTZ, "--json", "--base-url", srv.base_url,
                            "--journal", str(run.journal), "--resume",
                            "--max-cells", "50"], cwd=run.ws,
                           env=dict(env(), RUNTIME_DIRECTORY=str(rt)),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    start = [e for e in parse(p.stdout) if e["type"] == "run_start"][0]
    assert start["limits"]["max_cells"] == 7 and \
        start["limits"]["deadline"] == 3600 and \
        start["limits"]["max_tokens"] == 900000, start["limits"]
    assert "--resume: the budgets set by the operator (agentz ctl " \
        "budgets) hold: --max-cells 7 --deadline 3600" in p.stderr, p.stderr


# --- usage errors in the event stream ------------------------------------------------

@pytest.mark.parametrize("args", [
    ("--journal", "{tmp}/no/such/dir/j.jsonl", "the task"),
    ("--resume", "--journal", "{tmp}/empty.jsonl"),
])
def test_a_usage_errors_events_carry_its_reason(tmp_path, args):
    (tmp_path / "empty.jsonl").write_text("")
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = subprocess.run([AGENTZ, "--json", "--base-url",
                        "http://127.0.0.1:9/v1", *argv], cwd=ws, env=env(),
                       stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=60 * SLOW)
    assert p.returncode == 2, p.stderr
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("agentz: ")]
    assert len(said) == 1, p.stderr
    reason = said[0][len("agentz: "):]
    events = parse(p.stdout)
    assert [e["type"] for e in events] == ["stop", "run_end"], events
    assert events[0]["kind"] == "usage"
    assert events[0]["reason"] == reason and events[1]["reason"] == reason, \
        (events, reason)
