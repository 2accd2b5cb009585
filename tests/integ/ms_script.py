"""The model server's script: turn specs, their validation and matching,
ids and small helpers, and the item specs of a turn (see model_server.py's
docstring for the script format)."""

import json
import math
import re
import secrets
import string
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
