"""agentz worker runtime, part 2 (runs after runtime.py, in the same module):
what a cell sees of the agent.

call_me() asks the supervisor to call the model (the supervisor holds the
key, rewrites the request and runs the host tools); quit() ends the run;
CELL_INPUTS / CELL_OUTPUTS / get_last_error() read the history the
supervisor keeps. Everything here is bound to the cell it was injected into
and refused once that cell is inactive.
"""


class NextCellAlreadyScheduled(Exception):
    """The model submitted a second successor for this cell."""


class ModelError(Exception):
    """The model request failed (HTTP error, stream error, bad event)."""


class BudgetExceeded(ModelError):
    """A budget of the run (--max-tokens, --max-cost, --deadline) is spent:
    the model call was not made, or was cut, and the run stops.  A
    ModelError, so code that handles a failed model call handles it too."""


class CellInactive(RuntimeError):
    """A host function bound to a cell was used after the cell ended."""


_ERROR_TYPES.update({
    "NextCellAlreadyScheduled": NextCellAlreadyScheduled,
    "ModelError": ModelError,
    "BudgetExceeded": BudgetExceeded,
    "CellInactive": CellInactive,
})


def _json():
    import json
    return json


class _Obj:
    """Read-only attribute access over a JSON value, like the SDK's models."""

    __slots__ = ("_d",)

    def __init__(self, d):
        object.__setattr__(self, "_d", d)

    def __getattr__(self, name):
        try:
            return _wrap(self._d[name])
        except (KeyError, TypeError):
            raise AttributeError(name) from None

    def __getitem__(self, key):
        return _wrap(self._d[key])

    def get(self, key, default=None):
        return _wrap(self._d.get(key, default))

    def __contains__(self, key):
        return key in self._d

    def __setattr__(self, name, value):
        raise AttributeError("response objects are read-only")

    def __eq__(self, other):
        return isinstance(other, _Obj) and self._d == other._d

    def __repr__(self):
        return f"{type(self).__name__}({self._d!r})"

    def to_dict(self):
        import copy
        return copy.deepcopy(self._d)

    def model_dump(self, **kw):
        return self.to_dict()

    def to_json(self, **kw):
        return _json().dumps(self._d, **kw)


