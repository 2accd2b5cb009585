"""Hard stops outside the model (SPEC §8): each ends the run with exit 4 and
says why; none is reported as success."""
import os
import subprocess
import time

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ


def run(tmp_path, script, *args, timeout=60):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with ModelServer(script) as srv:
        t0 = time.monotonic()
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, *args, "task"],
                           cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
        return p, time.monotonic() - t0


def chain(n):
    """Cell 0 asks; every cell then registers the next one, forever."""
    turns = [{"match": "Submit the first Python cell",
              "next_cell": {"code": "r = call_me(input='next')\n",
                            "summary": "step"}},
             {"text": "ok"}]
    for _ in range(n):
        turns += [{"match": "next", "next_cell": {
            "code": "r = call_me(input='next')\n", "summary": "step"}},
            {"text": "ok"}]
    return turns


def test_max_cells(tmp_path):
    p, _ = run(tmp_path, chain(10), "--max-cells", "3")
    assert p.returncode == 4, p.stderr
    assert "the budget of 3 cells is spent" in p.stderr
    assert "cell 2: ok" in p.stderr and "cell 3:" not in p.stderr


def test_run_deadline(tmp_path):
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": "import time\ntime.sleep(60)\n",
                             "summary": "long"}},
              {"text": "ok"}]
    p, took = run(tmp_path, script, "--deadline", "1")
    assert p.returncode == 4, p.stderr
    assert "the run deadline of 1 s was reached" in p.stderr
    assert took < 20


def test_token_budget(tmp_path):
    p, _ = run(tmp_path, chain(10), "--max-tokens", "5000")
    assert p.returncode == 4, p.stderr
    assert "tokens used, the budget is 5000" in p.stderr


def test_repeated_identical_failure(tmp_path):
    bad = "raise ValueError('the same thing')\n"
    script = [{"match": "Submit the first Python cell",
               "next_cell": {"code": bad, "summary": "fail"}},
              {"text": "ok"},
              {"match": "Repair the failed cell",
               "next_cell": {"code": bad, "summary": "fail again"}},
              {"text": "ok"}]
    p, _ = run(tmp_path, script, "--max-same-failure", "2")
    assert p.returncode == 4, p.stderr
    assert "the same failure happened 2 times" in p.stderr
    assert "ValueError: the same thing" in p.stderr


# --- budgets hard inside a cell (issue 18 §4) ---------------------------------
#
# The budgets are checked before every model request, while an answer
# streams and as each call ends, not only when a cell ends; a cell has at
# most --max-parallel-calls calls in flight, the rest wait in order.

import json  # noqa: E402
import re  # noqa: E402
import textwrap  # noqa: E402

from agentz_util import SAN, beside  # noqa: E402
from ctl_util import set_deadline_now  # noqa: E402

SLOW = 4 if SAN else 1
U60 = {"input_tokens": 40, "output_tokens": 20}     # 60 tokens a request


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def first(cell, usage=U60):
    """Cell 0 asks; the model answers with cell (two requests: the
    set_next_cell_code call and its continuation)."""
    return [{"match": "Submit the first Python cell", "usage": usage,
             "next_cell": {"code": cell, "summary": "the cell"}},
            {"text": "ok", "usage": usage}]


