"""Runs are unambiguous, and the operator's commands say what is wrong
(issue 22): two live runs whose journals are both journal.jsonl are listed
apart by agentz runs (handle, pid, folder, task), a name both have is
refused with both handles, each run's handle is said at its start; a path
that is not a socket, a folder that is not there and an unknown command
are each their own one-line error with exit 2.  Helpers in ctl_util.py;
each test has its own runtime directory, never /run/agentz.
"""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ  # noqa: E402
from model_server import ModelServer  # noqa: E402
from ctl_util import EXIT_OPERATOR, Run, SLOW, ctl, first, gated  # noqa: E402


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


def env_for(rt):
    return dict(os.environ, RUNTIME_DIRECTORY=str(rt))


def runs(*args, env=None):
    return subprocess.run([AGENTZ, "runs", *args], capture_output=True,
                          text=True, env=env, timeout=30 * SLOW)


def one_line(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


TASK_A = "count the rows of every csv file here and say which is largest"
TASK_B = "plot the temperatures of march"


def test_two_runs_of_one_journal_name_are_told_apart(tmp_path, rt):
    """Both journals are NAME.jsonl (journal.jsonl in the issue; a name of
    this test's own here, as agentz ctl also searches /run/agentz)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    env = env_for(rt)
    n = "journal%d" % os.getpid()
    with ModelServer(first(gated(1))) as srv, \
            ModelServer(first(gated(1))) as srv2:
        a = Run(srv, tmp_path / "a", n, rt, task=TASK_A)
        b = None
        try:
            a.wait_out("C1")
            b = Run(srv2, tmp_path / "b", n, rt, task=TASK_B)
            b.wait_out("C1")
            pa, pb = a.p.pid, b.p.pid
            # each start says the handle agentz ctl takes, without -v
            assert "control: agentz ctl %s COMMAND (socket %s/%s.sock)" % (
                n, rt, n) in a.err.decode(), a.show()
            assert "control: agentz ctl %s-%d COMMAND (another run is " \
                "named %s" % (n, pb, n) in b.err.decode(), b.show()

            # the listing: a handle each, unique, with pid, folder, task
            p = runs("--json", str(rt), env=env)
            assert p.returncode == 0, p.stderr
            got = {j["handle"]: j for j in map(json.loads,
                                                p.stdout.splitlines())}
            assert set(got) == {"%s-%d" % (n, pa), "%s-%d" % (n, pb)}, got
            ja, jb = got["%s-%d" % (n, pa)], got["%s-%d" % (n, pb)]
            assert ja["name"] == jb["name"] == n
            assert (ja["pid"], jb["pid"]) == (pa, pb)
            assert ja["cwd"] == str(a.ws) and jb["cwd"] == str(b.ws)
            assert ja["task"] == "count the rows of every csv file here " \
                "and say which is..."
            assert jb["task"] == TASK_B
            assert ja["socket"] == str(rt / (n + ".sock"))
            assert jb["socket"] == str(rt / ("%s-%d.sock" % (n, pb)))
            p = runs(str(rt), env=env)
            assert p.returncode == 0, p.stderr
            lines = p.stdout.splitlines()
            assert lines[0].split() == ["NAME", "STATE", "CELL", "AGE",
                                        "TOKENS", "PID", "FOLDER", "TASK",
                                        "LAST"]
            rows = {ln.split()[0]: ln for ln in lines[1:]}
            assert set(rows) == {"%s-%d" % (n, pa), "%s-%d" % (n, pb)}
            for h, pid, run, task in (("%s-%d" % (n, pa), pa, a, TASK_A),
                                      ("%s-%d" % (n, pb), pb, b, TASK_B)):
                cols = rows[h].split()
                assert cols[1:3] == ["running", "1"] and cols[5] == str(pid)
                assert cols[6] == str(run.ws), rows[h]
                assert '"%s' % task[:25] in rows[h], rows[h]

            # the name both have: refused, both handles listed, nothing sent
            rc, r, err = ctl(n, "stop", "--now", env=env)
            assert rc == 2 and r is None, err
            lines = err.splitlines()
            assert lines[0] == "agentz ctl: '%s' names 2 runs; give " \
                "the handle of one:" % n, err
            assert len(lines) == 3, err
            for pid, ws, task in ((pa, a.ws, "count the rows"),
                                  (pb, b.ws, "plot the temperatures")):
                rx = r"  %s-%d +pid %d +%s  \"%s" % (n, pid, pid, re.escape(
                    str(ws)), task)
                assert any(re.match(rx, ln) for ln in lines[1:]), err
            # an unknown command is the client's usage error, not the run's no
            rc, r, err = ctl("%s-%d" % (n, pa), "frob", env=env)
            assert rc == 2 and r is None
            assert one_line(err) == "agentz ctl: unknown command 'frob' " \
                "(status, note TEXT, stop, stop --now, pause, resume, " \
                "kill-cell, budgets [OPTIONS], allow HOST, deny HOST, " \
                "network, approve [--always] ID, reject ID)"
            assert not a.records("operator") and not b.records("operator")

            # a handle stops that run and no other
            rc, r, err = ctl("%s-%d" % (n, pb), "stop", "--now", env=env)
            assert rc == 0 and r["ok"] is True, err
            assert b.wait() == EXIT_OPERATOR, b.show()
            assert a.p.poll() is None
            # the name is the one run's again: its handle, and ctl takes it
            p = runs("--json", str(rt), env=env)
            [j] = map(json.loads, p.stdout.splitlines())
            assert j["handle"] == n and j["pid"] == pa
            rc, r, err = ctl(n, "status", env=env)
            assert rc == 0 and r["pid"] == pa, err
            rc, r, err = ctl("%s-%d" % (n, pa), "status", env=env)
            assert rc == 0 and r["pid"] == pa, err
            a.gate(1)
            assert a.wait() == 0, a.show()
        finally:
            a.kill()
            if b is not None:
                b.kill()
    assert [r["command"] for r in b.records("operator")] == ["stop --now"]
    assert not a.records("operator")


def test_a_socket_outside_the_searched_folders_is_shown_by_its_path(
        tmp_path, rt):
    """A folder given to agentz runs that agentz ctl NAME does not search:
    the handle is the socket's path, which agentz ctl takes."""
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "far", other)
        try:
            run.wait_out("C1")
            p = runs("--json", str(other), env=env_for(rt))
            assert p.returncode == 0, p.stderr
            [j] = map(json.loads, p.stdout.splitlines())
            assert j["handle"] == run.sock and j["name"] == "far"
            rc, r, err = ctl(j["handle"], "status", env=env_for(rt))
            assert rc == 0 and r["pid"] == run.p.pid, err
            rc, r, err = ctl("far", "status", env=env_for(rt))
            assert rc == 2 and "no run named 'far'" in one_line(err)
            # a live run's journal still reports (not refused as no journal)
            p = subprocess.run([AGENTZ, "report", str(run.journal)],
                               capture_output=True, text=True,
                               timeout=60 * SLOW)
            assert p.returncode == 0 and p.stderr == "", p.stderr
            assert "no stop record" in p.stdout and 'data-cells="2"' in \
                p.stdout
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()


