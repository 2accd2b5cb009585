"""Shared helpers for the integration tests: run the real binaries."""
import json
import os
import subprocess

BUILD = os.environ.get("AGENTZ_BUILD",
                       os.path.join(os.path.dirname(__file__), "..", "..", "build"))
AGENTZ = os.path.join(BUILD, "agentz")
WORKER = os.path.join(BUILD, "agentz-worker")
SAN = os.environ.get("AGENTZ_SAN") == "1"


def run(args, stdin=None, env=None, timeout=60, **kw):
    """Run the agentz binary; returns CompletedProcess with text output."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([AGENTZ] + list(args), input=stdin, env=full_env,
                          capture_output=True, timeout=timeout, text=True, **kw)


def cells(*codes):
    """Join cell sources into the stdin form separated by '# %%' lines."""
    return "\n# %%\n".join(codes) + "\n"


def exec_json(*codes, args=(), env=None, timeout=60):
    """Run codes as cells via `agentz exec --json -`; returns (records, proc)."""
    p = run(["exec", "--json", *args, "-"], stdin=cells(*codes), env=env,
            timeout=timeout)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return recs, p
