#!/usr/bin/python3
"""What the egress proxy costs (issue 21, "Benchmark").

    /usr/bin/python3 bench/egress.py [BUILD_DIR] [--mb N] [--requests N]

Figures side by side, never a test. An HTTP origin of this script's own
on the host's 127.0.0.1 (a free port; threads; HTTP/1.0, one request per
connection) serves a body of --mb MiB and a small one. The same client
code (raw sockets, so the figures are the transport's and not urllib's)
runs twice:

  direct   in this process, in the host's network namespace;
  proxied  in a cell of `agentz exec --allow-host 127.0.0.1`: in the
           worker's network namespace, through the supervisor's proxy at
           127.0.0.1:3128 (absolute-form GET, what HTTP_PROXY clients do).

Rows: the download's throughput (MB/s, and proxied as a share of direct:
target >= 80 %), and --requests small requests one after another, a new
connection each (median and p90 latency; the proxied median minus the
direct one: target <= 0.2 ms added), and the supervisor's CPU time over
the proxied part (utime + stime of the agentz process, from /proc, read
while the cell waits before and after its work).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import REPO, SYS_PY, pct  # noqa: E402

CLIENT = r'''
import socket, time, os
def get(host, port, path, via=None):
    s = socket.create_connection(via or (host, port))
    target = ('http://%s:%d%s' % (host, port, path)) if via else path
    s.sendall(('GET %s HTTP/1.0\r\nHost: %s:%d\r\n\r\n'
               % (target, host, port)).encode())
    n = 0
    while True:
        d = s.recv(1 << 18)
        if not d:
            break
        n += len(d)
    s.close()
    return n
def work(port, requests, via=None):
    t0 = time.perf_counter()
    n = get('127.0.0.1', port, '/big', via)
    big_s = time.perf_counter() - t0
    lat = []
    for _ in range(requests):
        t = time.perf_counter()
        get('127.0.0.1', port, '/small', via)
        lat.append(time.perf_counter() - t)
    return {'bytes': n, 'big_s': big_s, 'lat': lat}
'''


class Origin:
    def __init__(self, mb):
        self.big = b"x" * (mb << 20)
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(128)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        with c:
            data = b""
            while b"\r\n\r\n" not in data:
                d = c.recv(4096)
                if not d:
                    return
                data += d
            body = self.big if b" /big" in data.split(b"\r\n")[0] or \
                b"/big " in data.split(b"\r\n")[0] else b"ok\n"
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n"
                      % len(body))
            c.sendall(body)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_file(path, p, bound=120):
    end = time.monotonic() + bound
    while not os.path.exists(path):
        if p.poll() is not None or time.monotonic() > end:
            raise SystemExit("bench/egress.py: the cell did not get to %s"
                             % os.path.basename(path))
        time.sleep(0.005)


def proxied(build, port, requests):
    ws = tempfile.mkdtemp(prefix="agentz-bench-egress-", dir="/var/tmp")
    try:
        cell = CLIENT + r'''
import json
open('ready', 'w').close()
while not os.path.exists('go'):
    time.sleep(0.002)
r = work(%d, %d, via=('127.0.0.1', 3128))
open('done', 'w').close()
while not os.path.exists('end'):
    time.sleep(0.002)
print('RESULT ' + json.dumps(r))
''' % (port, requests)
        p = subprocess.Popen(
            [os.path.join(build, "agentz"), "exec", "--allow-host",
             "127.0.0.1", "--cell-timeout", "600", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=ws, text=True)
        p.stdin.write(cell)
        p.stdin.close()
        p.stdin = None
        wait_file(os.path.join(ws, "ready"), p)
        c0 = cpu_s(p.pid)
        open(os.path.join(ws, "go"), "w").close()
        wait_file(os.path.join(ws, "done"), p, 600)
        c1 = cpu_s(p.pid)
        open(os.path.join(ws, "end"), "w").close()
        out, err = p.communicate(timeout=120)
        line = [x for x in out.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            raise SystemExit("bench/egress.py: agentz exec failed (%s): %s"
                             % (p.returncode, err[-2000:]))
        r = json.loads(line[-1][7:])
        r["cpu_s"] = c1 - c0
        return r
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def main():
    args = sys.argv[1:]
    build = os.path.join(REPO, "build")
    mb, requests = 100, 1000
    while args:
        a = args.pop(0)
        if a == "--mb":
            mb = int(args.pop(0))
        elif a == "--requests":
            requests = int(args.pop(0))
        else:
            build = os.path.abspath(a)
    origin = Origin(mb)
    ns = {}
    exec(CLIENT, ns)
    ns["work"](origin.port, 20)                       # warm-up
    direct = ns["work"](origin.port, requests)
    prox = proxied(build, origin.port, requests)
    mbs = lambda r: r["bytes"] / r["big_s"] / 1e6    # noqa: E731
    print("egress proxy (%s, %d MiB, %d requests; %s)" % (
        time.strftime("%Y-%m-%d"), mb, requests, SYS_PY))
    print("  %-34s %12s %12s %10s" % ("", "direct", "proxied", "ratio"))
    print("  %-34s %9.0f MB/s %9.0f MB/s %9.0f %%" % (
        "download throughput", mbs(direct), mbs(prox),
        100 * mbs(prox) / mbs(direct)))
    for name, p in (("median", 50), ("p90", 90)):
        d, x = pct(direct["lat"], p) * 1e3, pct(prox["lat"], p) * 1e3
        print("  %-34s %9.3f ms %9.3f ms %+8.3f ms" % (
            "small request, %s" % name, d, x, x - d))
    print("  %-34s %23.2f s (%.1f us a request, download included)" % (
        "supervisor CPU, proxied part", prox["cpu_s"],
        prox["cpu_s"] / (requests + 1) * 1e6))
    ok_t = mbs(prox) >= 0.8 * mbs(direct)
    ok_l = pct(prox["lat"], 50) - pct(direct["lat"], 50) <= 0.0002
    print("  targets: throughput >= 80 %% of direct: %s; <= 0.2 ms added "
          "a request: %s" % ("met" if ok_t else "MISS",
                             "met" if ok_l else "MISS"))


if __name__ == "__main__":
    main()
