"""The operator's control socket (issue 13, items 1, 2 and 5), continued: bad
clients (garbage, a huge line, one that never reads, more than eight at
once), agentz runs and the default place, help, the status bar, a model
outage, a note across a crash, a plain user's worker, a socket masked in the
workspace and budgets re-read.  Conventions as in test_ctl.py (helpers in
ctl_util.py).
"""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, binaries_for_any_user  # noqa: E402
from model_server import ModelServer  # noqa: E402
from ctl_util import (  # noqa: E402
    EXIT_OPERATOR, HANG, Run, SLOW, WORKER_PROBE, closed_by_server, code, ctl,
    first, gated, on, raw, read_reply)


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


# --- bad clients ------------------------------------------------------------------------

def test_garbage_and_a_huge_line_are_refused_and_the_run_goes_on(tmp_path, rt):
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "junk", rt)
        try:
            run.wait_out("C1")
            s = raw(run.sock)
            s.sendall(b"\xff\xfe garbage\n")
            r = read_reply(s)
            assert r["ok"] is False and "not UTF-8" in r["error"]
            assert closed_by_server(s)
            s = raw(run.sock)
            s.sendall(b"launch the missiles\n")
            r = read_reply(s)
            assert r["ok"] is False and "unknown command" in r["error"]
            assert closed_by_server(s)
            s = raw(run.sock)
            try:
                s.sendall(b"note " + b"x" * (1 << 20) + b"\n")
                r = read_reply(s)
            except (BrokenPipeError, ConnectionResetError):
                r = None        # closed on us mid-line: refused too
            assert r is None or (r["ok"] is False and
                                 "too long" in r["error"]), r
            assert closed_by_server(s)
            s.close()
            st = run.ctl("status")[1]
            assert st["state"] == "running" and st["notes_pending"] == 0
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    assert not run.records("note")


def test_a_client_that_never_reads_is_dropped(tmp_path, rt):
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "hog", rt)
        try:
            run.wait_out("C1")
            hog = raw(run.sock)
            try:
                for _ in range(200):
                    hog.sendall(b"status\n" * 100)
            except (BrokenPipeError, ConnectionResetError):
                pass
            # the hog is still connected on our side, unread; others are
            # served and the run goes on
            rc, st, err = run.ctl("status")
            assert rc == 0 and st["cell"]["n"] == 1, err
            assert closed_by_server(hog)
            hog.close()
            run.wait_err("does not read its replies")
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()


# --- agentz runs, names, the default place -------------------------------------------------

def test_runs_lists_two_concurrent_runs_and_a_stale_socket(tmp_path, rt):
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(rt / "gone.sock"))
    stale.close()
    with ModelServer(first(HANG)) as srv, ModelServer(first(HANG)) as srv2:
        a = Run(srv, tmp_path, "alpha", rt)
        b = Run(srv2, tmp_path, "beta", rt)
        try:
            a.wait_out("C1")
            b.wait_out("C1")
            p = subprocess.run([AGENTZ, "runs", "--json", str(rt)],
                               capture_output=True, text=True, timeout=30)
            assert p.returncode == 0, p.stderr
            runs = {j["name"]: j for j in map(json.loads,
                                               p.stdout.splitlines())}
            assert set(runs) == {"alpha", "beta", "gone"}
            for name, run in (("alpha", a), ("beta", b)):
                assert runs[name]["state"] == "running"
                assert runs[name]["pid"] == run.p.pid
                assert runs[name]["cell"]["n"] == 1
                assert runs[name]["tokens"]["used"] > 0
                assert runs[name]["last"] == "cell 0: ok"
                assert runs[name]["socket"] == run.sock
            assert runs["gone"]["state"] == "stale"
            # a run's handle is its name where agentz ctl NAME searches
            # (issue 22; elsewhere, its socket's path)
            p = subprocess.run([AGENTZ, "runs", str(rt)], capture_output=True,
                               text=True, timeout=30,
                               env=dict(os.environ, RUNTIME_DIRECTORY=str(rt)))
            lines = p.stdout.splitlines()
            # PID, FOLDER and TASK added by issue 22 (test_ctl_names.py)
            assert lines[0].split() == ["NAME", "STATE", "CELL", "AGE",
                                        "TOKENS", "PID", "FOLDER", "TASK",
                                        "LAST"]
            rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
            assert rows["alpha"][1:3] == ["running", "1"]
            assert rows["beta"][1:3] == ["running", "1"]
            assert rows["gone"][1] == "stale"
            # a run by its name, found through $RUNTIME_DIRECTORY
            env = dict(os.environ, RUNTIME_DIRECTORY=str(rt))
            rc, r, err = ctl("beta", "stop", "--now", env=env)
            assert rc == 0 and r["ok"] is True, err
            assert a.ctl("stop", "--now")[0] == 0
            assert a.wait() == EXIT_OPERATOR and b.wait() == EXIT_OPERATOR
            rc, r, err = ctl("beta", "status", env=env)
            assert rc == 2 and "no run named 'beta'" in err
        finally:
            a.kill()
            b.kill()


