"""Durable unattended runs (issue 9): the journal is a log that can be
trusted, a stop decided while resuming ends the process, budgets survive
restarts, and a resumed run says what happened. Every wait is on an event
(a line on stdout, a process exit) and bounded."""
import json
import os
import resource
import selectors
import signal
import subprocess
import time

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, beside

HANG = "import time\nprint('{marker}', flush=True)\ntime.sleep(300)\n"


def env():
    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def records(path):
    return [json.loads(line) for line in open(path)]


def start(tmp_path, srv, journal, *args, task=("the task",), **kw):
    return subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "--journal",
                             str(journal), *args, *task], cwd=tmp_path,
                            env=env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kw)


def resume(tmp_path, srv, journal, *args, timeout=30):
    return subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                           str(journal), "--resume", *args], cwd=tmp_path,
                          env=env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def wait_line(p, marker, timeout=60):
    """Reads p's stdout until a line holds marker; False at the deadline."""
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    buf = b""
    while marker.encode() not in buf:
        left = end - time.monotonic()
        if left <= 0 or not sel.select(left):
            return False
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            return False
        buf += chunk
    return True


def killed_mid_cell(tmp_path, script, journal, marker, *args, resumed=False):
    """Runs (or resumes) until a cell prints marker, then SIGKILLs the
    supervisor there: the journal holds a cell that never ended."""
    with ModelServer(script) as srv:
        task = () if resumed else ("the task",)
        extra = ("--resume",) if resumed else ()
        p = start(tmp_path, srv, journal, *extra, *args, task=task)
        try:
            assert wait_line(p, marker), p.stderr.read1().decode()
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def first(code, summary="first"):
    return {"match": "Submit the first Python cell",
            "next_cell": {"code": code, "summary": summary}}


def repair(code, summary="repair"):
    return {"match": "Repair the failed cell",
            "next_cell": {"code": code, "summary": summary}}


OK = {"text": "ok"}


def three_failures(tmp_path, journal):
    script = [first("raise ValueError('a')\n"), OK,
              repair("raise ValueError('b')\n"), OK,
              repair("raise ValueError('c')\n"), OK]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal)
        p.communicate(timeout=60)
    assert p.returncode == 1
    assert records(journal)[-1]["type"] == "stop"


# --- 2: stops that stop during resume ------------------------------------

def test_resume_after_three_failures_exits_instead_of_hanging(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    three_failures(tmp_path, journal)
    # the supervisor died before it wrote its stop record
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:-1]))
    with ModelServer([]) as srv:
        p = resume(tmp_path, srv, journal, timeout=30)
        asked = len(srv.requests)
    assert p.returncode == 1, p.stderr
    assert "3 consecutive failed cells" in p.stderr
    assert asked == 0
    last = records(journal)[-1]
    assert last["type"] == "stop" and last["exit"] == 1