def start(srv, tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.Popen([AGENTZ, "--base-url", srv.base_url, *args,
                             "task"], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=120):
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out, err


def show(p, out, err):
    return f"exit {p.returncode}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-6000:]}"


def journal(path):
    return [json.loads(line) for line in open(path)]


def stop_reason(path):
    stops = [r for r in journal(path) if r.get("type") == "stop"]
    assert stops, journal(path)
    return stops[-1]["exit"], stops[-1]["reason"]


def over_by(reason):
    m = re.search(r": \$?([0-9.]+)( s)? over", reason)
    assert m, reason
    return float(m.group(1))


def last_tokens(path):
    usage = [r for r in journal(path) if r.get("type") == "usage"]
    return usage[-1]["tokens"] if usage else 0


@pytest.mark.parametrize("budget", [
    ("--max-tokens", "300"),
    # $1 a token, so the same 300 as money
    ("--price", "1000000,1000000,1000000", "--max-cost", "300")],
    ids=["tokens", "cost"])
def test_call_me_attack_stops_within_one_call(tmp_path, budget):
    # One cell makes 42 call_me's under a budget of 300 (60 tokens each):
    # the run stops at the call that reaches the budget, not at the cell's
    # end.
    attack = code("""
        for i in range(42):
            call_me(input=f'attack {i}')
        """)
    script = first(attack) + [{"match": "attack", "text": "ok", "usage": U60,
                               "repeat": "forever"}]
    jpath = beside(tmp_path)
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, *budget, "--journal", str(jpath))
        out, err = finish(p)
        served = 60 * len(srv.requests)
    assert p.returncode == 4, show(p, out, err)
    assert served <= 300 + 60, (served, show(p, out, err))
    rc, why = stop_reason(jpath)
    assert rc == 4 and budget[-2] in why, why
    assert over_by(why) <= 60, why
    assert last_tokens(jpath) <= 300 + 60


def test_call_over_budget_is_not_sent(tmp_path):
    # cell 1 asks with an input of about 2,500 tokens under --max-tokens
    # 1000 (120 spent): the request is refused before it is sent, the run
    # stops as a budget stop naming the call's estimate
    big = code("""
        call_me(input='big ' + 'x' * 10000)
        """)
    script = first(big) + [{"match": "big x", "text": "ok", "usage": U60}]
    jpath = beside(tmp_path)
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, "--max-tokens", "1000", "--journal",
                  str(jpath))
        out, err = finish(p)
        n = len(srv.requests)
    assert p.returncode == 4, show(p, out, err)
    assert n == 2, show(p, out, err)
    rc, why = stop_reason(jpath)
    assert rc == 4 and "--max-tokens" in why, why
    assert "of the request refused" in why, why
    assert last_tokens(jpath) == 120, journal(jpath)


LONG = {"match": "long answer", "text": "x" * 400000, "delta_size": 100,
        "delay": 0.002}


CUT = 2 * 16384 // 4      # tokens of two reads, at about 4 bytes a token


def events(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def cut_request(evs):
    ends = [e for e in evs if e.get("type") == "model_request_end"
            and e.get("cell") == 1]
    assert ends, evs[-10:]
    return ends[-1]


def streaming_abort(tmp_path, *budget):
    # cell 1's answer is long (100,000 tokens, paced like a model): the
    # stream is cut once the budget is crossed, not at its end
    script = first("r = call_me(input='long answer')\n") + [LONG]
    jpath = beside(tmp_path)
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, "--json", "--journal", str(jpath), *budget)
        out, err = finish(p)
        cut = srv.wait_for_disconnects(1, timeout=10 * SLOW)
        disconnects = list(srv.disconnects)
    assert p.returncode == 4, show(p, out, err)
    assert cut and disconnects[0]["while"] == "sending", disconnects
    req = cut_request(events(out))
    assert req["error"]["type"] == "BudgetExceeded", req
    return jpath


def test_streaming_answer_cut_at_token_budget(tmp_path):
    jpath = streaming_abort(tmp_path, "--max-tokens", "1000")
    rc, why = stop_reason(jpath)
    assert rc == 4 and "--max-tokens" in why, why
    # decided at the delta that crossed (25 tokens each)
    assert over_by(why) <= 200, why
    # counted at the cut: what streamed until then, the rest of the read
    # that crossed included (curl reads at most 16 KiB at a time), not
    # the answer's 100,000 tokens
    assert last_tokens(jpath) <= 1000 + CUT, journal(jpath)


def test_streaming_answer_cut_at_cost_budget(tmp_path):
    # $1 a token: 120 tokens ($120) for cell 0, then the long answer
    jpath = streaming_abort(tmp_path, "--price", "1000000,1000000,1000000",
                            "--max-cost", "1000")
    rc, why = stop_reason(jpath)
    assert rc == 4 and "--max-cost" in why, why
    assert over_by(why) <= 200, why
    assert last_tokens(jpath) <= 1000 + CUT, journal(jpath)


