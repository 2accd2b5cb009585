"""Tests of the scripted Responses API test server (model_server.py): normal
responses (text, reasoning, tool calls, incomplete, non-streamed) and
failures (HTTP errors, stream errors, dropped streams, invalid JSON events).

Run: /usr/bin/python3 -m pytest -q tests/integ/test_model_server.py

Every test talks HTTP to an in-process ModelServer on 127.0.0.1, through a
raw socket (to see chunk boundaries and an unterminated chunked body) or
http.client / urllib.  No sleeps are used for synchronisation.  Helpers in
raw_http.py.
"""
import http.client
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from model_server import ModelServer  # noqa: E402
from raw_http import (  # noqa: E402
    check_seq, raw_request, req, sse_events, types)


TEXT_EVENTS = ["response.output_item.added", "response.content_part.added"]
TEXT_END = ["response.output_text.done", "response.content_part.done",
            "response.output_item.done"]


@pytest.fixture
def server():
    servers = []

    def make(script, **kw):
        s = ModelServer(script, **kw).start()
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


# Normal responses
# ---------------------------------------------------------------------------

def test_text_stream_sequence_and_record(server):
    srv = server([{"text": "Hello, world!", "delta_size": 4,
                   "usage": {"input_tokens": 100}}])
    body = req(instructions="Be brief.", tools=[{"type": "function", "name": "f"}])
    r = raw_request(srv.port, body, headers={"Authorization": "Bearer sk-test"})
    assert r.status == 200 and r.complete
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.headers["x-request-id"].startswith("req_")
    evs = r.events()
    assert types(evs) == (["response.created", "response.in_progress"] + TEXT_EVENTS
                          + ["response.output_text.delta"] * 4 + TEXT_END
                          + ["response.completed"])
    check_seq(evs)
    assert len(r.chunks) == len(evs)         # one HTTP chunk per event
    deltas = [e["delta"] for e in evs if e["type"] == "response.output_text.delta"]
    assert deltas == ["Hell", "o, w", "orld", "!"]
    assert all(e["logprobs"] == [] and e["obfuscation"] for e in evs
               if e["type"] == "response.output_text.delta")
    assert evs[-4]["text"] == "Hello, world!"
    created, final = evs[0]["response"], evs[-1]["response"]
    assert created["usage"] is None and created["output"] == []
    assert created["status"] == "in_progress"
    assert final["id"] == created["id"] and final["id"].startswith("resp_")
    assert final["status"] == "completed" and final["completed_at"]
    assert final["instructions"] == "Be brief." and final["tools"] == body["tools"]
    assert final["output"][0]["content"][0]["text"] == "Hello, world!"
    u = final["usage"]
    assert u["input_tokens"] == 100 and u["output_tokens"] == 4
    assert u["total_tokens"] == 104
    assert u["output_tokens_details"] == {"reasoning_tokens": 0}
    rec = srv.requests[0]
    assert rec["body"] == body and rec["path"] == "/v1/responses"
    assert srv.bodies == [body]
    assert rec["authorization"] == "Bearer sk-test"
    assert rec["headers"]["authorization"] == "Bearer sk-test"
    assert rec["turn"] == 0 and rec["status"] == 200
    assert rec["response_id"] == final["id"]
    assert srv.responses[final["id"]]["output"] == final["output"]
    assert srv.unused_turns() == []


def test_explicit_deltas_phase_and_no_obfuscation(server):
    srv = server([{"text": ["é", "€x", "😀"], "phase": "final_answer"}])
    r = raw_request(srv.port, req(stream_options={"include_obfuscation": False}))
    evs = r.events()
    deltas = [e for e in evs if e["type"] == "response.output_text.delta"]
    assert [d["delta"] for d in deltas] == ["é", "€x", "😀"]
    assert all("obfuscation" not in d for d in deltas)
    assert evs[2]["item"]["phase"] == "final_answer"
    assert evs[-1]["response"]["output"][0]["phase"] == "final_answer"


