"""Tests of the scripted Responses API test server (model_server.py).

Run: /usr/bin/python3 -m pytest -q tests/integ/test_model_server.py

Every test talks HTTP to an in-process ModelServer on 127.0.0.1, through a
raw socket (to see chunk boundaries and an unterminated chunked body) or
http.client / urllib.  No sleeps are used for synchronisation.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from model_server import ModelServer, ScriptError  # noqa: E402

SERVER_PY = os.path.join(HERE, "model_server.py")
from agentz_util import FIXTURES as _FIXTURES  # noqa: E402

FIXTURES = Path(_FIXTURES)

TEXT_EVENTS = ["response.output_item.added", "response.content_part.added"]
TEXT_END = ["response.output_text.done", "response.content_part.done",
            "response.output_item.done"]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

class Reply:
    def __init__(self, status, headers, body, chunks, complete):
        self.status = status
        self.headers = headers
        self.body = body
        self.chunks = chunks          # sizes of the HTTP chunks received
        self.complete = complete      # terminating zero chunk seen

    def json(self):
        return json.loads(self.body)

    def events(self):
        return sse_events(self.body)


def decode_chunked(data):
    """(body, chunk sizes, complete) of a possibly cut chunked body."""
    body, sizes, pos = bytearray(), [], 0
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return bytes(body), sizes, False
        n = int(data[pos:eol].split(b";")[0], 16)
        if n == 0:
            return bytes(body), sizes, data[eol + 2:eol + 4] == b"\r\n"
        start = eol + 2
        piece = data[start:start + n]
        body += piece
        if len(piece) < n or data[start + n:start + n + 2] != b"\r\n":
            return bytes(body), sizes, False
        sizes.append(n)
        pos = start + n + 2


def raw_request(port, body=None, path="/v1/responses", method="POST",
                headers=None, raw_body=None):
    """One request on a fresh connection (Connection: close); read to EOF."""
    if raw_body is None:
        raw_body = b"" if body is None else json.dumps(body).encode()
    h = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
         "Content-Length": str(len(raw_body)), "Connection": "close"}
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + raw_body)
        data = bytearray()
        while True:
            try:
                b = s.recv(1 << 16)
            except ConnectionResetError:
                break
            if not b:
                break
            data += b
    data = bytes(data)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("transfer-encoding") == "chunked":
        body, sizes, complete = decode_chunked(rest)
    else:
        n = int(hdrs.get("content-length", len(rest)))
        body, sizes, complete = rest[:n], [], len(rest) >= n
    return Reply(status, hdrs, body, sizes, complete)


def sse_events(body):
    """Parse SSE; return event dicts, checking `event:` equals data.type."""
    out = []
    for block in body.decode("utf-8").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if not data:
            continue
        d = json.loads("\n".join(data))
        if name is not None:
            assert name == d["type"]
        out.append(d)
    return out


def types(evs):
    return [e["type"] for e in evs]


def check_seq(evs):
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))


def req(input="hi", stream=True, **kw):
    d = {"model": "gpt-test", "input": input, "stream": stream}
    d.update(kw)
    return d


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


# ---------------------------------------------------------------------------
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
# Timing, replay, big, framing
# ---------------------------------------------------------------------------

def test_slow_stream_and_pause(server):
    # 10 events: 9 gaps of 0.02 s + one pause of 0.15 s after event 2.
    srv = server([{"text": "abcdefgh", "delta_size": 4, "delay": 0.02,
                   "pause_after": 2, "pause": 0.15}])
    t0 = time.monotonic()
    r = raw_request(srv.port, req())
    elapsed = time.monotonic() - t0
    assert len(r.events()) == 10 and r.complete
    assert elapsed >= 0.9 * (9 * 0.02 + 0.15)


def test_initial_delay(server):
    srv = server([{"kind": "http_error", "status": 500, "initial_delay": 0.1}])
    t0 = time.monotonic()
    assert raw_request(srv.port, req()).status == 500
    assert time.monotonic() - t0 >= 0.09


def test_replay_verbatim_with_chunk_size(server, tmp_path):
    evs = [{"type": "response.created", "sequence_number": 0,
            "response": {"id": "resp_fixed", "status": "in_progress", "output": []}},
           {"type": "response.completed", "sequence_number": 1,
            "response": {"id": "resp_fixed", "status": "completed", "output": [],
                         "usage": {"input_tokens": 1}}}]
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in evs)
    sse = ": comment\n\n" + sse.replace("in_progress", "in_progress ünïcode")
    (tmp_path / "rec.sse").write_bytes(sse.encode())
    (tmp_path / "rec.jsonl").write_text("\n".join(json.dumps(e) for e in evs))
    srv = server([{"kind": "replay", "file": "rec.sse", "chunk_size": 7},
                  {"kind": "replay", "file": "rec.sse"},
                  {"kind": "replay", "file": str(tmp_path / "rec.jsonl")},
                  {"kind": "replay", "file": "rec.sse"}], base_dir=str(tmp_path))
    r = raw_request(srv.port, req())
    assert r.body == sse.encode() and r.complete
    assert all(n == 7 for n in r.chunks[:-1]) and 0 < r.chunks[-1] <= 7
    r = raw_request(srv.port, req())
    assert r.body == sse.encode() and len(r.chunks) == 3       # one chunk per event
    r = raw_request(srv.port, req())
    assert r.body.decode() == "".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in evs)
    assert srv.responses["resp_fixed"]["status"] == "completed"
    d = raw_request(srv.port, req(stream=False)).json()
    assert d["id"] == "resp_fixed" and d["usage"] == {"input_tokens": 1}
    assert srv.requests[0]["response_id"] == "resp_fixed"


def test_replay_shared_fixtures(server):
    files = ["text_stream.sse", "reasoning_summary_stream.sse",
             "openrouter_reasoning_text_stream.sse", "local_shell_call_stream.jsonl"]
    assert FIXTURES.is_dir(), \
        f"recorded fixtures missing at {FIXTURES} (the tests need ../shared)"
    srv = server([{"kind": "replay", "file": f} for f in files], base_dir=str(FIXTURES))
    for f in files[:3]:
        r = raw_request(srv.port, req())
        assert r.complete and r.body == (FIXTURES / f).read_bytes()
    evs = raw_request(srv.port, req()).events()
    assert types(evs)[-1] == "response.completed" and len(evs) == 7


def test_big_stream(server):
    srv = server([{"kind": "big", "mb": 2, "delta_size": 32, "next_cell": "print('big')"}])
    t0 = time.monotonic()
    r = raw_request(srv.port, req())
    assert time.monotonic() - t0 < 2.0
    assert r.complete and len(r.body) >= 2 * (1 << 20)
    assert max(r.chunks) >= 1 << 19                           # written in big chunks
    evs = r.events()
    check_seq(evs)
    deltas = [e for e in evs if e["type"] == "response.output_text.delta"]
    delta_bytes = sum(len(f"event: {e['type']}\ndata: ") for e in deltas) + \
        sum(len(json.dumps(e, separators=(",", ":"))) + 2 for e in deltas)
    assert delta_bytes >= 2 * (1 << 20)
    assert {len(d["delta"]) for d in deltas} == {32}
    text = "".join(d["delta"] for d in deltas)
    done = [e for e in evs if e["type"] == "response.output_text.done"][0]
    assert done["text"] == text
    final = evs[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == text
    assert json.loads(final["output"][1]["arguments"])["code"] == "print('big')"
    assert final["usage"]["output_tokens"] >= len(text) // 4


def test_openrouter_style_framing(server):
    srv = server([{"text": "hi", "framing": {
        "event_lines": False, "done_marker": True, "crlf": True,
        "preamble": ": OPENROUTER PROCESSING\r\n\r\n"}}])
    r = raw_request(srv.port, req())
    text = r.body.decode()
    assert text.startswith(": OPENROUTER PROCESSING\r\n\r\ndata: {")
    assert "event:" not in text and text.endswith("data: [DONE]\r\n\r\n")
    datas = [b[6:] for b in text.split("\r\n\r\n") if b.startswith("data: {")]
    assert json.loads(datas[-1])["type"] == "response.completed"


# ---------------------------------------------------------------------------
# Script mechanics, routes, CLI
# ---------------------------------------------------------------------------

def test_match_routing_parallel(server):
    n = 8
    script = [{"match": f"worker-{k}:", "text": f"answer {k}"} for k in reversed(range(n))]
    script.append({"text": "fallback"})
    srv = server(script)
    results = {}

    def run(k):
        evs = raw_request(srv.port, req(input=[{"role": "user", "content":
                                                f"I am worker-{k}: go"}])).events()
        results[k] = evs[-1]["response"]["output"][0]["content"][0]["text"]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {k: f"answer {k}" for k in range(n)}
    assert srv.unused_turns() == [n]
    evs = raw_request(srv.port, req(input="no marker")).events()
    assert evs[-1]["response"]["output"][0]["content"][0]["text"] == "fallback"
    assert sorted(r["turn"] for r in srv.requests) == list(range(n + 1))


def test_match_list_regex_and_newlines(server):
    srv = server([{"match": ["alpha", "line1\nline2"], "text": "both"},
                  {"match_re": r"cell \d+ failed", "text": "regex"}])
    r = raw_request(srv.port, req(input="cell 12 failed"))
    assert r.events()[-1]["response"]["output"][0]["content"][0]["text"] == "regex"
    r = raw_request(srv.port, req(input="alpha then line1\nline2"))
    assert r.events()[-1]["response"]["output"][0]["content"][0]["text"] == "both"


def test_script_exhausted(server):
    srv = server([{"text": "only one"}])
    assert raw_request(srv.port, req()).status == 200
    r = raw_request(srv.port, req())
    assert r.status == 500 and "script exhausted" in r.json()["error"]["message"]
    assert r.json()["error"]["code"] == "script_exhausted"
    assert r.headers["x-should-retry"] == "false"
    assert srv.requests[1]["turn"] is None and srv.requests[1]["status"] == 500


def test_repeat_callable_defaults_and_add_turns(server):
    seen = []

    def dynamic(rec):
        seen.append(rec["body"]["input"])
        return {"text": "echo " + rec["body"]["input"]}

    srv = server({"defaults": {"delta_size": 2, "status": 503},
                  "turns": [{"text": "twice", "repeat": 2},
                            dynamic,
                            {"kind": "http_error"}]})
    for _ in range(2):
        evs = raw_request(srv.port, req()).events()
        assert sum(e["type"] == "response.output_text.delta" for e in evs) == 3
    evs = raw_request(srv.port, req(input="ping")).events()
    assert evs[-1]["response"]["output"][0]["content"][0]["text"] == "echo ping"
    assert seen == ["ping"]
    assert raw_request(srv.port, req()).status == 503   # status from defaults
    srv.add_turns([{"text": "later", "repeat": "forever"}])
    assert srv.unused_turns() == [3]
    for _ in range(3):
        assert raw_request(srv.port, req()).status == 200
    assert srv.unused_turns() == []
    assert srv.wait_for_requests(7, timeout=1)


def test_script_validation():
    bad = [[{"kind": "nope"}], [{"text": "x", "colour": 1}],
           [{"kind": "http_error"}], [{"kind": "replay", "file": "/no/such/file"}],
           [{"output": [], "text": "x"}], [{"calls": [{"arguments": "{}"}]}],
           [{"kind": "big"}], [{"text": "x", "repeat": 0}], [{"text": 5}],
           [{"kind": "http_error", "status": 42}], [{"text": "x", "status": 500}],
           {"turns": [], "extra": 1}]
    for script in bad:
        with pytest.raises(ScriptError):
            ModelServer(script)


def test_routes_and_bad_bodies(server):
    srv = server([{"text": "openrouter base"}, {"text": "second"}],
                 check_previous=True)
    r = raw_request(srv.port, None, method="GET")
    assert r.status == 404
    assert r.json()["error"] == {"message": "Invalid URL (GET /v1/responses)",
                                 "type": "invalid_request_error", "param": None,
                                 "code": None}
    assert raw_request(srv.port, req(), path="/v1/chat/completions").status == 404
    r = raw_request(srv.port, raw_body=b"{not json")
    assert r.status == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert srv.requests[-1]["body"] is None and srv.requests[-1]["body_text"] == "{not json"
    r = raw_request(srv.port, req(previous_response_id="resp_unknown"))
    assert r.status == 400
    assert r.json()["error"]["code"] == "previous_response_not_found"
    r = raw_request(srv.port, req(), path="/api/v1/responses?x=1")
    assert r.status == 200
    first = r.events()[-1]["response"]["id"]
    assert raw_request(srv.port, req(previous_response_id=first)).status == 200
    assert srv.unused_turns() == []
    assert [x["turn"] for x in srv.requests] == [None, None, None, None, 0, 1]
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"


def test_urllib_client_and_record_file(server, tmp_path):
    rec = tmp_path / "rec.jsonl"
    srv = server([{"text": "via urllib"}, {"kind": "http_error", "status": 401}],
                 record=str(rec))
    data = json.dumps(req()).encode()
    q = urllib.request.Request(srv.base_url + "/responses", data=data,
                               headers={"Authorization": "Bearer k1",
                                        "Content-Type": "application/json"})
    with urllib.request.urlopen(q, timeout=5) as resp:
        assert "via urllib" in resp.read().decode()
    q = urllib.request.Request(srv.base_url + "/responses", data=data)
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(q, timeout=5)
    assert ei.value.code == 401
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert [x["status"] for x in lines] == [200, 401]
    assert lines[0]["authorization"] == "Bearer k1" and lines[1]["authorization"] is None
    assert lines[0]["body"] == req()


def test_stop_aborts_stalled_stream(server):
    srv = server([{"kind": "drop", "text": "x", "stall": 30}])
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", raw_request(srv.port, req())))
    t.start()
    assert srv.wait_for_requests(1, timeout=5)
    t0 = time.monotonic()
    srv.stop()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 3
    assert not out["r"].complete


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli(tmp_path, sig):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"next_cell": {"code": "print(1)", "summary": "one"}}]))
    port_file, rec = tmp_path / "port", tmp_path / "rec.jsonl"
    p = subprocess.Popen(["/usr/bin/python3", SERVER_PY, "--script", str(script),
                          "--port-file", str(port_file), "--record", str(rec)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("PORT ")
        port = int(line.split()[1])
        assert int(port_file.read_text()) == port
        r = raw_request(port, req(), headers={"Authorization": "Bearer cli"})
        call = r.events()[-1]["response"]["output"][0]
        assert call["name"] == "set_next_cell_code"
        assert raw_request(port, req()).status == 500
        p.send_signal(sig)
        assert p.wait(timeout=5) == 0
        lines = [json.loads(x) for x in rec.read_text().splitlines()]
        assert [x["status"] for x in lines] == [200, 500]
        assert lines[0]["authorization"] == "Bearer cli"
        assert "turn=0" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
