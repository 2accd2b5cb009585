"""The model server's event building: Builder turns a turn's item specs into
Responses API stream events, Framer serialises them as SSE."""

import random
import time

from ms_script import (
    DEFAULT_DELTA_SIZE, DEFAULT_MODEL, _ALNUM, dumps, ev, nbytes, new_blob,
    new_call_id, new_id, split_text, tokens)


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