def _wrap(v):
    if isinstance(v, dict):
        return _Obj(v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class Response(_Obj):
    """The final Response of call_me (attribute access like the OpenAI SDK).

    A field the SDK types as optional reads as None when the server left it
    out (local servers often send no usage), as in the SDK.
    """

    __slots__ = ()

    _OPTIONAL = frozenset((
        "background", "completed_at", "conversation", "error",
        "incomplete_details", "instructions", "max_output_tokens",
        "max_tool_calls", "metadata", "previous_response_id", "prompt",
        "prompt_cache_key", "prompt_cache_retention", "reasoning",
        "safety_identifier", "service_tier", "status", "temperature", "text",
        "top_logprobs", "top_p", "truncation", "usage", "user"))

    def __getattr__(self, name):
        d = self._d
        if isinstance(d, dict) and name not in d and name in Response._OPTIONAL:
            return None
        return _Obj.__getattr__(self, name)

    @property
    def output_text(self):
        parts = []
        for item in self._d.get("output") or []:
            if item.get("type") != "message":
                continue
            for c in item.get("content") or []:
                if c.get("type") == "output_text":
                    parts.append(c.get("text", ""))
        return "".join(parts)


class ResponseStream:
    """Iterator over a streamed call_me: yields events; .response at the end."""

    def __init__(self, rid):
        self._rid = rid
        self.response = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._rid is None:
            raise StopIteration
        try:
            kind, status, body = _agentz.wait(self._rid)
        except BaseException:
            self.close()
            raise
        if kind == "event":
            return _Obj(_loads(body))
        self.close()
        if status != 0:
            _raise_reply_error(body)
        self.response = Response(_loads(body))
        raise StopIteration

    def close(self):
        if self._rid is not None:
            _agentz.end(self._rid)
            self._rid = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def get_final_response(self):
        for _ in self:
            pass
        return self.response


def _bind(cell, fn):
    def bound(*args, **kwargs):
        if _current_cell != cell:
            raise CellInactive(f"Cell {cell} has finished; {fn.__name__}() "
                               "is bound to the cell it was given to")
        return fn(cell, *args, **kwargs)
    bound.__name__ = fn.__name__
    bound.__doc__ = fn.__doc__
    return bound


def _call_me(cell, input=None, *, stream=False, **params):
    """Call the model like client.responses.create(input=..., **params).

    Returns a Response, or with stream=True an iterator of events. The
    supervisor sets model, instructions and the host tools; the model may
    submit the next cell with set_next_cell_code.
    """
    if input is not None:
        params["input"] = input
    body = _json().dumps({"params": params, "stream": bool(stream)})
    if stream:
        payload = body.encode("utf-8", "surrogateescape")
        return ResponseStream(_agentz.begin("call_me", payload, cell))
    return Response(_loads(host_request("call_me", body, cell)))


def _quit(cell, *args):
    """End the run normally (only when the user explicitly asks)."""
    raise AgentQuit(*args)


class _History:
    """Read-only mapping of cell number -> record, fetched from the host.

    Nothing is held here: each access asks the supervisor for what it
    needs (one record, the keys, or the records page by page), so the
    history may be far larger than one reply.
    """

    def __init__(self, what):
        self._what = what

    def _ask(self, **kw):
        kw["what"] = self._what
        return _loads(host_request("cells", _json().dumps(kw)))

    @staticmethod
    def _index(n):
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
        if isinstance(n, str) and n.isascii() and n.isdigit() and str(int(n)) == n:
            return int(n)
        return None

    def _keys(self):
        info = self._ask(keys=True)
        # an output exists once its cell ended; inputs from the start
        running = set(info["running"]) if self._what == "outputs" else ()
        return [i for i in range(info["total"]) if i not in running]

    def __getitem__(self, n):
        i = self._index(n)
        rec = None if i is None else self._ask(cell=i)
        if rec is None:
            raise KeyError(n)
        return rec

    def __len__(self):
        return len(self._keys())

    def __iter__(self):
        return iter(self._keys())

    def __contains__(self, n):
        i = self._index(n)
        return i is not None and i in set(self._keys())

    def keys(self):
        return self._keys()

    def items(self):
        out, i, end = [], 0, self._ask(keys=True)["total"]
        while i < end:
            page = self._ask(start=i, end=end)
            out.extend((int(k), v) for k, v in page["cells"].items())
            i = page["next"]
        return sorted(out, key=lambda kv: kv[0])

    def values(self):
        return [v for _, v in self.items()]

    def get(self, n, default=None):
        try:
            return self[n]
        except KeyError:
            return default

    def __repr__(self):
        return f"<{self._what} of {len(self)} cells>"


def get_last_error():
    """The full record of the latest failed cell, or None."""
    return _loads(host_request("cells", _json().dumps({"what": "last_error"})))


_engine_source = None
_runtime_info = None
_docs = (None, "")  # (file_key when read, text)


def _openai_docs():
    """OPENAI_DOCS.md of the working directory, or "": read again only when
    its stat changes (a stat per cell, no open or exception when absent)."""
    global _docs
    key = _agentz.file_key("OPENAI_DOCS.md")
    if key is None:
        return ""
    if key != _docs[0]:
        try:
            with open("OPENAI_DOCS.md", encoding="utf-8") as f:
                _docs = (key, f.read())
        except OSError:
            _docs = (key, "")
    return _docs[1]


def _inject(n):
    global _engine_source, _runtime_info
    if _engine_source is None:
        _engine_source = _agentz.engine_source()
    if _runtime_info is None:
        try:
            _runtime_info = _loads(host_request("runtime_info", b"{}", n))
        except Exception:
            _runtime_info = {}
    docs = _openai_docs()
    NAMESPACE.update(
        call_me=_bind(n, _call_me),
        quit=_bind(n, _quit),
        AgentQuit=AgentQuit,
        NextCellAlreadyScheduled=NextCellAlreadyScheduled,
        ModelError=ModelError,
        BudgetExceeded=BudgetExceeded,
        CELL_INPUTS=_History("inputs"),
        CELL_OUTPUTS=_History("outputs"),
        get_last_error=get_last_error,
        ENGINE_SOURCE=_engine_source,
        openai_docs=docs,
        RUNTIME_INFO=dict(_runtime_info),
    )


_CELL_HOOKS.append(_inject)
RUNTIME_FILES.add(_inject.__code__.co_filename)
