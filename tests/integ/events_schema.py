"""The schema of `agentz --json "task"`'s event stream (version 1), as
docs/operating.md documents it ("The event stream"), as a table; validate() checks
one event against it, parse() every line of a stream, check_stream() the
stream's order. Used by test_events.py.
"""
import json

INT, NUM, STR, BOOL, DICT, NULL = "int", "number", "str", "bool", "dict", \
    "null"
ANY = "any"

ENVELOPE = {"v": INT, "type": STR, "seq": INT, "time": NUM}

STOP = {"exit": INT, "kind": STR, "reason": (STR, NULL)}
OUTAGE = {"request": (INT, NULL), "cell": (INT, NULL), "call": INT,
          "since": NUM, "waited": NUM, "patience": NUM, "tries": INT,
          "reason": STR}

# type -> (required fields, optional fields): name -> type(s)
SCHEMA = {
    "run_start": ({
        "task": (STR, NULL), "model": STR, "base_url": STR,
        "service_tier": STR, "resume": BOOL, "journal": (STR, NULL),
        "pid": INT, "options": DICT, "limits": DICT, "price": (DICT, NULL),
        "sandbox": DICT}, {}),
    "model_request_start": ({
        "request": INT, "cell": INT, "purpose": STR, "stream": BOOL}, {}),
    "model_request_end": ({
        "request": INT, "cell": INT, "purpose": STR, "tokens_in": INT,
        "tokens_cached": INT, "tokens_out": INT, "tokens_total": INT,
        "requests": INT, "retries": INT, "outage_tries": INT,
        "latency_ms": NUM, "error": (DICT, NULL)}, {}),
    "cell_start": ({
        "cell": INT, "code": STR, "summary": (STR, NULL),
        "generated_by": (INT, NULL), "repair": BOOL}, {}),
    "cell_output": ({"cell": (INT, NULL), "stream": STR, "text": STR}, {}),
    "cell_end": ({
        "cell": INT, "status": STR, "kind": (STR, NULL),
        "live_output_dropped": INT, "record": DICT}, {}),
    "kill": ({"cell": INT, "stage": STR, "reason": STR,
              "ended_by": (STR, NULL)}, {}),
    "budgets": ({"by": (STR, NULL), "limits": DICT}, {}),
    "rollback": ({"cell": INT, "namespace": STR},
                 {"to_before_cell": INT, "threads_lost": ANY}),
    "repair": ({
        "cell": INT, "next_cell": INT, "status": STR, "kind": (STR, NULL),
        "exception_type": (STR, NULL), "detail": (STR, NULL),
        "failures": INT}, {}),
    "stop": (STOP, {}),
    "budget_stop": (STOP, {}),
    "outage_wait_start": (dict(OUTAGE, next_try_in=NUM), {"hint": STR}),
    "outage_wait_end": (dict(OUTAGE, outcome=STR), {}),
    "egress": ({
        "what": STR, "conn": INT, "method": STR, "host": STR, "port": INT,
        "addr": (STR, NULL), "entry": (STR, NULL), "reason": (STR, NULL)},
        {"by": STR, "up": INT, "down": INT, "seconds": NUM}),
    "network_approval": ({
        "what": STR, "conn": INT, "method": STR, "host": STR, "port": INT,
        "addr": (STR, NULL), "entry": (STR, NULL), "reason": (STR, NULL)},
        {}),
    "run_end": ({
        "exit": INT, "reason": (STR, NULL), "cells": INT, "tokens": INT,
        "tokens_estimated": INT, "cost": (NUM, NULL), "failures": INT,
        "duration": NUM}, {}),
}

# the fixed sub-objects and closed value sets
SUB = {
    ("run_start", "options"): {
        "cell_timeout": NUM, "grace": NUM, "request_timeout": NUM,
        "max_output_tokens": INT, "max_retries": INT,
        "outage_patience": NUM, "output_limit": INT, "memory_limit": INT},
    ("run_start", "limits"): {
        k: (NUM, NULL) for k in ("max_cells", "deadline", "max_tokens",
                                 "max_cost", "max_same_failure",
                                 "max_restarts", "max_egress_bytes")},
    ("budgets", "limits"): {
        k: (NUM, NULL) for k in ("max_cells", "deadline", "max_tokens",
                                 "max_cost", "max_same_failure",
                                 "max_restarts", "max_egress_bytes")},
    ("run_start", "sandbox"): {
        k: (STR, NULL) for k in ("seccomp", "isolation_mode", "isolation",
                                 "containment", "network", "workspace")},
    ("model_request_end", "error"): {"type": STR, "message": (STR, NULL)},
}
ENUMS = {
    ("cell_output", "stream"): {"stdout", "stderr"},
    ("kill", "stage"): {"interrupt", "stack_dump", "kill"},
    ("egress", "what"): {"allowed", "refused", "closed"},
    ("network_approval", "what"): {"held"},
    ("model_request_start", "purpose"): {"call_me", "repair"},
    ("model_request_end", "purpose"): {"call_me", "repair"},
    ("outage_wait_end", "outcome"): {"answered", "gave_up"},
    ("stop", "kind"): {"quit", "failures", "usage", "worker", "journal",
                       "interrupted", "signal", "operator", "other"},
    ("budget_stop", "kind"): {"budget"},
}
RECORD_KEYS = {"cell", "code", "status", "kind", "output", "namespace",
               "duration_us", "detail", "traceback"}


