"""The egress proxy (issue 21): `--network proxy`, the supervisor's HTTP
proxy inside the worker's network namespace, and its policy.

A cell reaches the outside only through the proxy at 127.0.0.1:3128 of
its own namespace (HTTP_PROXY and friends in its environment); the
supervisor resolves names, refuses what no --allow-host entry names,
refuses loopback, link-local (the metadata address) and private
addresses unless an entry names the address itself, lets a deny entry
win, checks a TLS ClientHello's server name against the CONNECT's host,
and bounds how many connections a cell holds. Every case runs as root
and as a plain user (isolation_util's Ctx) and asserts what got through
(the test's own servers count what reached them), what the cell saw, and
that the supervisor lives and the next cell works.

Safety: every server is the test's own on the host's 127.0.0.1 (a free
port), closed in a finally; names that must not resolve use the
reserved .invalid domain; the metadata address is never reached (the
proxy refuses before connecting, and nothing of the test's listens
there).
"""
import json
import os
import re
import socket
import threading
import uuid

import pytest

from test_network import TcpServer, host_netns
from isolation_util import (OK_CELL, PRELUDE, RUN_TIMEOUT, assert_ok,  # noqa
                            brief, ctx, probe, who)

PROXY = "http://127.0.0.1:3128"


class HttpServer:
    """The test's own HTTP origin on the host's 127.0.0.1: one body per
    request, the heads it received kept."""

    def __init__(self, size=0):
        self.body = ("origin-%s\n" % uuid.uuid4().hex).encode()
        self.body += b"x" * size
        self.heads = []
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.done = False
        self.th = threading.Thread(target=self._serve, daemon=True)
        self.th.start()

    def _serve(self):
        while not self.done:
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with c:
                c.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    self.heads.append(data.decode("latin-1"))
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                              b"Connection: close\r\n\r\n" % len(self.body)
                              + self.body)
                except OSError:
                    pass

    def close(self):
        self.done = True
        self.th.join(5)
        self.srv.close()


class EchoServer(TcpServer):
    """Echoes what a connection sends; counts bytes received."""

    def __init__(self):
        self.got = 0
        super().__init__()

    def _serve(self):
        while not self.done:
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,),
                             daemon=True).start()

    def _echo(self, conn):
        with conn:
            conn.settimeout(5)
            try:
                while True:
                    d = conn.recv(4096)
                    if not d:
                        return
                    self.got += len(d)
                    conn.sendall(d)
            except OSError:
                pass


def server(ctx, cls):
    s = cls()
    ctx.cleanups.append(s.close)
    return s


# A cell's tools: fetch a URL through the proxy (explicitly: 127.0.0.1 is
# in NO_PROXY, the namespace's own loopback), a raw CONNECT.
NET_PRELUDE = PRELUDE + r'''
import socket, urllib.request, urllib.error
for _k in ('no_proxy', 'NO_PROXY'):    # the host's loopback is the test's
    os.environ.pop(_k, None)
def fetch(url, proxy='http://127.0.0.1:3128'):
    op = urllib.request.build_opener(urllib.request.ProxyHandler(
        {'http': proxy, 'https': proxy}))
    try:
        r = op.open(url, timeout=20)
        return {'status': r.status, 'body': r.read().decode()}
    except urllib.error.HTTPError as e:
        return {'status': e.code, 'body': e.read().decode()}
    except Exception as e:
        return {'error': _code(e)}
def connect(target, payload=b'', read=True):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n'
              % (target.encode(), target.encode()))
    head = b''
    while b'\r\n\r\n' not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    status = head.split(b' ')[1].decode() if head else ''
    got = b''
    if status == '200' and payload:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        while read:
            d = s.recv(4096)
            if not d:
                break
            got += d
    s.close()
    return {'status': status, 'got': got.decode('latin-1')}
'''


def cell(body):
    return NET_PRELUDE + body


def proxy_args(*extra):
    return ["--network", "proxy", *extra]


def records(r):
    a = r.recs[0]
    return a, probe(a)


# --- the environment and what the run says ----------------------------------

def test_proxy_env_and_start_line(ctx):
    r = ctx.run([PRELUDE + ("report(env={k: v for k, v in os.environ.items() "
                      "if 'proxy' in k.lower()}, netns=os.readlink("
                      "'/proc/self/ns/net'))"), OK_CELL],
                args=proxy_args("-v", "--allow-host", "pypi.org"))
    a, res = records(r)
    env = res["env"]
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
              "https_proxy", "all_proxy"):
        assert env[k] == PROXY, env
    assert "127.0.0.1" in env["NO_PROXY"].split(","), env
    assert res["netns"] != host_netns(), res
    assert a["worker"]["network"] == "proxy", brief(a)
    assert "network: proxy http://127.0.0.1:3128 (allow: pypi.org)" \
        in r.stderr, r.stderr[-2000:]
    assert_ok(r.recs[1])


def test_exec_default_network_is_none_without_proxy_env(ctx):
    r = ctx.run([cell("report(env=[k for k in os.environ "
                      "if 'proxy' in k.lower()])")])
    a, res = records(r)
    assert res["env"] == [], res
    assert a["worker"]["network"] == "none", brief(a)


# --- the policy ----------------------------------------------------------------