def test_reasoning_summary_raw_and_encrypted(server):
    srv = server([
        {"reasoning": {"summary": ["First part.", "Second."],
                       "encrypted_content": "gAAAAB-final", "tokens": 448},
         "text": "ok"},
        {"reasoning": {"content": "raw thoughts"}, "text": "ok"},
        {"reasoning": True, "text": "ok"},
    ])
    evs = raw_request(srv.port, req()).events()
    check_seq(evs)
    part = ["response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done"]
    # "Second." fits in one 8-character delta
    assert types(evs)[2:13] == (["response.output_item.added"] + part + part[:2]
                                + part[3:] + ["response.output_item.done"])
    added, done = evs[2]["item"], evs[12]["item"]
    assert added["summary"] == [] and done["summary"] == [
        {"type": "summary_text", "text": "First part."},
        {"type": "summary_text", "text": "Second."}]
    assert done["encrypted_content"] == "gAAAAB-final"
    assert added["encrypted_content"] != "gAAAAB-final"   # as in real streams
    assert [e["summary_index"] for e in evs[3:12]] == [0] * 5 + [1] * 4
    final = evs[-1]["response"]
    assert final["output"][0] == done and final["output"][1]["type"] == "message"
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] == 448
    assert final["usage"]["output_tokens"] == 448 + 1

    evs = raw_request(srv.port, req()).events()
    rt = [e for e in evs if e["type"].startswith("response.reasoning_text")]
    assert "".join(e["delta"] for e in rt[:-1]) == "raw thoughts"
    assert rt[-1]["text"] == "raw thoughts"
    assert evs[3]["part"] == {"type": "reasoning_text", "text": ""}
    assert "encrypted_content" not in evs[2]["item"]       # not requested

    evs = raw_request(srv.port, req(include=["reasoning.encrypted_content"])).events()
    assert types(evs)[2:4] == ["response.output_item.added", "response.output_item.done"]
    assert evs[3]["item"]["encrypted_content"].startswith("gAAAA")


def test_function_calls_with_text_and_reasoning(server):
    code = "x = 1\nprint(f'{x}')"
    srv = server([{"reasoning": True, "text": "Let me look.", "phase": "commentary",
                   "calls": [{"name": "get_capital", "arguments": {"country": "FR"}},
                             {"name": "get_capital", "arguments": "{\"country\":\"DE\"}",
                              "call_id": "call_de"}],
                   "next_cell": {"code": code, "summary": "Print x."}},
                  {"next_cell": "print(2)"}])
    first = raw_request(srv.port, req())
    evs = first.events()
    check_seq(evs)
    final = evs[-1]["response"]
    out = final["output"]
    assert [o["type"] for o in out] == ["reasoning", "message", "function_call",
                                        "function_call", "function_call"]
    assert out[1]["phase"] == "commentary"
    calls = out[2:]
    assert calls[1]["call_id"] == "call_de"
    assert len({c["call_id"] for c in calls}) == 3 and len({c["id"] for c in calls}) == 3
    assert all(c["call_id"].startswith("call_") and c["id"].startswith("fc_")
               and c["status"] == "completed" for c in calls)
    assert json.loads(calls[0]["arguments"]) == {"country": "FR"}
    assert json.loads(calls[2]["arguments"]) == {"code": code, "summary": "Print x."}
    assert calls[2]["name"] == "set_next_cell_code"
    for idx, call in zip((2, 3, 4), calls):
        added = [e for e in evs if e["type"] == "response.output_item.added"
                 and e["output_index"] == idx][0]
        assert added["item"]["arguments"] == "" and added["item"]["status"] == "in_progress"
        deltas = [e for e in evs if e["type"] == "response.function_call_arguments.delta"
                  and e["output_index"] == idx]
        assert deltas and all("call_id" not in d and d["item_id"] == call["id"]
                              for d in deltas)
        assert "".join(d["delta"] for d in deltas) == call["arguments"]
        done = [e for e in evs if e["type"] == "response.function_call_arguments.done"
                and e["output_index"] == idx][0]
        assert done["arguments"] == call["arguments"]

    # previous_response_id is recorded and echoed; ids are unique
    second = raw_request(srv.port, req(previous_response_id=final["id"]))
    f2 = second.events()[-1]["response"]
    assert f2["previous_response_id"] == final["id"] and f2["id"] != final["id"]
    assert srv.requests[1]["body"]["previous_response_id"] == final["id"]
    assert set(srv.responses) == {final["id"], f2["id"]}
    assert json.loads(f2["output"][0]["arguments"]) == {"code": "print(2)",
                                                        "summary": "Next cell."}


