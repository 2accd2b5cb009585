"""agentz "TASK" (issue 3, SPEC §2-§6): how the supervisor rewrites the
model requests a cell makes (reasoning effort, host tool names, engine fields),
host-only continuations, external tool calls handed back to the cell, and
get_history_cells.  Conventions as in test_agent.py (helpers in agent_util.py).
"""
import json
import os
import re
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_server import ModelServer  # noqa: E402
from agent_util import (  # noqa: E402
    FIRST_INPUT, HOST_TOOLS, Router, SLOW, code, continuations, fresh,
    run_agent, show, submit, tool_outputs)


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