def test_unlisted_host_is_refused_with_the_reason(ctx):
    r = ctx.run([cell("report(r=fetch('http://nothing.invalid/x'))"),
                 OK_CELL], args=proxy_args())
    _, res = records(r)
    assert res["r"]["status"] == 403, res
    assert "nothing.invalid:80 is not in the allow-list" in \
        res["r"]["body"], res
    assert "network: refused GET nothing.invalid:80" in r.stderr, \
        r.stderr[-2000:]
    assert_ok(r.recs[1])


def test_loopback_needs_the_address_itself(ctx):
    origin = server(ctx, HttpServer)
    url = "http://127.0.0.1:%d/p?q=1" % origin.port
    name_url = "http://localhost:%d/" % origin.port
    # '*' and the name allow much, but never the host's loopback
    r = ctx.run([cell("report(a=fetch(%r), b=fetch(%r))" % (url, name_url)),
                 OK_CELL], args=proxy_args("--allow-host", "*",
                                           "--allow-host", "localhost"))
    _, res = records(r)
    for k in ("a", "b"):
        assert res[k]["status"] == 403, res
        assert "a loopback address: only an entry naming the address" \
            in res[k]["body"], res
    assert origin.heads == []
    assert_ok(r.recs[1])
    # the address named: it goes through, in origin-form, Host from the URL
    r = ctx.run([cell("report(a=fetch(%r))" % url)],
                args=proxy_args("--allow-host", "127.0.0.1"))
    _, res = records(r)
    assert res["a"] == {"status": 200, "body": origin.body.decode()}, res
    head = origin.heads[-1]
    assert head.startswith("GET /p?q=1 HTTP/1.1\r\n"), head
    assert "Host: 127.0.0.1:%d\r\n" % origin.port in head, head
    assert "Connection: close\r\n" in head, head
    assert "proxy-connection" not in head.lower(), head


def test_deny_wins_and_metadata_is_refused(ctx):
    origin = server(ctx, HttpServer)
    r = ctx.run([cell("report(a=fetch('http://127.0.0.1:%d/'), "
                      "m=fetch('http://169.254.169.254/latest/meta-data/'), "
                      "p=fetch('http://10.1.2.3/'))" % origin.port),
                 OK_CELL],
                args=proxy_args("--allow-host", "*", "--allow-host",
                                "127.0.0.1", "--deny-host", "127.0.0.0/8"))
    _, res = records(r)
    assert res["a"]["status"] == 403 and "denied" in res["a"]["body"], res
    assert res["m"]["status"] == 403 and "link-local" in res["m"]["body"], \
        res
    assert res["p"]["status"] == 403 and "private" in res["p"]["body"], res
    assert origin.heads == []
    assert_ok(r.recs[1])


# --- CONNECT -----------------------------------------------------------------

def test_connect_tunnels_bytes_both_ways(ctx):
    echo = server(ctx, EchoServer)
    target = "127.0.0.1:%d" % echo.port
    r = ctx.run([cell("report(c=connect(%r, b'ping-through'))" % target),
                 OK_CELL], args=proxy_args("--allow-host", target))
    _, res = records(r)
    assert res["c"] == {"status": "200", "got": "ping-through"}, res
    assert echo.got == len("ping-through")
    assert_ok(r.recs[1])


def test_large_transfers_arrive_whole_both_ways(ctx):
    """8 MiB down through a plain-HTTP request and 2 MiB each way through
    a CONNECT tunnel: every byte, in order (the buffers fill and drain
    many times over)."""
    origin = server(ctx, lambda: HttpServer(size=8 << 20))
    echo = server(ctx, EchoServer)
    target = "127.0.0.1:%d" % echo.port
    code = r'''
import hashlib, threading
r = fetch('http://127.0.0.1:%d/')
down = hashlib.sha256(r.get('body', '').encode()).hexdigest()
s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
s.sendall(b'CONNECT %s HTTP/1.1\r\n\r\n')
head = b''
while b'\r\n\r\n' not in head:
    head += s.recv(1)
data = bytes(range(256)) * 8192
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = []
while True:
    d = s.recv(65536)
    if not d:
        break
    got.append(d)
t.join()
report(status=r.get('status'), down=down, echoed=b''.join(got) == data)
''' % (origin.port, target)
    r = ctx.run([cell(code), OK_CELL], args=proxy_args(
        "--allow-host", "127.0.0.1"))
    _, res = records(r)
    import hashlib
    assert res == {"status": 200, "echoed": True, "down": hashlib.sha256(
        origin.body).hexdigest()}, res
    assert echo.got == 2 << 20
    assert_ok(r.recs[1])


def test_a_direct_connection_bypassing_the_proxy_reaches_nothing(ctx):
    """The proxy is the only way out: a socket connected straight to the
    host's 127.0.0.1 origin (allowed through the proxy) finds only the
    namespace's own loopback."""
    origin = server(ctx, HttpServer)
    r = ctx.run([cell("""
def direct():
    try:
        socket.create_connection(('127.0.0.1', %d), timeout=5).close()
        return 'CONNECTED'
    except Exception as e:
        return _code(e)
report(d=direct(), p=fetch('http://127.0.0.1:%d/').get('status'))
""" % (origin.port, origin.port))], args=proxy_args("--allow-host",
                                                    "127.0.0.1"))
    _, res = records(r)
    assert res == {"d": "ECONNREFUSED", "p": 200}, res
    assert len(origin.heads) == 1