def test_other_tool_call_kinds(server):
    srv = server([{"calls": [
        {"type": "custom_tool_call", "name": "exec", "input": "ls -la /tmp"},
        {"type": "local_shell_call", "command": ["ls", "-a", "~"], "timeout_ms": 500},
        {"type": "apply_patch_call", "operation": {"type": "create_file",
                                                   "path": "a.md", "diff": "+## A\n+b\n"}},
        {"type": "apply_patch_call", "operation": {"type": "delete_file", "path": "b.md"}},
        {"type": "computer_call", "action": {"type": "screenshot"},
         "pending_safety_checks": []},
    ]}])
    evs = raw_request(srv.port, req()).events()
    check_seq(evs)
    by_index = {}
    for e in evs:
        if "output_index" in e:
            by_index.setdefault(e["output_index"], []).append(e)
    ctc = by_index[0]
    assert types(ctc) == (["response.output_item.added"]
                          + ["response.custom_tool_call_input.delta"] * 2
                          + ["response.custom_tool_call_input.done",
                             "response.output_item.done"])
    assert ctc[0]["item"]["input"] == "" and ctc[-1]["item"]["input"] == "ls -la /tmp"
    assert ctc[-1]["item"]["id"].startswith("ctc_") and "status" not in ctc[-1]["item"]
    lsh = by_index[1]
    assert types(lsh) == ["response.output_item.added", "response.output_item.done"]
    assert lsh[0]["item"]["action"] == {"type": "exec", "command": [], "env": {}}
    assert lsh[1]["item"]["action"] == {"type": "exec", "command": ["ls", "-a", "~"],
                                        "env": {}, "timeout_ms": 500}
    assert lsh[1]["item"]["id"].startswith("lsh_")
    apc = by_index[2]
    assert apc[0]["item"]["operation"] == {"type": "create_file", "path": "a.md", "diff": ""}
    diff_deltas = [e["delta"] for e in apc
                   if e["type"] == "response.apply_patch_call_operation_diff.delta"]
    assert "".join(diff_deltas) == "+## A\n+b\n"
    assert apc[-2]["type"] == "response.apply_patch_call_operation_diff.done"
    assert apc[-1]["item"]["operation"]["diff"] == "+## A\n+b\n"
    assert types(by_index[3]) == ["response.output_item.added", "response.output_item.done"]
    cu = by_index[4][-1]["item"]
    assert cu["type"] == "computer_call" and cu["call_id"].startswith("call_")
    assert cu["status"] == "completed" and by_index[4][0]["item"]["status"] == "in_progress"
    assert len(evs[-1]["response"]["output"]) == 5


def test_incomplete_and_refusal(server):
    srv = server([{"text": "cut", "incomplete": True},
                  {"output": [{"type": "message", "refusal": "No."}]}])
    evs = raw_request(srv.port, req()).events()
    assert evs[-1]["type"] == "response.incomplete"
    r = evs[-1]["response"]
    assert r["status"] == "incomplete" and r["completed_at"] is None
    assert r["incomplete_details"] == {"reason": "max_output_tokens"}
    assert r["output"][0]["status"] == "incomplete"
    evs = raw_request(srv.port, req()).events()
    assert "response.refusal.delta" in types(evs)
    assert [e for e in evs if e["type"] == "response.refusal.done"][0]["refusal"] == "No."


def test_non_streamed_response(server):
    srv = server([{"text": "plain", "response": {"model": "gpt-test-2026-01-01"}}])
    r = raw_request(srv.port, req(stream=False))
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    assert "content-length" in r.headers
    d = r.json()
    assert d["object"] == "response" and d["status"] == "completed"
    assert d["model"] == "gpt-test-2026-01-01"
    assert d["output"][0]["content"][0]["text"] == "plain"
    assert d["usage"]["total_tokens"] > 0 and d["id"] in srv.responses


# ---------------------------------------------------------------------------
# Failures
# ---------------------------------------------------------------------------

def test_http_errors(server):
    statuses = [401, 403, 404, 408, 409, 429, 500, 503]
    script = [{"kind": "http_error", "status": s} for s in statuses]
    script[5]["headers"] = {"retry-after": "1", "retry-after-ms": "1200"}
    script[5]["error"] = {"message": "Slow down. Please try again in 1.2s."}
    script.append({"kind": "http_error", "status": 502, "body": "<html>bad gateway</html>",
                   "content_type": "text/html"})
    srv = server(script)
    for s in statuses:
        r = raw_request(srv.port, req())
        assert r.status == s and r.headers["content-type"] == "application/json"
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["message"]
        if s == 401:
            assert err["code"] == "invalid_api_key"
        if s == 429:
            assert err["code"] == "rate_limit_exceeded"
            assert err["message"] == "Slow down. Please try again in 1.2s."
            assert r.headers["retry-after"] == "1"
            assert r.headers["retry-after-ms"] == "1200"
        else:
            assert "retry-after" not in r.headers
    r = raw_request(srv.port, req())
    assert r.status == 502 and r.body == b"<html>bad gateway</html>"
    assert r.headers["content-type"] == "text/html"
    assert [x["status"] for x in srv.requests] == statuses + [502]