def test_streaming_repair_cut_at_token_budget(tmp_path):
    # cell 1 fails; the repair request's answer is long: cut at the budget
    script = first("raise ValueError('broken')\n") + [
        dict(LONG, match="Repair the failed cell")]
    jpath = beside(tmp_path)
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, "--journal", str(jpath), "--max-tokens",
                  "1500")
        out, err = finish(p)
        cut = srv.wait_for_disconnects(1, timeout=10 * SLOW)
        disconnects = list(srv.disconnects)
    assert p.returncode == 4, show(p, out, err)
    assert cut and disconnects[0]["while"] == "sending", disconnects
    rc, why = stop_reason(jpath)
    assert rc == 4 and "--max-tokens" in why, why
    assert over_by(why) <= 200, why
    assert last_tokens(jpath) <= 1500 + CUT, journal(jpath)


def test_deadline_cuts_a_streaming_call(tmp_path, monkeypatch):
    # the answer is held until the deadline passed: the call is cut, its
    # cell gets BudgetExceeded, the stop record names the deadline and by
    # how much it was passed. The deadline is set through ctl once cell
    # 1's call reached the server (a --deadline fixed at start could pass
    # before, on a loaded machine under ASan: then the engine's own first
    # call is the one cut); 1 s after the start, so it is already past.
    script = first("r = call_me(input='long answer')\n") + [
        dict(LONG, hold="never")]
    jpath = beside(tmp_path)
    rt = tmp_path / "rt"
    rt.mkdir()
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(rt))
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, "--json", "--journal", str(jpath),
                  "--deadline", "600")
        try:
            assert srv.wait_for_requests(3, timeout=60 * SLOW), \
                show(p, *finish(p, timeout=1))
            set_deadline_now(rt)
        finally:
            out, err = finish(p)
    assert p.returncode == 4, show(p, out, err)
    rc, why = stop_reason(jpath)
    assert rc == 4 and "--deadline" in why, why
    assert over_by(why) < 60, why
    req = cut_request(events(out))
    assert req["error"]["type"] == "BudgetExceeded", req


def test_budget_exceeded_is_a_model_error(tmp_path):
    # the exception a cell sees: exported like ModelError, and a subclass
    # of it (code that handles a failed model call handles it too)
    check = code("""
        assert issubclass(BudgetExceeded, ModelError), BudgetExceeded.__mro__
        open('seen', 'w').write(BudgetExceeded.__name__)
        quit()
        """)
    with ModelServer(first(check)) as srv:
        p = start(srv, tmp_path)
        out, err = finish(p)
    assert p.returncode == 0, show(p, out, err)
    assert (tmp_path / "seen").read_text() == "BudgetExceeded"


# The cell starts its threads one by one, each only once the one before has
# sent its request (its host_request frame holds the request id): the order
# the supervisor receives them is known.
THREADS = """
    import json, sys, threading, time
    threading.stack_size(256 * 1024)
    K = {k}
    got = [None] * K
    def work(i):
        got[i] = call_me(input=f'q{{i}}z').output_text
    def sent(t):
        f = sys._current_frames().get(t.ident)
        while f is not None:
            if f.f_code.co_name == 'host_request' and 'rid' in f.f_locals:
                return True
            f = f.f_back
        return False
    ts = []
    for i in range(K):
        t = threading.Thread(target=work, args=(i,), daemon=True)
        t.start()
        ts.append(t)
        while {ordered} and t.is_alive() and not sent(t):
            time.sleep(0.0005)
    for t in ts:
        t.join()
    open('got.json', 'w').write(json.dumps(got))
    quit()
    """


def answers(k, hold=None):
    def answer(rec):
        i = re.search(r"q(\d+)z", json.dumps(rec["body"])).group(1)
        turn = {"text": f"a{i}"}
        if hold:
            turn["hold"] = hold
        return turn
    return [answer] * k


