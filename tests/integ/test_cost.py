"""The cost budget (issue 9, items 3 and 4): --max-cost USD with prices from
the built-in table or --price IN,CACHED,OUT (USD per 1M tokens); the money is
shown per cell and journaled in `usage` records, restored on --resume, and a
run past its cost budget stops with exit 4 (also when resumed)."""
import os
import re
import subprocess

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, pty_run, beside
from test_budgets import chain, run
from test_durable import (HANG, OK, first, killed_mid_cell, records, repair,
                          resume, start)

# 600k uncached + 400k cached input, 100k output: at --price 1,0.1,10 that
# is $0.60 + $0.04 + $1.00 = $1.64; at gpt-4o's built-in 2.50,1.25,10 it is
# $1.50 + $0.50 + $1.00 = $3.00.
BIG = {"input_tokens": 1000000, "input_tokens_details": {"cached_tokens": 400000},
       "output_tokens": 100000}
NONE = {"input_tokens": 0, "output_tokens": 0}


# cell 1 sleeps with the first call's cost on the bar
TUI_SCRIPT = [dict(first("import time\ntime.sleep(0.5)\nquit()\n"), usage=BIG),
              dict(OK, usage=NONE)]


def tui_env():
    e = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    e["TERM"] = "xterm"
    return e


def usage_records(journal):
    return [r for r in records(journal) if r["type"] == "usage"]


def priced_quit():
    """One paid model call (the first cell), then quit()."""
    return [dict(first("quit()\n"), usage=BIG), dict(OK, usage=NONE)]


def test_max_cost_stops_the_run_with_a_recorded_stop(tmp_path):
    turns = chain(10)
    for t in turns:
        t["usage"] = {"input_tokens": 100000, "output_tokens": 10000}
    journal = beside(tmp_path, "run.jsonl")
    # each call_me costs 2 x (0.10 + 0.10) = $0.40 at --price 1,1,10
    p, _ = run(tmp_path, turns, "--journal", str(journal),
               "--price", "1,1,10", "--max-cost", "1")
    assert p.returncode == 4, p.stderr
    assert "the cost budget (--max-cost) is $1.00" in p.stderr
    assert "cell 3:" not in p.stderr
    stop = records(journal)[-1]
    assert stop["type"] == "stop" and stop["exit"] == 4
    # stopped at the request that reached the budget (cell 2's first
    # round), not at the end of the cell ($1.20)
    assert "--max-cost" in stop["reason"] and "$1.00" in stop["reason"]
    assert " over" in stop["reason"]
    assert "tokens so far, $0.4000)" in p.stderr


