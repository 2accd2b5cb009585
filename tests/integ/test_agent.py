"""agentz "TASK": the model-written loop, end to end (issue 3, SPEC §2-§6).

Every test starts its own in-process ModelServer (tests/integ/model_server.py)
on 127.0.0.1, runs the real build/agentz against it in a temporary working
directory and asserts on what agentz printed, its exit status and the request
bodies the server recorded.

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
import re
import secrets
import subprocess
import sys
import textwrap
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, PROBE, SAN  # noqa: E402
from model_server import ModelServer  # noqa: E402

SLOW = 4 if SAN else 1
TASK = "Compute the answer to the test question."
FIRST_INPUT = TASK + "\nSubmit the first Python cell."
HOST_TOOLS = ["set_next_cell_code", "get_history_cells"]
RECOVERY_PREFIX = ("Repair the failed cell and continue the original task. "
                   "Existing side effects are not rolled back.\n")
RECOVERY_SUMMARY = "Analyze the previous cell's error and generate repair code."


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def code(src):
    """Cell source from an indented triple-quoted string."""
    return textwrap.dedent(src).strip("\n") + "\n"


def submit(src, summary="Next cell.", reply="ok", text=None):
    """Turns: the model submits src as the next cell, then answers the
    supervisor's invisible continuation of that host-only response."""
    t = {"next_cell": {"code": code(src), "summary": summary}}
    if text is not None:
        t["text"] = text
    return [t, {"text": reply}]


def run_agent(srv, cwd, task=TASK, args=(), env=None, timeout=30,
              base_url=True):
    """Run build/agentz against srv in cwd with a small, known environment."""
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
         "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(env or {})
    cmd = [AGENTZ]
    if base_url:
        cmd += ["--base-url", srv.base_url]
    cmd += ["--cell-timeout", "60", *args, task]
    return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout * SLOW)


def show(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def first_content(body):
    """The original input text of a request (continuations included)."""
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    if isinstance(inp, list) and inp and isinstance(inp[0], dict):
        c = inp[0].get("content")
        return c if isinstance(c, str) else None
    return None


def fresh(srv, text):
    """Records of requests whose input is exactly the string text."""
    return [r for r in srv.requests
            if r["body"] and r["body"].get("input") == text]


def continuations(srv, text):
    """Records of supervisor continuations of the request with input text."""
    return [r for r in srv.requests
            if r["body"] and isinstance(r["body"].get("input"), list)
            and first_content(r["body"]) == text]


def tool_outputs(body):
    """{call_id: [output, ...]} of the function_call_output items in input."""
    out = {}
    for it in body.get("input") or []:
        if isinstance(it, dict) and it.get("type") == "function_call_output":
            out.setdefault(it["call_id"], []).append(it["output"])
    return out


def recovery_record(body):
    """The JSON record of a repair request (after the fixed prefix)."""
    inp = body["input"]
    assert isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX), inp[:200]
    return json.loads(inp[len(RECOVERY_PREFIX):])


def is_recovery(rec):
    """A repair request of the supervisor (not its continuation)."""
    inp = (rec["body"] or {}).get("input")
    return isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX)


def status_lines(p):
    return re.findall(r"^\[agentz\] cell (\d+): (ok|error|interrupted|exited)"
                      r"([^\n]*)$", p.stderr, re.M)


class Router:
    """A callable turn answering by input text (for concurrent requests).

    fresh: {input text or prefix: spec or fn(record) -> spec};
    cont: the same for the supervisor's continuations of those inputs
    (default: a plain text answer).  Use router.turns() as the script.
    """

    def __init__(self, fresh, cont=None):
        self.fresh = fresh
        self.cont = cont or {}

    @staticmethod
    def _pick(table, key):
        if key in table:
            return table[key]
        for k, v in table.items():
            if key.startswith(k):
                return v
        return None

    def __call__(self, rec):
        body = rec["body"]
        key = first_content(body)
        if isinstance(body["input"], str):
            h = self._pick(self.fresh, key)
            if h is None:
                raise KeyError(f"no route for {key!r}")
        else:
            h = self._pick(self.cont, key) or {"text": f"cont: {key[:30]}"}
        return h(rec) if callable(h) else h

    def turns(self, n=60):
        return [self] * n


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


