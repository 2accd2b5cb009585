"""Tests of the scripted Responses API test server (model_server.py),
continued: timing (delays, pauses), replay of recorded fixtures, big streams,
OpenRouter-style framing, and the script mechanics (match routing, repeat,
defaults, validation), routes, the urllib client, stop and the CLI.
Conventions as in test_model_server.py (helpers in raw_http.py).
"""
import json
import os
import signal
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
from raw_http import check_seq, raw_request, req, types  # noqa: E402

SERVER_PY = os.path.join(HERE, "model_server.py")
from agentz_util import FIXTURES as _FIXTURES  # noqa: E402

FIXTURES = Path(_FIXTURES)


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