def test_connect_port_must_match_the_entry(ctx):
    echo = server(ctx, EchoServer)
    r = ctx.run([cell("report(c=connect('127.0.0.1:%d', b'x'))"
                      % echo.port)],
                args=proxy_args("--allow-host", "127.0.0.1:1"))
    _, res = records(r)
    assert res["c"]["status"] == "403", res
    assert echo.accepted == 0


def test_tls_server_name_must_be_the_connect_host(ctx):
    echo = server(ctx, EchoServer)
    target = "127.0.0.1:%d" % echo.port
    # a real ClientHello naming another host, through a tunnel to ours
    code = r'''
import ssl
s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
s.sendall(b'CONNECT %s HTTP/1.1\r\n\r\n' % TARGET.encode())
head = b''
while b'\r\n\r\n' not in head:
    d = s.recv(1)
    if not d:
        break
    head += d
ctx_ = ssl.create_default_context()
try:
    ctx_.wrap_socket(s, server_hostname='elsewhere.example')
    out = 'handshake?'
except Exception as e:
    out = type(e).__name__
report(head=head.decode(), out=out)
'''.replace("TARGET", repr(target))
    r = ctx.run([cell(code), OK_CELL], args=proxy_args("-v", "--allow-host",
                                                        target))
    _, res = records(r)
    assert res["head"].startswith("HTTP/1.1 200"), res
    assert res["out"] != "handshake?", res
    assert echo.got == 0, "the hello went through: %d bytes" % echo.got
    assert "the TLS server name elsewhere.example is not the CONNECT's " \
        "host 127.0.0.1" in r.stderr, r.stderr[-2000:]
    assert_ok(r.recs[1])


def test_bad_requests_get_a_status(ctx):
    code = r'''
def raw(data):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(data)
    out = b''
    while True:
        d = s.recv(4096)
        if not d:
            break
        out += d
    s.close()
    return out.split(b'\r\n', 1)[0].decode()
report(a=raw(b'GET /x HTTP/1.1\r\n\r\n'),
       b=raw(b'CONNECT nohost HTTP/1.1\r\n\r\n'),
       c=raw(b'GET http://a.invalid/ HTTP/1.1\nHost: x\n\n'),
       d=raw(b'GET https://a.invalid/ HTTP/1.1\r\n\r\n'),
       e=raw(b'GET http://a.invalid/ HTTP/1.1\r\nX: ' + b'a' * 9000))
'''
    r = ctx.run([cell(code), OK_CELL], args=proxy_args("--allow-host", "*"))
    _, res = records(r)
    assert res["a"].startswith("HTTP/1.1 400"), res
    assert res["b"].startswith("HTTP/1.1 400"), res
    assert res["c"].startswith("HTTP/1.1 400"), res
    assert res["d"].startswith("HTTP/1.1 400"), res
    assert res["e"].startswith("HTTP/1.1 431"), res
    assert_ok(r.recs[1])


def test_a_cell_holding_many_connections_is_capped(ctx):
    echo = server(ctx, EchoServer)
    target = "127.0.0.1:%d" % echo.port
    code = r'''
held, statuses = [], []
for i in range(80):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT %s HTTP/1.1\r\n\r\n' % TARGET.encode())
    head = b''
    while b'\r\n\r\n' not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    statuses.append(head.split(b' ')[1].decode() if head else '')
    held.append(s)
for s in held:
    s.close()
report(ok=statuses.count('200'), busy=statuses.count('503'))
'''.replace("TARGET", repr(target))
    r = ctx.run([cell(code), OK_CELL], args=proxy_args("--allow-host",
                                                        target))
    _, res = records(r)
    assert res == {"ok": 64, "busy": 16}, res
    assert_ok(r.recs[1])


# --- options -----------------------------------------------------------------

@pytest.mark.parametrize("args,words", [
    (["--allow-host", "a b"], "--allow-host 'a b': not a host name"),
    (["--allow-host", "10.0.0.1/8"], "bits set past the prefix"),
    (["--deny-host", "x.com:99999"], "the port is not 1..65535"),
    (["--allow-host", "x.com", "--network", "none"],
     "--allow-host needs --network proxy"),
])
def test_bad_entries_are_usage_errors(ctx, args, words):
    rc, out, err = ctx.run_raw([*args, "-"], stdin_text="x = 1\n")
    assert rc == 2, (rc, err)
    assert words in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- an agent run: the default, the journal, the events -----------------------