# ---------------------------------------------------------------------------
# request rewriting
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("given,expected", [
    ({"effort": "none"}, "medium"),
    ({"effort": "minimal"}, "medium"),
    ({"effort": "low"}, "medium"),
    ({"effort": "medium"}, "medium"),
    ({"effort": "high"}, "high"),
    ({"effort": "xhigh"}, "xhigh"),
    (None, "medium"),                       # no reasoning parameter at all
    ({"summary": "auto"}, "medium"),        # reasoning without effort
], ids=["none", "minimal", "low", "medium", "high", "xhigh", "missing",
        "no-effort-key"])
def test_reasoning_effort_only_goes_up(tmp_path, given, expected):
    arg = "" if given is None else f", reasoning={given!r}"
    cell1 = f"call_me(input='EFFORT-PROBE'{arg})\nquit()"
    with ModelServer(submit(cell1) + [{"text": "fine"}]) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    (rec,) = fresh(srv, "EFFORT-PROBE")
    want = dict(given or {}, effort=expected)
    assert rec["body"]["reasoning"] == want


def test_host_tool_name_collision(tmp_path):
    cell1 = """
        fake = {'type': 'function', 'name': 'set_next_cell_code',
                'description': 'FAKE-HOST-TOOL', 'strict': False,
                'parameters': {'type': 'object', 'properties': {}}}
        mine = {'type': 'function', 'name': 'lookup', 'description': 'caller tool',
                'parameters': {'type': 'object', 'properties': {'q': {'type': 'string'}}}}
        call_me(input='TOOLS-PROBE',
                tools=[fake, mine, dict(fake, name='get_history_cells'),
                       {'type': 'web_search'}])
        quit()
        """
    with ModelServer(submit(cell1) + [{"text": "fine"}]) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    (rec,) = fresh(srv, "TOOLS-PROBE")
    tools = rec["body"]["tools"]
    names = [t.get("name") for t in tools]
    assert names.count("set_next_cell_code") == 1
    assert names.count("get_history_cells") == 1
    assert "FAKE-HOST-TOOL" not in json.dumps(tools)
    host = srv.bodies[0]["tools"]
    assert [t for t in tools if t.get("name") in HOST_TOOLS] == host
    assert names == ["lookup", None, "set_next_cell_code", "get_history_cells"]
    assert tools[1] == {"type": "web_search"}


def test_engine_fields_and_extra_body_stripping(tmp_path):
    cell1 = """
        call_me(input='EXTRA-PROBE', model='evil-model', instructions='EVIL-1',
                background=True, max_output_tokens=5, service_tier='flex',
                temperature=0.1, reasoning={'effort': 'high'}, timeout=3,
                extra_body={'model': 'evil-2', 'instructions': 'EVIL-2',
                            'tools': [], 'reasoning': {'effort': 'low'},
                            'stream': False, 'timeout': 1, 'background': True,
                            'max_output_tokens': 1, 'service_tier': 'flex',
                            'temperature': 0.7, 'metadata': {'k': 'v'},
                            'store': False, 'top_logprobs': 2})
        quit()
        """
    with ModelServer(submit(cell1) + [{"text": "fine"}]) as srv:
        p = run_agent(srv, tmp_path, args=["--model", "engine-model",
                                           "--max-output-tokens", "4321",
                                           "--service-tier", "priority"])
    assert p.returncode == 0, show(p)
    (rec,) = fresh(srv, "EXTRA-PROBE")
    b = rec["body"]
    assert b["model"] == "engine-model"
    assert b["instructions"] == srv.bodies[0]["instructions"]
    assert "EVIL" not in json.dumps(b)
    assert b["background"] is False and b["stream"] is True
    assert b["max_output_tokens"] == 4321 and b["service_tier"] == "priority"
    assert b["reasoning"] == {"effort": "high"}
    assert [t["name"] for t in b["tools"]] == HOST_TOOLS
    assert "timeout" not in b and "extra_body" not in b
    # the rest of extra_body is merged, last
    assert b["temperature"] == 0.7
    assert b["metadata"] == {"k": "v"} and b["store"] is False
    assert b["top_logprobs"] == 2


