"""The journal: every step recorded before it happens, and a restarted
supervisor resumes the run from it (SPEC §2, §8)."""
import json
import os
import signal
import subprocess
import time

from model_server import ModelServer

from agentz_util import AGENTZ


def env():
    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def records(path):
    return [json.loads(line) for line in open(path)]


def test_resume_after_the_supervisor_was_killed(tmp_path):
    journal = tmp_path / "run.jsonl"
    first = [
        {"match": "Submit the first Python cell",
         "next_cell": {"code": "x = 41\nr = call_me(input='step-two')\n",
                       "summary": "set x"}},
        {"text": "ok"},
        {"match": "step-two",
         "next_cell": {"code": "import time\nprint('cell 2 hangs')\n"
                               "time.sleep(300)\n", "summary": "hang"}},
        {"text": "ok"},
    ]
    with ModelServer(first) as srv:
        p = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, "--journal",
                              str(journal), "the task"], cwd=tmp_path,
                             env=env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            lines = [p.stdout.readline() for _ in range(2)]
            assert lines == [b"ok\n", b"cell 2 hangs\n"]   # cell 0, cell 2
            os.kill(p.pid, signal.SIGKILL)     # the supervisor dies mid-cell
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
    kinds = [(r["type"], r.get("cell")) for r in records(journal)]
    assert kinds[0] == ("run", None)
    assert ("input", 2) in kinds and ("output", 2) not in kinds
    assert ("successor", 1) in kinds
    repair = "print('repaired', 'x' in dir())\nquit()\n"
    second = [
        {"match": "Repair the failed cell",
         "next_cell": {"code": repair, "summary": "whatever"}},
        {"text": "ok"},
    ]
    with ModelServer(second) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(journal), "--resume"], cwd=tmp_path, env=env(),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        body = srv.bodies[0]
    assert p.returncode == 0, p.stderr
    assert "repaired False" in p.stdout       # a fresh namespace
    failed = json.loads(body["input"].split("\n", 1)[1])
    assert failed["task"] == "the task" and failed["cell"] == 2
    assert failed["kind"] == "restart" and "restarted" in failed["detail"]
    recs = records(journal)
    kinds = [(r["type"], r.get("cell")) for r in recs]
    assert ("output", 2) in kinds and ("resume", None) in kinds
    assert kinds[-1] == ("stop", None) and recs[-1]["exit"] == 0
    out3 = [r for r in recs if r["type"] == "output" and r["cell"] == 3][0]
    assert out3["status"] == "exited"


def test_a_used_journal_needs_resume_and_an_ended_run_stays_ended(tmp_path):
    journal = tmp_path / "run.jsonl"
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": "quit()\n", "summary": "stop"}},
              {"text": "ok"}]
    with ModelServer(script) as srv:
        args = [AGENTZ, "--base-url", srv.base_url, "--journal", str(journal)]
        ok = subprocess.run(args + ["t"], cwd=tmp_path, env=env(),
                            stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=60)
        again = subprocess.run(args + ["t"], cwd=tmp_path, env=env(),
                               stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=60)
        resumed = subprocess.run(args + ["--resume"], cwd=tmp_path, env=env(),
                                 stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=60)
        requests = len(srv.requests)
    assert ok.returncode == 0, ok.stderr
    assert again.returncode == 2 and "--resume" in again.stderr
    assert resumed.returncode == 0 and "already ended" in resumed.stderr
    assert requests == 2                      # the resume asked nothing


def test_secrets_never_reach_the_journal(tmp_path):
    journal = tmp_path / "run.jsonl"
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": "print('key sk-canary-1234567')\nquit()\n",
                             "summary": "leak"}},
              {"text": "ok"}]
    with ModelServer(script) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(journal), "t"], cwd=tmp_path,
                           env=dict(env(), MY_API_KEY="sk-canary-1234567"),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    text = journal.read_text()
    assert "sk-canary-1234567" not in text and "[REDACTED]" in text


def test_resume_without_a_journal_starts_a_new_run(tmp_path):
    journal = tmp_path / "new.jsonl"
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": "quit()\n", "summary": "stop"}},
              {"text": "ok"}]
    with ModelServer(script) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(journal), "--resume", "a task"], cwd=tmp_path,
                           env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        bare = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                               str(tmp_path / "none.jsonl"), "--resume"],
                              cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert records(journal)[0] == {**records(journal)[0], "type": "run",
                                   "task": "a task"}
    assert bare.returncode == 2 and "no task" in bare.stderr
