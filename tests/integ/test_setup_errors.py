"""Set-up errors fail fast and say what to fix (issue 22).

- Before any model call of the run succeeded, an answer no waiting can fix
  (HTTP 401, 403, 404, 400 naming the model) stops the run at once: exit
  2, one line naming what to check (the key never shown, the URL without
  credentials), journaled as the run's stop (`agentz report` reads it),
  the `--json` stop event says so. After a first success they stay
  ordinary errors (test_agent_errors.py's client errors).
- A refused connection before any answer is still waited out, but says
  once "no answer yet from BASE — is OPENAI_BASE_URL right?" (stderr, and
  the first outage_wait_start event's "hint").
- `--resume` without `--journal`, `--worker` that is not an executable
  file: one line, exit 2, nothing started (agent runs and exec).
- `--pass-env` naming a secret warns once (it is still not passed).

Each test runs the real build/agentz (against tests/integ/model_server.py
for agent runs).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, beside, exec_json, run  # noqa: E402
from events_schema import validate  # noqa: E402
from model_server import ModelServer  # noqa: E402
from agent_util import SLOW, TASK, run_agent, show, submit  # noqa: E402

KEY = "sk-setup-canary-0123456789abcdef"


def closed_port():
    """A port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def lines_with(text, needle):
    return [ln for ln in text.splitlines() if needle in ln]