def test_agent_run_proxies_by_default_and_journals_each_connection(tmp_path):
    """An agent run's default network is the proxy with nothing allowed:
    the model server on the host's 127.0.0.1 is out of a cell's reach
    (only call_me reaches it); an allowed origin is reached; every
    connection is in the journal and the event stream."""
    from model_server import ModelServer
    from agent_util import run_agent, submit
    from events_schema import parse
    origin = HttpServer()
    try:
        body = NET_PRELUDE + (
            "import json\n"
            "print(json.dumps(dict(o=fetch('http://127.0.0.1:%d/'), "
            "m=fetch(MODEL), u=fetch('http://nothing.invalid/'))))\n"
            "quit()\n" % origin.port)
        with ModelServer([]) as srv:
            srv.add_turns(submit("MODEL = %r\n" % (srv.base_url +
                                                    "/responses") + body))
            j = tmp_path / "journal.jsonl"
            ws = tmp_path / "ws"
            ws.mkdir()
            p = run_agent(srv, ws, args=[
                "--json", "--journal", str(j), "--allow-host",
                "127.0.0.1:%d" % origin.port])
        assert p.returncode == 0, p.stderr[-3000:]
        events = parse(p.stdout)
        out = "".join(e["text"] for e in events if e["type"] ==
                      "cell_output" and e["stream"] == "stdout")
        res = json.loads(out.strip().splitlines()[-1])
        assert res["o"] == {"status": 200, "body": origin.body.decode()}, res
        assert res["m"]["status"] == 403, res
        assert "is not in the allow-list" in res["m"]["body"], res
        assert res["u"]["status"] == 403, res
        recs = [json.loads(line) for line in j.read_text().splitlines()]
        iso = [r for r in recs if r.get("type") == "isolation"]
        assert iso and iso[0]["network"] == "proxy", iso
        assert "allow: 127.0.0.1:%d" % origin.port in iso[0]["egress"], iso
        net = [r for r in recs if r.get("type") == "egress"]
        seen = [(r["what"], r["host"]) for r in net]
        assert ("allowed", "127.0.0.1") in seen, net
        assert ("closed", "127.0.0.1") in seen, net
        assert seen.count(("refused", "127.0.0.1")) == 1, net  # the model
        assert ("refused", "nothing.invalid") in seen, net
        closed = [r for r in net if r["what"] == "closed"][0]
        out1 = [r for r in recs if r.get("type") == "output" and
                r.get("cell") == 1][0]
        assert out1["egress"] == {
            "allowed": 1, "refused": 2, "bytes_up": closed["up"],
            "bytes_down": closed["down"],
            "last_refused": "nothing.invalid:80 is not in the allow-list "
                            "(--allow-host, or agentz ctl RUN allow HOST)"
        }, out1
        assert closed["down"] > len(origin.body) and closed["cell"] == 1, \
            closed
        evs = [e for e in events if e["type"] == "egress"]
        assert [(e["what"], e["host"]) for e in evs] == seen, evs
        assert all(e["by"] == "policy" for e in evs
                   if e["what"] != "closed"), evs
        # the report's network section: one row per decision
        import subprocess
        from agentz_util import AGENTZ
        html = tmp_path / "run.html"
        rep = subprocess.run([AGENTZ, "report", str(j), "-o", str(html)],
                             capture_output=True, text=True, timeout=60)
        assert rep.returncode == 0, rep.stderr
        page = html.read_text()
        sec = page[page.index('<section id="network">'):]
        sec = sec[:sec.index("</section>")]
        assert "1 connection through the egress proxy allowed, 2 refused" \
            in sec, sec
        assert sec.count("<tr class=") == 3, sec
        assert "nothing.invalid" in sec and "refused by policy" in sec, sec
        assert "allowed by policy" in sec and \
            "<td>%d</td>" % closed["down"] in sec, sec
    finally:
        origin.close()


# --- the operator's hand: ctl allow, deny, network ----------------------------

def test_ctl_allow_deny_network_change_the_policy_live(tmp_path):
    """A refused origin, then `ctl allow` opens it for the same cell,
    `ctl network` lists the policy, `ctl deny` closes it again; each
    change is journaled. The cell waits on gate files the test makes."""
    from model_server import ModelServer
    from ctl_util import Run, first
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    origin = HttpServer()
    url = "http://127.0.0.1:%d/" % origin.port
    body = NET_PRELUDE.replace("def fetch", "def _f") + r'''
def fetch(url):
    r = _f(url)
    return r.get('status', r.get('error'))
def gate(n):
    print('AT%d' % n, flush=True)
    while not os.path.exists('go%d' % n):
        time.sleep(0.01)
import time
print('A', fetch(URL), flush=True)
gate(1)
print('B', fetch(URL), flush=True)
gate(2)
print('C', fetch(URL), flush=True)
quit()
'''.replace("URL", repr(url))
    try:
        with ModelServer(first(body)) as srv:
            run = Run(srv, tmp_path, "net", rt)
            try:
                run.wait_out("AT1")
                rc, r, err = run.ctl("allow", "127.0.0.1:%d" % origin.port)
                assert rc == 0 and r["ok"], (rc, r, err)
                assert "allow: 127.0.0.1:%d" % origin.port in r["policy"]
                rc, r, err = run.ctl("allow", "not a host")
                assert rc == 1 and not r["ok"], (rc, r, err)
                assert "not a host name" in r["error"], r
                run.gate(1)
                run.wait_out("AT2")
                rc, r, err = run.ctl("deny", "127.0.0.1")
                assert rc == 0 and r["ok"], (rc, r, err)
                rc, r, err = run.ctl("network")
                assert rc == 0 and r["network"] == "proxy", r
                assert "deny: 127.0.0.1" in r["policy"], r
                assert r["live"] == 0, r
                run.gate(2)
                assert run.wait() == 0, run.show()
            finally:
                run.kill()
        out = run.out.decode()
        assert "A 403" in out and "B 200" in out and "C 403" in out, out
        eg = run.records("egress_policy")
        assert [(r["command"], r["entry"]) for r in eg] == [
            ("allow", "127.0.0.1:%d" % origin.port),
            ("deny", "127.0.0.1")], eg
        assert len(origin.heads) == 1
    finally:
        origin.close()


