"""The supervisor stays bounded whatever the worker sends (issue 10 items 1-2).

Each case is an attack from a cell through the worker's request API
(_agentz.begin sends a REQUEST without waiting for its reply; see
worker/runtime.py and worker/chan.c): replies never read, a body far over
its method's cap, huge exception text, a flood of requests against the
cell's deadline, a call_me of many small input items. Each asserts the
behaviour (clear errors, the next cell fine, the deadline on time) and the
supervisor's peak RSS: VmHWM of agentz read by the test while agentz is
alive (the last cell waits on a gate file the test creates after reading
it), below 64 MiB + 2 x the largest request the supervisor accepted.

Containment: every run has a hard timeout (its process group is SIGKILLed
after it), and outside the sanitizer build agentz runs under RLIMIT_AS
(prlimit) so a regression fails the test instead of eating the machine.
Under ASan the shadow memory makes RSS meaningless and RLIMIT_AS breaks
the runtime: the RSS assertions are skipped there, the behaviour ones kept.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from agentz_util import AGENTZ, SAN, cells, status_kb, wait_file

sys.path.insert(0, os.path.dirname(__file__))
from model_server import ModelServer  # noqa: E402

MiB = 1 << 20
BASE_KB = 64 * 1024
AS_LIMIT = 3 << 30          # for a regression: fail, do not swap
SLOW = 4 if SAN else 1

# The last cell of every run: tell the test, then wait for its gate.
GATE_CELL = """\
import os, time
open('rss-ready', 'w').close()
while not os.path.exists('rss-gate'):
    time.sleep(0.005)