def test_an_ended_run_resumes_to_its_own_exit_code(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    three_failures(tmp_path, journal)
    n = len(records(journal))
    with ModelServer([]) as srv:
        p = resume(tmp_path, srv, journal)
        asked = len(srv.requests)
    assert p.returncode == 1, p.stderr
    assert "already ended" in p.stderr and asked == 0
    assert len(records(journal)) == n          # nothing appended


def test_a_budget_stop_is_final_on_resume(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    step = {"match": "next", "next_cell": {
        "code": "r = call_me(input='next')\n", "summary": "step"}}
    script = [first("r = call_me(input='next')\n"), OK] + [step, OK] * 5
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal, "--max-cells", "2")
        p.communicate(timeout=60)
        assert p.returncode == 4
        before = len(srv.requests)
        again = resume(tmp_path, srv, journal, "--max-cells", "2")
        after = len(srv.requests)
    assert again.returncode == 4, again.stderr
    assert "already ended" in again.stderr
    assert after == before                      # no extra cell, no request
    assert not [r for r in records(journal) if r["type"] == "input"
                and r["cell"] >= 2]


# --- 4: budgets across restarts ----------------------------------------------

def test_cells_budget_survives_a_restart(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    # cell 0 asks, cell 1 hangs: 2 cells begun
    script = [first("r = call_me(input='two')\n"), OK,
              {"match": "two", "next_cell": {
                  "code": HANG.format(marker="cell-one-hangs"),
                  "summary": "hang"}}, OK]
    killed_mid_cell(tmp_path, script, journal, "cell-one-hangs")
    with ModelServer([repair("print('extra cell')\nquit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--max-cells", "2")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "the budget of 2 cells is spent" in p.stderr
    assert "extra cell" not in p.stdout and asked == 0
    assert records(journal)[-1]["exit"] == 4


def test_tokens_budget_survives_a_restart(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [first(HANG.format(marker="spent")),
              {"text": "ok", "usage": {"input_tokens": 900,
                                        "output_tokens": 200}}]
    killed_mid_cell(tmp_path, script, journal, "spent")
    usage = [r for r in records(journal) if r["type"] == "usage"]
    assert usage and usage[-1]["tokens"] >= 1100
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--max-tokens", "1000")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "tokens used, the budget is 1000" in p.stderr and asked == 0


def test_a_cut_stream_counts_its_estimate(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    code = ("try:\n    call_me(input='big')\nexcept Exception as e:\n"
            "    print('cut:', type(e).__name__)\nquit()\n")
    script = [first(code), OK,
              {"match": "big", "kind": "drop", "text": "x" * 40000,
               "delta_size": 1000}]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal, "--max-retries", "0")
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert b"cut:" in out
    usage = [r for r in records(journal) if r["type"] == "usage"]
    assert usage[-1]["estimated"] >= 40000 // 4


def test_deadline_counts_from_the_first_start(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [first(HANG.format(marker="running")), OK]
    killed_mid_cell(tmp_path, script, journal, "running", "--deadline", "600")
    # the run began 700 s ago: move its first start back (no sleeping)
    recs = records(journal)
    recs[0]["at"] -= 700
    journal.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--deadline", "600")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "the run deadline of 600 s was reached" in p.stderr
    assert asked == 0


def test_repeated_failures_are_counted_across_a_restart(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    bad = "raise ValueError('the same thing')\n"
    script = [first(bad), OK, repair(HANG.format(marker="repairing")), OK]
    killed_mid_cell(tmp_path, script, journal, "repairing",
                    "--max-same-failure", "2")
    with ModelServer([repair(bad), OK, repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--max-same-failure", "2")
    assert p.returncode == 4, p.stderr
    assert "the same failure happened 2 times" in p.stderr


def test_an_interrupted_cell_is_not_a_model_failure(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [first("raise ValueError('a')\n"), OK,
              repair("raise ValueError('b')\n"), OK,
              repair(HANG.format(marker="third")), OK]
    killed_mid_cell(tmp_path, script, journal, "third")
    with ModelServer([repair("print('went on')\nquit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "went on" in p.stdout


def test_max_restarts_ends_a_crash_loop_with_a_record(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    killed_mid_cell(tmp_path, [first(HANG.format(marker="loop-0")), OK],
                    journal, "loop-0")
    killed_mid_cell(tmp_path, [repair(HANG.format(marker="loop-1")), OK],
                    journal, "loop-1", "--max-restarts", "1", resumed=True)
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--max-restarts", "1")
        again = resume(tmp_path, srv, journal, "--max-restarts", "1")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "--max-restarts 1" in p.stderr
    last = records(journal)[-1]
    assert last["type"] == "stop" and last["exit"] == 4
    assert "crash loop" in last["reason"]
    assert again.returncode == 4 and "already ended" in again.stderr
    assert asked == 0


# --- 1: the journal as a log -------------------------------------------------

def test_a_torn_tail_is_cut_before_anything_is_appended(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    killed_mid_cell(tmp_path, [first(HANG.format(marker="torn")), OK],
                    journal, "torn")
    with open(journal, "ab") as f:
        f.write(b'{"v":1,"type":"outp' + b"\0" * 64)
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal)
    assert p.returncode == 0, p.stderr
    assert "torn last line" in p.stderr
    recs = records(journal)                    # every line is a record
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 0


def test_a_valid_json_record_of_the_wrong_shape_is_corruption(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    killed_mid_cell(tmp_path, [first(HANG.format(marker="shape")), OK],
                    journal, "shape")
    lines = journal.read_text().splitlines(keepends=True)
    lines.insert(1, '{"v":1,"type":"input","cell":"x","code":5}\n')
    journal.write_text("".join(lines))
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal)
        asked = len(srv.requests)
    assert p.returncode == 2, p.stderr
    assert f"{journal}:2:" in p.stderr and "corrupt" in p.stderr
    assert asked == 0
    assert journal.read_text() == "".join(lines)   # left as it was


def test_a_second_supervisor_is_refused_and_no_child_holds_the_journal(
        tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [first(HANG.format(marker="holding")), OK]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal)
        try:
            assert wait_line(p, "holding")
            holders = set()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    fds = os.listdir(f"/proc/{pid}/fd")
                except OSError:
                    continue
                for fd in fds:
                    try:
                        if os.readlink(f"/proc/{pid}/fd/{fd}") == str(journal):
                            holders.add(int(pid))
                    except OSError:
                        pass
            assert holders == {p.pid}        # no worker, spawner or init
            second = resume(tmp_path, srv, journal, timeout=20)
        finally:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    assert second.returncode == 2, second.stderr
    assert "in use by another agentz" in second.stderr
    assert f"pid {p.pid}" in second.stderr
    assert not [r for r in records(journal) if r["type"] == "resume"]


def _small_files():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE,
                       (6000, resource.RLIM_INFINITY))


def test_a_failed_journal_write_stops_the_run_with_its_own_code(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [first("print('y' * 8000)\nr = call_me(input='more')\n"), OK,
              {"match": "more", "next_cell": {"code": "quit()\n",
                                              "summary": "end"}}, OK]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal, preexec_fn=_small_files)
        out, err = p.communicate(timeout=60)
    err = err.decode()
    assert p.returncode == 5, err
    assert "cannot write the journal" in err
    # the big output (cell 1) could not be recorded: nothing after it
    # happened, and no half record was left
    recs = records(journal)
    assert [r["cell"] for r in recs if r["type"] == "input"] == [0, 1]
    assert [r["cell"] for r in recs if r["type"] == "output"] == [0]


# --- 5: resume says what happened -----------------------------------------

def test_the_successor_runs_as_the_models_cell_and_the_model_is_told(
        tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    cell1 = ("r = call_me(input='register')\n" +
             HANG.format(marker="registered"))
    script = [first("r = call_me(input='go')\n"), OK,
              {"match": "go", "next_cell": {"code": cell1,
                                            "summary": "one"}}, OK,
              {"match": "register", "next_cell": {
                  "code": "r = call_me(input='after')\nquit()\n",
                  "summary": "the successor"}}, OK]
    killed_mid_cell(tmp_path, script, journal, "registered")
    with ModelServer([{"match": "after", "text": "ok"}]) as srv:
        p = resume(tmp_path, srv, journal)
        body = srv.bodies[0]
    assert p.returncode == 0, p.stderr
    # cell 0 asks, cell 1 says go, cell 2 registers cell 3 and is killed
    inp = [r for r in records(journal) if r["type"] == "input"
           and r["cell"] == 3][0]
    assert inp["summary"] == "the successor" and inp["generated_by"] == 2
    text = json.dumps(body["input"])
    assert "restarted" in text and "cell 2" in text and "partial" in text


# --- issue 18 §3: consistency, and calls cut by a SIGKILL ----------------

@pytest.mark.parametrize("line,said", [
    ('{"v":1,"type":"input","cell":0,"code":"again"}', "a second input for "
     "cell 0"),
    ('{"v":1,"type":"input","cell":5,"code":"x"}', "an input for cell 5 "
     "where cell 2 comes next"),
    ('{"v":1,"type":"output","cell":7,"status":"ok"}', "a output for cell 7, "
     "which has no input"),
    ('{"v":1,"type":"output","cell":0,"status":"ok"}', "a second output for "
     "cell 0"),
    ('{"v":1,"type":"usage","tokens":-5}', "a usage of -5 tokens"),
    ('{"v":1,"type":"usage","tokens":99999999999999999}',
     "a usage of 99999999999999999 tokens"),
    ('{"v":1,"type":"usage","tokens":10,"estimated":-1}',
     "-1 tokens estimated of 10"),
    ('{"v":1,"type":"usage","tokens":10,"cost":-2.5}', "a cost of -2.5 USD"),
    ('{"v":1,"type":"call","id":0,"estimated":-3}', "a model call estimated "
     "at -3 tokens")])
def test_an_inconsistent_journal_is_corruption(tmp_path, line, said):
    journal = beside(tmp_path, "run.jsonl")
    killed_mid_cell(tmp_path, [first(HANG.format(marker="incons")), OK],
                    journal, "incons")
    lines = journal.read_text().splitlines(keepends=True)
    lines.append(line + "\n")
    journal.write_text("".join(lines))
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal)
        asked = len(srv.requests)
    assert p.returncode == 2, p.stderr
    assert f"{journal}:{len(lines)}: corrupt" in p.stderr, p.stderr
    assert said in p.stderr, p.stderr
    assert asked == 0
    assert journal.read_text() == "".join(lines)   # left as it was


def wait_record(journal, pred, p, timeout=60):
    """Waits until the journal holds a record pred accepts (or p ended)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        try:
            for r in records(journal):
                if pred(r):
                    return r
        except (ValueError, FileNotFoundError):
            pass                    # not created yet, or a line being written
        time.sleep(0.05)
    return None


def test_tokens_of_a_call_cut_by_a_sigkill_are_counted_on_resume(tmp_path):
    """The supervisor is SIGKILLed while the server streams a long
    answer (it stalls after 80 KB, never ending): the call's start and its
    streamed estimate were journaled, and the resumed run counts them."""
    journal = beside(tmp_path, "run.jsonl")
    code = "r = call_me(input='long-answer')\nprint(r.output_text)\n"
    script = [first(code), OK,
              {"match": "long-answer", "kind": "drop", "text": "y" * 100000,
               "delta_size": 1000, "after": 82, "stall": 120}]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal)
        try:
            big = wait_record(journal, lambda r: r["type"] == "call" and
                              r["estimated"] >= 15000, p)
            assert big is not None, p.stderr.read1().decode()
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    recs = records(journal)
    usage = [r for r in recs if r["type"] == "usage"]
    before = usage[-1]["tokens"] if usage else 0
    cut = [r for r in recs if r["type"] == "call" and r["id"] == big["id"]]
    est = cut[-1]["estimated"]
    assert not [r for r in usage if big["id"] in r.get("calls", [])]
    with ModelServer([repair("quit()\n"), OK]) as srv:
        q = resume(tmp_path, srv, journal)
    assert q.returncode == 0, q.stderr
    assert "cut by the restart" in q.stderr
    usage = [r for r in records(journal) if r["type"] == "usage"]
    settled = [r for r in usage if big["id"] in r.get("calls", [])]
    assert len(settled) == 1 and settled[0]["tokens"] == before + est
    assert usage[-1]["tokens"] >= before + est