# ---------------------------------------------------------------------------
# continuation and external tool calls
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_host_only_continuation_caller_sees_one_response(tmp_path, stream):
    if stream:
        cell1 = """
            s = call_me(input='HOC-PROBE', stream=True)
            events = list(s)
            done = [e for e in events if e.type == 'response.completed']
            r = s.response
            print('DONE-EVENTS', len(done), done[-1].response.id == r.id)
            print('HOC', r.id, r.output_text, [o.type for o in r.output])
            """
    else:
        cell1 = """
            r = call_me(input='HOC-PROBE')
            print('HOC', r.id, r.output_text, [o.type for o in r.output])
            """
    script = submit(cell1) + [
        {"reasoning": "Look at the history first.",
         "calls": [{"name": "get_history_cells", "arguments": {},
                    "call_id": "call_hist1"}]},
        {"text": "interim words", "next_cell": "quit()"},
        {"text": "FINAL-ANSWER"},
    ]
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert len(srv.requests) == 5
    final_id = srv.requests[4]["response_id"]
    assert f"HOC {final_id} FINAL-ANSWER ['message']\n" in p.stdout, show(p)
    if stream:
        assert "DONE-EVENTS 1 True\n" in p.stdout, show(p)
    c1, c2 = srv.bodies[3], srv.bodies[4]
    assert c1["input"][0] == {"role": "user", "content": "HOC-PROBE"}
    assert [it.get("type") for it in c1["input"]] == [
        None, "reasoning", "function_call", "function_call_output"]
    assert "status" not in c1["input"][2]
    assert c1["input"][2]["call_id"] == "call_hist1"
    assert json.loads(c1["input"][3]["output"]) == {"total": 2}
    # the second continuation extends the first
    assert c2["input"][:4] == c1["input"]
    assert [it.get("type") for it in c2["input"][4:]] == [
        "message", "function_call", "function_call_output"]
    assert "Registered" in c2["input"][6]["output"]
    assert c1["tools"] == srv.bodies[2]["tools"]


@pytest.mark.parametrize("mode", ["previous_response_id", "input_items"])
def test_external_tool_call_handed_back_and_continued(tmp_path, mode):
    cell1 = """
        tools = [{'type': 'function', 'name': 'lookup',
                  'parameters': {'type': 'object', 'properties': {'q': {'type': 'string'}}}}]
        r = call_me(input='EXT-PROBE', tools=tools)
        print('HANDED', [(o.type, o.name, o.call_id) for o in r.output if o.type == 'function_call'])
        outs = [{'type': 'function_call_output', 'call_id': 'call_ext1', 'output': 'LOOKUP-RESULT'},
                {'type': 'function_call_output', 'call_id': 'call_host1', 'output': 'CALLER-FAKE'}]
        if MODE == 'previous_response_id':
            r2 = call_me(input=outs, previous_response_id=r.id, tools=tools)
        else:
            items = [{'role': 'user', 'content': 'EXT-PROBE'}]
            items += [o.to_dict() for o in r.output]
            r2 = call_me(input=items + outs, tools=tools)
        print('CONTINUED', r2.output_text)
        """
    script = submit(f"MODE = {mode!r}\n" + code(cell1)) + [
        {"text": "Let me check.", "calls": [
            {"name": "set_next_cell_code", "call_id": "call_host1",
             "arguments": {"code": "print('NEXT-RAN')\nquit()",
                           "summary": "Finish."}},
            {"name": "lookup", "arguments": {"q": "x"}, "call_id": "call_ext1"}]},
        {"text": "EXT-DONE"},
    ]
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert ("HANDED [('function_call', 'set_next_cell_code', 'call_host1'), "
            "('function_call', 'lookup', 'call_ext1')]\n") in p.stdout, show(p)
    assert "CONTINUED EXT-DONE\n" in p.stdout
    assert "NEXT-RAN\n" in p.stdout, "the host call in a mixed response registers"
    # handed back: no supervisor continuation between the two caller requests
    assert len(srv.requests) == 4
    b = srv.bodies[3]
    assert "CALLER-FAKE" not in json.dumps(b)
    outs = tool_outputs(b)
    assert outs["call_ext1"] == ["LOOKUP-RESULT"]
    assert len(outs["call_host1"]) == 1
    assert outs["call_host1"][0].startswith("Registered"), outs
    if mode == "previous_response_id":
        assert b["previous_response_id"] == srv.requests[2]["response_id"]
    else:
        calls = [it["call_id"] for it in b["input"]
                 if it.get("type") == "function_call"]
        assert calls == ["call_host1", "call_ext1"]
        pos = {(it.get("type"), it.get("call_id")): i
               for i, it in enumerate(b["input"])}
        assert pos[("function_call", "call_host1")] < \
            pos[("function_call_output", "call_host1")]