def test_the_default_place_is_run_agentz_masked_in_the_view(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("/run/agentz is root's")
    name = "ctltest-%d" % os.getpid()
    sock = "/run/agentz/%s.sock" % name
    script = first("""
        import os
        print('C1', flush=True)
        try:
            print('SEEN', sorted(os.listdir('/run/agentz')), flush=True)
        except OSError as e:
            print('SEEN ERR', type(e).__name__, flush=True)
        print('ISSOCK', os.path.exists(%r), flush=True)
        quit()
        """ % sock)
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, name, None)
        try:
            assert run.wait() == 0, run.show()
        finally:
            run.kill()
    out = run.out.decode()
    assert "SEEN ERR" in out or "SEEN []" in out, out
    assert "ISSOCK False" in out, out
    assert not os.path.exists(sock)
    assert os.stat("/run/agentz").st_uid == 0


def test_help_lists_the_new_commands():
    p = subprocess.run([AGENTZ, "--help"], capture_output=True, text=True)
    assert "agentz ctl RUN COMMAND" in p.stdout
    assert "agentz runs [--json]" in p.stdout
    assert "6 the operator stopped it" in p.stdout
    p = subprocess.run([AGENTZ, "ctl", "--help"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and "kill-cell" in p.stdout
    p = subprocess.run([AGENTZ, "ctl", "x"], capture_output=True, text=True)
    assert p.returncode == 2


def test_the_status_bar_shows_paused_and_a_pending_note(tmp_path, rt):
    import fcntl
    import struct
    import termios
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(TERM="xterm", RUNTIME_DIRECTORY=str(rt))
    buf, cond = [b""], threading.Condition()

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            with cond:
                buf[0] += chunk or b"\0EOF"
                cond.notify_all()
            if not chunk:
                return

    def wait_for(pattern, since=0):
        rx = re.compile(pattern.encode())
        with cond:
            assert cond.wait_for(lambda: rx.search(buf[0], since) or
                                 b"\0EOF" in buf[0], 30 * SLOW)
            assert rx.search(buf[0], since), buf[0].decode(errors="replace")

    with ModelServer(first(gated(1))) as srv:
        p = subprocess.Popen([AGENTZ, "--base-url", srv.base_url,
                              "--journal", str(tmp_path / "bar.jsonl"),
                              "the task"], cwd=ws, env=env, stdin=slave,
                             stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        t = threading.Thread(target=read)
        t.start()
        sock = str(rt / "bar.sock")
        try:
            wait_for("C1")
            assert ctl(sock, "pause")[0] == 0
            wait_for(r"\x1b\[7m . PAUSED \| cell 1: first")
            assert ctl(sock, "note", "look", "again")[0] == 0
            wait_for(r"\x1b\[7m . PAUSED \| operator note pending \| cell 1")
            since = len(buf[0])
            assert ctl(sock, "resume")[0] == 0
            wait_for(r"\x1b\[7m . operator note pending \| cell 1", since)
            (ws / "go1").write_text("go")
            assert p.wait(timeout=30 * SLOW) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            t.join(timeout=10)
            os.close(master)


def test_status_during_a_model_outage_and_stop_now_there(tmp_path, rt):
    script = [{"kind": "http_error", "status": 503, "repeat": "forever"}]
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "outage", rt,
                  args=("--max-retries", "0", "--outage-patience", "600"))
        try:
            run.wait_record(lambda r: r["type"] == "outage")
            st = run.ctl("status")[1]
            assert st["state"] == "waiting-model", st
            assert st["outage"].startswith("waiting for the model: "), st
            assert st["cell"]["n"] == 0
            rc, r, err = run.ctl("stop", "--now")
            assert rc == 0, err
            assert run.wait() == EXIT_OPERATOR, run.show()
        finally:
            run.kill()
    assert [r["command"] for r in run.records("operator")] == ["stop --now"]
    out = run.records("output")[-1]
    assert out["cell"] == 0 and out["kind"] == "timeout"
    assert "stop --now" in run.records()[-1]["reason"]


def test_at_most_eight_clients_at_once(tmp_path, rt):
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "many", rt)
        try:
            run.wait_out("C1")
            idle = [raw(run.sock) for _ in range(8)]
            extra = raw(run.sock)
            r = read_reply(extra)
            assert r == {"ok": False,
                         "error": "busy: too many clients connected"}, r
            assert closed_by_server(extra)
            # one goes; once another's request is answered, the server has
            # seen the first one's end, so a new client gets a slot
            idle.pop().close()
            idle[0].sendall(b"status\n")
            assert read_reply(idle[0])["state"] == "running"
            rc, st, err = run.ctl("status")
            assert rc == 0 and st["cell"]["n"] == 1, err
            for s in idle:
                s.close()
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()


def test_a_note_not_delivered_before_a_crash_goes_after_resume(tmp_path, rt):
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "crash", rt)
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("note", "remember ZQNOTE")
            assert rc == 0, err
            run.p.kill()    # SIGKILL: no stop record, the socket left
            run.wait()
        finally:
            run.kill()
    assert os.path.exists(run.sock)
    assert [r["type"] for r in run.records()][-1] == "note"
    script = [{"match": "Repair the failed cell",
               "next_cell": {"code": "quit()\n"}}, {"text": "ok"}]
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["RUNTIME_DIRECTORY"] = str(rt)
    with ModelServer(script) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(run.journal), "--resume"], cwd=run.ws,
                           env=env, capture_output=True, text=True,
                           timeout=60 * SLOW)
        repair = [r["body"]["input"] for r in srv.requests
                  if isinstance(r["body"]["input"], str)][0]
    assert p.returncode == 0, p.stderr
    assert "[agentz] A note from the operator of this run: remember " \
        "ZQNOTE" in repair, repair
    assert "not delivered before the restart" in p.stderr
    types = [r["type"] for r in run.records()]
    assert types.count("note") == 1 and types.count("note_delivered") == 1
    assert types.index("note_delivered") > types.index("resume")
    assert not os.path.exists(run.sock)     # the stale one replaced, gone


