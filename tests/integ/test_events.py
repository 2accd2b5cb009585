"""Issue 13, item 3: `agentz --json "task"` prints the run as an event
stream on stdout, one JSON object a line, every one validated against the
schema docs/operating.md documents ("The event stream", version 1), kept as a
table in events_schema.py.

Scripted runs (tests/integ/model_server.py) between them make every event
type appear: a cell that ignores its interrupt (kill: interrupt,
stack_dump, kill) followed by a repair, a budget stop, a model outage
waited out. Under --json the cells' output travels only inside
cell_output events (never raw on stdout), the status bar stays off the
terminal, secrets are redacted inside events, and a reader that stalls
loses only whole cell_output events, counted in the cell's cell_end.

rollback cannot be produced yet (no record says "rolled back" until the
snapshot work lands): tests/unit/test_events.c checks the record ->
rollback mapping, and test_rollback_follows_its_cell_end skips until a
run's record says so.
"""
import json
import os
import re
import select
import signal
import subprocess
import textwrap
import time

from model_server import ModelServer

from agentz_util import AGENTZ, PROBE, ROOT, SAN, exec_json, pty_run
from ctl_util import set_deadline_now
from events_schema import SCHEMA, check_stream, parse, validate

SLOW = 4 if SAN else 1
SECRET = "sk-events-Z3k9SECRETvalue4471"
TASK = "Compute the answer to the test question."

# --- running agentz --json ----------------------------------------------------

def env(tmp_path, **extra):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
         "HOME": str(tmp_path), "LANG": "C.UTF-8", "EVENTS_API_KEY": SECRET}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(extra)
    return e


def command(base_url, args):
    return [AGENTZ, "--json", "--base-url", base_url, *args, TASK]


def run_json(tmp_path, script, *args, timeout=60):
    with ModelServer(script) as srv:
        p = subprocess.run(command(srv.base_url, args), cwd=tmp_path,
                           env=env(tmp_path), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True,
                           timeout=timeout * SLOW)
    return p, parse(p.stdout)


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def first(turn_code, summary="work"):
    """The first cell, submitted from cell 0's call, and the answer to the
    invisible continuation of that host-only response."""
    return [{"match": "Submit the first Python cell",
             "next_cell": {"code": code(turn_code), "summary": summary}},
            {"text": "ok"}]


def of(events, typ):
    return [e for e in events if e["type"] == typ]