def is_type(v, t):
    if isinstance(t, tuple):
        return any(is_type(v, x) for x in t)
    return {
        INT: lambda: isinstance(v, int) and not isinstance(v, bool),
        NUM: lambda: isinstance(v, (int, float)) and not isinstance(v, bool),
        STR: lambda: isinstance(v, str),
        BOOL: lambda: isinstance(v, bool),
        DICT: lambda: isinstance(v, dict),
        NULL: lambda: v is None,
        ANY: lambda: True,
    }[t]()


def check_fields(where, obj, required, optional=None):
    optional = optional or {}
    for k, t in required.items():
        assert k in obj, f"{where}: no {k!r} in {obj}"
        assert is_type(obj[k], t), f"{where}: {k}={obj[k]!r} is not {t}"
    for k, v in obj.items():
        assert k in required or k in optional, \
            f"{where}: undocumented field {k!r} in {obj}"
        if k in optional:
            assert is_type(v, optional[k]), f"{where}: {k}={v!r}"


def validate(ev):
    """One event against the schema: the envelope, its type's fields with
    their types (no field the schema does not name), the sub-objects."""
    for k, t in ENVELOPE.items():
        assert is_type(ev.get(k), t), f"envelope {k}: {ev}"
    assert ev["v"] == 1, ev
    assert ev["type"] in SCHEMA, f"unknown event type: {ev}"
    req, opt = SCHEMA[ev["type"]]
    body = {k: v for k, v in ev.items() if k not in ENVELOPE}
    check_fields(ev["type"], body, req, opt)
    for (typ, field), sub in SUB.items():
        if ev["type"] == typ and isinstance(ev.get(field), dict):
            check_fields(f"{typ}.{field}", ev[field], sub)
    for (typ, field), values in ENUMS.items():
        if ev["type"] == typ:
            assert ev[field] in values, ev
    if ev["type"] == "cell_end":
        assert RECORD_KEYS <= set(ev["record"]), ev["record"].keys()
        assert ev["record"]["cell"] == ev["cell"]


def parse(stdout):
    """Every stdout line is one event that validates; no other line."""
    events = []
    for line in stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            raise AssertionError(f"a stdout line is not JSON: {line!r}")
        validate(ev)
        events.append(ev)
    return events


def check_stream(events, dropped_ok=False):
    """seq counts from 0 (a gap only where cell_output was dropped);
    run_start first, one stop, after it only the ends of what it cut off,
    run_end last; each cell's output events join to the output its record
    kept."""
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and seqs[0] == 0, seqs
    if not dropped_ok:
        assert seqs == list(range(len(seqs))), seqs
    types = [e["type"] for e in events]
    assert types[0] == "run_start" and types[-1] == "run_end", types
    stops = [i for i, t in enumerate(types) if t in ("stop", "budget_stop")]
    assert len(stops) == 1, types
    assert set(types[stops[0] + 1:-1]) <= {"model_request_end",
                                           "outage_wait_end",
                                           "cell_output", "cell_end"}, types
    # a cell_end after the stop is the cell the stop cut (or one whose
    # worker had died), never a cell started after it
    starts = [e["cell"] for e in events[stops[0]:] if e["type"] ==
              "cell_start"]
    assert starts == [], types
    assert types.count("run_start") == 1 and types.count("run_end") == 1
    assert events[-1]["exit"] == events[stops[0]]["exit"]
    if dropped_ok:
        return
    for end in (e for e in events if e["type"] == "cell_end"):
        text = "".join(e["text"] for e in events
                       if e["type"] == "cell_output" and
                       e["cell"] == end["cell"] and e["seq"] < end["seq"])
        assert text == end["record"]["output"], (text, end["record"])
        assert end["live_output_dropped"] == 0