def test_other_tool_call_types_are_handed_back(tmp_path):
    """Any non-host tool call, even beside a host call, goes back to the
    caller at once (no supervisor continuation)."""
    kinds = {
        "custom_tool_call": {"type": "custom_tool_call", "name": "exec",
                             "input": "ls"},
        "local_shell_call": {"type": "local_shell_call", "command": ["ls"]},
        "apply_patch_call": {"type": "apply_patch_call", "operation": {
            "type": "create_file", "path": "x.md", "diff": "+x\n"}},
        "computer_call": {"type": "computer_call",
                          "action": {"type": "screenshot"},
                          "pending_safety_checks": []},
    }
    cell1 = """
        for kind in KINDS:
            r = call_me(input='KIND-' + kind)
            print('GOT', kind, [o.type for o in r.output])
        quit()
        """
    script = submit(f"KINDS = {list(kinds)!r}\n" + code(cell1))
    for kind, item in kinds.items():
        script.append({"calls": [{"name": "get_history_cells",
                                  "arguments": {}, "call_id": "h_" + kind},
                                 item]})
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    for kind in kinds:
        assert f"GOT {kind} ['function_call', '{kind}']\n" in p.stdout, show(p)
        assert continuations(srv, "KIND-" + kind) == []
    assert len(srv.requests) == 2 + len(kinds)


def test_parallel_call_me_from_8_threads_one_successor(tmp_path):
    """8 threads call the model at once (the server holds every answer until
    all 8 requests are in): odd threads get plain answers, even threads'
    answers each submit a successor; exactly one is kept, the other three
    raise NextCellAlreadyScheduled in their thread."""
    cell1 = """
        import threading
        results = {}
        def work(i):
            try:
                results[i] = ('ok', call_me(input=f'PAR-{i}-Q').output_text)
            except NextCellAlreadyScheduled:
                results[i] = ('dup', None)
            except BaseException as e:
                results[i] = ('err', repr(e))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print('PAR', sorted(results.items()))
        """
    barrier = threading.Barrier(8, timeout=20 * SLOW)

    def par(i):
        def answer(rec):
            barrier.wait()
            if i % 2:
                return {"text": f"answer {i}"}
            return {"text": f"part {i}", "next_cell": {
                "code": f"print('SUCC', {i})\nquit()", "summary": f"From {i}."}}
        return answer

    fresh_routes = {FIRST_INPUT: submit(cell1)[0]}
    fresh_routes.update({f"PAR-{i}-Q": par(i) for i in range(8)})
    router = Router(fresh_routes,
                    {f"PAR-{i}-Q": {"text": f"answer {i}"} for i in range(8)})
    with ModelServer(router.turns()) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    m = re.search(r"^PAR (.*)$", p.stdout, re.M)
    assert m, show(p)
    results = dict(eval(m.group(1)))                       # noqa: S307
    for i in range(1, 8, 2):
        assert results[i] == ("ok", f"answer {i}"), results
    winners = [i for i in range(0, 8, 2) if results[i][0] == "ok"]
    assert len(winners) == 1, results
    (w,) = winners
    assert results[w] == ("ok", f"answer {w}")
    assert all(results[i] == ("dup", None) for i in range(0, 8, 2) if i != w)
    assert f"SUCC {w}\n" in p.stdout
    for i in range(8):
        assert len(fresh(srv, f"PAR-{i}-Q")) == 1
    assert sum(len(continuations(srv, f"PAR-{i}-Q")) for i in range(8)) == 1
    assert len(continuations(srv, f"PAR-{w}-Q")) == 1