def test_cost_is_journaled_and_shown_only_with_a_price(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    p, _ = run(tmp_path, priced_quit(), "--journal", str(journal),
               "--price", "1,0.1,10")
    assert p.returncode == 0, p.stderr
    last = usage_records(journal)[-1]
    assert last["tokens"] == 1100000
    assert last["cost"] == pytest.approx(1.64)
    assert "tokens so far, $1.64)" in p.stderr
    # the default model has no built-in price: tokens only, no money
    unpriced = beside(tmp_path, "unpriced.jsonl")
    p, _ = run(tmp_path, priced_quit(), "--journal", str(unpriced))
    assert p.returncode == 0, p.stderr
    assert "tokens so far)" in p.stderr and "$" not in p.stderr
    assert "cost" not in usage_records(unpriced)[-1]


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-2024-08-06"])
def test_the_built_in_price_applies(tmp_path, model):
    journal = beside(tmp_path, "run.jsonl")
    p, _ = run(tmp_path, priced_quit(), "--journal", str(journal),
               "--model", model, "--max-cost", "100")
    assert p.returncode == 0, p.stderr
    assert usage_records(journal)[-1]["cost"] == pytest.approx(3.00)


@pytest.mark.parametrize("opt,value", [
    ("--price", "1,2"), ("--price", "a,b,c"), ("--price", "1,2,3,4"),
    ("--price", "-1,0,1"), ("--max-cost", "abc"), ("--max-cost", "0"),
    ("--max-cost", "-2")])
def test_bad_values_are_usage_errors(tmp_path, opt, value):
    p = subprocess.run([AGENTZ, "--base-url", "http://127.0.0.1:9", opt,
                        value, "task"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr
    assert f"invalid {opt} '{value}'" in p.stderr


def test_max_cost_without_a_price_is_refused_at_start(tmp_path):
    with ModelServer(priced_quit()) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url,
                            "--max-cost", "5", "task"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        asked = len(srv.requests)
    assert p.returncode == 2, p.stderr
    assert "--max-cost needs the price of the model gpt-6-astra" in p.stderr
    assert "--price IN,CACHED,OUT" in p.stderr
    assert asked == 0


def test_cost_survives_a_restart_and_a_spent_budget_is_final(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [dict(first(HANG.format(marker="spent")), usage=BIG),
              dict(OK, usage=NONE)]
    killed_mid_cell(tmp_path, script, journal, "spent",
                    "--price", "1,0.1,10")
    assert usage_records(journal)[-1]["cost"] == pytest.approx(1.64)
    with ModelServer([repair("quit()\n"), OK]) as srv:
        p = resume(tmp_path, srv, journal, "--price", "1,0.1,10",
                   "--max-cost", "1.5")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "cost $1.64, the cost budget (--max-cost) is $1.50" in p.stderr
    assert asked == 0
    assert records(journal)[-1]["exit"] == 4


def test_cost_is_restored_and_added_to_on_resume(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [dict(first(HANG.format(marker="spent")), usage=BIG),
              dict(OK, usage=NONE)]
    killed_mid_cell(tmp_path, script, journal, "spent",
                    "--price", "1,0.1,10")
    again = [dict(repair("quit()\n"), usage=BIG), dict(OK, usage=NONE)]
    with ModelServer(again) as srv:
        p = resume(tmp_path, srv, journal, "--price", "1,0.1,10",
                   "--max-cost", "10")
    assert p.returncode == 0, p.stderr
    assert usage_records(journal)[-1]["cost"] == pytest.approx(3.28)


def test_a_cut_stream_is_priced_as_output(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    code = ("try:\n    call_me(input='big')\nexcept Exception as e:\n"
            "    print('cut:', type(e).__name__)\nquit()\n")
    script = [dict(first(code), usage=NONE), dict(OK, usage=NONE),
              {"match": "big", "kind": "drop", "text": "x" * 40000,
               "delta_size": 1000}]
    with ModelServer(script) as srv:
        p = start(tmp_path, srv, journal, "--max-retries", "0",
                  "--price", "0,0,10")
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    last = usage_records(journal)[-1]
    assert last["estimated"] >= 40000 // 4
    assert last["cost"] == pytest.approx(last["estimated"] * 10 / 1e6)


def tty_run(tmp_path, *args):
    """Runs a short task on a pseudo-terminal; what it wrote there."""
    with ModelServer(TUI_SCRIPT) as srv:
        rc, text = pty_run([AGENTZ, "--base-url", srv.base_url, *args,
                            "task"], tmp_path, tui_env(), cols=120)
    assert rc == 0, text[-2000:]
    return text


def test_the_status_bar_shows_the_money(tmp_path):
    text = tty_run(tmp_path, "--price", "1,0.1,10")
    assert re.search(r"total [1-9][0-9]* tokens, \$1\.64", text), text[-2000:]


def test_tokens_spent_before_a_price_was_known_count_as_output(tmp_path):
    journal = beside(tmp_path, "run.jsonl")
    script = [dict(first(HANG.format(marker="spent")), usage=BIG),
              dict(OK, usage=NONE)]
    killed_mid_cell(tmp_path, script, journal, "spent")
    assert "cost" not in usage_records(journal)[-1]
    with ModelServer([repair("quit()\n"), OK]) as srv:
        # 1.1M tokens at $10 per 1M output: $11
        p = resume(tmp_path, srv, journal, "--price", "1,0.1,10",
                   "--max-cost", "10")
        asked = len(srv.requests)
    assert p.returncode == 4, p.stderr
    assert "journaled without their cost" in p.stderr
    assert "cost $11.00, the cost budget (--max-cost) is $10.00" in p.stderr
    assert asked == 0