def test_http_error_keeps_connection_usable(server):
    srv = server([{"kind": "http_error", "status": 503}, {"text": "after retry"}])
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", "/v1/responses", json.dumps(req()))
    r1 = conn.getresponse()
    assert r1.status == 503 and json.loads(r1.read())["error"]["type"]
    sock = conn.sock
    conn.request("POST", "/v1/responses", json.dumps(req()))
    r2 = conn.getresponse()
    assert r2.status == 200 and conn.sock is sock          # kept alive
    assert "after retry" in r2.read().decode()
    conn.close()


def test_stream_errors(server):
    quota = {"type": "insufficient_quota", "code": "insufficient_quota",
             "message": "You exceeded your current quota."}
    srv = server([
        {"kind": "stream_error", "error": quota},
        {"kind": "stream_error", "text": "partial answer", "delta_size": 4, "after": 6},
        {"kind": "stream_error", "terminal": "error", "error": {"code": None}},
        {"kind": "stream_error", "terminal": "failed", "text": "done part"},
        {"kind": "stream_error", "terminal": "error", "flat": True},
    ])
    r = raw_request(srv.port, req())
    assert r.status == 200 and r.complete
    evs = r.events()
    check_seq(evs)
    assert types(evs) == ["response.created", "response.in_progress", "error",
                          "response.failed"]
    assert evs[2]["error"]["code"] == "insufficient_quota" and "message" in evs[2]["error"]
    failed = evs[3]["response"]
    assert failed["status"] == "failed" and failed["usage"] is None
    assert failed["error"] == {"code": "insufficient_quota",
                               "message": "You exceeded your current quota."}
    assert srv.responses[failed["id"]]["status"] == "failed"

    evs = raw_request(srv.port, req()).events()
    assert types(evs)[:6] == ["response.created", "response.in_progress"] + TEXT_EVENTS \
        + ["response.output_text.delta"] * 2
    assert types(evs)[6:] == ["error", "response.failed"]
    assert evs[6]["error"]["type"] == "server_error"
    assert evs[-1]["response"]["output"] == []              # nothing finished

    evs = raw_request(srv.port, req()).events()
    assert types(evs)[-1] == "error" and evs[-1]["error"]["code"] is None

    evs = raw_request(srv.port, req()).events()
    assert "error" not in types(evs) and evs[-1]["type"] == "response.failed"
    assert evs[-1]["response"]["output"][0]["content"][0]["text"] == "done part"

    evs = raw_request(srv.port, req()).events()
    assert set(evs[-1]) == {"type", "code", "message", "param", "sequence_number"}


def test_dropped_stream(server):
    srv = server([
        {"kind": "drop", "text": "never finished", "delta_size": 4},
        {"kind": "drop", "text": "abc", "after": 3, "partial_bytes": 25},
        {"kind": "drop", "text": "http.client sees it"},
        {"kind": "drop", "text": "rst", "after": 2, "reset": True},
    ])
    r = raw_request(srv.port, req())
    assert r.status == 200 and not r.complete
    evs = r.events()
    assert types(evs)[-1] == "response.output_item.done"      # all but the terminal
    check_seq(evs)

    r = raw_request(srv.port, req())
    assert not r.complete
    text = r.body.decode()
    assert text.endswith(text.split("\n\n")[-1]) and len(text.split("\n\n")[-1]) == 25
    assert types(sse_events(r.body.rsplit(b"\n\n", 1)[0] + b"\n\n"))[-1] == \
        "response.output_item.added"

    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", "/v1/responses", json.dumps(req()))
    resp = conn.getresponse()
    assert resp.status == 200
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()

    r = raw_request(srv.port, req())
    assert not r.complete
    assert srv.requests[0]["response_id"] and srv.responses == {}


def test_dropped_non_streamed_body(server):
    srv = server([{"kind": "drop", "text": "x"}])
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("POST", "/v1/responses", json.dumps(req(stream=False)))
    resp = conn.getresponse()
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()


def test_invalid_json_event(server):
    srv = server([{"kind": "invalid_json", "text": "abc", "at": 3},
                  {"kind": "invalid_json", "text": "abc", "at": 0, "data": "{oops"}])
    r = raw_request(srv.port, req())
    assert r.complete
    blocks = [b for b in r.body.decode().split("\n\n") if b]
    bad = []
    seqs = []
    for i, b in enumerate(blocks):
        name, data = b.split("\n")
        try:
            seqs.append(json.loads(data[6:])["sequence_number"])
        except ValueError:
            bad.append(i)
            assert name == "event: response.content_part.added"
    assert bad == [3]
    assert seqs == [n for n in range(len(blocks)) if n != 3]
    assert json.loads(blocks[-1].split("\n")[1][6:])["type"] == "response.completed"
    r = raw_request(srv.port, req())
    assert r.body.decode().split("\n\n")[0] == "event: response.created\ndata: {oops"


# ---------------------------------------------------------------------------