# ---------------------------------------------------------------------------
# get_history_cells
# ---------------------------------------------------------------------------

def test_get_history_cells_slices(tmp_path):
    cell2 = """
        print('LIVE-MARK', flush=True)
        call_me(input='HIST-PROBE')
        """
    cases = {
        "h_empty": {},
        "h_nulls": {"start": None, "end": None},
        "h_neg": {"start": -2},
        "h_neg2": {"start": -3, "end": -1},
        "h_out": {"start": 5, "end": 100},
        "h_wide": {"start": -100, "end": 100},
        "h_run": {"start": 2, "end": 3},
        "h_end": {"end": 1},
        "h_rev": {"start": 2, "end": 1},
        "h_str": {"start": "1"},
        "h_float": {"start": 1.5},
        "h_bool": {"end": True},
    }
    calls = [{"name": "get_history_cells", "arguments": a, "call_id": cid}
             for cid, a in cases.items()]
    script = (submit("print('one')\ncall_me(input='TO-CELL2')")
              + submit(cell2)
              + [{"calls": calls}]
              + submit("quit()"))
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    cont = continuations(srv, "HIST-PROBE")
    assert len(cont) == 2
    outs = {k: v[0] for k, v in tool_outputs(cont[0]["body"]).items()}
    assert set(outs) == set(cases)

    def cells_of(cid):
        d = json.loads(outs[cid])
        assert d["total"] == 3, (cid, d)
        return [c["cell"] for c in d["cells"]]

    assert json.loads(outs["h_empty"]) == {"total": 3}
    assert json.loads(outs["h_nulls"]) == {"total": 3}
    assert cells_of("h_neg") == [1, 2]
    assert cells_of("h_neg2") == [0, 1]
    assert cells_of("h_out") == []
    assert cells_of("h_wide") == [0, 1, 2]
    assert cells_of("h_end") == [0]
    assert cells_of("h_rev") == []
    (running,) = json.loads(outs["h_run"])["cells"]
    assert running["cell"] == 2 and running["status"] == "running"
    assert "LIVE-MARK" in running["output"]
    assert running["code"] == code(cell2)
    done = json.loads(outs["h_wide"])["cells"]
    assert [c["status"] for c in done] == ["ok", "ok", "running"]
    assert done[0]["code"].startswith("response = call_me(")
    assert done[1]["output"] == "one\n"
    for cid in ("h_str", "h_float", "h_bool"):
        assert outs[cid].startswith("Error"), (cid, outs[cid])


# ---------------------------------------------------------------------------
# model errors
# ---------------------------------------------------------------------------


PROBE_STREAM = """
    try:
        s = call_me(input='PROBE-REQ', stream=True)
        n = 0
        for ev in s:
            n += 1
        print('RESULT', s.response.output_text)
    except ModelError as e:
        print('MODELERROR', n > 0, e)
    quit()
    """