def test_a_plain_users_worker_is_refused():
    """A plain user's worker has the user's uid (in a user namespace): the
    uid check would let it pass, the PID namespace check refuses it."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    base = tempfile.mkdtemp(prefix="agentz-ctl-user-")
    os.chmod(base, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        xdg = os.path.join(base, "xdg")
        os.mkdir(xdg, 0o700)
        os.chown(xdg, 65534, 65534)
        os.chown(base, 65534, 65534)    # the journal's folder
        sock = os.path.join(xdg, "agentz", "user.sock")
        script = first(WORKER_PROBE % {"sock": sock,
                                       "rt": os.path.dirname(sock)})
        with binaries_for_any_user() as agentz, ModelServer(script) as srv:
            run = Run(srv, pathlib.Path(base), "user", None, agentz=agentz,
                      prefix=nobody, owner=65534,
                      env={"XDG_RUNTIME_DIR": xdg, "HOME": base})
            try:
                run.wait_out("C1")
                assert os.stat(sock).st_uid == 65534
                assert os.stat(sock).st_mode & 0o777 == 0o600
                # the user's own client is let in
                rc, st, err = ctl(sock, "status", prefix=nobody,
                                  agentz=agentz)
                assert rc == 0 and st["uid"] == 65534, err
                os.link(sock, run.ws / "link.sock")
                assert run.wait() == 0, run.show()
            finally:
                run.kill()
        out = run.out.decode()
        assert "DIRECT ERR" in out, out
        via = [ln for ln in out.splitlines() if ln.startswith("VIA")][0]
        reply = json.loads(via[4:])
        assert reply["ok"] is False and "inside the run's worker PID " \
            "namespace" in reply["error"], via
        assert not os.path.exists(sock)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_socket_next_to_a_journal_in_the_workspace_is_masked():
    """A plain user's socket folder inside the workspace (its
    $XDG_RUNTIME_DIR; a journal there is refused): cells cannot reach the
    socket there."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    base = tempfile.mkdtemp(prefix="agentz-ctl-ws-")
    os.chmod(base, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        ws = os.path.join(base, "ws")
        os.mkdir(ws)
        os.chown(ws, 65534, 65534)
        # the socket's folder inside the workspace (a journal there is
        # refused, so through $XDG_RUNTIME_DIR)
        jdir = os.path.join(base, "j")
        os.mkdir(jdir)
        os.chown(jdir, 65534, 65534)
        journal = os.path.join(jdir, "inws.jsonl")
        sock = os.path.join(ws, "agentz", "inws.sock")
        probe = code("""
            import os, socket
            print('C1', flush=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect('agentz/inws.sock')
                s.sendall(b'stop --now\\n')
                print('GOT', s.recv(4096), flush=True)
            except OSError as e:
                print('ERR', type(e).__name__, flush=True)
            quit()
            """)
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "XDG_RUNTIME_DIR",
                            "RUNTIME_DIRECTORY")}
        env["HOME"] = base
        env["XDG_RUNTIME_DIR"] = ws
        with binaries_for_any_user() as agentz, \
                ModelServer(first(probe)) as srv:
            p = subprocess.Popen([*nobody, agentz, "--base-url",
                                  srv.base_url, "--journal", journal,
                                  "the task"], cwd=ws, env=env,
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            out, err = p.communicate(timeout=60 * SLOW)
        assert p.returncode == 0, err
        assert b"ERR " in out and b"GOT" not in out, out
        assert not os.path.exists(sock)
        assert b"no control socket" not in err, err
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_budgets_are_re_read(tmp_path, rt):
    script = first(gated(1, "call_me(input='ZQNEXT')\n")) + \
        on("ZQNEXT", "print('C2', flush=True)\nquit()\n")
    with ModelServer(script) as srv:
        run = Run(srv, tmp_path, "budg", rt, args=("--max-cells", "50"))
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("budgets", "--bogus")
            assert rc == 1 and "not options" in r["error"], (r, err)
            run.wait_err("unknown option --bogus")
            rc, r, err = run.ctl("budgets", "--max-cost", "1")
            assert rc == 1 and "price" in r["error"], (r, err)
            assert run.ctl("status")[1]["cells"]["max"] == 50
            rc, r, err = run.ctl("budgets", "--max-cells", "2",
                                 "--max-tokens", "900000")
            assert rc == 0 and r["max_cells"] == 2, (r, err)
            assert r["max_tokens"] == 900000 and r["max_same_failure"] == 5
            st = run.ctl("status")[1]
            assert st["cells"] == {"used": 2, "max": 2, "left": 0}
            assert st["tokens"]["max"] == 900000
            assert st["state"] == "running"     # checked when the cell ends
            run.gate(1)
            assert run.wait() == 4, run.show()
        finally:
            run.kill()
    assert b"C2" not in run.out
    stop = run.records()[-1]
    assert stop["exit"] == 4 and "cells" in stop["reason"], stop
    assert [r["command"] for r in run.records("operator")] == ["budgets"]


def test_a_deadline_re_read_already_past_stops_the_run(tmp_path, rt):
    with ModelServer(first(HANG)) as srv:
        run = Run(srv, tmp_path, "dl", rt, args=("--deadline", "3600"))
        try:
            run.wait_out("C1")
            assert run.ctl("status")[1]["deadline"]["max"] == 3600
            rc, r, err = run.ctl("budgets", "--deadline", "0.001")
            assert rc == 0 and r["deadline"] == 0.001, (r, err)
            assert run.wait() == 4, run.show()
        finally:
            run.kill()
    assert "run deadline" in run.records()[-1]["reason"]