def show(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n" \
        f"{p.stderr}"


# A cell that prints (stdout, stderr, UTF-8, the secret built from pieces),
# asks the model, then ignores its interrupt: the whole ladder runs.
STUBBORN = f"""
    import sys, time
    # the key: {SECRET}
    print('OUT-LINE h\\u00e9llo \\u2713')
    print('ERR-LINE', file=sys.stderr)
    print('KEY', '{SECRET[:9]}' + '{SECRET[9:]}')
    r = call_me(input='PROBE-REQ')
    print('ANSWER', r.output_text)
    while True:
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            pass
    """
REPAIR = [{"match": "Repair the failed cell",
           "next_cell": {"code": "print('REPAIRED')\nquit()\n",
                         "summary": "Repair."}},
          {"text": "ok"}]


def test_timeout_kill_ladder_repair(tmp_path):
    script = first(STUBBORN) + [{"match": "PROBE-REQ", "text": "pong"}] + \
        REPAIR
    p, events = run_json(tmp_path, script, "--cell-timeout", "2", "--grace",
                         "1")
    assert p.returncode == 0, show(p)
    check_stream(events)
    types = [e["type"] for e in events]
    start = events[0]
    assert start["task"] == TASK and start["options"]["cell_timeout"] == 2
    assert start["sandbox"]["seccomp"] == "default"
    # the ladder, in order, for cell 1, between its start and its end
    kills = of(events, "kill")
    assert [k["stage"] for k in kills] == ["interrupt", "stack_dump",
                                           "kill"], kills
    assert all(k["cell"] == 1 and "2 s timeout" in k["reason"]
               for k in kills)
    end1 = [e for e in of(events, "cell_end") if e["cell"] == 1][0]
    assert kills[-1]["seq"] < end1["seq"]
    # agent cells get a snapshot: the kill rolled the namespace back
    assert end1["kind"] == "timeout" and end1["record"]["namespace"] == \
        "rolled back to before cell 1", end1
    # the repair: after cell 1's end, its request, then cell 2 (a repair)
    rep = of(events, "repair")
    assert len(rep) == 1 and rep[0]["cell"] == 1 and \
        rep[0]["next_cell"] == 2 and rep[0]["kind"] == "timeout", rep
    assert rep[0]["seq"] > end1["seq"]
    reqs = of(events, "model_request_start")
    assert [(r["cell"], r["purpose"]) for r in reqs] == [
        (0, "call_me"), (1, "call_me"), (1, "repair")], reqs
    ends = {e["request"]: e for e in of(events, "model_request_end")}
    assert set(ends) == {r["request"] for r in reqs}
    for r in reqs:
        e = ends[r["request"]]
        assert e["seq"] > r["seq"] and e["error"] is None, e
        assert e["tokens_in"] > 0 and e["tokens_out"] > 0, e
        assert e["tokens_total"] == e["tokens_in"] + e["tokens_out"]
        assert e["latency_ms"] > 0 and e["retries"] == 0
    # the host-only answer was continued: two HTTP requests
    assert ends[reqs[0]["request"]]["requests"] == 2
    cell2 = [e for e in of(events, "cell_start") if e["cell"] == 2][0]
    assert cell2["repair"] and cell2["seq"] > ends[reqs[2]["request"]]["seq"]
    assert types[-2:] == ["stop", "run_end"]
    assert events[-2]["kind"] == "quit" and events[-1]["exit"] == 0
    assert events[-1]["cells"] == 3 and events[-1]["tokens"] > 0
    # output only inside events: both streams, UTF-8 whole, the secret not
    outs = of(events, "cell_output")
    assert {(o["cell"], o["stream"]) for o in outs} >= {(1, "stdout"),
                                                        (1, "stderr")}
    text = "".join(o["text"] for o in outs)
    assert "OUT-LINE h\u00e9llo \u2713" in text and "ERR-LINE" in text
    assert "KEY [REDACTED]" in text and "ANSWER pong" in text, text
    assert "REPAIRED" in text
    # the secret is nowhere: not in the code (cell_start, record), not in
    # the output; the human lines are on stderr
    assert SECRET not in p.stdout
    assert "the key: [REDACTED]" in of(events, "cell_start")[1]["code"]
    for word in ("OUT-LINE", "ERR-LINE", "REPAIRED", "[agentz] cell"):
        assert not any(line.startswith(word)
                       for line in p.stdout.splitlines()), word
    assert "[agentz] cell 1: error timeout" in p.stderr, p.stderr


def chain(n):
    """Cell 0 asks; every cell then registers the next one."""
    turns = first("r = call_me(input='next')\n", "step")
    for _ in range(n):
        turns += [{"match": "next", "next_cell": {
            "code": "r = call_me(input='next')\n", "summary": "step"}},
            {"text": "ok"}]
    return turns


def test_budget_stop(tmp_path):
    p, events = run_json(tmp_path, chain(10), "--max-cells", "3")
    assert p.returncode == 4, show(p)
    check_stream(events)
    stop = events[-2]
    assert stop["type"] == "budget_stop" and stop["exit"] == 4, stop
    assert stop["kind"] == "budget"
    assert "the budget of 3 cells is spent" in stop["reason"]
    assert events[-1]["reason"] == stop["reason"]
    assert events[0]["limits"]["max_cells"] == 3
    assert [e["cell"] for e in of(events, "cell_end")] == [0, 1, 2]
    assert events[-1]["cells"] == 3


def test_deadline_stop_ends_open_requests(tmp_path):
    """--deadline while cell 1's model call waits for an answer that is
    held back: budget_stop, then that request's end (cut off), the cell's
    end (cut by the stop: kind stopped), run_end."""
    # The deadline is set through ctl once cell 1's call reached the
    # server (a --deadline fixed at start can pass before it on a loaded
    # machine under ASan, cutting the engine's own first call); 1 s after
    # the start, it is already past and stops the run at once.
    script = first("r = call_me(input='PROBE-REQ')\n") + [
        {"match": "PROBE-REQ", "hold": "never", "text": "late"}]
    rt = tmp_path / "rt"
    rt.mkdir()
    with ModelServer(script) as srv:
        p = subprocess.Popen(command(srv.base_url, ["--deadline", "600"]),
                             cwd=tmp_path,
                             env=env(tmp_path, RUNTIME_DIRECTORY=str(rt)),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert srv.wait_for_requests(3, timeout=60 * SLOW), "no call"
            set_deadline_now(rt)
            out, err = p.communicate(timeout=60 * SLOW)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    p = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    events = parse(out)
    assert p.returncode == 4, show(p)
    check_stream(events)
    types = [e["type"] for e in events]
    assert types[-4:] == ["budget_stop", "model_request_end", "cell_end",
                          "run_end"], types
    assert "run deadline of 1 s" in events[-4]["reason"]
    end = events[-3]
    # the cell's call was cut by a budget stop: BudgetExceeded
    assert end["cell"] == 1 and end["error"]["type"] == "BudgetExceeded", end
    assert end["tokens_total"] == 0 and end["latency_ms"] > 0
    cut = events[-2]
    assert cut["cell"] == 1 and cut["kind"] == "stopped", cut
    assert cut["record"]["model_calls_cancelled"] == 1, cut


def test_failures_stop(tmp_path):
    bad = "raise ValueError('again')\n"
    script = first(bad) + [{"match": "Repair the failed cell", "repeat": 3,
                            "text": "no cell from me"}]
    p, events = run_json(tmp_path, script)
    assert p.returncode == 1, show(p)
    check_stream(events)
    assert events[-2]["type"] == "stop" and events[-2]["kind"] == \
        "failures", events[-2]
    assert len(of(events, "repair")) == 2
    assert [r["failures"] for r in of(events, "repair")] == [1, 2]
    end1 = [e for e in of(events, "cell_end") if e["cell"] == 1][0]
    assert end1["record"]["exception_type"] == "ValueError"



def test_outage_wait(tmp_path):
    # 2 quick attempts (--max-retries 1), then tries 1 s and 2 s apart
    script = first(PROBE) + [
        {"kind": "http_error", "status": 503, "repeat": 3,
         "error": {"message": "Overloaded, try later."}},
        {"text": "AFTER-OUTAGE"}]
    p, events = run_json(tmp_path, script, "--max-retries", "1",
                         "--outage-patience", "30")
    assert p.returncode == 0, show(p)
    check_stream(events)
    waits = of(events, "outage_wait_start")
    assert [w["tries"] for w in waits] == [1, 2], waits
    assert [w["next_try_in"] for w in waits] == [1.0, 2.0]
    probe = [r for r in of(events, "model_request_start") if r["cell"] == 1]
    assert len(probe) == 1
    req = probe[0]["request"]
    assert all(w["request"] == req and w["cell"] == 1 and
               "Overloaded, try later." in w["reason"] and
               w["since"] == waits[0]["since"] for w in waits), waits
    over = of(events, "outage_wait_end")
    assert len(over) == 1 and over[0]["outcome"] == "answered", over
    assert over[0]["request"] == req and over[0]["waited"] >= 2.9
    end = [e for e in of(events, "model_request_end")
           if e["request"] == req][0]
    assert end["error"] is None and end["outage_tries"] == 2, end
    assert end["requests"] == 3 and end["retries"] == 1, end
    assert waits[0]["seq"] < waits[1]["seq"] < over[0]["seq"] < end["seq"]
    text = "".join(o["text"] for o in of(events, "cell_output"))
    assert "RESULT AFTER-OUTAGE" in text


def test_outage_gave_up(tmp_path):
    script = first(PROBE) + [
        {"kind": "http_error", "status": 503, "repeat": "forever"}]
    p, events = run_json(tmp_path, script, "--max-retries", "1",
                         "--outage-patience", "1")
    assert p.returncode == 0, show(p)
    check_stream(events)
    over = of(events, "outage_wait_end")
    assert len(over) == 1 and over[0]["outcome"] == "gave_up", over
    end = [e for e in of(events, "model_request_end") if e["cell"] == 1][0]
    assert end["error"]["type"] == "ModelError", end
    assert "HTTP 503" in end["error"]["message"], end


def test_all_event_types_are_documented_and_seen(tmp_path):
    """docs/operating.md documents every type the schema here has, with
    its version; the runs above make every type appear but budgets (only
    an operator's `agentz ctl RUN budgets` sends it: test_labels.py)."""
    readme = open(os.path.join(ROOT, "docs", "operating.md")).read()
    sec = readme[readme.index("## The event stream"):]
    sec = sec[:sec.index("\n## ", 1) if "\n## " in sec else len(sec)]
    for typ in SCHEMA:
        assert f"`{typ}`" in sec, typ
    assert '"v":1' in sec.replace(" ", "")
    seen = set()
    scripts = [
        (first(STUBBORN) + [{"match": "PROBE-REQ", "text": "pong"}] + REPAIR,
         ["--cell-timeout", "2", "--grace", "1"]),
        (chain(5), ["--max-cells", "2"]),
        (first(PROBE) + [{"kind": "http_error", "status": 503},
                         {"text": "UP"}],
         ["--max-retries", "0", "--outage-patience", "30"]),
    ]
    for i, (script, args) in enumerate(scripts):
        d = tmp_path / str(i)
        d.mkdir()
        _, events = run_json(d, script, *args)
        seen |= {e["type"] for e in events}
    # egress, network_approval: test_egress.py's agent runs make (and
    # parse) them
    assert set(SCHEMA) - seen == {"budgets", "egress", "network_approval"}, \
        set(SCHEMA) - seen


def test_rollback_follows_its_cell_end(tmp_path):
    """A record whose namespace says "rolled back" is followed by a
    rollback event (the mapping itself is tests/unit/test_events.c's)."""
    script = first(STUBBORN) + [{"match": "PROBE-REQ", "text": "pong"}] + \
        REPAIR
    p, events = run_json(tmp_path, script, "--cell-timeout", "2", "--grace",
                         "1")
    ends = [e for e in of(events, "cell_end")
            if e["record"]["namespace"] and
            e["record"]["namespace"].startswith("rolled back")]
    assert ends, "the killed cell's snapshot did not take over"
    for end in ends:
        nxt = [e for e in events if e["seq"] == end["seq"] + 1]
        assert nxt and nxt[0]["type"] == "rollback", nxt
        assert nxt[0]["cell"] == end["cell"]
        assert nxt[0]["namespace"] == end["record"]["namespace"]
        if "threads_lost" in end["record"]:
            assert nxt[0]["threads_lost"] == end["record"]["threads_lost"]


def started(cell):
    """A predicate on stdout bytes: cell's cell_start line arrived."""
    def pred(buf):
        for line in buf.split(b"\n")[:-1]:
            ev = json.loads(line)
            if ev["type"] == "cell_start" and ev["cell"] == cell:
                return True
        return False
    return pred


def test_signal_stop(tmp_path):
    """SIGTERM while a cell runs (sent once its cell_start arrived): a stop
    of kind signal, the cut cell's end, then run_end, with the process's
    exit status."""
    with ModelServer(first("import time\ntime.sleep(60)\n")) as srv:
        p = subprocess.Popen(command(srv.base_url, []), cwd=tmp_path,
                             env=env(tmp_path), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out = read_until(p.stdout.fileno(), b"", started(1),
                             time.monotonic() + 30 * SLOW)
            p.send_signal(signal.SIGTERM)
            out += p.stdout.read()
            p.wait(timeout=10 * SLOW)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 128 + signal.SIGTERM
    events = parse(out.decode())
    check_stream(events)
    assert events[-3]["type"] == "stop" and events[-3]["kind"] == "signal"
    assert "SIGTERM" in events[-3]["reason"]
    assert events[-3]["exit"] == events[-1]["exit"] == 143
    # the cell the stop cut has its end
    assert events[-2]["type"] == "cell_end" and events[-2]["cell"] == 1
    assert events[-2]["kind"] == "stopped", events[-2]


# --- the reader ------------------------------------------------------------------

FLOOD = """
    import sys
    sys.stderr.write('FLOOD-START\\n'); sys.stderr.flush()
    while True:
        print('x' * 99)
    """


def read_until(fd, buf, pred, deadline):
    while not pred(buf):
        left = deadline - time.monotonic()
        assert left > 0, buf[-2000:]
        r, _, _ = select.select([fd], [], [], left)
        chunk = os.read(fd, 65536) if r else b""
        assert chunk, buf[-2000:]
        buf += chunk
    return buf


def test_stalled_reader_loses_only_whole_output_events(tmp_path):
    """stdout is read only once the flooding cell timed out: the run went
    on meanwhile; what was dropped is whole cell_output events, counted
    in cell_end; every other event arrives."""
    with ModelServer(first(FLOOD) + REPAIR) as srv:
        p = subprocess.Popen(
            command(srv.base_url, ["--cell-timeout", "2", "--grace", "1"]),
            cwd=tmp_path, env=env(tmp_path), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 30 * SLOW
            err = read_until(p.stderr.fileno(), b"",
                             lambda b: b"[agentz] cell 1:" in b, end)
            assert b"error timeout" in err, err
            out = p.stdout.read()
            p.wait(timeout=10 * SLOW)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 0
    events = parse(out.decode())
    check_stream(events, dropped_ok=True)
    end1 = [e for e in of(events, "cell_end") if e["cell"] == 1][0]
    assert end1["live_output_dropped"] > 0, end1
    kept = sum(len(e["text"]) for e in of(events, "cell_output")
               if e["cell"] == 1)
    assert kept + end1["live_output_dropped"] == \
        end1["record"]["output_bytes"]
    gaps = events[-1]["seq"] + 1 - len(events)
    assert gaps > 0
    assert [k["stage"] for k in of(events, "kill")][0] == "interrupt"
    assert "REPAIRED" in "".join(e["text"] for e in of(events,
                                                       "cell_output"))


def test_a_reader_that_never_reads_still_gets_stop_and_run_end(tmp_path):
    """stdout is a pipe nobody reads until agentz has exited (issue 18,
    5b): what is in it then is whole events only (never a cut line),
    ending with the stop and run_end; the events that could not be
    written were dropped whole (gaps in seq)."""
    with ModelServer(first(FLOOD) + REPAIR) as srv:
        with open(tmp_path / "stderr", "wb") as err:
            p = subprocess.Popen(
                command(srv.base_url, ["--cell-timeout", "2", "--grace",
                                       "1"]),
                cwd=tmp_path, env=env(tmp_path), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err)
            try:
                rc = p.wait(timeout=60 * SLOW)
                out = p.stdout.read()
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    stderr = (tmp_path / "stderr").read_text(errors="replace")
    assert rc == 0, stderr[-3000:]
    assert out.endswith(b"\n"), out[-300:]
    events = [json.loads(line) for line in out.split(b"\n")[:-1]]
    for ev in events:
        validate(ev)
    assert [e["type"] for e in events[-2:]] == ["stop", "run_end"], \
        [e["type"] for e in events[-5:]]
    assert events[-2]["kind"] == "quit" and events[-1]["exit"] == 0
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and seqs[0] == 0
    assert events[-1]["seq"] + 1 > len(events)     # some were dropped


def test_line_separators_are_escaped(tmp_path):
    """U+2028 and U+2029 in a cell's output travel escaped: a reader
    splitting with str.splitlines() finds one event a line."""
    cell = "print('a\\u2028b\\u2029c')\nquit()\n"
    p, _ = run_json(tmp_path, first(cell))
    assert p.returncode == 0, show(p)
    assert "\u2028" not in p.stdout and "\u2029" not in p.stdout
    events = [json.loads(line) for line in p.stdout.splitlines()]
    check_stream(events)
    text = "".join(e["text"] for e in of(events, "cell_output")
                   if e["cell"] == 1)
    assert text == "a\u2028b\u2029c\n", repr(text)


def test_no_status_bar_under_json(tmp_path):
    """On a terminal --json keeps the status bar (and its escapes) off."""
    with ModelServer(first("print('DONE')\nquit()\n")) as srv:
        rc, text = pty_run(command(srv.base_url, []), tmp_path,
                           env(tmp_path, TERM="xterm"))
    assert rc == 0, text
    assert "\x1b[" not in text, repr(text[-500:])
    lines = [ln for ln in text.replace("\r\n", "\n").split("\n")
             if ln.startswith("{")]
    events = [json.loads(ln) for ln in lines]
    for ev in events:
        validate(ev)
    assert events[0]["type"] == "run_start" and \
        events[-1]["type"] == "run_end"


def test_exec_json_keeps_its_records():
    recs, p = exec_json("print('hi')", "1/0")
    assert p.returncode == 1
    assert [r["status"] for r in recs] == ["ok", "error"]
    assert all("type" not in r and "v" not in r for r in recs)
    assert recs[0]["output"] == "hi\n"


def test_help_says_what_json_does():
    p = subprocess.run([AGENTZ, "--help"], capture_output=True, text=True,
                       timeout=10)
    line = [ln for ln in p.stdout.splitlines() if "--json" in ln]
    assert line and re.search(r"event", " ".join(line)), p.stdout
