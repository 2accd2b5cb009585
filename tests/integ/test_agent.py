"""agentz "TASK": the model-written loop, end to end (issue 3, SPEC §2-§6):
the first cell and the task prompt, operator defaults, and the cell protocol
(successors, failures and their recovery, quit, interrupts).

Every test starts its own in-process ModelServer (tests/integ/model_server.py)
on 127.0.0.1, runs the real build/agentz against it in a temporary working
directory and asserts on what agentz printed, its exit status and the request
bodies the server recorded (helpers in agent_util.py).

Script conventions.  A response whose tool calls are only host tools is
continued invisibly by the supervisor (a second request), so a turn that
submits a cell is followed by a turn answering that continuation (submit()).
Sequential runs use plain ordered turn lists; where requests run concurrently
a Router (a callable turn) answers by the request's input text instead.
Cells synchronise with the server through events and barriers in the
server's handler threads, never through sleeps.
"""
import json
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_server import ModelServer  # noqa: E402
from agent_util import (  # noqa: E402
    FIRST_INPUT, HOST_TOOLS, RECOVERY_SUMMARY, Router, SLOW, TASK, code,
    continuations, first_content, fresh, is_recovery, recovery_record,
    run_agent, show, status_lines, submit)


# ---------------------------------------------------------------------------
# the first cell, the task prompt, engine-set fields
# ---------------------------------------------------------------------------

def test_first_cell_and_task_prompt(tmp_path):
    task = 'Say "hi" \\ twice\nthen print the ünïcode answer'
    cell1 = """
        print('GEN', CELL_INPUTS[1]['generated_by'], CELL_INPUTS[1]['summary'])
        print('C0', CELL_OUTPUTS[0]['status'], CELL_OUTPUTS[0]['output'] == 'FIRST-OUTPUT\\n')
        quit()
        """
    script = submit(cell1, summary="Report and stop.", text="interim words",
                    reply="FIRST-OUTPUT")
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path, task=task,
                      args=["--model", "model-under-test",
                            "--max-output-tokens", "777",
                            "--service-tier", "flex"],
                      env={"OPENAI_API_KEY": "sk-test-first-cell"})
    assert p.returncode == 0, show(p)
    assert p.stdout.startswith("FIRST-OUTPUT\n"), show(p)
    assert "GEN 0 Report and stop.\n" in p.stdout
    assert "C0 ok True\n" in p.stdout
    assert [s[:2] for s in status_lines(p)] == [("0", "ok"), ("1", "exited")], show(p)


    assert len(srv.requests) == 2
    first = srv.requests[0]
    assert first["path"] == "/v1/responses"
    assert first["authorization"] == "Bearer sk-test-first-cell"
    b = first["body"]
    assert b["input"] == task + "\nSubmit the first Python cell."
    assert b["model"] == "model-under-test"
    assert b["stream"] is True and b["background"] is False
    assert b["max_output_tokens"] == 777 and b["service_tier"] == "flex"
    assert b["reasoning"] == {"effort": "medium"}
    ins = b["instructions"]
    assert isinstance(ins, str) and len(ins) > 200
    for needle in ("set_next_cell_code", "get_history_cells", "quit()",
                   "model-under-test", "medium"):
        assert needle in ins, needle
    assert [t["name"] for t in b["tools"]] == HOST_TOOLS
    snc, ghc = b["tools"]
    assert snc["type"] == "function" and snc["strict"] is True
    assert snc["parameters"]["required"] == ["code", "summary"]
    assert snc["parameters"]["additionalProperties"] is False
    assert ghc["strict"] is False
    assert set(ghc["parameters"]["properties"]) == {"start", "end"}

    # the continuation: original input + model output + host tool output
    c = srv.requests[1]["body"]
    for k in ("model", "instructions", "tools", "reasoning", "stream",
              "max_output_tokens", "service_tier", "background"):
        assert c[k] == b[k], k
    assert c["input"][0] == {"role": "user", "content": b["input"]}
    types = [it.get("type") for it in c["input"][1:]]
    assert types == ["message", "function_call", "function_call_output"], types
    fc = c["input"][2]
    assert fc["name"] == "set_next_cell_code" and "status" not in fc
    assert json.loads(fc["arguments"])["code"] == code(cell1)
    assert c["input"][3]["call_id"] == fc["call_id"]
    assert "Registered" in c["input"][3]["output"]


