"""The worker's network (issue 20, item 2): a namespace of the run's own.

By default (`--network none`) the run's init, its spawners, workers,
snapshots and the standby share a network namespace where only the
loopback interface exists, up. A cell may serve and reach 127.0.0.1 of
its own namespace; the host's 127.0.0.1 services (the model server
included), its abstract unix sockets and its interfaces are out of reach
and out of sight, and an abstract name a cell binds collides with nothing
of the host's. `--network host` opts out, loudly; every report says which
network the worker has.

Every case runs as root and as a plain user (isolation_util's Ctx: copies
of the binaries, a workspace owned by nobody) and asserts the attack
fails, the supervisor lives (a normal exit) and the next cell works.

Safety: the servers and abstract names are the test's own (127.0.0.1 on a
free port, `@agentz-test-<random>`), closed in a finally; every run has a
hard timeout after which its process group is killed. The `@agentz-uid-N`
names a cell squats are the last slots (65500 and up), which no run takes
unless 65,500 run at once.
"""
import json
import os
import socket
import threading
import time
import uuid

import pytest

from agentz_util import SAN
from model_server import ModelServer
from test_deaths import infra, kill_init
from isolation_util import (IS_ROOT, OK_CELL, PRELUDE, RUN_TIMEOUT, Gate,
                            assert_ok, brief, ctx, probe, who)  # noqa: F401

SLOW = 4 if SAN else 1

# what a cell says of its network: its namespace, the interfaces of
# /proc/net/dev (the reader's namespace), and a round trip on 127.0.0.1
NET_PRELUDE = PRELUDE + r'''
import socket
def _ifaces():
    with open('/proc/net/dev') as f:
        return sorted(l.split(':')[0].strip() for l in f.readlines()[2:])
def _tcp_ports():
    out = set()
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(name) as f:
                for l in f.readlines()[1:]:
                    out.add(int(l.split()[1].rsplit(':', 1)[1], 16))
        except OSError:
            pass
    return sorted(out)
def _unix_names():
    with open('/proc/net/unix') as f:
        return [l.split()[-1] for l in f.readlines()[1:]
                if l.split()[-1].startswith('@')]
def _loop():
    srv = socket.socket()
    srv.bind(('127.0.0.1', 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname(), timeout=5)
    s, _ = srv.accept()
    c.sendall(b'ping')
    got = s.recv(4)
    for x in (c, s, srv):
        x.close()
    u1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u1.bind(('127.0.0.1', 0))
    u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u2.sendto(b'pong', u1.getsockname())
    u1.settimeout(5)
    got += u1.recv(4)
    u1.close(); u2.close()
    return got.decode()
def _try(f):
    try:
        return f()
    except Exception as e:
        return _code(e)
def net_state():
    return dict(netns=os.readlink('/proc/self/ns/net'), ifaces=_ifaces(),
                loop=_try(_loop))
'''


SUN_PATH = 108


def host_netns():
    return os.readlink("/proc/self/ns/net")


class TcpServer:
    """The test's own server on the host's 127.0.0.1 (a free port): it
    answers every connection with one line and counts them."""

    def __init__(self):
        self.line = "hello-%s\n" % uuid.uuid4().hex
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.accepted = 0
        self.done = False
        self.th = threading.Thread(target=self._serve, daemon=True)
        self.th.start()

    def _serve(self):
        while not self.done:
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            with conn:
                try:
                    conn.sendall(self.line.encode())
                except OSError:
                    pass

    def close(self):
        self.done = True
        self.th.join(5)
        self.srv.close()


def slot_name(n):
    """A worker-uid slot's abstract name as jail.c binds it: the whole
    sun_path, NUL-padded."""
    return ("\0agentz-uid-%d" % n).encode().ljust(SUN_PATH, b"\0")