def asked(srv):
    out = []
    for r in srv.requests:
        m = re.search(r"q(\d+)z", json.dumps(r["body"]))
        if m:
            out.append(int(m.group(1)))
    return out


@pytest.mark.early("300 concurrent calls")
def test_300_concurrent_calls_capped(tmp_path):
    k = 300
    cell = code(THREADS.format(k=k, ordered="False"))
    with ModelServer(first(cell) + answers(k, hold="go")) as srv:
        p = start(srv, tmp_path, "--cell-timeout", "600")
        # the first answers wait until 8 calls reached the server
        ok = srv.wait_for_requests(2 + 8, timeout=60 * SLOW)
        srv.release("go")
        out, err = finish(p, timeout=300)
        most, n = srv.max_active, len(srv.requests)
        order = asked(srv)
    assert ok, show(p, out, err)
    assert p.returncode == 0, show(p, out, err)
    assert most <= 8, most
    assert n == 2 + k and sorted(order) == list(range(k)), n
    got = json.loads((tmp_path / "got.json").read_text())
    assert got == [f"a{i}" for i in range(k)]


def test_waiting_calls_start_in_order(tmp_path):
    k = 40
    cell = code(THREADS.format(k=k, ordered="True"))
    with ModelServer(first(cell) + answers(k)) as srv:
        p = start(srv, tmp_path, "--max-parallel-calls", "1")
        out, err = finish(p)
        most, order = srv.max_active, asked(srv)
    assert p.returncode == 0, show(p, out, err)
    assert most == 1, most
    assert order == list(range(k)), order
    got = json.loads((tmp_path / "got.json").read_text())
    assert got == [f"a{i}" for i in range(k)]


def test_waiting_calls_die_with_their_cell(tmp_path):
    # one call in flight (held), two waiting; the cell is killed at its
    # timeout: the waiting ones are never sent, even once the slot frees
    cell = code("""
        import signal, sys, threading, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        def sent(t):
            f = sys._current_frames().get(t.ident)
            while f is not None:
                if f.f_code.co_name == 'host_request' and 'rid' in f.f_locals:
                    return True
                f = f.f_back
            return False
        ts = [threading.Thread(target=call_me, kwargs={'input': f'w{i}z'})
              for i in range(3)]
        for t in ts:
            t.start()
            while t.is_alive() and not sent(t):
                time.sleep(0.0005)
        open('all-asked', 'w').close()
        for t in ts:
            t.join()
        """)
    # (the repair request holds the cell's code: its turns come first)
    script = first(cell) + [
        {"match": "Repair the failed cell",
         "next_cell": {"code": "quit()\n", "summary": "stop"}},
        {"match": "Repair the failed cell", "text": "ok"},
        {"match_re": r"w\dz", "hold": "never", "text": "x", "repeat": 3}]
    with ModelServer(script) as srv:
        p = start(srv, tmp_path, "--max-parallel-calls", "1",
                  "--cell-timeout", str(3 * SLOW), "--grace", "0.5")
        out, err = finish(p)
        asked_all = (tmp_path / "all-asked").exists()
        sent = [r for r in srv.requests
                if re.search(r"w\dz", json.dumps(r["body"]))]
    assert p.returncode == 0, show(p, out, err)
    assert asked_all, "the cell was killed before its three calls were asked"
    assert len(sent) == 1, [json.dumps(r["body"])[:3000] for r in sent]
    assert "cell 1: 1 model call in flight cancelled" in err, err


@pytest.mark.parametrize("value", ["0", "257", "100000", "-1", "x"])
def test_max_parallel_calls_refused(tmp_path, value):
    p = subprocess.run([AGENTZ, "--max-parallel-calls", value, "task"],
                       cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2, p.stderr
    assert f"invalid --max-parallel-calls '{value}'" in p.stderr, p.stderr
    assert "from 1 to 256" in p.stderr, p.stderr
