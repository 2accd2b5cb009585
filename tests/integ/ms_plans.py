"""The model server's plans: what to send for one turn (status, headers,
body or a generator of pieces), one plan_* function per kind of turn."""

import json
import math
import random
import re
from pathlib import Path

from ms_script import (
    BIG_PIECE, DEFAULT_MODEL, _ALNUM, content_items, dumps, ev, new_id)
from ms_events import Builder, Framer


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
