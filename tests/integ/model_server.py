#!/usr/bin/python3
"""Scriptable local OpenAI Responses API server for agentz tests, demo, benchmarks.

Python 3.11 standard library only.  Run it with /usr/bin/python3.

    /usr/bin/python3 tests/integ/model_server.py --script FILE [--port N]
        [--record FILE] [--port-file FILE] [--check-previous] [--quiet]

It listens on 127.0.0.1 (port 0 = any free port), prints ``PORT <n>`` on stdout
(flushed) once listening, writes ``<n>\\n`` to --port-file if given (atomically,
before the PORT line), logs one line per request on stderr (unless --quiet) and
exits with status 0 on SIGTERM or SIGINT.

This file is the entry point (the ModelServer object and the CLI); the rest
lives beside it: ms_script.py (turns, validation, matching, helpers),
ms_events.py (Responses API events and their SSE framing), ms_plans.py (what
to send for one turn) and ms_http.py (the request handler and HTTP server).

From Python (pytest)::

    sys.path.insert(0, os.path.dirname(__file__))
    from model_server import ModelServer
    with ModelServer([{"text": "hi"}]) as srv:      # start() in a background thread
        srv.base_url          # "http://127.0.0.1:PORT/v1"
        srv.requests          # list of request records (see "Records" below)
        srv.bodies            # [record["body"] for each record]
        srv.responses         # {resp_id: final response object}
        srv.max_active        # the most requests answered at once
        srv.wait_for_requests(3, timeout=5)
        srv.unused_turns()    # indices of turns not (fully) consumed
        srv.add_turns([...])  # append turns at run time

Routes
------
``POST /v1/responses`` and ``POST /api/v1/responses`` (OpenRouter-style base).
Anything else gets 404 with an OpenAI-style body
``{"error":{"message":"Invalid URL (GET /x)","type":"invalid_request_error",
"param":null,"code":null}}``.  A body that is not JSON gets 400 and consumes no
turn.  With --check-previous (``check_previous=True``), an unknown
``previous_response_id`` gets 400 ``previous_response_not_found`` and consumes
no turn; otherwise ``previous_response_id`` is only recorded and echoed.

``"stream": true`` in the body gives SSE; anything else gives the final
response object as one JSON body (what a non-streamed OpenAI call returns).

Wire format
-----------
HTTP/1.1, keep-alive.  Streams are ``200``, ``content-type: text/event-stream;
charset=utf-8``, ``transfer-encoding: chunked``, with ``x-request-id``,
``openai-version``, ``openai-processing-ms`` and ``x-ratelimit-*`` headers.
Each event is ``event: <type>\\ndata: <one-line JSON>\\n\\n`` and is written as
one HTTP chunk (unless ``chunk_size`` re-slices the stream).  A normal stream
ends with the zero-length chunk; a dropped stream closes the connection
without it, so a client sees an incomplete chunked body (curl: error 18,
"transfer closed with outstanding read data remaining"; http.client:
IncompleteRead).  Every event has ``sequence_number`` 0, 1, 2, ...

Event order of a normal response (items one after another, as recorded)::

    response.created, response.in_progress,
    per item: response.output_item.added, <item events>, response.output_item.done
    response.completed  (or response.incomplete)

    message:          content_part.added, output_text.delta*, output_text.done,
                      content_part.done          (refusal: refusal.delta*/.done)
    reasoning:        per summary part k: reasoning_summary_part.added,
                      reasoning_summary_text.delta*, reasoning_summary_text.done,
                      reasoning_summary_part.done; then, if "content" is given:
                      content_part.added(reasoning_text), reasoning_text.delta*,
                      reasoning_text.done, content_part.done
    function_call:    function_call_arguments.delta*, function_call_arguments.done
    custom_tool_call: custom_tool_call_input.delta*, custom_tool_call_input.done
    apply_patch_call: apply_patch_call_operation_diff.delta*, .done (if a diff)
    local_shell_call and any other type: only added/done (the added copy of a
                      local_shell_call has "command": [], as recorded)

Deltas carry ``obfuscation`` padding (off with ``"obfuscation": false`` or the
request's ``stream_options.include_obfuscation: false``) and text deltas carry
``logprobs: []``.  The response object echoes the request (model, instructions,
tools, tool_choice, reasoning, previous_response_id, store, text, metadata...);
``usage`` is null except on the terminal event.

Ids: ``resp_``/``msg_``/``rs_``/``fc_``/``ctc_``/``lsh_``/``apc_`` + 48 random
hex digits, ``call_`` + 24 random letters/digits; all unique unless a turn
gives its own.  Every response that reaches a terminal event (completed,
incomplete, failed) is kept in ``ModelServer.responses`` by id.

Script format
-------------
A script is a JSON file (or a Python list) holding a list of turns, or an
object ``{"defaults": {...}, "turns": [...]}``; ``defaults`` keys are merged
into every turn that does not set them (only into kinds that accept the key).
One request consumes one turn: the FIRST unconsumed turn whose ``match``
succeeds (turns without ``match`` match anything).  When nothing matches, the
answer is HTTP 500 ``{"error":{"message":"script exhausted: ...","type":
"server_error","param":null,"code":"script_exhausted"}}`` with header
``x-should-retry: false``.  From Python a turn may also be a callable
``fn(record) -> turn dict`` (it matches anything).

Keys every turn accepts:
  kind           "response" (default), "stream_error", "drop", "invalid_json",
                 "http_error", "replay", "big", "empty"
  match          substring, or list of substrings that must all appear in the
                 request: checked against the raw body, its canonical JSON
                 dump, and every string value in it (so "a\\nb" matches a real
                 newline inside the input text)
  match_re       Python regular expression searched in the same text
  repeat         how many requests this turn answers (default 1), or "forever"
  headers        extra/overriding response headers {"name": "value"}; a null
                 value removes a default header
  initial_delay  seconds to wait before sending the status line
  hold           a gate name: the answer waits (after the request is recorded)
                 until ``ModelServer.release(name)`` is called, so a test can
                 order the answer after an event instead of a timer.  A client
                 that closes the connection while held is noticed at once
                 (see "Disconnects")
  note           free text, ignored

Streamed kinds (response, stream_error, drop, invalid_json, big, replay) also take:
  delay          seconds between events (float)
  pause_after, pause
                 after ``pause_after`` events, wait ``pause`` seconds once
                 (first-token latency, idle-timeout tests)
  chunk_size     re-slice the byte stream into HTTP chunks of this many bytes
                 (events then straddle chunks, UTF-8 sequences get split)
  framing        {"event_lines": true, "done_marker": false, "preamble": null,
                  "crlf": false, "sequence_number": true}; OpenRouter style is
                 {"event_lines": false, "done_marker": true,
                  "preamble": ": OPENROUTER PROCESSING\\n\\n"}  (not for replay)

Content keys (response, stream_error, drop, invalid_json):
  output         explicit list of items, see "Items"; or the shorthands below,
                 emitted in this order: reasoning, message, calls, next_cell
  reasoning      item spec dict without "type", a string (one summary part),
                 or true (a reasoning item with no summary)
  text           message text, or a list of strings = the exact deltas
  phase          "commentary" / "final_answer" on the shorthand message
  calls          list of items; "type" defaults to "function_call"
  next_cell      "code" or {"code": ..., "summary": ...}: a function_call to
                 set_next_cell_code with arguments {"code","summary"} (summary
                 defaults to "Next cell.")
  delta_size     characters per delta (default 8)
  obfuscation    false to drop the "obfuscation" field from deltas
  usage          dict merged over the computed usage (total_tokens recomputed
                 unless given), or null for "usage": null.  Computed: input =
                 ceil(body bytes/4), output = ceil(visible output bytes/4) +
                 reasoning, reasoning = ceil(reasoning text bytes/4) or 16 for
                 a reasoning item without text, or the item's "tokens"
  response       dict of top-level fields overriding the response object
                 (e.g. {"model": "gpt-5-2025-08-07", "service_tier": "default"})
  incomplete     true or a reason ("max_output_tokens", "content_filter"):
                 end with response.incomplete, incomplete_details {"reason"},
                 items with status "incomplete"; true means "max_output_tokens"

Items (in "output" or "calls"); "id" may be given on any item:
  {"type": "message", "text": "...", "phase": "commentary"}  or
  {"type": "message", "refusal": "I can't help with that."}
  {"type": "reasoning", "summary": ["part 0", "part 1"], "content": "raw text",
   "encrypted_content": "gAAAA..." | true | null, "tokens": 448}
      encrypted_content: a string is used as is; true generates one; null
      omits it; absent = generated only if the request has
      include: ["reasoning.encrypted_content"].  The copy in output_item.added
      is deliberately a DIFFERENT blob (as in real streams); the done copy and
      response.completed carry the real one.
  {"type": "function_call", "name": "f", "arguments": {...} | "raw string",
   "call_id": "call_x"}    (dict/list arguments are dumped as compact JSON;
                            a string is sent verbatim, even invalid JSON)
  {"type": "custom_tool_call", "name": "code_exec", "input": "print(1)"}
  {"type": "local_shell_call", "command": ["ls", "-a"], "env": {},
   "timeout_ms": 1000, "working_directory": "/tmp", "user": "x"}
  {"type": "apply_patch_call", "operation": {"type": "create_file",
   "path": "a.md", "diff": "+hello\\n"}}
  any other type, e.g. {"type": "computer_call", "action": {"type": "screenshot"},
   "pending_safety_checks": []}: sent as added (status in_progress) and done
   (status completed) with the given fields; a "*_call" type gets a call_id.

Examples, one per kind:

  text (optionally with reasoning and usage):
    {"text": "Hello there.", "delta_size": 4,
     "reasoning": {"summary": ["Thinking."], "encrypted_content": "gAAAAB-x"},
     "usage": {"input_tokens": 100, "output_tokens": 20}}
  function calls (text and reasoning before them, several calls):
    {"reasoning": true, "text": "Let me look.", "phase": "commentary",
     "calls": [{"name": "get_capital", "arguments": {"country": "FR"}},
               {"name": "get_capital", "arguments": "{\\"country\\":\\"DE\\"}",
                "call_id": "call_de"}]}
  next cell (the usual agentz turn):
    {"next_cell": {"code": "print(1)", "summary": "Print one."}}
  other tool calls (handed back to the caller):
    {"calls": [{"type": "custom_tool_call", "name": "exec", "input": "ls"}]}
    {"calls": [{"type": "local_shell_call", "command": ["ls", "-a", "~"]}]}
    {"calls": [{"type": "apply_patch_call", "operation":
               {"type": "create_file", "path": "x.md", "diff": "+x\\n"}}]}
  http error (before any streaming):
    {"kind": "http_error", "status": 429,
     "error": {"message": "Rate limit reached. Please try again in 1.2s."},
     "headers": {"retry-after": "1", "retry-after-ms": "1200"}}
      keys: status (required), error (merged over the default error object
      for that status: message/type/param/code), body (raw string body
      instead, e.g. an HTML 502 page), content_type.
  stream error (inside a 200 stream):
    {"kind": "stream_error", "text": "partial", "after": 5,
     "terminal": "error_then_failed",
     "error": {"type": "insufficient_quota", "code": "insufficient_quota",
               "message": "You exceeded your current quota."}}
      after: events sent before the error (default: every non-terminal
      event); terminal: "error_then_failed" (default, as recorded), "error"
      (lone error event, then a clean end of stream) or "failed"
      (response.failed only); flat: true sends the SDK's flat error event
      {"type":"error","code","message","param"} instead of the nested one.
  dropped stream (no terminal event, no terminating chunk):
    {"kind": "drop", "text": "never finished", "after": 6,
     "partial_bytes": 20, "stall": 0.5, "reset": false}
      after: complete events sent (default: all but the terminal one);
      partial_bytes: then this many bytes of the next event; stall: seconds
      to wait before closing; reset: true closes with a TCP RST.
  invalid JSON in one event:
    {"kind": "invalid_json", "text": "x", "at": 3, "data": "{\\"type\\": oops"}
      at: index of the event whose data is replaced (default 2); data: the
      replacement (default: the event's JSON cut in half).  The rest of the
      stream is normal.
  empty body (a 2xx whose body has not one byte):
    {"kind": "empty", "status": 200, "end": "close"}
      status: default 200; end: "close" (default: no content-length, no
      chunking, the connection closed right after the headers, so the body
      is what came before the close: nothing), "length" (content-length: 0)
      or "chunked" (the zero-length chunk at once).
  slow stream (any streamed kind):
    {"text": "slow answer", "delay": 0.05, "pause_after": 2, "pause": 1.5}
  replay a recorded body verbatim:
    {"kind": "replay", "file": "fixtures/text_stream.sse", "chunk_size": 7}
      file: relative to the script file's directory (or base_dir), then the
      current directory; format: "sse" (bytes as they are) or "jsonl" (one
      data payload per line, framed as event:/data:); default by suffix.
      Ids are those of the file; its terminal response is stored by id.
  big stream (benchmarks):
    {"kind": "big", "mb": 64, "delta_size": 32, "next_cell": "print('done')"}
      mb (float, MiB) or bytes: the output_text.delta events alone reach at
      least this size; then the usual done events (which repeat the whole
      text, as a real server does) and optional calls/next_cell.  Written in
      ~1 MiB chunks.

Records
-------
Every request (matched or not) is appended to ``ModelServer.requests`` and,
with --record, to the file as one JSON line (flushed):
  {"index": 0, "time": 1785000000.1, "method": "POST", "path": "/v1/responses",
   "headers": {lower-case name: value}, "authorization": "Bearer sk-test" | null,
   "body": parsed JSON | null, "body_text": raw text (only if not JSON),
   "turn": index of the consumed turn | null, "kind": "response" | null,
   "response_id": "resp_..." | null, "status": HTTP status}

Disconnects
-----------
A client that goes away before its answer is complete is recorded in
``ModelServer.disconnects`` as ``{"index": request index, "time": ...,
"while": "held" | "sending"}``: noticed at once while the answer waits at a
``hold`` gate (a thread watches the socket for EOF), otherwise when a write
fails.  ``srv.wait_for_disconnects(n, timeout=5)`` blocks until n were seen.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

from ms_script import (
    ROUTES, ScriptError, Turn, apply_defaults, haystack, load_script, new_id)
from ms_plans import (
    error_body, json_plan, plan_big, plan_content, plan_empty,
    plan_http_error, plan_replay)
from ms_http import _HTTPServer

# ScriptError is re-exported: callers import it from here.
__all__ = ["ModelServer", "ScriptError", "main"]


# ---------------------------------------------------------------------------
# The server object
# ---------------------------------------------------------------------------

class ModelServer:
    """Scripted Responses API server on 127.0.0.1.

    script: list of turns, {"defaults", "turns"} dict, or path to a JSON file.
    port: 0 picks a free port.  record: path of a JSON-lines file to append
    every request record to.  base_dir: where relative replay files are
    looked up (default: the script file's directory, else the cwd).
    check_previous: reject unknown previous_response_id with 400.
    log: True logs one line per request on stderr (or pass a callable).
    """

    def __init__(self, script=None, *, host="127.0.0.1", port=0, record=None,
                 base_dir=None, check_previous=False, log=False):
        turns, defaults, base_dir = load_script(script, base_dir)
        self.host = host
        self._port = port
        self.base_dir = base_dir
        self.defaults = defaults
        self.check_previous = check_previous
        self._log = log
        self.turns = []
        self.requests = []
        self.responses = {}
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._released = set()
        self.disconnects = []
        self.active = 0             # requests being answered right now
        self.max_active = 0         # the most answered at once
        self._record_path = record
        self._record_file = None
        self._httpd = None
        self._thread = None
        self.add_turns(turns)

    # -- script -------------------------------------------------------------

    def add_turns(self, turns):
        """Append turns (validated now; ScriptError on a bad one)."""
        with self._lock:
            start = len(self.turns)
            new = [Turn(start + i, apply_defaults(t, self.defaults), self.base_dir)
                   for i, t in enumerate(turns)]
            self.turns.extend(new)

    def unused_turns(self):
        """Indices of turns not used up; a "forever" turn counts until used once."""
        with self._lock:
            return [t.index for t in self.turns
                    if t.available() and not (t.limit is None and t.used)]

    def _take(self, hay):
        for t in self.turns:
            if t.available() and t.matches(hay):
                t.used += 1
                return t
        return None

    # -- lifecycle ----------------------------------------------------------

    @property
    def port(self):
        return self._httpd.server_address[1] if self._httpd else None

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self):
        return self.url + "/v1"

    @property
    def bodies(self):
        return [r["body"] for r in self.requests]

    def bind(self):
        if self._httpd is None:
            if self._record_path:
                self._record_file = open(self._record_path, "a", encoding="utf-8")
            self._httpd = _HTTPServer((self.host, self._port), self)
        return self

    def start(self):
        """Bind and serve in a background thread; returns self."""
        self.bind()
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="model-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self):
        """Bind and serve in this thread until shutdown() (CLI use)."""
        self.bind()
        self._httpd.serve_forever(poll_interval=0.1)

    def shutdown(self):
        """Stop the accept loop; safe from any thread but the serving one."""
        if self._httpd is not None:
            self._httpd.shutdown()

    def stop(self):
        """Stop serving, abort live streams, close every connection."""
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()         # wake answers held at a gate
        if self._httpd is None:
            return
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        threads = self._httpd.close_live()
        for t in threads:
            if t is not threading.current_thread():
                t.join(5)
        self._httpd.server_close()
        if self._record_file:
            self._record_file.close()
            self._record_file = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def release(self, name):
        """Open the gate name: answers of turns with "hold": name go on."""
        with self._cond:
            self._released.add(name)
            self._cond.notify_all()

    def wait_gate(self, name, gone=None):
        """Block until release(name); False when the server stops first
        (or the Event gone is set: the client went away)."""
        with self._cond:
            self._cond.wait_for(lambda: name in self._released or
                                self.stopping.is_set() or
                                (gone is not None and gone.is_set()))
            return name in self._released and not self.stopping.is_set()

    def active_change(self, d):
        """A request is being answered (+1) or is over (-1): active, and
        max_active, the most at once (the client's concurrency)."""
        with self._cond:
            self.active += d
            self.max_active = max(self.max_active, self.active)
            self._cond.notify_all()

    def disconnected(self, index, during):
        """Record that the client of request index went away."""
        with self._cond:
            self.disconnects.append({"index": index, "time": time.time(),
                                     "while": during})
            self._cond.notify_all()
        self.log(f"#{index} client disconnected while {during}")

    def wait_for_disconnects(self, n, timeout=5.0):
        """Block until at least n disconnects were recorded; False on
        timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.disconnects) >= n,
                                       timeout)

    def wait_for_requests(self, n, timeout=5.0):
        """Block until at least n requests were recorded; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= n, timeout)

    def log(self, line):
        if callable(self._log):
            self._log(line)
        elif self._log:
            print(f"[model_server] {line}", file=sys.stderr, flush=True)

    # -- per request ----------------------------------------------------------

    def dispatch(self, rec, raw, bad_json):
        """Record the request, pick a turn, return the Plan to send."""
        body = rec["body"]
        resp_id = None
        with self._lock:
            turn, spec = None, None
            if rec["method"] != "POST" or rec["path"] not in ROUTES:
                plan = json_plan(404, {"error": {
                    "message": f"Invalid URL ({rec['method']} {rec['path']})",
                    "type": "invalid_request_error", "param": None, "code": None}})
            elif bad_json or not isinstance(body, dict):
                plan = json_plan(400, error_body(400, {
                    "message": "We could not parse the JSON body of your request. "
                               "(HINT: This likely means you aren't using your HTTP "
                               "library correctly. The OpenAI API expects a JSON "
                               "payload, but what was sent was not valid JSON."}))
            elif (self.check_previous and body.get("previous_response_id")
                  and body["previous_response_id"] not in self.responses):
                pid = body["previous_response_id"]
                plan = json_plan(400, error_body(400, {
                    "message": f"Previous response with id '{pid}' not found.",
                    "param": "previous_response_id",
                    "code": "previous_response_not_found"}))
            else:
                turn = self._take(haystack(raw, body))
                plan = None
            if turn is None and plan is None:
                used = sum(1 for t in self.turns if t.used)
                plan = json_plan(500, {"error": {
                    "message": f"script exhausted: no unconsumed turn matches request "
                               f"#{len(self.requests)} ({len(self.turns)} turns, "
                               f"{used} used)",
                    "type": "server_error", "param": None,
                    "code": "script_exhausted"}}, {"x-should-retry": "false"})
            rec["index"] = len(self.requests)
            rec["time"] = time.time()
            rec["turn"] = turn.index if turn else None
        if turn is not None:
            resp_id = new_id("resp_")
            try:
                spec = turn.spec
                if turn.fn:
                    spec = Turn(turn.index, apply_defaults(turn.fn(rec), self.defaults),
                                self.base_dir).spec
                plan = self._plan(spec, body, len(raw), resp_id)
            except Exception as e:      # a broken turn must fail the test loudly
                plan = json_plan(500, error_body(500, {
                    "message": f"model_server: turn {turn.index} failed: {e!r}",
                    "code": "model_server_error"}), {"x-should-retry": "false"})
        rec["kind"] = spec.get("kind", "response") if spec else None
        if plan.store is not None:
            rec["response_id"] = plan.store.get("id")
        else:
            rec["response_id"] = resp_id if plan.status == 200 else None
        rec["status"] = plan.status
        with self._cond:
            if plan.store is not None and plan.store.get("id"):
                self.responses[plan.store["id"]] = plan.store
            self.requests.append(rec)
            if self._record_file:
                self._record_file.write(json.dumps(rec, ensure_ascii=False) + "\n")
                self._record_file.flush()
            self._cond.notify_all()
        self.log(f"#{rec['index']} {rec['method']} {rec['path']} turn={rec['turn']} "
                 f"kind={rec['kind']} status={plan.status} {rec['response_id'] or ''}")
        return plan

    def _plan(self, spec, body, raw_len, resp_id):
        kind = spec.get("kind", "response")
        stream = body.get("stream") is True
        if kind == "http_error":
            plan = plan_http_error(spec, body)
        elif kind == "replay":
            plan = plan_replay(spec, stream)
        elif kind == "big":
            plan = plan_big(spec, body, raw_len, resp_id, stream)
        elif kind == "empty":
            plan = plan_empty(spec)
        else:
            plan = plan_content(spec, body, raw_len, resp_id, stream)
        plan.extra_headers = spec.get("headers") or {}
        plan.initial_delay = float(spec.get("initial_delay", 0) or 0)
        plan.hold = spec.get("hold")
        plan.delay = float(spec.get("delay", 0) or 0)
        plan.pause_after = spec.get("pause_after")
        plan.pause = float(spec.get("pause", 0) or 0)
        plan.chunk_size = spec.get("chunk_size")
        return plan


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def write_port_file(path, port):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Scripted OpenAI Responses API test server.")
    ap.add_argument("--script", required=True, help="JSON script file")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--record", help="append request records as JSON lines")
    ap.add_argument("--port-file", help="write the port number here")
    ap.add_argument("--check-previous", action="store_true",
                    help="400 for an unknown previous_response_id")
    ap.add_argument("--quiet", action="store_true", help="no per-request log")
    args = ap.parse_args(argv)
    try:
        srv = ModelServer(args.script, port=args.port, record=args.record,
                          check_previous=args.check_previous, log=not args.quiet)
        srv.bind()
    except (OSError, ValueError) as e:
        print(f"model_server: {e}", file=sys.stderr)
        return 2

    def on_signal(signum, frame):
        srv.stopping.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.port_file:
        write_port_file(args.port_file, srv.port)
    print(f"PORT {srv.port}", flush=True)
    srv.serve_forever()
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