def test_operator_defaults_env_and_dotenv(tmp_path):
    """Defaults; AGENTZ_MODEL from the environment wins over .env; the base
    URL comes from .env (OPENAI_BASE_URL); no API key is needed locally."""
    script = submit("quit()")
    with ModelServer(script) as srv:
        (tmp_path / ".env").write_text(
            f"OPENAI_BASE_URL={srv.base_url}\nAGENTZ_MODEL=from-dotenv\n")
        p = run_agent(srv, tmp_path, base_url=False,
                      env={"AGENTZ_MODEL": "from-env"})
    assert p.returncode == 0, show(p)
    b = srv.bodies[0]
    assert b["model"] == "from-env"
    assert b["max_output_tokens"] == 128000
    assert b["service_tier"] == "auto"
    assert srv.requests[0]["authorization"] is None


# ---------------------------------------------------------------------------
# the cell protocol
# ---------------------------------------------------------------------------

def test_successor_chaining_over_20_cells_keeps_namespace(tmp_path):
    step = """
        n += 1
        seen.append(n)
        call_me(input=f'STEP {n}')
        """
    final = """
        gens = [CELL_INPUTS[i]['generated_by'] for i in range(1, 22)]
        print('FINAL', n, seen == list(range(1, 21)), gens == list(range(21)))
        quit()
        """
    script = submit("n = 1\nseen = [n]\ncall_me(input='STEP 1')")
    for k in range(1, 20):
        script += submit(step, summary=f"Step {k + 1}.")
    script += submit(final)
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path, timeout=60)
    assert p.returncode == 0, show(p)
    assert "FINAL 20 True True\n" in p.stdout, show(p)
    st = status_lines(p)
    assert [s[:2] for s in st] == [(str(i), "ok") for i in range(21)] + \
        [("21", "exited")], show(p)
    inputs = [b["input"] for b in srv.bodies if isinstance(b["input"], str)]
    assert inputs == [FIRST_INPUT] + [f"STEP {k}" for k in range(1, 21)]
    assert srv.unused_turns() == []


def test_no_successor_is_a_failure_and_recovered(tmp_path):
    cell1 = "print('NO-SUCC')"
    repair = """
        rec = CELL_INPUTS[2]
        err = get_last_error()
        print('REPAIR', rec['summary'], rec['generated_by'], err['cell'], err['kind'])
        quit()
        """
    script = submit(cell1) + submit(repair)
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    st = status_lines(p)
    assert [s[:2] for s in st] == [("0", "ok"), ("1", "error"), ("2", "exited")], show(p)
    assert "no_successor" in st[1][2]
    assert f"REPAIR {RECOVERY_SUMMARY} None 1 no_successor\n" in p.stdout, show(p)

    assert len(srv.requests) == 4
    rb = srv.bodies[2]
    rec = recovery_record(rb)
    assert rec["task"] == TASK
    assert rec["cell"] == 1 and rec["status"] == "error"
    assert rec["kind"] == "no_successor"
    assert rec["code"] == code(cell1)
    assert rec["output"] == "NO-SUCC\n"
    assert [t["name"] for t in rb["tools"]] == HOST_TOOLS
    assert rb["instructions"] == srv.bodies[0]["instructions"]


def test_second_submission_raises_next_cell_already_scheduled(tmp_path):
    cell1 = """
        first = call_me(input='FIRST-SUB')
        try:
            call_me(input='SECOND-SUB')
            print('NOT RAISED')
        except NextCellAlreadyScheduled as e:
            print('RAISED', type(e).__name__)
        """
    script = (submit(cell1)
              + submit("print('FIRST-KEPT')\nquit()")
              + [{"next_cell": "print('SECOND-WRONG')\nquit()"},
                 {"text": "the second submission must not be continued"}])
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert "RAISED NextCellAlreadyScheduled\n" in p.stdout, show(p)
    assert "FIRST-KEPT\n" in p.stdout
    assert "SECOND-WRONG" not in p.stdout and "NOT RAISED" not in p.stdout
    # the refused submission is raised in the cell, not returned to the model
    assert len(fresh(srv, "SECOND-SUB")) == 1
    assert continuations(srv, "SECOND-SUB") == []
    assert len(srv.requests) == 5, [first_content(b) for b in srv.bodies]