def abstract_listener(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(name if isinstance(name, bytes) else "\0" + name)
    s.listen(8)
    s.setblocking(False)
    return s


def accepted_any(s):
    try:
        c, _ = s.accept()
    except BlockingIOError:
        return False
    c.close()
    return True


def connect_cell(port):
    return NET_PRELUDE + f'''
def conn():
    s = socket.create_connection(('127.0.0.1', {port}), timeout=5)
    try:
        return 'LINE:' + s.makefile().readline()
    finally:
        s.close()
try:
    r = conn()
except Exception as e:
    r = _code(e)
report(tcp=r, listed={port} in _tcp_ports(), **net_state())
'''


# --- (1) the host's 127.0.0.1 services ----------------------------------------

def test_a_cell_cannot_reach_a_host_loopback_service(ctx):
    srv = TcpServer()
    ctx.cleanups.append(srv.close)
    r = ctx.run([connect_cell(srv.port), OK_CELL])
    a, b = r.recs
    res = probe(a)
    assert res["tcp"] == "ECONNREFUSED", res     # nothing there: its own lo
    assert not res["listed"], res                # not even in /proc/net/tcp
    assert srv.accepted == 0
    assert res["ifaces"] == ["lo"], res
    assert res["netns"] != host_netns(), res
    assert a["worker"]["network"] == "none", brief(a)
    assert_ok(b)


def test_network_host_reaches_the_host_and_says_so(ctx):
    srv = TcpServer()
    ctx.cleanups.append(srv.close)
    r = ctx.run([connect_cell(srv.port), OK_CELL],
                args=["--network", "host"])
    a, b = r.recs
    res = probe(a)
    assert res["tcp"] == "LINE:" + srv.line, res
    assert res["listed"], res
    assert srv.accepted == 1
    assert res["netns"] == host_netns(), res
    assert a["worker"]["network"] == "host", brief(a)
    assert "netns" not in a["worker"]["isolation"].split(","), brief(a)
    assert "--network host" in r.stderr, r.stderr[-2000:]     # loudly
    assert_ok(b)


# --- (2) the host's abstract unix sockets ----------------------------------------

def test_a_cell_cannot_reach_or_see_a_host_abstract_socket(ctx):
    name = "agentz-test-" + uuid.uuid4().hex
    s = abstract_listener(name)
    ctx.cleanups.append(s.close)
    code = NET_PRELUDE + f'''
def conn():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.settimeout(5)
        c.connect('\\0' + {name!r})
    finally:
        c.close()
report(connect=t(conn), listed='@' + {name!r} in _unix_names())
'''
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    res = probe(a)
    assert res["connect"] == "ECONNREFUSED", res     # no such name there
    assert not res["listed"], res
    assert not accepted_any(s)
    assert_ok(b)


# --- (3) an abstract name a cell binds collides with nothing of the host's ----

def test_abstract_names_a_cell_binds_are_its_own(ctx):
    name = "agentz-test-" + uuid.uuid4().hex
    slots = [slot_name(n) for n in range(65500, 65536)]
    gate = Gate(ctx, "squat")
    squat = NET_PRELUDE + f'''
_held = []
def _bind(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(n if isinstance(n, bytes) else '\\0' + n)
    s.listen(1)
    _held.append(s)
report(bound=[t(_bind, n) for n in [{name!r}] + {slots!r}])
''' + gate.code()
    # the cell's names are still its own, and answer inside its namespace
    after = NET_PRELUDE + f'''
def conn(n):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5)
    c.connect('\\0' + n)
    c.close()
report(mine=t(conn, {name!r}), held=len(_held))
'''
    h = ctx.start_exec([squat, after, OK_CELL])
    gate.wait(h.p)
    taken = {}
    for n in [name] + slots:          # the host binds them after the cell
        try:
            s = abstract_listener(n)
        except OSError as e:
            taken[repr(n.rstrip(b"\0") if isinstance(n, bytes) else n)] = \
                e.strerror
            continue
        if n == name:
            ctx.cleanups.append(s.close)     # held until the run ends
        else:
            s.close()
    gate.release()
    r = ctx.finish(h)
    a, b, c = r.recs
    assert set(probe(a)["bound"]) == {"OK"}, probe(a)
    assert not taken, taken
    assert probe(b) == {"mine": "OK", "held": 1 + len(slots)}, probe(b)
    assert_ok(c)


def test_a_cell_squatting_uid_slots_leaves_the_next_run_alone(ctx):
    # the cell holds the first 64 worker-uid slot names while another run
    # starts as root: that run takes slot 0 ... 63 as if none were held
    # (with the host's network it would skip every one the cell holds)
    if ctx.who.name != "root":
        pytest.skip("worker-uid slots are root's")
    gate = Gate(ctx, "slots")
    squat = NET_PRELUDE + '''
_held = []
for n in range(64):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(('\\0agentz-uid-%d' % n).encode().ljust(108, b'\\0'))
    except OSError:
        s.close()
        continue
    _held.append(s)
print(len(_held))
''' + gate.code()
    h = ctx.start_exec([squat, OK_CELL])
    gate.wait(h.p)
    ws2 = ctx.visible_dir("agentz-net-ws2-")
    try:
        r2 = ctx.run(["import os\nprint(os.getuid())"], cwd=ws2)
    finally:
        gate.release()
    r = ctx.finish(h)
    assert r.recs[0]["output"] == "64\n", brief(r.recs[0])
    uid = int(r2.recs[0]["output"])
    # the first run holds one slot, others' runs may hold a few: a slot
    # well below the 64 the cell squats
    assert uid < 1900000000 + 64, (uid, brief(r2.recs[0]))
    assert_ok(r.recs[1])


# --- (4) its own loopback works ----------------------------------------------

def test_a_cell_serves_and_reaches_its_own_loopback(ctx):
    code = NET_PRELUDE + "report(**net_state())"
    r = ctx.run([code, OK_CELL])
    a, b = r.recs
    res = probe(a)
    assert res["loop"] == "pingpong", res
    assert res["ifaces"] == ["lo"], res         # no host interface
    assert res["netns"] != host_netns(), res
    assert_ok(b)


# --- every process of the run, and a rebuilt world -----------------------------

def _netns_of(pid):
    try:
        return os.readlink("/proc/%d/ns/net" % pid)
    except OSError:
        return None


def _pidns_members(ns):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink("/proc/%s/ns/pid" % d) == ns:
                    out.append(int(d))
            except OSError:
                pass
    return out


def _settled_infra(sup):
    """infra(sup) once every spawner has started its worker: a spawner is
    forked in the host's namespaces and waits there for its cgroup, then
    joins the run's before it forks the worker (a standby's, started 200 ms
    into a cell, may be on its way when the cell reaches its gate)."""
    end = time.monotonic() + 30 * SLOW
    while True:
        init, spawners = infra(sup)
        if init is not None and spawners and all(spawners.values()):
            return init, spawners
        assert time.monotonic() < end, (init, spawners)
        time.sleep(0.01)


def test_every_process_of_the_run_shares_the_network_namespace(ctx):
    if not IS_ROOT:
        pytest.skip("reads other processes' namespaces from the host")
    gate = Gate(ctx, "net")
    code = NET_PRELUDE + "report(**net_state())\n" + gate.code()
    crash = "import os\nos.kill(os.getpid(), 9)"
    again = NET_PRELUDE + "report(**net_state())"
    h = ctx.start_exec([code, crash, again, OK_CELL],
                       args=["--snapshot", "always"])
    gate.wait(h.p)
    init, spawners = _settled_infra(h.p.pid)
    seen = {init: _netns_of(init)}
    for sp in spawners:
        seen[sp] = _netns_of(sp)
    for pid in _pidns_members(os.readlink("/proc/%d/ns/pid" % init)):
        seen[pid] = _netns_of(pid)
    gate.release()
    r = ctx.finish(h, expect_rc=1)
    a, _, c, d = r.recs
    net = probe(a)["netns"]
    assert net != host_netns()
    # the init, the spawners, the worker, its snapshot, the standby
    assert len(seen) >= 4, seen
    assert set(seen.values()) == {net}, (net, seen)
    assert probe(c)["netns"] == net, probe(c)      # the next worker
    assert probe(c)["loop"] == "pingpong", probe(c)
    assert_ok(d)


def test_a_rebuilt_world_has_a_network_namespace_too(ctx):
    gate = Gate(ctx, "lost")
    code = NET_PRELUDE + "report(**net_state())\n" + gate.code()
    after = NET_PRELUDE + "report(**net_state())"
    h = ctx.start_exec([code, after, OK_CELL])
    gate.wait(h.p)
    kill_init(h.p, "network")
    r = ctx.finish(h, expect_rc=None)
    a, b, c = r.recs
    assert a["namespace"] == "lost", brief(a)
    res = probe(b)
    assert res["netns"] not in (host_netns(), probe(a)["netns"]), res
    assert res["ifaces"] == ["lo"] and res["loop"] == "pingpong", res
    assert b["worker"]["network"] == "none", brief(b)
    assert "(rebuild 1)" in r.stderr, r.stderr[-2000:]
    assert_ok(c)


# --- (5) what the reports say ------------------------------------------------

def test_exec_json_says_which_network(ctx):
    r = ctx.run([OK_CELL])
    w = r.recs[0]["worker"]
    assert w["network"] == "none", w
    assert "netns" in w["isolation"].split(","), w
    r = ctx.run([OK_CELL], args=["--isolation", "off"])
    assert r.recs[0]["worker"]["network"] == "host", r.recs[0]["worker"]


def test_the_record_and_runtime_info_say_none_and_the_model_server_is_out_of_reach(ctx):
    journal = os.path.join(ctx.visible_dir("agentz-net-journal-"),
                           "journal.jsonl")
    with ModelServer([]) as srv:
        port = int(srv.base_url.split(":")[2].split("/")[0])
        code = connect_cell(port) + '''
report(runtime_network=RUNTIME_INFO.get('network'))
call_me(input='probe done')
'''
        srv.add_turns([
            {"match": "Submit the first Python cell",
             "next_cell": {"code": code, "summary": "reach the model"}},
            {"text": "ok"},
            {"match": "probe done",
             "next_cell": {"code": "print('after-ok')\nquit()\n",
                           "summary": "next"}},
            {"text": "ok"}, {"text": "ok"}])
        p, f = ctx.start([ctx.agentz, "--network", "none", "--base-url",
                          srv.base_url, "--journal", journal, "a task"],
                         env={"OPENAI_API_KEY": None})
        out, err = ctx.communicate(p, RUN_TIMEOUT)
        f.close()
    assert p.returncode == 0, (out[-2000:], err[-2000:])
    probes = [json.loads(x[6:]) for x in out.splitlines()
              if x.startswith("PROBE ")]
    assert len(probes) == 2, (out[-2000:], err[-2000:])
    res = dict(probes[0], **probes[1])
    assert res["tcp"] == "ECONNREFUSED" and not res["listed"], res
    assert res["runtime_network"] == "none", res
    assert "after-ok" in out.splitlines(), out[-2000:]
    assert "; network: none" in err, err[-2000:]
    with open(journal) as jf:
        recs = [json.loads(x) for x in jf.read().splitlines()]
    iso = [x for x in recs if x["type"] == "isolation"]
    assert len(iso) == 1 and iso[0]["network"] == "none", iso
