"""Shared helpers for the integration tests: run the real binaries."""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("AGENTZ_BUILD", os.path.join(ROOT, "build"))
# The recorded Responses API streams live in the sibling shared/ folder
# (as the Makefile says); tests that need them fail when it is missing.
FIXTURES = os.environ.get("AGENTZ_FIXTURES", os.path.join(
    ROOT, "..", "shared", "fixtures", "responses"))
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


@contextlib.contextmanager
def binaries_for_any_user():
    """Copies of agentz and agentz-worker that any user can reach and run
    (the build folder may sit under a 0700 home such as /root); yields the
    path of the copy of agentz."""
    d = tempfile.mkdtemp(prefix="agentz-bin-")
    try:
        os.chmod(d, 0o755)
        for name in ("agentz", "agentz-worker"):
            shutil.copy2(os.path.join(BUILD, name), d)
        yield os.path.join(d, "agentz")
    finally:
        shutil.rmtree(d, ignore_errors=True)
