"""Loose ends found trying agentz as a user would (issue 10, item 6).

Each test runs the real build/agentz against tests/integ/model_server.py
(scripted turns, see test_agent.py for the conventions) and fails without
its fix:

- a Response whose stream left out optional fields (usage, ...) reads
  them as None, as the OpenAI SDK does;
- a 2xx with an empty body is retried like a connection that broke;
- the tool result of a repair cell names the cell it becomes;
- input()'s prompt comes after what the cell printed before it;
- the stop after three failures counts the cells that ran, and a repair
  answer without a cell is shown (shortened, redacted);
- no API key is needed for a server that is not OpenAI's.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ  # noqa: E402
from model_server import ModelServer  # noqa: E402
from agent_util import (SLOW, code, first_content, is_recovery,  # noqa: E402
                        run_agent, show, status_lines, submit,
                        tool_outputs)


def base_env(cwd, extra=None):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
         "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(extra or {})
    return e


# --- (a) optional Response fields ---------------------------------------

def minimal_stream(path, text):
    """An SSE stream as a bare local server sends it: the completed
    response has id, status and output only (no usage, no model...)."""
    msg = {"id": "msg_1", "type": "message", "role": "assistant",
           "status": "completed",
           "content": [{"type": "output_text", "text": text,
                        "annotations": []}]}
    events = [
        {"type": "response.created",
         "response": {"id": "resp_min", "status": "in_progress",
                      "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": dict(msg, status="in_progress", content=[])},
        {"type": "response.output_text.delta", "output_index": 0,
         "item_id": "msg_1", "content_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0,
         "item": msg},
        {"type": "response.completed",
         "response": {"id": "resp_min", "object": "response",
                      "status": "completed", "output": [msg]}},
    ]
    path.write_text("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
                            for e in events))
    return str(path)


def test_missing_optional_response_fields_read_as_none(tmp_path):
    sse = minimal_stream(tmp_path / "minimal.sse", "MINIMAL-ANSWER")
    cell1 = code("""
        r = call_me(input="ASK-MINIMAL")
        print("TEXT", r.output_text)
        print("FIELDS", r.usage, r.incomplete_details, r.error,
              r.previous_response_id, r.service_tier)
        s = call_me(input="ASK-MINIMAL-STREAM", stream=True)
        for _ in s:
            pass
        print("STREAMED", s.response.usage, s.response.status)
        try:
            r.no_such_field
        except AttributeError:
            print("UNKNOWN-RAISES")
        quit()
    """)
    script = (submit(cell1)
              + [{"kind": "replay", "file": sse, "match": "ASK-MINIMAL"},
                 {"kind": "replay", "file": sse,
                  "match": "ASK-MINIMAL-STREAM"}])
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert "TEXT MINIMAL-ANSWER\n" in p.stdout, show(p)
    assert "FIELDS None None None None None\n" in p.stdout, show(p)
    assert "STREAMED None completed\n" in p.stdout, show(p)
    assert "UNKNOWN-RAISES\n" in p.stdout, show(p)


# --- (b) a 2xx with an empty body ------------------------------------------

@pytest.mark.parametrize("end", ["close", "length", "chunked"])
def test_empty_2xx_is_retried(tmp_path, end):
    script = [{"kind": "empty", "end": end}] + submit("quit()")
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path, args=["--outage-patience", "0"])
    assert p.returncode == 0, show(p)
    kinds = [(r["status"], r["kind"]) for r in srv.requests]
    assert kinds == [(200, "empty"), (200, "response"),
                     (200, "response")], kinds
    # the retry is the same request again
    assert srv.requests[1]["body"] == srv.requests[0]["body"]
    assert "ModelError" not in p.stdout + p.stderr, show(p)


# --- (c) the repair cell's tool result ------------------------------------

def test_repair_tool_result_names_the_cell_it_becomes(tmp_path):
    script = (submit("raise ValueError('BOOM')")   # cell 1 fails
              + submit("print('REPAIRED')\nquit()"))  # the repair: cell 2
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert [s[:2] for s in status_lines(p)] == [
        ("0", "ok"), ("1", "error"), ("2", "exited")], show(p)
    assert [is_recovery(r) for r in srv.requests] == [False, False, True,
                                                      False]
    normal = list(tool_outputs(srv.bodies[1]).values())
    repair = list(tool_outputs(srv.bodies[3]).values())
    assert normal == [["Registered as the next cell (cell 1); it runs "
                       "after cell 0 ends."]], normal
    assert repair == [["Registered as the repair cell; it runs next, as "
                       "cell 2."]], repair


# --- (d) input()'s prompt after the output before it ------------------------

def wait_line(fd, what, timeout=30 * SLOW):
    """Reads from fd (a FIFO we hold open for writing too) until what."""
    got = b""
    end = time.monotonic() + timeout
    while what.encode() not in got:
        left = end - time.monotonic()
        assert left > 0, f"no {what!r} from the cell (got {got!r})"
        r, _, _ = select.select([fd], [], [], left)
        if r:
            got += os.read(fd, 4096)


def test_input_prompt_follows_the_output_printed_before_it(tmp_path):
    """The supervisor is stopped while the cell prints and then asks for a
    line, so it finds both the output and the request waiting at once."""
    c2t, t2c = tmp_path / "c2t", tmp_path / "t2c"
    os.mkfifo(c2t)
    os.mkfifo(t2c)
    # O_RDWR: opening never blocks, on either side, whatever goes wrong
    rfd = os.open(c2t, os.O_RDWR | os.O_NONBLOCK)
    wfd = os.open(t2c, os.O_RDWR)
    cell1 = code("""
        import json, sys
        import agentz_runtime as rt
        c2t = open("c2t", "w", buffering=1)
        t2c = open("t2c")
        c2t.write("ready\\n")
        t2c.readline()                   # the supervisor is stopped now
        print("BEFORE-THE-PROMPT")
        sys.stdout.flush()
        rid = rt._agentz.begin("input", json.dumps(
            {"prompt": "PROMPT> "}).encode(), rt._current_cell)
        c2t.write("sent\\n")
        try:
            kind, status, body = rt._agentz.wait(rid)
        finally:
            rt._agentz.end(rid)
        print("ANSWER", kind, status, body.decode())
        quit()
    """)
    p = None
    try:
        with ModelServer(submit(cell1)) as srv:
            cmd = [AGENTZ, "--base-url", srv.base_url, "--cell-timeout", "60",
                   "Ask the user."]
            p = subprocess.Popen(cmd, cwd=tmp_path, env=base_env(tmp_path),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            wait_line(rfd, "ready")
            os.kill(p.pid, signal.SIGSTOP)
            os.write(wfd, b"go\n")
            wait_line(rfd, "sent")
            os.kill(p.pid, signal.SIGCONT)
            out, err = p.communicate("THE-LINE\n", timeout=60 * SLOW)
    finally:
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()
        os.close(rfd)
        os.close(wfd)
    assert p.returncode == 0, f"{out}\n{err}"
    assert "BEFORE-THE-PROMPT\nPROMPT> " in out, out
    assert "ANSWER reply 0 THE-LINE\n" in out, out


# --- (e) three failures and the repair answer without a cell ---------------

def test_three_failures_count_the_cells_that_ran(tmp_path):
    secret = "loose-ends-secret-7f3a"
    long_tail = "word " * 200
    script = (submit("raise ValueError('ONLY-FAILURE')")
              + [{"text": f"I will not write a cell.\nMy key is {secret}."},
                 {"text": "Still no cell: " + long_tail}])
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path, env={"LOOSE_API_KEY": secret})
    assert p.returncode == 1, show(p)
    assert len(srv.requests) == 4
    assert ("stopping: 3 consecutive failures: 1 failed cell (the last is "
            "cell 1) and 2 repair requests that gave no cell") in p.stderr, \
        show(p)
    said = [ln for ln in p.stderr.splitlines()
            if "did not submit a repair cell" in ln]
    assert len(said) == 2, show(p)
    assert said[0].endswith("it said: I will not write a cell. My key is "
                            "[REDACTED]."), said[0]
    assert secret not in p.stderr + p.stdout
    tail = said[1].split("it said: ", 1)[1]
    assert tail.startswith("Still no cell: word word")
    assert tail.endswith("...") and len(tail.encode()) <= 300, tail


def test_three_failed_cells_keep_their_message(tmp_path):
    script = (submit("raise ValueError('F1')") + submit("raise ValueError('F2')")
              + submit("raise ValueError('F3')"))
    with ModelServer(script) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 1, show(p)
    assert "stopping: 3 consecutive failed cells (the last is cell 3)" in \
        p.stderr, show(p)


# --- (f) no API key for a server that is not OpenAI's -----------------------

def test_no_key_needed_unless_the_host_is_openai(tmp_path):
    with ModelServer(submit("print('LOCAL-OK')\nquit()")) as srv:
        # a local mirror whose name merely contains OpenAI's host name
        url = srv.base_url.replace("127.0.0.1", "api.openai.com.localhost")
        p = run_agent(srv, tmp_path, base_url=False,
                      env={"OPENAI_BASE_URL": url})
    assert p.returncode == 0, show(p)
    assert "LOCAL-OK" in p.stdout
    assert len(srv.requests) == 2
    assert all(r["authorization"] is None for r in srv.requests)


def test_no_key_for_openai_is_a_usage_error(tmp_path):
    p = subprocess.run([AGENTZ, "--base-url", "https://api.openai.com/v1",
                        "a task"], cwd=tmp_path, env=base_env(tmp_path),
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 2, show(p)
    assert "OPENAI_API_KEY is not set" in p.stderr


@pytest.mark.parametrize("url,why", [
    ("not a url", "Bad scheme"),
    ("ftp://x", "scheme ftp is not http or https"),
    ("http://[::1", "Bad IPv6 address"),
    ("", "empty"),
])
def test_a_malformed_base_url_stops_at_start(tmp_path, url, why):
    # before the world or any cell: one line, exit 2, whether it came
    # from --base-url or OPENAI_BASE_URL
    for args, env in ((["--base-url", url], {}), ([], {"OPENAI_BASE_URL": url})):
        if not url and not args:
            continue                 # an empty variable means the default
        e = dict(base_env(tmp_path), **env)
        p = subprocess.run([AGENTZ, *args, "a task"], cwd=tmp_path, env=e,
                           capture_output=True, text=True, timeout=30 * SLOW)
        assert p.returncode == 2, show(p)
        lines = p.stderr.splitlines()
        assert len(lines) == 1, show(p)
        assert lines[0].startswith("agentz: the model's base URL '%s' "
                                   "(OPENAI_BASE_URL or --base-url) cannot "
                                   "be used: %s (e.g. " % (url, why)), show(p)
        assert "isolation:" not in p.stderr


def test_a_base_url_with_credentials_is_not_repeated(tmp_path):
    p = subprocess.run([AGENTZ, "--base-url", "http://user:s3cret@[::1",
                        "a task"], cwd=tmp_path, env=base_env(tmp_path),
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 2, show(p)
    assert "s3cret" not in p.stderr and "with credentials, not shown" in \
        p.stderr, show(p)