def run_probe(tmp_path, turns, args=(), probe=PROBE):
    """Cell 1 calls the model once (PROBE-REQ) and prints the outcome."""
    with ModelServer(submit(probe) + turns) as srv:
        p = run_agent(srv, tmp_path, args=args)
    assert p.returncode == 0, show(p)
    probes = fresh(srv, "PROBE-REQ")
    m = re.search(r"^(RESULT|MODELERROR) (.*)$", p.stdout, re.M)
    assert m, show(p)
    return m.group(1), m.group(2), probes, p


@pytest.mark.parametrize("status,errcode,message", [
    (401, "invalid_api_key", "Incorrect API key provided: sk-te***st."),
    (403, "unsupported_country_region_territory",
     "Country, region, or territory not supported"),
    (404, "model_not_found", "The model `gpt-nope` does not exist"),
])
def test_http_client_errors_are_not_retried(tmp_path, status, errcode, message):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "http_error", "status": status,
         "error": {"message": message, "code": errcode}},
        {"text": "SHOULD-NOT-BE-RETRIED"}])
    assert what == "MODELERROR", show(p)
    assert len(probes) == 1
    assert f"HTTP {status}" in text and message in text, text
    assert "\n" not in text.strip()


def test_http_429_honours_retry_after_ms(tmp_path):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "http_error", "status": 429,
         "error": {"message": "Rate limit reached."},
         "headers": {"retry-after-ms": "600", "retry-after": "3"}},
        {"text": "AFTER-429"}])
    assert (what, text) == ("RESULT", "AFTER-429"), show(p)
    assert len(probes) == 2
    gap = probes[1]["time"] - probes[0]["time"]
    # retry-after-ms (0.6 s) wins over retry-after (3 s) and over the
    # default backoff (at most 0.5 s for the first retry)
    assert 0.55 <= gap < 2.5, gap


def test_http_429_insufficient_quota_is_not_retried(tmp_path):
    # A 429 for an exhausted quota will not get better by waiting.
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "http_error", "status": 429,
         "error": {"message": "You exceeded your current quota.",
                   "type": "insufficient_quota", "code": "insufficient_quota"},
         "headers": {"retry-after-ms": "20"}},
        {"text": "SHOULD-NOT-BE-RETRIED"}])
    assert what == "MODELERROR", show(p)
    assert len(probes) == 1
    assert "HTTP 429" in text and "insufficient_quota" in text, text


@pytest.mark.parametrize("status", [408, 409, 500, 503])
def test_http_retryable_status_is_retried(tmp_path, status):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "http_error", "status": status},
        {"text": "AFTER-5XX"}])
    assert (what, text) == ("RESULT", "AFTER-5XX"), show(p)
    assert len(probes) == 2


def test_http_retries_are_bounded(tmp_path):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "http_error", "status": 503, "repeat": 3,
         "error": {"message": "Overloaded, try later."},
         "headers": {"retry-after-ms": "20"}},
        {"text": "ONE-TOO-MANY"}],
        # the quick retries alone: no waiting out an outage
        args=["--max-retries", "2", "--outage-patience", "0"])
    assert what == "MODELERROR", show(p)
    assert "HTTP 503" in text and "Overloaded, try later." in text
    assert len(probes) == 3


def test_connection_dropped_before_any_event_is_retried(tmp_path):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "drop", "after": 0},
        {"text": "AFTER-DROP"}])
    assert (what, text) == ("RESULT", "AFTER-DROP"), show(p)
    assert len(probes) == 2


def test_dropped_stream_raises_model_error(tmp_path):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "drop", "text": "never finished"},
        {"text": "RETRIED-AFTER-PARTIAL-STREAM"}])
    assert what == "MODELERROR", show(p)
    assert "stream ended" in text, text


@pytest.mark.parametrize("terminal,stream", [
    ("error_then_failed", False), ("error", False), ("failed", False),
    ("error_then_failed", True)])
def test_error_event_mid_stream_raises_model_error(tmp_path, terminal, stream):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "stream_error", "text": "partial answer", "terminal": terminal,
         "error": {"type": "server_error", "code": "server_error",
                   "message": "MIDSTREAM-BOOM happened"}}],
        probe=PROBE_STREAM if stream else PROBE)
    assert what == "MODELERROR", show(p)
    assert "MIDSTREAM-BOOM happened" in text, text
    if stream:
        assert text.startswith("True "), "events came before the error"
    assert len(probes) == 1