def journal_records(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


# --- 1. first-call 401 / 403 / 404 / 400 on the model --------------------

SETUP_ERRORS = [
    ({"kind": "http_error", "status": 401,
      "error": {"message": "Incorrect API key provided: sk-se***ef.",
                "type": "invalid_request_error", "code": "invalid_api_key"}},
     "check OPENAI_API_KEY"),
    ({"kind": "http_error", "status": 403,
      "error": {"message": "Country, region, or territory not supported",
                "code": "unsupported_country_region_territory"}},
     "check OPENAI_API_KEY"),
    ({"kind": "http_error", "status": 404,
      "error": {"message": "The model `gpt-nope` does not exist or you do "
                "not have access to it.", "type": "invalid_request_error",
                "code": "model_not_found"}},
     "check OPENAI_BASE_URL"),
    ({"kind": "http_error", "status": 400,
      "error": {"message": "The requested model 'gpt-nope' does not exist.",
                "type": "invalid_request_error", "param": "model",
                "code": "model_not_found"}},
     "check the model name"),
]


@pytest.mark.parametrize("turn,check", SETUP_ERRORS,
                         ids=["401", "403", "404", "400-model"])
def test_first_call_setup_error_stops_at_once(tmp_path, turn, check):
    journal = beside(tmp_path)
    with ModelServer([turn, {"text": "SHOULD-NOT-BE-ASKED"}] +
                     [{"text": "x"}] * 5) as srv:
        p = run_agent(srv, tmp_path, args=["--model", "gpt-nope", "--journal",
                                           str(journal), "--json"],
                      env={"OPENAI_API_KEY": KEY})
    assert p.returncode == 2, show(p)
    assert len(srv.requests) == 1, "no repair, no retry: " + show(p)
    st = turn["status"]
    (line,) = lines_with(p.stderr, "stopping:")
    assert f"HTTP {st}" in line and check in line, line
    assert "before any model call succeeded" in line, line
    assert f"{srv.base_url}/responses" in line, line
    if st in (404, 400):
        assert "gpt-nope" in line, line
    assert KEY not in p.stderr + p.stdout
    # journaled as the run's stop, readable by agentz report
    recs = journal_records(journal)
    stop = [r for r in recs if r.get("type") == "stop"]
    assert len(stop) == 1 and stop[0]["exit"] == 2, recs
    assert check in stop[0]["reason"], stop
    assert KEY not in journal.read_text()
    rep = run(["report", str(journal), "-o", str(tmp_path / "r.html")])
    assert rep.returncode == 0, rep.stderr
    # the --json stream's stop event
    evs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
    for ev in evs:
        validate(ev)
    (ev,) = [e for e in evs if e["type"] == "stop"]
    assert ev["exit"] == 2 and ev["kind"] == "usage", ev
    assert check in ev["reason"], ev


def test_404_of_a_wrong_path_names_the_url_without_credentials(tmp_path):
    with ModelServer([{"text": "never asked"}]) as srv:
        port = srv.base_url.split(":")[2].split("/")[0]
        base = f"http://someone:pw-canary-77@127.0.0.1:{port}/wrong"
        p = run_agent(srv, tmp_path, args=["--base-url", base],
                      base_url=False)
    assert p.returncode == 2, show(p)
    (line,) = lines_with(p.stderr, "stopping:")
    assert "HTTP 404" in line and "check OPENAI_BASE_URL" in line, line
    assert f"http://127.0.0.1:{port}/wrong/responses" in line, line
    assert "pw-canary-77" not in p.stderr and "someone" not in p.stderr


def test_400_not_about_the_model_is_an_ordinary_failure(tmp_path):
    # a 400 on the request's input says nothing about the set-up: the
    # cell fails and is repaired as before
    with ModelServer([{"kind": "http_error", "status": 400,
                       "error": {"message": "Invalid value for 'input'.",
                                 "param": "input"}},
                      {"next_cell": {"code": "print('REPAIRED')\nquit()\n",
                                     "summary": "Repair."}},
                      {"text": "ok"}]) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert "REPAIRED" in p.stdout, show(p)
    assert "stopping:" not in p.stderr, show(p)


def test_setup_error_after_a_first_success_is_ordinary(tmp_path):
    # the 401 comes after the model answered once: the cell sees a
    # ModelError and the run goes on
    probe = """
        try:
            call_me(input='PROBE-REQ')
        except ModelError as e:
            print('MODELERROR', e)
        quit()
        """
    with ModelServer(submit(probe) + [
            {"kind": "http_error", "status": 401,
             "error": {"message": "Incorrect API key provided.",
                       "code": "invalid_api_key"}}]) as srv:
        p = run_agent(srv, tmp_path)
    assert p.returncode == 0, show(p)
    assert "MODELERROR HTTP 401" in p.stdout, show(p)
    assert "stopping:" not in p.stderr, show(p)


# --- 2. a refused connection: waited out, said once -----------------------

def test_refused_connection_waits_and_says_once(tmp_path):
    port = closed_port()
    base = f"http://user:pw-canary-99@127.0.0.1:{port}/v1"
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
         "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    proc = subprocess.Popen(
        [AGENTZ, "--base-url", base, "--max-retries", "0",
         "--outage-patience", "600", "--json", TASK],
        cwd=tmp_path, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    lines, cond = [], threading.Condition()

    def read():
        for ln in proc.stderr:
            with cond:
                lines.append(ln)
                cond.notify_all()
        with cond:
            lines.append(None)
            cond.notify_all()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        # two waits of the outage (1 s apart): the hint came with the first
        with cond:
            assert cond.wait_for(lambda: None in lines or sum(
                "waiting for the model" in ln for ln in lines if ln) >= 2,
                30 * SLOW), "".join(ln for ln in lines if ln)
        proc.send_signal(signal.SIGTERM)
        out = proc.stdout.read()
        proc.wait(timeout=30 * SLOW)
        t.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(ln for ln in lines if ln)
    hint = (f"no answer yet from http://127.0.0.1:{port}/v1 — is "
            "OPENAI_BASE_URL right?")
    assert err.count("no answer yet") == 1, err
    assert hint in err, err
    assert err.count("waiting for the model") >= 2, err
    assert "pw-canary-99" not in err + out
    evs = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    for ev in evs:
        validate(ev)
    waits = [v for v in evs if v["type"] == "outage_wait_start"]
    assert len(waits) >= 2, evs
    assert waits[0].get("hint") == hint, waits[0]
    assert all("hint" not in v for v in waits[1:]), waits


# --- 3. --resume without --journal ---------------------------------------

def test_resume_without_journal_is_its_own_error(tmp_path):
    e = {k: v for k, v in os.environ.items() if k != "AGENTZ_JOURNAL"}
    p = subprocess.run([AGENTZ, "--resume"], cwd=tmp_path, env=e,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert "--resume needs --journal" in p.stderr, p.stderr
    assert p.stdout == ""
    assert not (tmp_path / ".agentz-workspace").exists()


# --- 4. --worker that cannot be a worker ----------------------------------

def bad_workers(tmp_path):
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\nexit 0\n")
    plain.chmod(0o644)
    return [("/nonexistent/agentz-worker", "no such file"),
            (str(tmp_path), "a directory"),
            (str(plain), "not executable")]


@pytest.mark.parametrize("cmd", ["agent", "exec"])
def test_worker_path_checked_at_start(tmp_path, cmd):
    ws = tmp_path / "ws"
    ws.mkdir()
    for path, why in bad_workers(tmp_path):
        if cmd == "exec":
            args = ["exec", "--worker", path, "-"]
        else:
            args = ["--base-url", f"http://127.0.0.1:{closed_port()}/v1",
                    "--worker", path, "a task"]
        p = subprocess.run([AGENTZ, *args], cwd=ws, input="print(1)\n",
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (path, p.stderr)
        assert p.stderr.count("\n") == 1, p.stderr
        assert f"invalid --worker '{path}': {why}" in p.stderr, p.stderr
        assert "attempt" not in p.stderr
        assert not (ws / ".agentz-workspace").exists(), "nothing started"


# --- 5. --pass-env naming a secret -----------------------------------------

def test_pass_env_naming_a_secret_warns_once(tmp_path):
    recs, p = exec_json(
        "import os\nprint(os.environ.get('EXTRA'), os.environ.get('X_TOKEN'))",
        args=["--pass-env", "EXTRA", "--pass-env", "X_TOKEN",
              "--pass-env", "X_TOKEN"],
        env={"EXTRA": "yes", "X_TOKEN": "canary-tok"})
    assert p.returncode == 0, p.stderr
    assert recs[0]["output"] == "yes None\n"
    warn = lines_with(p.stderr, "--pass-env X_TOKEN")
    assert len(warn) == 1, p.stderr
    assert "secret" in warn[0] and "not passed" in warn[0], warn
    assert "EXTRA" not in p.stderr
    assert "canary-tok" not in p.stderr


# --- 6. libcurl: only agent runs load it ------------------------------------

def libcurl_file():
    """The file the loader finds for libcurl.so.4 (x86-64), or None."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                         check=False).stdout
    for ln in out.splitlines():
        name, _, path = ln.strip().partition(" => ")
        if name.startswith("libcurl.so.4 ") and "x86-64" in name:
            return os.path.realpath(path)
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace: root")
def test_a_missing_libcurl_stops_an_agent_run_and_not_exec(tmp_path):
    # libcurl.so.4 made unloadable (/dev/null over it) in a mount
    # namespace of the test's own: the dynamic loader's real failure
    lib = libcurl_file()
    if lib is None:
        pytest.skip("libcurl.so.4 not in the loader's cache")
    ws = tmp_path / "ws"
    ws.mkdir()
    hide = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind /dev/null "$0" && exec "$@"', lib, AGENTZ]
    e = dict(os.environ, OPENAI_API_KEY=KEY)
    p = subprocess.run(hide + ["--base-url",
                               f"http://127.0.0.1:{closed_port()}/v1",
                               "a task"], cwd=ws, env=e, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert "cannot load libcurl.so.4" in p.stderr, p.stderr
    assert "libcurl4" in p.stderr, p.stderr
    assert "file too short" in p.stderr, p.stderr  # the loader's reason
    p = subprocess.run(hide + ["exec", "-"], cwd=ws, input="print(6 * 7)\n",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "42\n", p.stdout
