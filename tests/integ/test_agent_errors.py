"""agentz "TASK" (issue 3, SPEC §2-§6): model errors as a cell sees them
(HTTP statuses, retries, dropped and broken streams) and secrets (redaction in
output, records and tool results; none in the worker's environment or memory).
Conventions as in test_agent.py (helpers in agent_util.py).
"""
import json
import os
import re
import secrets
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import PROBE, SAN  # noqa: E402
from model_server import ModelServer  # noqa: E402
from agent_util import (  # noqa: E402
    code, continuations, fresh, is_recovery, run_agent, show, submit,
    tool_outputs)


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
        regions, skipped, maps = [], [], []
        for line in open('/proc/self/smaps'):
            f = line.split()
            if '-' in f[0]:
                maps.append([f, 0])
            elif f[0] in ('Rss:', 'Swap:'):
                maps[-1][1] += int(f[1])
        for f, kb in maps:
            if not f[1].startswith('r') or (len(f) > 5 and f[5] in
                    ('[vvar]', '[vvar_vclock]', '[vsyscall]')):
                continue
            lo, hi = (int(x, 16) for x in f[0].split('-'))
            if kb == 0 and f[4] == '0' and len(f) == 5:
                continue    # private anonymous, never touched: all zeros
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


@pytest.mark.early("scans the worker's memory")
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