def test_invalid_json_event_raises_model_error(tmp_path):
    what, text, probes, p = run_probe(tmp_path, [
        {"kind": "invalid_json", "text": "x", "at": 3,
         "data": "{\"type\": oops"}])
    assert what == "MODELERROR", show(p)
    assert "invalid JSON" in text, text


# ---------------------------------------------------------------------------
# secrets
# ---------------------------------------------------------------------------

def canaries():
    h = secrets.token_hex
    return {
        "OPENAI_API_KEY": "sk-canary-" + h(16),
        "OTHER_API_KEY": "other-canary-" + h(16),
        "SERVICE_TOKEN": "tok-canary-" + h(16),
        "APP_SECRET": "sec-canary-" + h(16),
        "DB_PASSWORD": "pw-canary-" + h(16),
        "PLAIN_SETTING": "listed-canary-" + h(16),   # named in AGENTZ_SECRETS
    }


def test_redaction_in_output_records_and_tool_results(tmp_path):
    can = canaries()
    values = list(can.values())
    (tmp_path / "canaries.json").write_text(json.dumps(values))
    cell1 = """
        import json, os, sys
        vals = json.load(open('canaries.json'))
        for v in vals:
            print('WHOLE', v)
        sys.stdout.flush()
        v = vals[0]
        # each secret in two writes; the supervisor reads the first half
        # while the model call between them runs
        os.write(1, b'SPLIT ' + v[:9].encode())
        call_me(input='BETWEEN-1')
        os.write(1, v[9:].encode() + b' END\\n')
        os.write(2, b'ERR ' + vals[2][:5].encode())
        call_me(input='BETWEEN-2')
        os.write(2, vals[2][5:].encode() + b' END\\n')
        call_me(input='TO-CELL2')
        """
    cell2 = """
        import json
        open('record1.json', 'w').write(json.dumps(CELL_OUTPUTS[1]))
        call_me(input='HIST-REDACT')
        raise ValueError('failing with ' + open('canaries.json').read())
        """
    repair = """
        import json
        open('last_error.json', 'w').write(json.dumps(get_last_error()))
        quit()
        """
    script = (submit(cell1) + [{"text": "between"}] * 2 + submit(cell2)
              + [{"calls": [{"name": "get_history_cells", "call_id": "h_all",
                             "arguments": {"start": 0, "end": 3}}]},
                 {"text": "seen it"}]
              + submit(repair))
    env = dict(can, AGENTZ_SECRETS="UNUSED_NAME,PLAIN_SETTING")
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path, env=env)
    assert p.returncode == 0, show(p)
    assert srv.requests[0]["authorization"] == "Bearer " + can["OPENAI_API_KEY"]

    def clean(text, what):
        for name, v in can.items():
            assert v not in text, f"{name} leaked into {what}"
        assert "[REDACTED]" in text, what

    # shown output, whole and split across chunks
    clean(p.stdout, "stdout")
    clean(p.stderr, "stderr")
    assert p.stdout.count("WHOLE [REDACTED]\n") == len(values), show(p)
    assert "SPLIT [REDACTED] END\n" in p.stdout, show(p)
    assert "ERR [REDACTED] END\n" in p.stderr, show(p)
    # records, as cells see them
    rec1 = json.loads((tmp_path / "record1.json").read_text())
    clean(rec1["output"], "CELL_OUTPUTS[1]")
    assert "SPLIT [REDACTED] END\nERR [REDACTED] END\n" in rec1["output"]
    last = (tmp_path / "last_error.json").read_text()
    clean(last, "get_last_error()")
    # the tool result of get_history_cells
    (cont,) = continuations(srv, "HIST-REDACT")
    hist = tool_outputs(cont["body"])["h_all"][0]
    clean(hist, "get_history_cells output")
    assert "SPLIT [REDACTED] END\nERR [REDACTED] END\n" in \
        json.loads(hist)["cells"][1]["output"]
    # the repair request carries the failed record
    (rb,) = [r["body"] for r in srv.requests if is_recovery(r)]
    clean(rb["input"], "the repair request")
    # and nothing the model received holds a secret
    for b in srv.bodies:
        for v in values:
            assert v not in json.dumps(b)