# --- the operator's commands given what is not there ---------------------------------------

def test_ctl_given_a_path_that_is_not_a_socket(tmp_path, rt):
    env = env_for(rt)
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    rc, r, err = ctl(str(f), "status", env=env)
    assert (rc, r) == (2, None)
    assert one_line(err) == "agentz ctl: %s is not a run's control socket " \
        "(a file; agentz runs lists the runs)" % f
    rc, r, err = ctl(str(tmp_path), "status", env=env)
    assert (rc, r) == (2, None)
    assert one_line(err) == "agentz ctl: %s is not a run's control socket " \
        "(a folder; agentz runs lists the runs)" % tmp_path
    gone = tmp_path / "gone.sock"
    rc, r, err = ctl(str(gone), "status", env=env)
    assert (rc, r) == (2, None)
    assert one_line(err) == "agentz ctl: %s: No such file or directory: " \
        "not a run's control socket (agentz runs lists the runs)" % gone


def test_ctl_an_unknown_command_is_a_usage_error(rt):
    env = env_for(rt)
    rc, r, err = ctl("nosuchrun", "frob", env=env)
    assert (rc, r) == (2, None)
    assert one_line(err).startswith("agentz ctl: unknown command 'frob' "
                                    "(status, note TEXT, stop,")
    rc, r, err = ctl("nosuchrun", "status", "now", env=env)
    assert (rc, r) == (2, None)
    assert one_line(err) == "agentz ctl: 'status' takes no argument (got " \
        "'now')"


def test_runs_given_a_folder_that_is_not_there(tmp_path, rt):
    env = env_for(rt)
    gone = tmp_path / "nonexistent"
    p = runs(str(gone), env=env)
    assert p.returncode == 2 and p.stdout == ""
    assert one_line(p.stderr) == "agentz runs: %s: No such file or " \
        "directory (give folders of control sockets, or sockets)" % gone
    f = tmp_path / "file"
    f.write_text("x")
    p = runs("--json", str(rt), str(f), env=env)
    assert p.returncode == 2 and p.stdout == ""
    assert one_line(p.stderr) == "agentz runs: %s is neither a folder nor " \
        "a socket (give folders of control sockets, or sockets)" % f
    # a folder that is there but holds no run is not an error
    p = runs(str(rt), env=env)
    assert p.returncode == 0 and one_line(p.stderr) == \
        "agentz runs: no runs found"
