#!/usr/bin/python3
"""Scriptable local OpenAI Responses API server for agentz tests, demo, benchmarks.

Python 3.11 standard library only.  Run it with /usr/bin/python3.

    /usr/bin/python3 tests/integ/model_server.py --script FILE [--port N]
        [--record FILE] [--port-file FILE] [--check-previous] [--quiet]

It listens on 127.0.0.1 (port 0 = any free port), prints ``PORT <n>`` on stdout
(flushed) once listening, writes ``<n>\\n`` to --port-file if given (atomically,
before the PORT line), logs one line per request on stderr (unless --quiet) and
exits with status 0 on SIGTERM or SIGINT.

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
import math
import os
import random
import re
import secrets
import select
import signal
import socket
import string
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROUTES = ("/v1/responses", "/api/v1/responses")
DEFAULT_MODEL = "gpt-test"
DEFAULT_DELTA_SIZE = 8
BIG_PIECE = 1 << 20

# ---------------------------------------------------------------------------
# Script: turns, validation, matching
# ---------------------------------------------------------------------------

COMMON_KEYS = {"kind", "match", "match_re", "repeat", "headers",
               "initial_delay", "hold", "note"}
STREAM_KEYS = {"delay", "pause_after", "pause", "chunk_size", "framing"}
CONTENT_KEYS = {"output", "reasoning", "text", "phase", "calls", "next_cell",
                "delta_size", "obfuscation", "usage", "response", "incomplete"}
KIND_KEYS = {
    "response": COMMON_KEYS | STREAM_KEYS | CONTENT_KEYS,
    "stream_error": (COMMON_KEYS | STREAM_KEYS | CONTENT_KEYS
                     | {"error", "after", "terminal", "flat"}),
    "drop": (COMMON_KEYS | STREAM_KEYS | CONTENT_KEYS
             | {"after", "partial_bytes", "stall", "reset"}),
    "invalid_json": COMMON_KEYS | STREAM_KEYS | CONTENT_KEYS | {"at", "data"},
    "http_error": COMMON_KEYS | {"status", "error", "body", "content_type"},
    "replay": COMMON_KEYS | (STREAM_KEYS - {"framing"}) | {"file", "format"},
    "big": (COMMON_KEYS | STREAM_KEYS
            | {"mb", "bytes", "delta_size", "obfuscation", "phase", "calls",
               "next_cell", "usage", "response"}),
    "empty": COMMON_KEYS | {"status", "end"},
}
EMPTY_ENDS = ("close", "length", "chunked")
FRAMING_KEYS = {"event_lines", "done_marker", "preamble", "crlf",
                "sequence_number"}
TERMINALS = ("error_then_failed", "error", "failed")


class ScriptError(ValueError):
    """A script turn is malformed (raised at load time)."""


class Turn:
    """One script turn: its spec (or callable), match rules, uses left."""

    def __init__(self, index, spec, base_dir):
        self.index = index
        self.fn = spec if callable(spec) else None
        self.spec = None if self.fn else spec
        self.used = 0
        self.limit = 1
        self.match = []
        self.match_re = None
        if self.fn is None:
            self._check(base_dir)

    def _fail(self, msg):
        raise ScriptError(f"turn {self.index}: {msg}")

    def _check(self, base_dir):
        spec = self.spec
        if not isinstance(spec, dict):
            self._fail("a turn must be an object")
        kind = spec.get("kind", "response")
        if kind not in KIND_KEYS:
            self._fail(f"unknown kind {kind!r}")
        extra = set(spec) - KIND_KEYS[kind]
        if extra:
            self._fail(f"unknown key(s) for kind {kind!r}: {sorted(extra)}")
        m = spec.get("match")
        self.match = [m] if isinstance(m, str) else list(m or [])
        if not all(isinstance(s, str) for s in self.match):
            self._fail("match must be a string or a list of strings")
        if spec.get("match_re") is not None:
            try:
                self.match_re = re.compile(spec["match_re"])
            except re.error as e:
                self._fail(f"bad match_re: {e}")
        rep = spec.get("repeat", 1)
        if rep == "forever":
            self.limit = None
        elif isinstance(rep, int) and rep >= 1:
            self.limit = rep
        else:
            self._fail("repeat must be an integer >= 1 or \"forever\"")
        st = spec.get("status")
        if kind == "http_error" and not (isinstance(st, int) and 100 <= st <= 599):
            self._fail("http_error needs an integer status (100-599)")
        if kind == "stream_error" and spec.get("terminal",
                                               TERMINALS[0]) not in TERMINALS:
            self._fail(f"terminal must be one of {TERMINALS}")
        if kind == "empty" and spec.get("end", "close") not in EMPTY_ENDS:
            self._fail(f"end must be one of {EMPTY_ENDS}")
        if kind == "big" and not (spec.get("mb") or spec.get("bytes")):
            self._fail("big needs mb or bytes")
        if kind == "replay":
            self._resolve_replay(base_dir)
        if "output" in spec and set(spec) & {"reasoning", "text", "calls",
                                             "next_cell", "phase"}:
            self._fail("give either output or the shorthands, not both")
        fr = spec.get("framing") or {}
        if set(fr) - FRAMING_KEYS:
            self._fail(f"unknown framing key(s): {sorted(set(fr) - FRAMING_KEYS)}")
        content_items(spec, strict=True, fail=self._fail)

    def _resolve_replay(self, base_dir):
        f = self.spec.get("file")
        if not isinstance(f, str):
            self._fail("replay needs a file")
        p = Path(f)
        cands = [p] if p.is_absolute() else [Path(base_dir or ".") / p, p]
        for c in cands:
            if c.is_file():
                self.spec = dict(self.spec, file=str(c.resolve()))
                return
        self._fail(f"replay file not found: {f}")

    def available(self):
        return self.limit is None or self.used < self.limit

    def matches(self, hay):
        if self.fn is not None:
            return True
        if not all(s in hay for s in self.match):
            return False
        return self.match_re is None or bool(self.match_re.search(hay))


def load_script(script, base_dir=None):
    """Return (turn specs, defaults, base_dir) from a path, list or dict."""
    if isinstance(script, (str, Path)):
        path = Path(script)
        with open(path, encoding="utf-8") as f:
            script = json.load(f)
        base_dir = base_dir or str(path.resolve().parent)
    defaults = {}
    if isinstance(script, dict):
        defaults = script.get("defaults") or {}
        extra = set(script) - {"turns", "defaults"}
        if extra:
            raise ScriptError(f"unknown top-level key(s): {sorted(extra)}")
        script = script.get("turns", [])
    if script is None:
        script = []
    if not isinstance(script, list):
        raise ScriptError("a script is a list of turns or {defaults, turns}")
    allowed = set().union(*KIND_KEYS.values())
    if not isinstance(defaults, dict) or set(defaults) - allowed:
        raise ScriptError("defaults must be an object of turn keys")
    return script, defaults, base_dir


def apply_defaults(spec, defaults):
    if not defaults or not isinstance(spec, dict):
        return spec
    allowed = KIND_KEYS.get(spec.get("kind", "response"), set())
    merged = {k: v for k, v in defaults.items() if k in allowed and k != "kind"}
    merged.update(spec)
    return merged


def haystack(raw, body):
    """Text that "match" looks in: raw body, canonical dump, string leaves."""
    parts = [raw.decode("utf-8", "replace")]
    if body is not None:
        parts.append(json.dumps(body, ensure_ascii=False))
        stack = [body]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                parts.append(v)
            elif isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# Ids and small helpers
# ---------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits


def new_id(prefix):
    return prefix + secrets.token_hex(24)


def new_call_id():
    return "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))


def new_blob():
    return "gAAAAB" + secrets.token_urlsafe(96)


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def ev(etype, **fields):
    d = {"type": etype}
    d.update(fields)
    return d


def split_text(text, size):
    if isinstance(text, list):
        return [str(t) for t in text]
    size = max(1, int(size))
    return [text[i:i + size] for i in range(0, len(text), size)]


def nbytes(s):
    return len(s.encode("utf-8"))


def tokens(n_bytes):
    return math.ceil(n_bytes / 4)


# ---------------------------------------------------------------------------
# Item specs from a turn
# ---------------------------------------------------------------------------

def content_items(spec, strict=False, fail=None):
    """Normalised item specs (dicts with "type") of a content turn."""
    def bad(msg):
        if fail:
            fail(msg)
        raise ScriptError(msg)

    if "output" in spec:
        items = spec["output"]
        if not isinstance(items, list):
            bad("output must be a list of items")
        items = [dict(i) if isinstance(i, dict) else bad("item must be an object")
                 for i in items]
    else:
        items = []
        r = spec.get("reasoning")
        if r is True:
            items.append({"type": "reasoning"})
        elif isinstance(r, str):
            items.append({"type": "reasoning", "summary": [r]})
        elif isinstance(r, dict):
            items.append(dict(r, type="reasoning"))
        elif r not in (None, False):
            bad("reasoning must be true, a string or an object")
        if "text" in spec:
            msg = {"type": "message", "text": spec["text"]}
            if spec.get("phase") is not None:
                msg["phase"] = spec["phase"]
            items.append(msg)
        for c in spec.get("calls") or []:
            if not isinstance(c, dict):
                bad("calls entries must be objects")
            items.append(dict({"type": "function_call"}, **c))
        nc = spec.get("next_cell")
        if nc is not None:
            if isinstance(nc, str):
                nc = {"code": nc}
            if not isinstance(nc, dict) or not isinstance(nc.get("code"), str):
                bad("next_cell must be code or {code, summary}")
            args = {"code": nc["code"], "summary": nc.get("summary", "Next cell.")}
            item = {"type": "function_call", "name": "set_next_cell_code",
                    "arguments": args}
            if "call_id" in nc:
                item["call_id"] = nc["call_id"]
            items.append(item)
    if strict:
        for it in items:
            t = it.get("type")
            if not isinstance(t, str):
                bad("every item needs a type")
            if t == "function_call" and not isinstance(it.get("name"), str):
                bad("function_call needs a name")
            if t == "custom_tool_call" and not isinstance(it.get("name"), str):
                bad("custom_tool_call needs a name")
            if t == "apply_patch_call" and not isinstance(it.get("operation"), dict):
                bad("apply_patch_call needs an operation object")
            if t == "message":
                txt = it.get("text", it.get("refusal"))
                if not (isinstance(txt, str) or (isinstance(txt, list) and all(
                        isinstance(x, str) for x in txt))):
                    bad("message needs text or refusal: a string or list of strings")
    return items


# ---------------------------------------------------------------------------
# Building events
# ---------------------------------------------------------------------------

ID_PREFIX = {"message": "msg_", "reasoning": "rs_", "function_call": "fc_",
             "custom_tool_call": "ctc_", "local_shell_call": "lsh_",
             "apply_patch_call": "apc_", "computer_call": "cu_",
             "shell_call": "sh_", "web_search_call": "ws_"}


class Builder:
    """Builds the event dicts (no sequence numbers yet) of one response."""

    def __init__(self, req, raw_len, spec, resp_id):
        self.req = req if isinstance(req, dict) else {}
        self.raw_len = raw_len
        self.spec = spec
        self.resp_id = resp_id
        self.rng = random.Random(resp_id)
        self.delta_size = spec.get("delta_size", DEFAULT_DELTA_SIZE)
        so = self.req.get("stream_options")
        self.obf = spec.get("obfuscation", True) and not (
            isinstance(so, dict) and so.get("include_obfuscation") is False)
        include = self.req.get("include")
        self.want_blob = isinstance(include, list) and \
            "reasoning.encrypted_content" in include
        inc = spec.get("incomplete")
        self.incomplete = "max_output_tokens" if inc is True else (inc or None)
        self.done_status = "incomplete" if self.incomplete else "completed"
        self.out_bytes = 0
        self.reasoning_tokens = 0
        self.created_at = int(time.time())

    # -- response object ----------------------------------------------------

    def response(self, status, output, usage):
        q = self.req
        reasoning = {"effort": None, "summary": None}
        if isinstance(q.get("reasoning"), dict):
            reasoning.update(q["reasoning"])
        r = {
            "id": self.resp_id, "object": "response",
            "created_at": self.created_at, "status": status,
            "background": False,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": None, "incomplete_details": None,
            "instructions": q.get("instructions"),
            "max_output_tokens": q.get("max_output_tokens"),
            "max_tool_calls": q.get("max_tool_calls"),
            "model": q.get("model") or DEFAULT_MODEL,
            "output": output,
            "parallel_tool_calls": q.get("parallel_tool_calls", True),
            "previous_response_id": q.get("previous_response_id"),
            "prompt_cache_key": q.get("prompt_cache_key"),
            "reasoning": reasoning,
            "safety_identifier": q.get("safety_identifier"),
            "service_tier": q.get("service_tier") or "auto",
            "store": q.get("store", True),
            "temperature": q.get("temperature", 1.0),
            "text": q.get("text") or {"format": {"type": "text"},
                                      "verbosity": "medium"},
            "tool_choice": q.get("tool_choice", "auto"),
            "tools": q.get("tools") or [],
            "top_logprobs": q.get("top_logprobs", 0),
            "top_p": q.get("top_p", 1.0),
            "truncation": q.get("truncation", "disabled"),
            "usage": usage, "user": q.get("user"),
            "metadata": q.get("metadata") or {},
        }
        if q.get("conversation") is not None:
            c = q["conversation"]
            r["conversation"] = c if isinstance(c, dict) else {"id": c}
        if self.incomplete and status == "incomplete":
            r["incomplete_details"] = {"reason": self.incomplete}
        r.update(self.spec.get("response") or {})
        return r

    def usage(self):
        u = self.spec.get("usage", {})
        if u is None:
            return None
        it = max(1, tokens(self.raw_len))
        ot = tokens(self.out_bytes) + self.reasoning_tokens
        base = {"input_tokens": it, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": ot,
                "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
                "total_tokens": it + ot}
        for k, v in u.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                base[k] = dict(base[k], **v)
            else:
                base[k] = v
        if "total_tokens" not in u:
            base["total_tokens"] = (base.get("input_tokens") or 0) + \
                (base.get("output_tokens") or 0)
        return base

    def preamble(self):
        return [ev("response.created", response=self.response("in_progress", [], None)),
                ev("response.in_progress", response=self.response("in_progress", [], None))]

    def terminal(self, output):
        if self.incomplete:
            return ev("response.incomplete",
                      response=self.response("incomplete", output, self.usage()))
        return ev("response.completed",
                  response=self.response("completed", output, self.usage()))

    # -- deltas -------------------------------------------------------------

    def obfuscation(self, delta):
        n = max(2, 16 - len(delta))
        return "".join(self.rng.choice(_ALNUM) for _ in range(n))

    def delta(self, etype, fields, delta):
        d = ev(etype, **fields)
        d["delta"] = delta
        return d

    def add_obf(self, d):
        if self.obf:
            d["obfuscation"] = self.obfuscation(d["delta"])
        return d

    # -- items ---------------------------------------------------------------

    def items(self, specs, first_index=0):
        """Events for items; returns (events, done_items)."""
        events, done = [], []
        for n, it in enumerate(specs):
            oi = first_index + n
            fn = getattr(self, "item_" + it["type"], self.item_generic)
            added, mid, final = fn(it, oi)
            events.append(ev("response.output_item.added", item=added, output_index=oi))
            events.extend(mid)
            events.append(ev("response.output_item.done", item=final, output_index=oi))
            done.append(final)
        return events, done

    def item_message(self, it, oi):
        iid = it.get("id") or new_id("msg_")
        head = {"id": iid, "type": "message", "status": "in_progress", "content": []}
        if it.get("phase") is not None:
            head["phase"] = it["phase"]
        head["role"] = "assistant"
        refusal = "refusal" in it
        raw = it["refusal"] if refusal else it["text"]
        pieces = split_text(raw, self.delta_size)
        full = "".join(pieces)
        self.out_bytes += nbytes(full)
        if refusal:
            part0 = {"type": "refusal", "refusal": ""}
            part = {"type": "refusal", "refusal": full}
        else:
            part0 = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": full}
        loc = {"content_index": 0, "item_id": iid}
        mid = [ev("response.content_part.added", **loc, output_index=oi, part=part0)]
        for p in pieces:
            if refusal:
                d = ev("response.refusal.delta", **loc, delta=p, output_index=oi)
            else:
                d = ev("response.output_text.delta", content_index=0, delta=p,
                       item_id=iid, logprobs=[])
                self.add_obf(d)
                d["output_index"] = oi
            mid.append(d)
        if refusal:
            mid.append(ev("response.refusal.done", **loc, output_index=oi, refusal=full))
        else:
            mid.append(ev("response.output_text.done", **loc, logprobs=[],
                          output_index=oi, text=full))
        mid.append(ev("response.content_part.done", **loc, output_index=oi, part=part))
        return head, mid, dict(head, status=self.done_status, content=[part])

    def item_reasoning(self, it, oi):
        iid = it.get("id") or new_id("rs_")
        summary = it.get("summary") or []
        if isinstance(summary, str):
            summary = [summary]
        raw = it.get("content")
        blob = it.get("encrypted_content", True if self.want_blob else None)
        if blob is True:
            blob = new_blob()
        head = {"id": iid, "type": "reasoning", "summary": []}
        if raw is not None:
            head["content"] = []
        if blob is not None:
            head["encrypted_content"] = new_blob()
        mid, texts = [], []
        loc = {"item_id": iid, "output_index": oi}
        for k, s in enumerate(summary):
            pieces = split_text(s, self.delta_size)
            text = "".join(pieces)
            texts.append(text)
            mid.append(ev("response.reasoning_summary_part.added", **loc, summary_index=k,
                          part={"type": "summary_text", "text": ""}))
            for p in pieces:
                mid.append(self.add_obf(ev("response.reasoning_summary_text.delta", **loc,
                                           summary_index=k, delta=p)))
            mid.append(ev("response.reasoning_summary_text.done", **loc,
                          summary_index=k, text=text))
            mid.append(ev("response.reasoning_summary_part.done", **loc, summary_index=k,
                          part={"type": "summary_text", "text": text}))
        raw_text = ""
        if raw is not None:
            pieces = split_text(raw, self.delta_size)
            raw_text = "".join(pieces)
            cl = {"content_index": 0, "item_id": iid, "output_index": oi}
            mid.append(ev("response.content_part.added", **cl,
                          part={"type": "reasoning_text", "text": ""}))
            for p in pieces:
                mid.append(ev("response.reasoning_text.delta", **cl, delta=p))
            mid.append(ev("response.reasoning_text.done", **cl, text=raw_text))
            mid.append(ev("response.content_part.done", **cl,
                          part={"type": "reasoning_text", "text": raw_text}))
        final = {"id": iid, "type": "reasoning",
                 "summary": [{"type": "summary_text", "text": t} for t in texts]}
        if raw is not None:
            final["content"] = [{"type": "reasoning_text", "text": raw_text}]
        if blob is not None:
            final["encrypted_content"] = blob
        n = sum(nbytes(t) for t in texts) + nbytes(raw_text)
        self.reasoning_tokens += it.get("tokens", tokens(n) if n else 16)
        return head, mid, final

    def _args(self, v):
        if v is None:
            return "{}"
        return v if isinstance(v, str) else dumps(v)

    def _streamed(self, oi, key, text, head, delta_type, done_type):
        """Delta events then the done event of one streamed string field."""
        pieces = split_text(text, self.delta_size)
        full = "".join(pieces)
        self.out_bytes += nbytes(full)
        iid = head["id"]
        mid = [self.add_obf(ev(delta_type, delta=p, item_id=iid, output_index=oi))
               for p in pieces]
        mid.append(ev(done_type, **{key: full}, item_id=iid, output_index=oi))
        return mid, full

    def item_function_call(self, it, oi):
        iid = it.get("id") or new_id("fc_")
        call_id = it.get("call_id") or new_call_id()
        head = {"id": iid, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call_id, "name": it["name"]}
        mid, full = self._streamed(oi, "arguments", self._args(it.get("arguments")),
                                   head, "response.function_call_arguments.delta",
                                   "response.function_call_arguments.done")
        final = dict(head, status=self.done_status, arguments=full)
        return head, mid, final

    def item_custom_tool_call(self, it, oi):
        iid = it.get("id") or new_id("ctc_")
        head = {"id": iid, "type": "custom_tool_call",
                "call_id": it.get("call_id") or new_call_id(), "input": "",
                "name": it["name"]}
        if it.get("namespace") is not None:
            head["namespace"] = it["namespace"]
        mid, full = self._streamed(oi, "input", str(it.get("input", "")),
                                   head, "response.custom_tool_call_input.delta",
                                   "response.custom_tool_call_input.done")
        return head, mid, dict(head, input=full)

    def item_local_shell_call(self, it, oi):
        iid = it.get("id") or new_id("lsh_")
        action = dict(it.get("action") or {})
        action.setdefault("type", "exec")
        action.setdefault("command", list(it.get("command") or []))
        action.setdefault("env", dict(it.get("env") or {}))
        for k in ("timeout_ms", "working_directory", "user"):
            if k in it:
                action.setdefault(k, it[k])
        self.out_bytes += nbytes(dumps(action))
        call_id = it.get("call_id") or new_call_id()
        head = {"id": iid, "type": "local_shell_call", "status": "in_progress",
                "action": {"type": action["type"], "command": [], "env": {}},
                "call_id": call_id}
        final = {"id": iid, "type": "local_shell_call", "status": self.done_status,
                 "action": action, "call_id": call_id}
        return head, [], final

    def item_apply_patch_call(self, it, oi):
        iid = it.get("id") or new_id("apc_")
        op = dict(it["operation"])
        head = {"id": iid, "type": "apply_patch_call", "status": "in_progress",
                "call_id": it.get("call_id") or new_call_id()}
        mid = []
        if "diff" in op:
            head["operation"] = dict(op, diff="")
            mid, full = self._streamed(oi, "diff", str(op["diff"]), head,
                                       "response.apply_patch_call_operation_diff.delta",
                                       "response.apply_patch_call_operation_diff.done")
            op["diff"] = full
        else:
            head["operation"] = op
            self.out_bytes += nbytes(dumps(op))
        final = dict(head, status=self.done_status, operation=op)
        return head, mid, final

    def item_generic(self, it, oi):
        t = it["type"]
        head = {"id": it.get("id") or new_id(ID_PREFIX.get(t, "item_")), "type": t}
        if t.endswith("_call") and "call_id" not in it:
            head["call_id"] = new_call_id()
        head.update({k: v for k, v in it.items() if k not in ("type", "id")})
        self.out_bytes += nbytes(dumps(it))
        final = dict(head)
        if "status" not in it:
            head["status"] = "in_progress"
            final["status"] = self.done_status
        return head, [], final


# ---------------------------------------------------------------------------
# Serialising events
# ---------------------------------------------------------------------------

class Framer:
    """Turns event dicts into SSE bytes, numbering them."""

    def __init__(self, framing=None):
        fr = framing or {}
        self.event_lines = fr.get("event_lines", True)
        self.done_marker = fr.get("done_marker", False)
        self.preamble = fr.get("preamble")
        self.nl = "\r\n" if fr.get("crlf") else "\n"
        self.with_seq = fr.get("sequence_number", True)
        self.seq = 0

    def number(self, d):
        if self.with_seq:
            d = dict(d)
            d["sequence_number"] = self.seq
        self.seq += 1
        return d

    def frame(self, etype, data):
        nl = self.nl
        head = f"event: {etype}{nl}" if self.event_lines else ""
        return f"{head}data: {data}{nl}{nl}".encode("utf-8")

    def event(self, d):
        d = self.number(d)
        return self.frame(d["type"], dumps(d))

    def start(self):
        return [self.preamble.encode("utf-8")] if self.preamble else []

    def end(self):
        return [f"data: [DONE]{self.nl}{self.nl}".encode()] if self.done_marker else []


# ---------------------------------------------------------------------------
# Planning a response: what to send for one turn
# ---------------------------------------------------------------------------

class Plan:
    """What the handler sends: status, headers, a body (bytes) or pieces."""

    def __init__(self, status=200, headers=None, body=None, pieces=None,
                 end="finish", store=None):
        self.status = status
        self.headers = headers or {}
        self.body = body                # bytes for a non-streamed reply
        self.pieces = pieces            # iterable of bytes (one event each)
        self.end = end                  # "finish" | "drop" | "truncate"
        self.store = store              # final response object to keep
        self.partial = b""              # bytes sent before an abrupt close
        self.stall = 0.0                # seconds to wait before that close
        self.reset = False              # close with RST instead of FIN
        self.extra_headers = {}         # the turn's "headers"
        self.initial_delay = 0.0
        self.hold = None                # gate to wait for (see release())
        self.index = None               # the request record's index
        self.delay = 0.0
        self.pause_after = None
        self.pause = 0.0
        self.chunk_size = None
        self.no_length = False          # neither content-length nor chunked


ERROR_DEFAULTS = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key",
          "Incorrect API key provided: sk-test****. You can find your API key "
          "at https://platform.openai.com/account/api-keys."),
    403: ("invalid_request_error", "unsupported_country_region_territory",
          "Country, region, or territory not supported"),
    404: ("invalid_request_error", "model_not_found",
          "The model `{model}` does not exist or you do not have access to it."),
    408: ("invalid_request_error", "timeout", "Request timed out."),
    409: ("invalid_request_error", "conflict",
          "The request conflicted with another request. Please retry."),
    422: ("invalid_request_error", None, "Unprocessable entity."),
    429: ("requests", "rate_limit_exceeded",
          "Rate limit reached for {model} in organization org-test on requests "
          "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20ms."),
    500: ("server_error", "server_error",
          "The server had an error while processing your request. Sorry about that!"),
    502: ("server_error", "bad_gateway", "Bad gateway."),
    503: ("service_unavailable_error", "server_is_overloaded",
          "The server is overloaded or not ready yet."),
    504: ("server_error", "gateway_timeout", "Gateway timeout."),
}


def error_body(status, overrides=None, model=DEFAULT_MODEL):
    etype, code, msg = ERROR_DEFAULTS.get(status, ("server_error", None, "Error."))
    err = {"message": msg.replace("{model}", str(model)), "type": etype,
           "param": None, "code": code}
    err.update(overrides or {})
    return {"error": err}


def json_plan(status, obj, headers=None):
    h = {"content-type": "application/json"}
    h.update(headers or {})
    return Plan(status, h, body=json.dumps(obj, indent=2).encode("utf-8") + b"\n")


def plan_http_error(spec, req):
    model = req.get("model", DEFAULT_MODEL) if isinstance(req, dict) else DEFAULT_MODEL
    status = spec["status"]
    if spec.get("body") is not None:
        h = {"content-type": spec.get("content_type", "text/plain")}
        return Plan(status, h, body=str(spec["body"]).encode("utf-8"))
    p = json_plan(status, error_body(status, spec.get("error"), model))
    if spec.get("content_type"):
        p.headers["content-type"] = spec["content_type"]
    return p


def plan_content(spec, req, raw_len, resp_id, stream):
    kind = spec.get("kind", "response")
    b = Builder(req, raw_len, spec, resp_id)
    specs = content_items(spec)
    pre = b.preamble()
    item_events, done = b.items(specs)
    final_ev = b.terminal(done)
    final = final_ev["response"]
    if kind == "stream_error":
        return plan_stream_error(spec, b, pre + item_events, done, stream)
    if not stream:
        if kind == "drop":
            body = json.dumps(final).encode("utf-8")
            p = Plan(200, {"content-type": "application/json",
                           "content-length": str(len(body))}, end="truncate")
            p.partial = body[:len(body) // 2]
            return p
        if kind == "invalid_json":
            body = json.dumps(final).encode("utf-8")
            return Plan(200, {"content-type": "application/json"},
                        body=body[:len(body) // 2])
        return Plan(200, {"content-type": "application/json"},
                    body=json.dumps(final).encode("utf-8"), store=final)
    events = pre + item_events + [final_ev]
    fr = Framer(spec.get("framing"))
    if kind == "drop":
        return plan_drop(spec, fr, events)
    at = spec.get("at", 2) if kind == "invalid_json" else None
    data = spec.get("data")

    def gen():
        yield from fr.start()
        for i, d in enumerate(events):
            if i == at:
                good = dumps(fr.number(d))
                yield fr.frame(d["type"], data if data is not None
                               else good[:len(good) // 2])
            else:
                yield fr.event(d)
        yield from fr.end()
    return Plan(200, stream_headers(), pieces=gen(), store=final)


def plan_empty(spec):
    status = spec.get("status", 200)
    end = spec.get("end", "close")
    if end == "chunked":
        return Plan(status, stream_headers(), pieces=iter(()))
    p = Plan(status, stream_headers(), body=b"")
    if end == "close":
        p.end = "truncate"
        p.no_length = True
    return p


def plan_drop(spec, fr, events):
    after = spec.get("after", len(events) - 1)
    after = max(0, min(after, len(events)))
    sent = events[:after]

    def gen():
        yield from fr.start()
        for d in sent:
            yield fr.event(d)
    p = Plan(200, stream_headers(), pieces=gen(), end="drop")
    nb = spec.get("partial_bytes", 0)
    if nb and after < len(events):
        nxt = Framer(spec.get("framing"))
        nxt.seq = fr.seq + after
        p.partial = nxt.event(events[after])[:nb]
    p.stall = float(spec.get("stall", 0) or 0)
    p.reset = bool(spec.get("reset"))
    return p


def plan_stream_error(spec, b, events, done, stream):
    err = {"type": "server_error", "code": "server_error",
           "message": "The server had an error while processing your request. "
                      "Sorry about that!", "param": None}
    err.update(spec.get("error") or {})
    if not stream:
        status = 429 if err.get("code") in ("insufficient_quota",
                                            "rate_limit_exceeded") else 500
        return json_plan(status, {"error": err})
    after = spec.get("after", len(events))
    after = max(0, min(after, len(events)))
    sent = events[:after]
    done_ids = {d["item"]["id"] for d in sent
                if d["type"] == "response.output_item.done"}
    failed = b.response("failed", [i for i in done if i.get("id") in done_ids], None)
    failed["error"] = {"code": err.get("code"), "message": err.get("message")}
    terminal = spec.get("terminal", "error_then_failed")
    tail = []
    if terminal in ("error_then_failed", "error"):
        if spec.get("flat"):
            tail.append(ev("error", code=err.get("code"), message=err.get("message"),
                           param=err.get("param")))
        else:
            tail.append(ev("error", error=err))
    if terminal in ("error_then_failed", "failed"):
        tail.append(ev("response.failed", response=failed))
    fr = Framer(spec.get("framing"))

    def gen():
        yield from fr.start()
        for d in sent + tail:
            yield fr.event(d)
        yield from fr.end()
    return Plan(200, stream_headers(), pieces=gen(),
                store=failed if terminal != "error" else None)


def plan_replay(spec, stream):
    path = spec["file"]
    data = Path(path).read_bytes()
    fmt = spec.get("format") or ("jsonl" if path.endswith(".jsonl") else "sse")
    if fmt == "jsonl":
        pieces = []
        for line in data.splitlines():
            if line.strip():
                t = json.loads(line).get("type", "message")
                pieces.append(b"event: " + t.encode() + b"\ndata: " + line + b"\n\n")
    else:
        pieces = [m.group(0) for m in
                  re.finditer(rb"(?s).*?(?:\r\n\r\n|\n\n|\r\r|\Z)", data) if m.group(0)]
    final = replay_final(pieces)
    if not stream:
        if final is None:
            return json_plan(500, error_body(500, {"message": "replay file has no "
                                                   "terminal response"}))
        return Plan(200, {"content-type": "application/json"},
                    body=json.dumps(final).encode("utf-8"), store=final)
    return Plan(200, stream_headers(), pieces=iter(pieces), store=final)


def replay_final(pieces):
    for piece in reversed(pieces):
        for line in piece.splitlines():
            if not line.startswith(b"data:"):
                continue
            try:
                d = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(d, dict) and d.get("type") in (
                    "response.completed", "response.incomplete", "response.failed"):
                return d.get("response")
    return None


def plan_big(spec, req, raw_len, resp_id, stream):
    b = Builder(req, raw_len, spec, resp_id)
    target = int(spec.get("bytes") or float(spec["mb"]) * (1 << 20))
    size = max(1, int(spec.get("delta_size", 32)))
    iid = new_id("msg_")
    fr = Framer(spec.get("framing"))
    base = "The quick brown fox jumps over the lazy dog 0123456789. "
    while len(base) < size + 16:
        base += base
    K = 16
    variants = [(base[k:] + base[:k])[:size] for k in range(K)]
    rng = random.Random(resp_id)
    templates = []
    for v in variants:
        d = {"type": "response.output_text.delta", "content_index": 0, "delta": v,
             "item_id": iid, "logprobs": []}
        if b.obf:
            d["obfuscation"] = "".join(rng.choice(_ALNUM)
                                       for _ in range(max(2, 16 - len(v))))
        d["output_index"] = 0
        if fr.with_seq:
            d["sequence_number"] = 0
        framed = fr.frame(d["type"], dumps(d))
        if fr.with_seq:
            cut = framed.rindex(b'"sequence_number":0}') + len(b'"sequence_number":')
            templates.append((framed[:cut], framed[cut + 1:]))
        else:
            templates.append((framed, b""))
    min_size = min(len(p) + len(s) for p, s in templates) + 1
    count = max(1, math.ceil(target / min_size))
    cycle = "".join(variants)
    text = cycle * (count // K) + "".join(variants[:count % K])
    msg = {"type": "message", "text": [], "phase": spec.get("phase")}
    # The message is built with an empty delta list, then its delta events
    # are replaced by the generated ones (same positions, same numbering).
    head, mid, final_msg = b.item_message(dict(msg, id=iid), 0)
    b.out_bytes += len(text)
    full_part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    mid[-2]["text"] = text              # output_text.done
    mid[-1]["part"] = full_part         # content_part.done
    final_msg["content"] = [full_part]
    extra_specs = content_items({k: spec[k] for k in ("calls", "next_cell") if k in spec})
    extra_events, extra_done = b.items(extra_specs, first_index=1)
    final_ev = b.terminal([final_msg] + extra_done)
    final = final_ev["response"]
    if not stream:
        return Plan(200, {"content-type": "application/json"},
                    body=json.dumps(final).encode("utf-8"), store=final)
    before = b.preamble() + [ev("response.output_item.added", item=head, output_index=0),
                             mid[0]]
    after = mid[1:] + [ev("response.output_item.done", item=final_msg, output_index=0)] \
        + extra_events + [final_ev]

    def gen():
        yield from fr.start()
        for d in before:
            yield fr.event(d)
        first = fr.seq
        per = max(1, BIG_PIECE // (min_size + 8))
        for lo in range(0, count, per):
            hi = min(count, lo + per)
            yield b"".join([templates[i % K][0] + b"%d" % (first + i) + templates[i % K][1]
                            for i in range(lo, hi)])
        fr.seq = first + count
        for d in after:
            yield fr.event(d)
        yield from fr.end()
    return Plan(200, stream_headers(), pieces=gen(), store=final)


def stream_headers():
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "openai-version": "2020-10-01",
        "openai-processing-ms": "42",
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "9999",
        "x-ratelimit-reset-requests": "6ms",
        "x-ratelimit-limit-tokens": "30000000",
        "x-ratelimit-remaining-tokens": "29999000",
        "x-ratelimit-reset-tokens": "2ms",
    }


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

class _Stop(Exception):
    """The server is stopping or the client went away: abandon the reply."""


class _Gone(Exception):
    """The client closed the connection while its answer was held."""


class ChunkWriter:
    """Writes HTTP/1.1 chunks; optionally re-slices into chunk_size pieces."""

    def __init__(self, wfile, chunk_size=None):
        self.wfile = wfile
        self.size = int(chunk_size) if chunk_size else None
        self.buf = bytearray()

    def _chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n" % len(data) + bytes(data) + b"\r\n")

    def send(self, data):
        if self.size is None:
            self._chunk(data)
            return
        self.buf += data
        while len(self.buf) >= self.size:
            self._chunk(self.buf[:self.size])
            del self.buf[:self.size]

    def flush(self):
        if self.buf:
            self._chunk(self.buf)
            self.buf.clear()

    def raw(self, data):
        """Bytes outside chunk framing (the part of a cut-off chunk)."""
        self.flush()
        self.wfile.write(data)

    def finish(self):
        self.flush()
        self.wfile.write(b"0\r\n\r\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "agentz-model-server/1"

    def log_message(self, fmt, *args):
        pass

    def log_error(self, fmt, *args):
        self.server.owner.log("error: " + (fmt % args))

    # -- routing ------------------------------------------------------------

    def do_POST(self):
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_POST

    def _handle(self):
        owner = self.server.owner
        try:
            raw = self._read_body()
        except ValueError as e:
            self._send_plan(json_plan(400, error_body(400, {"message": str(e)})))
            self.close_connection = True
            return
        path = self.path.split("?", 1)[0]
        body, body_err = None, None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body_err = raw.decode("utf-8", "replace")
        rec = {"method": self.command, "path": path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "authorization": self.headers.get("Authorization"),
               "body": body}
        if body_err is not None:
            rec["body_text"] = body_err
        owner.active_change(1)
        try:
            self._answer(owner, rec, raw, body_err)
        finally:
            owner.active_change(-1)

    def _answer(self, owner, rec, raw, body_err):
        plan = owner.dispatch(rec, raw, body_err is not None)
        plan.index = rec.get("index")
        try:
            self._send_plan(plan)
        except _Gone:
            self.close_connection = True
        except (_Stop, OSError) as e:
            self.close_connection = True
            if isinstance(e, OSError) and not owner.stopping.is_set():
                owner.disconnected(plan.index, "sending")

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                try:
                    n = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise ValueError("bad chunked request body") from None
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(n)
                self.rfile.readline(1024)
        cl = self.headers.get("Content-Length")
        if not cl:
            return b""
        try:
            n = int(cl)
        except ValueError:
            raise ValueError("bad Content-Length") from None
        return self.rfile.read(n)

    # -- sending ------------------------------------------------------------

    def _headers(self, plan, chunked):
        self.send_response(plan.status)
        h = {"x-request-id": "req_" + secrets.token_hex(16)}
        h.update(plan.headers)
        for k, v in plan.extra_headers.items():
            for old in [x for x in h if x.lower() == k.lower()]:
                del h[old]
            if v is not None:
                h[k] = str(v)
        if chunked:
            h["transfer-encoding"] = "chunked"
        elif not plan.no_length and "content-length" not in {k.lower()
                                                             for k in h}:
            h["content-length"] = str(len(plan.body or b""))
        for k, v in h.items():
            self.send_header(k, v)
        self.end_headers()

    def _wait(self, seconds):
        if seconds and seconds > 0 and self.server.owner.stopping.wait(seconds):
            raise _Stop()

    def _hold(self, plan):
        """Wait at plan's gate while a thread watches the client: EOF (or
        an error) on the socket before the gate opens is a disconnect."""
        owner = self.server.owner
        rfd, wfd = os.pipe()
        gone = threading.Event()

        def watch():
            try:
                r, _, _ = select.select([self.connection, rfd], [], [])
                if self.connection in r:
                    try:
                        data = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        gone.set()
                        owner.disconnected(plan.index, "held")
            finally:
                os.close(rfd)

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        try:
            ok = owner.wait_gate(plan.hold, gone)
        finally:
            os.write(wfd, b"x")
            os.close(wfd)
            t.join(5)
        if gone.is_set():
            raise _Gone()
        if not ok:
            raise _Stop()

    def _send_plan(self, plan):
        if plan.hold is not None:
            self._hold(plan)
        self._wait(plan.initial_delay)
        if plan.pieces is None:
            self._headers(plan, chunked=False)
            if plan.end == "truncate":
                self.wfile.write(plan.partial)
                self._abort(plan)
                return
            if self.command != "HEAD":
                self.wfile.write(plan.body or b"")
            return
        self._headers(plan, chunked=True)
        w = ChunkWriter(self.wfile, plan.chunk_size)
        delay, pause_after, pause = plan.delay, plan.pause_after, plan.pause
        n = 0
        for piece in plan.pieces:
            if n and delay:
                w.flush()
                self._wait(delay)
            w.send(piece)
            n += 1
            if pause_after is not None and n == pause_after and pause:
                w.flush()
                self._wait(pause)
            if self.server.owner.stopping.is_set():
                raise _Stop()
        if plan.end == "drop":
            w.flush()
            if plan.partial:
                w.raw(b"%x\r\n" % (len(plan.partial) + 64) + plan.partial)
            self._wait(plan.stall)
            self._abort(plan)
            return
        w.finish()

    def _abort(self, plan):
        """Close the connection without finishing the body."""
        self.close_connection = True
        try:
            self.wfile.flush()
            if plan.reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Eight parallel call_me connect at once: the default backlog (5) would
    # drop one and the client would retry a second later.
    request_queue_size = 128

    def __init__(self, addr, owner):
        self.owner = owner
        self._live = {}
        self._live_lock = threading.Lock()
        super().__init__(addr, Handler)

    def process_request_thread(self, request, client_address):
        with self._live_lock:
            self._live[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(request, None)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if not isinstance(exc, (OSError, _Stop)):
            super().handle_error(request, client_address)

    def close_live(self):
        """Unblock every handler thread (idle keep-alive reads included)."""
        with self._live_lock:
            live = list(self._live.items())
        for sock, _ in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return [t for _, t in live]


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
