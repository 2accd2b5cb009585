"""Hard stops outside the model (SPEC §8): each ends the run with exit 4 and
says why; none is reported as success."""
import os
import subprocess
import time

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