def test_ctl_allow_without_the_proxy_says_why(tmp_path):
    from model_server import ModelServer
    from ctl_util import Run, first, gated
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    with ModelServer(first(gated(1))) as srv:
        run = Run(srv, tmp_path, "nonet", rt, args=("--network", "none"))
        try:
            run.wait_out("C1")
            rc, r, err = run.ctl("allow", "pypi.org")
            assert rc == 1 and "network is none" in r["error"], (rc, r)
            rc, r, err = run.ctl("network")
            assert rc == 0 and r == {"ok": True, "network": "none"}, r
            rc, r, err = run.ctl("budgets", "--max-egress-bytes", "1M")
            assert rc == 1 and "needs the egress proxy" in r["error"], r
            assert not run.records("budgets")
            run.gate(1)
            assert run.wait() == 0, run.show()
        finally:
            run.kill()


# --- approvals (--network-ask) --------------------------------------------------
#
# The origin is the test's on the host's 127.0.0.1, asked for by the name
# "localhost": no entry names it (so it is held), and the address entry
# 127.0.0.0/8 lets the approved connection reach the loopback address.

def _held_run(tmp_path, name, origin, args=(), fetches=1):
    """A run whose cell fetches the origin `fetches` times (each may be
    held), printing each status; started, not waited for."""
    from model_server import ModelServer
    from ctl_util import Run, first
    rt = tmp_path / ("rt-" + name)
    rt.mkdir(mode=0o700)
    url = "http://localhost:%d/" % origin.port
    body = NET_PRELUDE + r'''
for i in range(N):
    r = fetch(URL)
    print('GOT%d' % i, r.get('status', r.get('error')), flush=True)
quit()
'''.replace("URL", repr(url)).replace("N", str(fetches))
    srv = ModelServer(first(body)).__enter__()
    run = Run(srv, tmp_path, name, rt, args=(
        "--json", "--network-ask", "--allow-host", "127.0.0.0/8", *args))
    return srv, run


def _held_ids(run, n):
    """Waits for n network_approval events; their connection ids."""
    from ctl_util import SLOW
    with run.cond:
        ok = run.cond.wait_for(lambda: run.out.decode().count(
            '"network_approval"') >= n or run.eof == 2, 30 * SLOW)
    assert ok, run.show()
    evs = [json.loads(x) for x in run.out.decode().splitlines()
           if '"network_approval"' in x]
    assert len(evs) >= n, run.show()
    return [e["conn"] for e in evs]


def _decisions(run):
    return [(r["what"], r.get("by")) for r in run.records("egress")
            if r["what"] != "closed"]


def test_a_held_connection_is_approved_by_the_operator(tmp_path):
    origin = HttpServer()
    srv, run = _held_run(tmp_path, "ap", origin)
    try:
        cid, = _held_ids(run, 1)
        rc, st, err = run.ctl("status")
        assert st["waiting_for_approval"] == "#%d localhost:%d" % (
            cid, origin.port), st
        assert st["state"] == "waiting-approval", st
        run.wait_err("waits for the operator's approval")
        rc, r, err = run.ctl("approve", str(cid + 100))
        assert rc == 1 and "no connection #%d waits" % (cid + 100) in \
            r["error"], r
        rc, r, err = run.ctl("approve", "--sometimes", str(cid))
        assert rc == 1 and "expected [--always] ID" in r["error"], r
        rc, r, err = run.ctl("approve", str(cid))
        assert rc == 0 and r == {"ok": True}, (rc, r, err)
        assert run.wait() == 0, run.show()
    finally:
        run.kill()
        srv.__exit__(None, None, None)
        origin.close()
    assert "GOT0 200" in run.out.decode(), run.show()
    assert _decisions(run) == [("held", None), ("allowed", "operator")]
    assert len(origin.heads) == 1


def test_reject_and_always(tmp_path):
    origin = HttpServer()
    srv, run = _held_run(tmp_path, "rj", origin, fetches=3)
    try:
        first_id, = _held_ids(run, 1)
        rc, r, err = run.ctl("reject", "#%d" % first_id)
        assert rc == 0 and r == {"ok": True}, (rc, r, err)
        second = _held_ids(run, 2)[1]
        rc, r, err = run.ctl("approve", "--always", str(second))
        assert rc == 0 and r == {"ok": True}, (rc, r, err)
        assert run.wait() == 0, run.show()      # the third: not held
    finally:
        run.kill()
        srv.__exit__(None, None, None)
        origin.close()
    out = run.out.decode()
    assert "GOT0 403" in out and "GOT1 200" in out and "GOT2 200" in out, \
        run.show()
    assert _decisions(run) == [
        ("held", None), ("refused", "operator"), ("held", None),
        ("allowed", "operator"), ("allowed", "policy")], _decisions(run)
    pol = run.records("egress_policy")
    assert pol and "localhost:%d" % origin.port in pol[0]["policy"], pol
    assert len(origin.heads) == 2


def test_no_answer_refuses_at_the_approval_timeout(tmp_path):
    origin = HttpServer()
    srv, run = _held_run(tmp_path, "to", origin,
                         args=("--approval-timeout", "0.5"))
    try:
        assert run.wait() == 0, run.show()
    finally:
        run.kill()
        srv.__exit__(None, None, None)
        origin.close()
    assert "GOT0 403" in run.out.decode(), run.show()
    assert _decisions(run) == [("held", None), ("refused", "timeout")]
    assert origin.heads == []