def test_late_submission_gets_cell_has_finished(tmp_path):
    """A request made by cell 1 that completes while cell 2 runs: its
    set_next_cell_code gets "Cell 1 has finished" and registers nothing;
    the host-only answer is not continued (issue 10): the thread's call_me
    raises ModelError saying so."""
    cell1 = """
        import threading
        late = {}
        def _late():
            try:
                late['text'] = call_me(input='LATE-Q').output_text
            except BaseException as e:
                late['error'] = repr(e)
        t = threading.Thread(target=_late)
        t.start()
        call_me(input='MAIN-Q')
        """
    cell2 = """
        call_me(input='CELL2-Q')
        t.join(30)
        print('LATE', late)
        quit()
        """
    late_arrived = threading.Event()
    cell2_started = threading.Event()

    def on_late(rec):
        late_arrived.set()
        assert cell2_started.wait(20 * SLOW)
        return {"next_cell": "print('LATE-CODE-RAN')\nquit()"}

    def on_main(rec):
        assert late_arrived.wait(20 * SLOW)
        return submit(cell2)[0]

    def on_cell2(rec):
        cell2_started.set()
        return {"text": "cell 2 is running"}

    router = Router({FIRST_INPUT: submit(cell1)[0], "LATE-Q": on_late,
                     "MAIN-Q": on_main, "CELL2-Q": on_cell2},
                    {"LATE-Q": {"text": "late-ack"}})
    with ModelServer(router.turns()) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert ("LATE {'error': 'ModelError(\"Cell 1 has finished: the model\\'s "
            "answer called only host tools and is not continued\")'}\n"
            in p.stdout), show(p)
    assert "LATE-CODE-RAN" not in p.stdout
    assert continuations(srv, "LATE-Q") == []


def test_three_consecutive_failures_exit_1(tmp_path):
    script = (submit("raise ValueError('FAIL-ONE')")
              + submit("raise ValueError('FAIL-TWO')")
              + submit("raise ValueError('FAIL-THREE')")
              # a fourth repair must never be asked for
              + submit("print('SHOULD-NOT-RUN')\nquit()"))
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 1, show(p)
    assert "SHOULD-NOT-RUN" not in p.stdout
    st = status_lines(p)
    assert [s[:2] for s in st] == [("0", "ok"), ("1", "error"), ("2", "error"),
                                   ("3", "error")], show(p)
    assert all("exception" in s[2] for s in st[1:])
    assert len(srv.requests) == 6
    assert [is_recovery(r) for r in srv.requests] == [False, False, True,
                                                      False, True, False]
    r1, r2 = recovery_record(srv.bodies[2]), recovery_record(srv.bodies[4])
    assert r1["cell"] == 1 and r1["exception_type"] == "ValueError"
    assert r1["kind"] == "exception"
    assert "FAIL-ONE" in r1["traceback"] and "<cell-1>" in r1["traceback"]
    assert r2["cell"] == 2 and "FAIL-TWO" in r2["traceback"]
    assert r2["summary"] == RECOVERY_SUMMARY and r2["generated_by"] is None


def test_repair_request_without_a_cell_counts_as_a_failure(tmp_path):
    script = (submit("raise ValueError('ONLY-FAILURE')")
              + [{"text": "I will not write a cell."},
                 {"text": "Still no cell."}]
              + submit("print('SHOULD-NOT-RUN')\nquit()"))
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 1, show(p)
    assert "SHOULD-NOT-RUN" not in p.stdout
    assert len(srv.requests) == 4, [first_content(b)[:40] for b in srv.bodies]
    assert [is_recovery(r) for r in srv.requests] == [False, False, True, True]
    assert recovery_record(srv.bodies[3])["cell"] == 1


def test_a_success_resets_the_failure_count(tmp_path):
    script = (submit("raise ValueError('A1')")
              + submit("raise ValueError('A2')")
              + submit("call_me(input='RESET-OK')")       # a success
              + submit("raise ValueError('B1')")
              + submit("raise ValueError('B2')")
              + submit("print('RECOVERED')\nquit()"))
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert "RECOVERED\n" in p.stdout
    st = [s[:2] for s in status_lines(p)]
    assert st == [("0", "ok"), ("1", "error"), ("2", "error"), ("3", "ok"),
                  ("4", "error"), ("5", "error"), ("6", "exited")], show(p)
    assert srv.unused_turns() == []


def test_quit_exits_0(tmp_path):
    cell1 = """
        try:
            print('BEFORE')
            quit()
        except Exception:
            print('CAUGHT')
        print('AFTER')
        """
    with ModelServer(submit(cell1) + submit("print('NEVER')")) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert p.stdout.endswith("BEFORE\n"), show(p)
    assert [s[:2] for s in status_lines(p)] == [("0", "ok"), ("1", "exited")]
    assert len(srv.requests) == 2


@pytest.mark.parametrize("raise_", ["raise KeyboardInterrupt",
                                    "raise SystemExit(0)"])
def test_keyboardinterrupt_or_systemexit_from_a_cell_exits_130(tmp_path, raise_):
    with ModelServer(submit(raise_) + submit("print('NEVER')")) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 130, show(p)
    assert [s[:2] for s in status_lines(p)] == [("0", "ok"),
                                                ("1", "interrupted")]
    assert len(srv.requests) == 2, "no repair after an interrupt"
