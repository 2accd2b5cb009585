"""Shared helpers of the agentz "TASK" tests (test_agent*.py): the task
prompt constants, script builders (code, submit), run_agent and readers of
the request bodies the ModelServer recorded, and Router (a callable turn
that answers concurrent requests by their input text).
"""
import json
import os
import re
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, SAN  # noqa: E402

SLOW = 4 if SAN else 1
TASK = "Compute the answer to the test question."
FIRST_INPUT = TASK + "\nSubmit the first Python cell."
HOST_TOOLS = ["set_next_cell_code", "get_history_cells"]
RECOVERY_PREFIX = ("Repair the failed cell and continue the original task. "
                   "Existing side effects are not rolled back.\n")
RECOVERY_SUMMARY = "Analyze the previous cell's error and generate repair code."


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def code(src):
    """Cell source from an indented triple-quoted string."""
    return textwrap.dedent(src).strip("\n") + "\n"


def submit(src, summary="Next cell.", reply="ok", text=None):
    """Turns: the model submits src as the next cell, then answers the
    supervisor's invisible continuation of that host-only response."""
    t = {"next_cell": {"code": code(src), "summary": summary}}
    if text is not None:
        t["text"] = text
    return [t, {"text": reply}]


def run_agent(srv, cwd, task=TASK, args=(), env=None, timeout=30,
              base_url=True):
    """Run build/agentz against srv in cwd with a small, known environment."""
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
         "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(env or {})


    cmd = [AGENTZ]
    if base_url:
        cmd += ["--base-url", srv.base_url]
    cmd += ["--cell-timeout", "60", *args, task]
    return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout * SLOW)


def show(p):
    return f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def first_content(body):
    """The original input text of a request (continuations included)."""
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    if isinstance(inp, list) and inp and isinstance(inp[0], dict):
        c = inp[0].get("content")
        return c if isinstance(c, str) else None
    return None


def fresh(srv, text):
    """Records of requests whose input is exactly the string text."""
    return [r for r in srv.requests
            if r["body"] and r["body"].get("input") == text]


def continuations(srv, text):
    """Records of supervisor continuations of the request with input text."""
    return [r for r in srv.requests
            if r["body"] and isinstance(r["body"].get("input"), list)
            and first_content(r["body"]) == text]


def tool_outputs(body):
    """{call_id: [output, ...]} of the function_call_output items in input."""
    out = {}
    for it in body.get("input") or []:
        if isinstance(it, dict) and it.get("type") == "function_call_output":
            out.setdefault(it["call_id"], []).append(it["output"])
    return out


def recovery_record(body):
    """The JSON record of a repair request (after the fixed prefix)."""
    inp = body["input"]
    assert isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX), inp[:200]
    return json.loads(inp[len(RECOVERY_PREFIX):])


def is_recovery(rec):
    """A repair request of the supervisor (not its continuation)."""
    inp = (rec["body"] or {}).get("input")
    return isinstance(inp, str) and inp.startswith(RECOVERY_PREFIX)


def status_lines(p):
    return re.findall(r"^\[agentz\] cell (\d+): (ok|error|interrupted|exited)"
                      r"([^\n]*)$", p.stderr, re.M)


class Router:
    """A callable turn answering by input text (for concurrent requests).

    fresh: {input text or prefix: spec or fn(record) -> spec};
    cont: the same for the supervisor's continuations of those inputs
    (default: a plain text answer).  Use router.turns() as the script.
    """

    def __init__(self, fresh, cont=None):
        self.fresh = fresh
        self.cont = cont or {}

    @staticmethod
    def _pick(table, key):
        if key in table:
            return table[key]
        for k, v in table.items():
            if key.startswith(k):
                return v
        return None

    def __call__(self, rec):
        body = rec["body"]
        key = first_content(body)
        if isinstance(body["input"], str):
            h = self._pick(self.fresh, key)
            if h is None:
                raise KeyError(f"no route for {key!r}")
        else:
            h = self._pick(self.cont, key) or {"text": f"cont: {key[:30]}"}
        return h(rec) if callable(h) else h

    def turns(self, n=60):
        return [self] * n