def test_network_ask_is_for_agent_runs(ctx):
    rc, out, err = ctx.run_raw(["--network-ask", "-"], stdin_text="x = 1\n")
    assert rc == 2 and "--network-ask is for agent runs" in err, err


def test_max_egress_bytes_cuts_the_download_and_stops_the_run(tmp_path):
    """A budget of bytes: the download that crosses it is cut at once
    (the cell sees a broken connection), a later connection is refused,
    and the run stops as for any budget, after the cell."""
    from model_server import ModelServer
    from agent_util import run_agent, submit
    origin = HttpServer(size=4 << 20)
    try:
        body = NET_PRELUDE + (
            "import json\n"
            "a = fetch('http://127.0.0.1:%d/')\n"
            "b = fetch('http://127.0.0.1:%d/')\n"
            "print(json.dumps(dict(a=a.get('error', a.get('status')), "
            "b=b.get('status'), bb=b.get('body'))))\n" % (origin.port,
                                                        origin.port))
        with ModelServer([]) as srv:
            srv.add_turns(submit(body))
            j = tmp_path / "journal.jsonl"
            ws = tmp_path / "ws"
            ws.mkdir()
            p = run_agent(srv, ws, args=[
                "--journal", str(j), "--allow-host", "127.0.0.1",
                "--max-egress-bytes", "256K"])
        assert p.returncode == 4, (p.returncode, p.stderr[-3000:])
        res = json.loads([x for x in p.stdout.splitlines()
                          if x.startswith("{")][-1])
        assert res["a"] != 200, res          # cut mid-body
        assert res["b"] == 403 and "egress budget is spent" in res["bb"], res
        assert "--max-egress-bytes" in p.stderr, p.stderr[-2000:]
        recs = [json.loads(line) for line in j.read_text().splitlines()]
        closed = [r for r in recs if r.get("type") == "egress" and
                  r["what"] == "closed"]
        assert closed and "egress budget is spent" in closed[0]["reason"]
        # it stops at the budget's last byte, not a splice's worth past it
        # (a connection's first 16.5 KiB go through its buffer, counted
        # as they come)
        total = sum(x["up"] + x["down"] for x in closed)
        assert total <= (256 << 10) + 16896, closed
    finally:
        origin.close()


# --- a real client: pip, through an allowed local index ----------------------

