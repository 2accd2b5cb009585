"""The journal: every step recorded before it happens, and a restarted
supervisor resumes the run from it (SPEC §2, §8)."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, beside


def env():
    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def records(path):
    return [json.loads(line) for line in open(path)]


def test_resume_after_the_supervisor_was_killed(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
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
    # the restart note, a blank line, the repair's line, the record
    failed = json.loads(body["input"].split("rolled back.\n", 1)[1])
    assert failed["task"] == "the task" and failed["cell"] == 2
    assert failed["kind"] == "restart" and "restarted" in failed["detail"]
    recs = records(journal)
    kinds = [(r["type"], r.get("cell")) for r in recs]
    assert ("output", 2) in kinds and ("resume", None) in kinds
    assert kinds[-1] == ("stop", None) and recs[-1]["exit"] == 0
    out3 = [r for r in recs if r["type"] == "output" and r["cell"] == 3][0]
    assert out3["status"] == "exited"


def test_a_used_journal_needs_resume_and_an_ended_run_stays_ended(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
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
    journal = beside(tmp_path, "run.jsonl")
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
    journal = beside(tmp_path, "new.jsonl")
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": "quit()\n", "summary": "stop"}},
              {"text": "ok"}]
    with ModelServer(script) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(journal), "--resume", "a task"], cwd=tmp_path,
                           env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        bare = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                               str(beside(tmp_path, "none.jsonl")), "--resume"],
                              cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert records(journal)[0] == {**records(journal)[0], "type": "run",
                                   "task": "a task"}
    assert bare.returncode == 2 and "no task" in bare.stderr


# --- issue 18 §3: the journal is the run's, and only the run's ----------

def first(code):
    return {"match": "Submit the first Python cell",
            "next_cell": {"code": code, "summary": "first"}}


def agentz(srv, journal, *args, cwd):
    return [AGENTZ, "--base-url", srv.base_url, "--journal", str(journal),
            *args]


def need_root():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")


@pytest.mark.parametrize("resume", [False, True])
def test_a_read_only_filesystem_at_start_exits_5(tmp_path, resume):
    """The journal's filesystem is read-only (a tmpfs remounted ro in a
    mount namespace of its own, gone with the process): exit 5, which
    the unit retries, not 2; nothing is asked of the model."""
    need_root()
    ro = beside(tmp_path, "ro")
    ro.mkdir()
    saved = beside(tmp_path, "saved.jsonl")
    saved.write_text('{"v":1,"type":"run","task":"t","model":"m","at":1}\n')
    with ModelServer([first("quit()\n"), {"text": "ok"}]) as srv:
        argv = agentz(srv, ro / "run.jsonl", cwd=tmp_path)
        argv += ["--resume"] if resume else ["t"]
        script = (f'mount -t tmpfs -o size=1M tmpfs {ro} && '
                  + (f'cp {saved} {ro}/run.jsonl && ' if resume else '')
                  + f'mount -o remount,ro {ro} && exec "$@"')
        p = subprocess.run(["unshare", "-m", "--propagation", "private",
                            "sh", "-c", script, "sh", *argv], cwd=tmp_path,
                           env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        asked = len(srv.requests)
    assert p.returncode == 5, p.stderr
    assert "Read-only file system" in p.stderr
    assert asked == 0
    assert not (ro / "run.jsonl").exists()      # the tmpfs was the child's


def hold_cell(tmp_path):
    """Cell 0 says READY, waits for the file go in the workspace, then
    quits: the step after it (its output) is the next append."""
    return first("import os, time\nprint('READY', flush=True)\n"
                 "while not os.path.exists('go'):\n    time.sleep(0.05)\n"
                 "quit()\n")


def run_until_ready(tmp_path, srv, journal):
    p = subprocess.Popen(agentz(srv, journal, "the task", cwd=tmp_path),
                         cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # cell 0 prints the model's "ok"; a run that never says READY is
    # ended after 60 s, so the loop meets EOF instead of waiting for good
    stop = threading.Timer(60, p.kill)
    stop.start()
    try:
        for line in p.stdout:
            if line == "READY\n":
                return p
    finally:
        stop.cancel()
    p.kill()
    assert False, p.communicate()[1]


def test_a_deleted_journal_stops_the_run_and_resume_goes_on(tmp_path):
    journal = beside(tmp_path)
    with ModelServer([hold_cell(tmp_path), {"text": "ok"}]) as srv:
        p = run_until_ready(tmp_path, srv, journal)
        try:
            os.unlink(journal)
            (tmp_path / "go").touch()
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 2, err
    assert f"the journal {journal} was deleted" in err
    assert "written back to" in err
    recs = records(journal)             # its records are back at the path
    kinds = [(r["type"], r.get("cell")) for r in recs]
    assert kinds[0] == ("run", None) and ("input", 1) in kinds
    assert ("output", 1) not in kinds   # the step it refused never happened
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 2
    # --resume goes on from there (a repair of cell 0), not from cell 0
    with ModelServer([{"match": "Repair the failed cell",
                       "next_cell": {"code": "quit()\n", "summary": "r"}},
                      {"text": "ok"}]) as srv:
        q = subprocess.run(agentz(srv, journal, "--resume", cwd=tmp_path),
                           cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        bodies = srv.bodies
    assert q.returncode == 0, q.stderr
    assert "Repair the failed cell" in json.dumps(bodies[0])
    assert "Submit the first Python cell" not in json.dumps(bodies)


def test_a_renamed_journal_stops_the_run_and_is_written_back(tmp_path):
    journal = beside(tmp_path)
    moved = beside(tmp_path, "moved.jsonl")
    with ModelServer([hold_cell(tmp_path), {"text": "ok"}]) as srv:
        p = run_until_ready(tmp_path, srv, journal)
        try:
            os.rename(journal, moved)
            (tmp_path / "go").touch()
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 2, err
    assert "was renamed or deleted" in err
    assert "written back to" in err
    # the renamed file got the stop, and a whole copy is back at the path
    assert journal.read_text() == moved.read_text()
    recs = records(journal)
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 2
    assert ("input", 1) in [(r["type"], r.get("cell")) for r in recs]


def test_a_replaced_journal_stops_the_run_and_is_left_alone(tmp_path):
    journal = beside(tmp_path)
    moved = beside(tmp_path, "moved.jsonl")
    other = '{"v":1,"type":"run","task":"other","model":"m","at":1}\n'
    with ModelServer([hold_cell(tmp_path), {"text": "ok"}]) as srv:
        p = run_until_ready(tmp_path, srv, journal)
        try:
            os.rename(journal, moved)
            journal.write_text(other)
            (tmp_path / "go").touch()
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 2, err
    assert "was replaced by another file" in err
    assert f"the run's journal is {moved}" in err
    assert journal.read_text() == other           # not ours: untouched
    recs = records(moved)
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 2
    assert ("output", 1) not in [(r["type"], r.get("cell")) for r in recs]


def plant(kind, journal, target):
    if kind == "symlink":
        os.symlink(target, journal)
    elif kind == "fifo":
        os.mkfifo(journal)
    elif kind == "foreign":
        shutil.copy(target, journal)
        os.chown(journal, 65534, 65534)
    elif kind == "hardlink":
        os.link(target, journal)


@pytest.mark.parametrize("kind,said", [
    ("symlink", "symbolic link"), ("fifo", "not a regular file"),
    ("foreign", "belongs to uid 65534"), ("hardlink", "has 2 names")])
def test_a_journal_that_is_not_a_plain_file_of_ours_is_refused(
        tmp_path, kind, said):
    """A link, a FIFO, another user's file or a second name of a file:
    refused before anything is read, cut or written (a planted link once
    made a root --resume cut a file outside the workspace)."""
    if kind == "foreign" and os.geteuid() != 0:
        pytest.skip("needs root")
    journal = beside(tmp_path)
    target = beside(tmp_path, "precious")
    body = b'{"v":1,"type":"run","task":"t","model":"m","at":1}\nprecious'
    target.write_bytes(body)             # a torn tail --resume would cut
    plant(kind, journal, target)
    with ModelServer([first("quit()\n"), {"text": "ok"}]) as srv:
        p = subprocess.run(agentz(srv, journal, "--resume", cwd=tmp_path),
                           cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        asked = len(srv.requests)
    assert p.returncode == 2, p.stderr
    assert said in p.stderr and "refusing the journal" in p.stderr
    assert asked == 0
    assert target.read_bytes() == body


@pytest.mark.parametrize("sub", ["", "deep/er"])
def test_a_journal_inside_the_workspace_is_refused(tmp_path, sub):
    (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    journal = tmp_path / sub / "run.jsonl"
    with ModelServer([first("quit()\n"), {"text": "ok"}]) as srv:
        p = subprocess.run(agentz(srv, journal, "t", cwd=tmp_path),
                           cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        asked = len(srv.requests)
    assert p.returncode == 2, p.stderr
    assert "inside the workspace" in p.stderr
    assert asked == 0 and not journal.exists()


@pytest.mark.parametrize("resume", [False, True])
def test_a_journal_that_is_a_directory_says_so(tmp_path, resume):
    d = beside(tmp_path, "jdir")
    d.mkdir()
    with ModelServer([first("quit()\n"), {"text": "ok"}]) as srv:
        argv = agentz(srv, d, "--resume" if resume else "t", cwd=tmp_path)
        p = subprocess.run(argv, cwd=tmp_path, env=env(),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert f"the journal {d} is a directory" in p.stderr
    assert "already holds a run" not in p.stderr