print('gate')"""


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def quiescent(pid, p, timeout):
    """Waits until agentz has used no CPU for 0.5 s (it has done all it
    will do with what it was sent), at most timeout seconds. A measuring
    window, not synchronisation: the assertions do not depend on it."""
    t0 = time.monotonic()
    last, still = cpu_ticks(pid), 0
    while still < 10 and time.monotonic() - t0 < timeout and \
            p.poll() is None:
        time.sleep(0.05)
        now = cpu_ticks(pid)
        still = still + 1 if now == last else 0
        last = now


def gated_run(argv, cwd, stdin=None, timeout=120, env=None, before=None):
    """Runs argv (agentz ...) in cwd; reads agentz's VmHWM when the gate
    cell says so, then opens the gate. Output is read all along (agentz
    writes records to a pipe). Returns (proc, stdout, stderr, peak_kb)."""
    if not SAN:
        argv = ["prlimit", "--as=%d" % AS_LIMIT, "--"] + argv
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen(argv, cwd=cwd, env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    got = {}

    def reader(name, f):
        got[name] = f.read()

    threads = [threading.Thread(target=reader, args=(n, f), daemon=True)
               for n, f in (("out", p.stdout), ("err", p.stderr))]
    for t in threads:
        t.start()
    peak = 0
    try:
        if stdin is not None:
            p.stdin.write(stdin.encode())
        p.stdin.close()
        if before is not None:
            before(p)
        ready = wait_file(os.path.join(cwd, "rss-ready"), p, timeout * SLOW)
        if ready:
            peak = status_kb(p.pid, "VmHWM")
        open(os.path.join(cwd, "rss-gate"), "w").close()
        p.wait(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            for t in threads:
                t.join(10)
            pytest.fail("agentz did not finish in time (killed); stderr: "
                        "%r" % got.get("err", b"")[-3000:])
    for t in threads:
        t.join(10)
    out = got.get("out", b"").decode("utf-8", "replace")
    err = got.get("err", b"").decode("utf-8", "replace")
    assert p.returncode >= 0, "agentz died by signal %d: %s" % (
        -p.returncode, err[-3000:])
    assert "AddressSanitizer" not in err and "runtime error:" not in err, err
    assert ready, "the gate cell never ran: %s" % err[-3000:]
    return p, out, err, peak


def exec_gated(tmp_path, codes, args=(), timeout=120, before=None):
    argv = [AGENTZ, "exec", "--json", *args, "-"]
    p, out, err, peak = gated_run(argv, str(tmp_path),
                                  stdin=cells(*codes, GATE_CELL),
                                  timeout=timeout, before=before)
    recs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(recs) == len(codes) + 1, err[-3000:]
    assert recs[-1]["status"] == "ok" and recs[-1]["output"] == "gate\n", \
        recs[-1]
    return recs, err, peak


def assert_rss(peak_kb, largest_request):
    if SAN:
        return      # ASan's shadow and quarantine: RSS says nothing here
    bound = BASE_KB + 2 * largest_request // 1024
    print("peak %d kB, bound %d kB" % (peak_kb, bound))
    assert 0 < peak_kb < bound, "supervisor peak RSS %d kB, bound %d kB" % (
        peak_kb, bound)


# Four cells of 1 MiB output each: a `cells outputs` reply is ~4 MiB.
BIG_HISTORY = ["print('o' * ((1 << 20) - 64))"] * 4


def flood(n, method, payload, then):
    """A cell sending n requests without reading a reply, then `then`."""
    return (
        "import _agentz, sys\n"
        "_n = sys.modules['agentz_runtime']._current_cell\n"
        "_ids = [_agentz.begin(%r, %r, _n) for _ in range(%d)]\n"
        "%s" % (method, payload, n, then))


def test_unread_replies_do_not_grow_the_supervisor(tmp_path):
    """250 `cells` requests whose ~4 MiB replies the cell does not read:
    the supervisor stops reading the cell's channel while replies wait,
    instead of queueing 1 GB. The cell holds off until agentz is idle (the
    test's gate), then drops the replies unread (end) and asks once more:
    that answer comes after all 250 were handled. The peak RSS is read at
    the end (VmHWM covers the whole run)."""
    code = flood(250, "cells", b'{"what": "outputs"}',
                 "import os, time\n"
                 "open('flood-ready', 'w').close()\n"
                 "while not os.path.exists('flood-gate'):\n"
                 "    time.sleep(0.005)\n"
                 "for _i in _ids:\n"
                 "    _agentz.end(_i)\n"
                 "sys.modules['agentz_runtime'].host_request("
                 "'runtime_info', b'{}')\n"
                 "print('sent', len(_ids))\n")

    def hold(p):
        assert wait_file(os.path.join(tmp_path, "flood-ready"), p, 60 * SLOW)
        quiescent(p.pid, p, 30 * SLOW)
        open(os.path.join(tmp_path, "flood-gate"), "w").close()

    recs, err, peak = exec_gated(tmp_path, BIG_HISTORY + [code, "print('ok')"],
                                 args=["--cell-timeout", "60"], before=hold)
    flood_rec, after = recs[4], recs[5]
    assert flood_rec["status"] == "ok", flood_rec
    assert flood_rec["output"] == "sent 250\n"
    assert after["status"] == "ok" and after["output"] == "ok\n", after
    assert after["worker"]["pid"] == flood_rec["worker"]["pid"]
    assert_rss(peak, 64)


def test_oversized_input_request_is_refused_unread(tmp_path):
    """A 60 MiB `input` body: a clear error for the cell, the body never
    buffered by the supervisor, the next cell fine."""
    code = (
        "import sys\n"
        "rt = sys.modules['agentz_runtime']\n"
        "try:\n"
        "    rt.host_request('input', b'{\"prompt\": \"' + b'p' * (60 << 20)"
        " + b'\"}')\n"
        "except ValueError as e:\n"
        "    print(type(e).__name__, e)\n")
    recs, err, peak = exec_gated(tmp_path, [code, "print('ok')"],
                                 args=["--cell-timeout", "60",
                                       "--memory-limit", "1G"])
    size = (60 << 20) + len('{"prompt": ""}')
    assert recs[0]["output"] == (
        "ValueError the input request is %d bytes, over its 65536-byte cap\n"
        % size), recs[0]
    assert recs[1]["output"] == "ok\n"
    assert recs[1]["worker"]["pid"] == recs[0]["worker"]["pid"]
    assert_rss(peak, 64 << 10)


def test_unknown_method_is_a_clear_error(tmp_path):
    code = (
        "import sys\n"
        "rt = sys.modules['agentz_runtime']\n"
        "for body in (b'{}', b'x' * (1 << 20)):\n"
        "    try:\n"
        "        rt.host_request('no_such_method', body)\n"
        "    except RuntimeError as e:\n"
        "        print(e)\n")
    recs, err, peak = exec_gated(tmp_path, [code])
    assert recs[0]["output"] == \
        "unknown host request method 'no_such_method'\n" * 2, recs[0]


@pytest.mark.early("a huge exception text")
def test_huge_exception_text_is_capped(tmp_path):
    """4 cells raising a 50 MiB message: each traceback is kept head and
    tail within --output-limit, and the supervisor does not hold them
    (200 MiB held would be far past its bound). Under ASan, whose RSS says
    nothing, one such cell: the cap, not the bound."""
    code = "raise ValueError('m' * (50 << 20) + 'END')"
    n = 1 if SAN else 4
    recs, err, peak = exec_gated(tmp_path, [code] * n + ["print('ok')"],
                                 args=["--cell-timeout", "60",
                                       "--output-limit", "64K",
                                       "--memory-limit", "2G"],
                                 timeout=240)
    for r in recs[:n]:
        assert r["status"] == "error" and r["exception_type"] == "ValueError"
        tb = r["traceback"]
        assert len(tb.encode()) < (64 << 10) + 128, len(tb)
        assert tb.startswith("Traceback (most recent call last):"), tb[:200]
        assert "bytes dropped ...]" in tb
        assert tb.rstrip().endswith("mmmEND"), tb[-200:]
    assert recs[n]["output"] == "ok\n"
    assert_rss(peak, 0)


@pytest.mark.alone(
    "300 requests of ~4 MiB replies; the cell must end by deadline + "
    "grace + 1 s (wall clock)")
def test_request_flood_does_not_hold_up_the_deadline(tmp_path):
    """300 `cells` requests of ~4 MiB replies each, then a busy loop, with
    --cell-timeout 2: the cell ends within its deadline + grace + 1 s."""
    code = flood(300, "cells", b'{"what": "outputs"}',
                 "while True:\n    pass\n")
    recs, err, peak = exec_gated(tmp_path, BIG_HISTORY + [code, "print('ok')"],
                                 args=["--cell-timeout", "2", "--grace",
                                       "0.5"])
    r = recs[4]
    assert r["status"] == "error" and r["kind"] == "timeout", r
    assert r["duration_us"] <= (2 + 0.5 + 1) * 1e6, r["duration_us"]
    assert recs[5]["output"] == "ok\n"
    assert_rss(peak, 64)


# --- call_me: a big body of many small input items -------------------------

def agent_env(tmp_path):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
         "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    return e


# ~20 MiB of JSON in ~60-byte items; under ASan (whose RSS says nothing,
# see assert_rss) a fifth: the same forwarding path, without the bound.
ITEMS = 300000 // (5 if SAN else 1)
BIG_CALL_CELL = """\
import json
items = [{"role": "user", "content": "item %%07d " %% i + "x" * 30}
         for i in range(%d)]
open('body-size', 'w').write(str(len(json.dumps(
    {"params": {"input": items}, "stream": False}))))
r = call_me(input=items)
print('answer:', r.output_text)
del items
""" % ITEMS + GATE_CELL + "\nquit()\n"


@pytest.mark.early("a call_me of ~20 MiB of small items")
def test_big_call_me_of_small_items_is_forwarded_without_a_tree(tmp_path):
    """~20 MiB of small input items: forwarded whole (the model sees every
    item) while the supervisor stays under 64 MiB + 2 x the request, far
    from the ~21x (~420 MiB) a jansson tree of it would take."""
    script = [{"next_cell": {"code": BIG_CALL_CELL, "summary": "Big."}},
              {"text": "cont"}, {"text": "big ok"}]
    with ModelServer(script) as srv:
        argv = [AGENTZ, "--base-url", srv.base_url, "--cell-timeout", "120",
                "--memory-limit", "2G", "Do the big call."]
        p, out, err, peak = gated_run(argv, str(tmp_path),
                                      env=agent_env(tmp_path), timeout=180)
        assert p.returncode == 0, err[-3000:]
        assert "answer: big ok" in out + err, (out + err)[-3000:]
        big = [b for b in srv.bodies
               if isinstance(b.get("input"), list) and len(b["input"]) > 1000]
        assert len(big) == 1, [type(b.get("input")) for b in srv.bodies]
        inp = big[0]["input"]
        assert len(inp) == ITEMS
        assert inp[0] == {"role": "user", "content": "item 0000000 " + "x" * 30}
        assert inp[-1]["content"].startswith("item %07d " % (ITEMS - 1))
        # the engine's fields are set as for any call
        assert big[0]["stream"] is True and big[0]["tools"], big[0].keys()
    size = int(open(os.path.join(tmp_path, "body-size")).read())
    assert size > (16 << 20) // (5 if SAN else 1)
    assert_rss(peak, size)


STREAM_CELL = """\
import os, time
s = call_me(input="stream please", stream=True)
open('stream-ready', 'w').close()
while not os.path.exists('stream-gate'):
    time.sleep(0.005)
n = 0
try:
    for ev in s:
        n += 1
    print('whole stream', n)
except ModelError as e:
    print('events', n > 0, 'then', e)
""" + GATE_CELL + "\nquit()\n"


def test_unread_stream_events_are_bounded(tmp_path):
    """call_me(stream=True) whose events the cell does not read while the
    model streams ~16 MiB of small deltas (~75 MB of events): past the
    bound the events are dropped and the call ends in a ModelError that
    says so; the supervisor does not hold the stream."""
    script = [{"next_cell": {"code": STREAM_CELL, "summary": "Stream."}},
              {"text": "cont"},
              {"kind": "big", "mb": 16, "delta_size": 32}]
    with ModelServer(script) as srv:
        def hold(p):
            assert wait_file(os.path.join(tmp_path, "stream-ready"), p,
                             60 * SLOW)
            srv.wait_for_requests(3, timeout=60 * SLOW)
            quiescent(p.pid, p, 60 * SLOW)
            open(os.path.join(tmp_path, "stream-gate"), "w").close()

        argv = [AGENTZ, "--base-url", srv.base_url, "--cell-timeout", "120",
                "Stream it."]
        p, out, err, peak = gated_run(argv, str(tmp_path),
                                      env=agent_env(tmp_path), timeout=180,
                                      before=hold)
    assert p.returncode == 0, err[-3000:]
    assert "events True then " in out and "stream events were dropped" in \
        out, out[-2000:]
    assert_rss(peak, 64 << 10)