def _wheel(name, version):
    """A minimal pure-Python wheel (PEP 427), its file name and bytes."""
    import base64
    import hashlib
    import io
    import zipfile
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        "%s.py" % name: b"ANSWER = 42\n",
        dist + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                             % (name, version)).encode(),
        dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
        record.append("%s,sha256=%s,%d" % (path, digest.rstrip(b"=").decode(),
                                           len(data)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return "%s-%s-py3-none-any.whl" % (name, version), buf.getvalue()


class IndexServer(HttpServer):
    """A PEP 503 simple index serving one wheel."""

    def __init__(self, name):
        self.name = name
        self.whl, self.data = _wheel(name, "1.0")
        super().__init__()

    def _serve(self):
        while not self.done:
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with c:
                c.settimeout(10)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        d = c.recv(4096)
                        if not d:
                            break
                        data += d
                    line = data.split(b"\r\n", 1)[0].decode("latin-1")
                    self.heads.append(line)
                    path = line.split(" ")[1]
                    if path.rstrip("/").endswith("/simple/" + self.name):
                        body = ('<html><body><a href="/files/%s">%s</a>'
                                '</body></html>' % (self.whl, self.whl)
                                ).encode()
                        ctype = b"text/html"
                    elif path.endswith(self.whl):
                        body, ctype = self.data, b"application/octet-stream"
                    else:
                        c.sendall(b"HTTP/1.1 404 Not Found\r\n"
                                  b"Content-Length: 0\r\n"
                                  b"Connection: close\r\n\r\n")
                        continue
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
                              b"Content-Length: %d\r\nConnection: close\r\n"
                              b"\r\n" % (ctype, len(body)) + body)
                except OSError:
                    pass


def test_pip_downloads_through_an_allowed_local_index(ctx):
    name = "agentztestpkg"
    index = server(ctx, lambda: IndexServer(name))
    code = r'''
import subprocess, sys
env = dict(os.environ)
for k in ('no_proxy', 'NO_PROXY'):
    env.pop(k, None)
p = subprocess.run(['/usr/bin/python3', '-m', 'pip', 'download', '--no-deps',
                    '--disable-pip-version-check', '--no-cache-dir',
                    '--index-url', 'http://127.0.0.1:%d/simple/',
                    '-d', '/tmp/dl', '%s'], env=env, capture_output=True,
                   text=True, timeout=120)
report(rc=p.returncode, files=sorted(os.listdir('/tmp/dl'))
       if os.path.isdir('/tmp/dl') else [], err=p.stderr[-800:])
''' % (index.port, name)
    r = ctx.run([cell(code)], args=proxy_args("--allow-host", "127.0.0.1:%d"
                                              % index.port))
    _, res = records(r)
    assert res["rc"] == 0 and res["files"] == [index.whl], res
    assert any(h.startswith("GET /simple/%s" % name) for h in index.heads), \
        index.heads
    # the same without the entry: pip fails, the index saw nothing more
    seen = len(index.heads)
    r = ctx.run([cell(code)], args=proxy_args())
    _, res = records(r)
    assert res["rc"] != 0 and res["files"] == [], res
    assert len(index.heads) == seen


# --- floods and slow clients ---------------------------------------------------

@pytest.mark.alone("a connection flood; the deadline must come by 2 s + 5 s (wall clock)")
def test_floods_and_slow_clients_neither_stall_a_deadline_nor_grow_the_supervisor(
        tmp_path):
    """A cell fills the proxy: 40 clients that never finish their head,
    24 tunnels it floods both ways without reading, more connections
    than the cap. Its own 2 s deadline still fires on time (the ladder
    runs on the same loop) and the supervisor's peak memory stays within
    the proxy's bound (64 connections' buffers) over its own."""
    from model_server import ModelServer
    from ctl_util import Run, first, gated, on, SLOW
    from agentz_util import SAN
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    echo = EchoServer()
    target = "127.0.0.1:%d" % echo.port
    flood = r'''
import socket, threading, time
held = []
for i in range(40):                       # slow heads
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'GET http://a.invalid/ HTTP/1.1\r\nX: ')
    held.append(s)
def tunnel():
    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)
    s.sendall(b'CONNECT TARGET HTTP/1.1\r\n\r\n')
    s.setblocking(False)
    held.append(s)
    junk = b'z' * 65536
    while True:                           # writes, never reads
        try:
            s.send(junk)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            return
for i in range(30):
    threading.Thread(target=tunnel, daemon=True).start()
print('FLOODING', flush=True)
time.sleep(120)
'''.replace("TARGET", target)
    try:
        script = first(flood) + on("Repair the failed cell", gated(9))
        with ModelServer(script) as srv:
            run = Run(srv, tmp_path, "flood", rt, args=(
                "--cell-timeout", "2", "--grace", "1", "--allow-host",
                target))
            try:
                run.wait_out("FLOODING")
                run.wait_out("C9", timeout=60)
                with open("/proc/%d/status" % run.p.pid) as f:
                    hwm_kb = int([ln for ln in f if ln.startswith(
                        "VmHWM:")][0].split()[1])
                run.gate(9)
                assert run.wait(timeout=60) == 0, run.show()
            finally:
                run.kill()
        out1 = [r for r in run.records("output") if r["cell"] == 1][0]
        assert out1["kind"] == "timeout", out1
        # the deadline came at 2 s (+ the grace), not after the flood
        assert out1["duration_us"] < 2e6 * SLOW + 5e6, out1
        eg = run.records("egress")
        refused = [r for r in eg if r["what"] == "refused"]
        assert any("too many connections" in r["reason"] for r in refused), \
            refused[:3]
        # the proxy's bound: 64 connections x 2 x 64.5 KiB of buffers
        # (their pipes are the kernel's), over a supervisor of ~20 MiB
        if not SAN:
            assert hwm_kb < 48 * 1024, hwm_kb
    finally:
        echo.close()


def test_entries_from_a_file(ctx):
    origin = server(ctx, HttpServer)
    lists = ctx.visible_dir("agentz-egress-lists-")
    good = ctx.write(os.path.join(lists, "allow.txt"), (
        "# the test's origin\n\n  pypi.org  \n127.0.0.1:%d # inline\n"
        % origin.port).encode())
    r = ctx.run([cell("report(a=fetch('http://127.0.0.1:%d/'))"
                      % origin.port)],
                args=proxy_args("-v", "--allow-host", "@" + good))
    _, res = records(r)
    assert res["a"]["status"] == 200, res
    assert "(allow: pypi.org, 127.0.0.1:%d)" % origin.port in r.stderr
    bad = ctx.write(os.path.join(lists, "bad.txt"), b"ok.example\nnot ok\n")
    rc, out, err = ctx.run_raw(["--allow-host", "@" + bad, "-"],
                               stdin_text="x = 1\n")
    assert rc == 2 and "--allow-host %s:2: 'not ok': not a host name" % bad \
        in err, err
    rc, out, err = ctx.run_raw(["--deny-host", "@" + lists, "-"],
                               stdin_text="x = 1\n")
    assert rc == 2 and "not a regular file" in err, err
    rc, out, err = ctx.run_raw(["--deny-host", "@/nonexistent/x", "-"],
                               stdin_text="x = 1\n")
    assert rc == 2 and "No such file or directory" in err, err


def test_ctl_allow_holds_across_a_resume(tmp_path):
    """The operator's `ctl allow` is journaled and made again when the
    run resumes after its supervisor was killed."""
    import signal
    import subprocess
    from model_server import ModelServer
    from ctl_util import Run, first, gated
    from agent_util import submit
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    origin = HttpServer()
    url = "http://127.0.0.1:%d/" % origin.port
    try:
        with ModelServer(first(gated(1, "import time\ntime.sleep(300)"))
                         ) as srv:
            run = Run(srv, tmp_path, "rs", rt)
            try:
                run.wait_out("C1")
                rc, r, err = run.ctl("allow", "127.0.0.1:%d" % origin.port)
                assert rc == 0 and r["ok"], (rc, r, err)
                run.wait_record(lambda x: x["type"] == "egress_policy")
                os.kill(run.p.pid, signal.SIGKILL)
                run.wait()
            finally:
                run.kill()
        body = NET_PRELUDE + (
            "r = fetch(%r)\nprint('AFTER', r.get('status', r.get('error')))"
            "\nquit()\n" % url)
        p = _resume_with_repair(run, rt, body)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "AFTER 200" in p.stdout, p.stdout + p.stderr[-2000:]
        assert "--resume: the operator's 1 egress policy change hold" \
            in p.stderr, p.stderr[-2000:]
    finally:
        origin.close()


def _events(out):
    """The --json events in out whose lines are whole."""
    return [json.loads(ln) for ln in out.decode().split("\n")[:-1]
            if ln.startswith("{")]


def _said(out):
    """The cells' output in the --json events in out."""
    return "".join(e["text"] for e in _events(out)
                   if e["type"] == "cell_output")


def test_ctl_budgets_sets_the_egress_budget_and_a_resume_counts_the_bytes(
        tmp_path):
    """`ctl budgets --max-egress-bytes` while the run goes on is taken and
    journaled; the run's supervisor is killed, and the resumed run keeps
    that budget and counts the bytes its journal saw close before: the
    repair's first download crosses it (cut), the second is refused, the
    run stops (exit 4). Without either, both downloads would pass."""
    import signal
    import subprocess
    from model_server import ModelServer
    from ctl_util import Run, first, gated
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    origin = HttpServer(size=96 << 10)
    url = "http://127.0.0.1:%d/" % origin.port
    try:
        cell = NET_PRELUDE + (
            "a = fetch(%r)\nprint('A', a.get('status', a.get('error')), "
            "flush=True)\n" % url) + gated(1, "import time\ntime.sleep(300)")
        with ModelServer(first(cell)) as srv:
            run = Run(srv, tmp_path, "eb", rt,
                      args=["--allow-host", "127.0.0.1", "--json"])
            try:
                # --json: the cell's output is in its events, in pieces
                with run.cond:
                    run.cond.wait_for(lambda: "C1\n" in _said(run.out) or
                                      run.eof == 2, 60)
                assert "A 200\nC1\n" in _said(run.out), run.show()
                rc, r, err = run.ctl("budgets", "--max-egress-bytes", "160K")
                assert rc == 0 and r["ok"], (rc, r, err)
                assert r["max_egress_bytes"] == 160 << 10, r
                run.wait_record(lambda x: x["type"] == "budgets")
                # the budgets event's last field, its line whole
                run.wait_out('"max_egress_bytes":%d}}' % (160 << 10))
                os.kill(run.p.pid, signal.SIGKILL)
                run.wait()
            finally:
                run.kill()
        recs = run.records()
        assert any(x["type"] == "budgets" and x["by"] == "operator" and
                   x.get("max_egress_bytes") == 160 << 10 for x in recs), \
            [x for x in recs if x["type"] == "budgets"]
        # the --json events: none at the start, the operator's after
        limits = {e["type"]: e["limits"] for e in _events(run.out)
                  if e["type"] in ("run_start", "budgets")}
        assert limits["run_start"]["max_egress_bytes"] is None, limits
        assert limits["budgets"]["max_egress_bytes"] == 160 << 10, limits
        before = sum(x["up"] + x["down"] for x in recs
                     if x["type"] == "egress" and x["what"] == "closed")
        assert 96 << 10 < before < 160 << 10, before
        page = tmp_path / "report.html"
        p = subprocess.run([AGENTZ_BIN(), "report", str(run.journal), "-o",
                            str(page)], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert re.search(r"max_egress_bytes</span>=[^ <]+ bytes",
                         page.read_text()), page.read_text()[-3000:]
        body = NET_PRELUDE + (
            "b = fetch(%r)\nc = fetch(%r)\n"
            "print('B', b.get('status', b.get('error')))\n"
            "print('C', c.get('status'), c.get('body', '')[:200])\n"
            % (url, url))
        p = _resume_with_repair(run, rt, body, "--allow-host", "127.0.0.1",
                                "--json")
        assert p.returncode == 4, (p.returncode, p.stdout[-2000:],
                                   p.stderr[-3000:])
        # the resumed run starts with the operator's budget, and says so
        said = _said(p.stdout.encode())
        start = [e for e in _events(p.stdout.encode())
                 if e["type"] == "run_start"]
        assert len(start) == 1, p.stdout[-2000:]
        assert start[0]["limits"]["max_egress_bytes"] == 160 << 10, start
        assert "B 200" not in said and "B " in said, said
        assert "C 403" in said and "egress budget is spent" in said, said
        assert "--resume: %d bytes went through the egress proxy before" \
            % before in p.stderr, p.stderr[-2000:]
    finally:
        origin.close()


def _resume_with_repair(run, rt, body, *args):
    """`agentz --resume [args]` of run's journal (its supervisor was
    killed mid-cell) whose repair request gets body: the finished process."""
    import subprocess
    from model_server import ModelServer
    with ModelServer([]) as srv:
        srv.add_turns([{"match": "Repair the failed cell",
                        "next_cell": {"code": body}}, {"text": "ok"}])
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        env["RUNTIME_DIRECTORY"] = str(rt)
        return subprocess.run(
            [AGENTZ_BIN(), "--base-url", srv.base_url, "--journal",
             str(run.journal), "--resume", *args], cwd=run.ws, env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=60)


def AGENTZ_BIN():
    from agentz_util import AGENTZ
    return AGENTZ