SCAN = """
    import json, os

    def scan(pairs):
        '''Count places in this process's memory where a+b is stored, for
        each (a, b); the whole string is never built here.'''
        found = [0] * len(pairs)
        regions, skipped = [], []
        for line in open('/proc/self/maps'):
            f = line.split()
            if not f[1].startswith('r') or (len(f) > 5 and f[5] in
                    ('[vvar]', '[vvar_vclock]', '[vsyscall]')):
                continue
            lo, hi = (int(x, 16) for x in f[0].split('-'))
            if hi - lo > 1 << 36:       # only ASan's shadow (SAN builds)
                skipped.append(hi - lo)
                continue
            regions.append((lo, hi))
        errors = scanned = 0
        with open('/proc/self/mem', 'rb', buffering=0) as mem:
            for lo, hi in regions:
                pos, tail = lo, b''
                while pos < hi:
                    n = min(1 << 20, hi - pos)
                    try:
                        mem.seek(pos)
                        chunk = mem.read(n)
                    except OSError:
                        errors += 1
                        break
                    scanned += len(chunk)
                    buf = tail + chunk
                    for i, (a, b) in enumerate(pairs):
                        j = buf.find(a)
                        while j >= 0:
                            if buf[j + len(a):j + len(a) + len(b)] == b:
                                found[i] += 1
                            j = buf.find(a, j + 1)
                    tail = buf[-128:]
                    pos += n
        return found, errors, scanned, skipped

    pairs = [(a.encode(), b.encode()) for a, b in HALVES]
    control = CONTROL[0] + CONTROL[1]        # really in memory
    found, errors, scanned, skipped = scan(pairs + [(CONTROL[0].encode(), CONTROL[1].encode())])
    environ = open('/proc/self/environ', 'rb').read()
    result = {
        'found': found[:-1], 'control': found[-1], 'errors': errors,
        'scanned': scanned, 'skipped': skipped,
        'env_hits': [a in environ or b in environ for a, b in pairs],
        'env_names': [n for n in NAMES if n in os.environ or
                      (n + '=').encode() in environ],
    }
    print('SCAN', json.dumps(result))
    quit()
    """


def test_worker_environment_and_memory_hold_no_secret(tmp_path):
    can = canaries()
    halves = [(v[:len(v) // 2], v[len(v) // 2:]) for v in can.values()]
    ctl = "control-" + secrets.token_hex(16)
    cell1 = (f"HALVES = {halves!r}\nCONTROL = {(ctl[:12], ctl[12:])!r}\n"
             f"NAMES = {list(can)!r}\n" + code(SCAN))
    env = dict(can, AGENTZ_SECRETS="PLAIN_SETTING")
    with ModelServer(submit(cell1)) as srv:
        p = run_agent(srv, tmp_path, env=env, timeout=60)
    assert p.returncode == 0, show(p)
    # the secrets really are in agentz's environment
    assert srv.requests[0]["authorization"] == "Bearer " + can["OPENAI_API_KEY"]
    m = re.search(r"^SCAN (.*)$", p.stdout, re.M)
    assert m, show(p)
    r = json.loads(m.group(1))
    assert r["control"] >= 1, f"the scanner works: {r}"
    assert r["scanned"] > 1 << 20, r
    assert SAN or r["skipped"] == [], r
    assert r["env_names"] == [], r
    assert r["env_hits"] == [False] * len(can), r
    assert r["found"] == [0] * len(can), \
        f"secrets in worker memory: {dict(zip(can, r['found']))}"
