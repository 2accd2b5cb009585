"""Memory flat in the length of the run (issue 10, item 5): the supervisor
keeps the newest cell records in memory within a fixed budget and the rest
where they are durable (the journal, or a spill file without one), and the
history is served to cells (CELL_INPUTS / CELL_OUTPUTS) and to the model
(get_history_cells) in bounded pieces, whatever its size."""
import json
import os
import signal
import subprocess
import textwrap

import pytest
from model_server import ModelServer

from agentz_util import AGENTZ, SAN, status_kb, wait_file, beside

SLOW = 4 if SAN else 1
MIB = 1 << 20
BUDGET = 8 * MIB            # cells.h CELLS_MEMORY_BUDGET


def env(cwd):
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
         "LANG": "C.UTF-8", "TMPDIR": str(cwd)}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            e[k] = os.environ[k]
    return e


def code(src):
    return textwrap.dedent(src).strip("\n") + "\n"


def gate(name):
    """A cell that says it is there and waits for the test to let it go."""
    return code(f"""
        import os, time
        open('ready-{name}', 'w').close()
        while not os.path.exists('go-{name}'):
            time.sleep(0.005)
        """)


def exec_cells(tmp_path, cells, *args):
    p = subprocess.Popen([AGENTZ, "exec", "--cell-timeout", "120", *args, "-"],
                         cwd=tmp_path, env=env(tmp_path), stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    p.stdin.write(("\n# %%\n".join(cells) + "\n").encode())
    p.stdin.close()
    return p


@pytest.mark.skipif(SAN, reason="under ASan the RSS is its quarantine's")
def test_rss_does_not_grow_with_cells_printing_output(tmp_path):
    """300 cells printing 200 KB: the supervisor keeps at most the budget of
    records (it kept every one: ~60 MB)."""
    big = "print('x' * 200_000)\n"
    cells = [big] * 10 + [gate("a")] + [big] * 300 + [gate("b")]
    p = exec_cells(tmp_path, cells)
    try:
        assert wait_file(tmp_path / "ready-a", p, 60 * SLOW), "no ready-a"
        before = status_kb(p.pid, "VmRSS")
        (tmp_path / "go-a").touch()
        assert wait_file(tmp_path / "ready-b", p, 300 * SLOW), "no ready-b"
        after = status_kb(p.pid, "VmRSS")
        (tmp_path / "go-b").touch()
        assert p.wait(timeout=60 * SLOW) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    grown = (after - before) * 1024
    assert grown < BUDGET + 8 * MIB, (
        f"supervisor RSS grew {grown / MIB:.1f} MiB over 300 cells of 200 KB "
        f"({before} kB -> {after} kB)")


@pytest.mark.early("24 cells of 1 MiB")
def test_old_outputs_are_read_back_past_the_frame_limit(tmp_path):
    """24 cells of 1 MiB (6 times the 4 MiB frame limit, 3 times the
    budget): CELL_OUTPUTS[1] is the capped output read back from the spill
    file, and the whole history can still be walked (it used to block until
    the cell's timeout)."""
    n = 24
    assert n * MIB > 2 * BUDGET
    cells = [f"print('{i % 10}' * {MIB})\n" for i in range(n)]
    check = code("""
        import json
        r = CELL_OUTPUTS[1]
        items = CELL_OUTPUTS.items()
        json.dump({
            "head": r["output"][:1000], "tail": r["output"][-1001:],
            "bytes": r["output_bytes"], "dropped": r["output_dropped"],
            "status": r["status"], "code": CELL_INPUTS[1]["code"],
            "keys": list(CELL_OUTPUTS), "len_in": len(CELL_INPUTS),
            "running_in": %d in CELL_INPUTS, "running_out": %d in CELL_OUTPUTS,
            "items": [(k, v["output"][:3]) for k, v in items],
            "last_error": get_last_error(),
            "missing": CELL_OUTPUTS.get(%d, "none"),
        }, open("result.json", "w"))
        """) % (n, n, n)
    p = exec_cells(tmp_path, cells + [check], "--max-frame", "4M")
    try:
        assert p.wait(timeout=300 * SLOW) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["status"] == "ok"
    assert r["head"] == "1" * 1000 and r["tail"] == "1" * 1000 + "\n"
    assert r["bytes"] == MIB + 1 and r["dropped"] == 1
    assert r["code"].strip() == cells[1].strip()
    assert r["keys"] == list(range(n)) and r["len_in"] == n + 1
    assert r["running_in"] is True and r["running_out"] is False
    assert r["items"] == [[i, str(i % 10) * 3] for i in range(n)]
    assert r["last_error"] is None and r["missing"] == "none"


def test_a_record_too_big_for_one_reply_says_so(tmp_path):
    """A record that cannot fit a reply is an error naming the bound, not a
    cell blocked until its timeout."""
    cells = [f"print('y' * {3 * MIB})\n", code("""
        try:
            CELL_OUTPUTS[0]
        except RuntimeError as e:
            open("error.txt", "w").write(str(e))
        open("input.txt", "w").write(CELL_INPUTS[0]["code"])
        """)]
    p = exec_cells(tmp_path, cells, "--max-frame", "4M", "--output-limit", "3M")
    try:
        assert p.wait(timeout=60 * SLOW) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = (tmp_path / "error.txt").read_text()
    assert "cell 0" in err and "one reply may carry" in err, err
    assert (tmp_path / "input.txt").read_text().strip() == cells[0].strip()


def big_cell(i):
    return f"print('{i % 10}' * {MIB})\ncall_me(input='NEXT-{i}')\n"


@pytest.mark.early("12 cells of 1 MiB, then a resume")
def test_agent_history_past_the_frame_limit_and_after_resume(tmp_path):
    """An agent run with a journal: 12 cells of 1 MiB; CELL_OUTPUTS[1] and
    get_history_cells serve old cells read back from the journal, and so
    does the run resumed after the supervisor was killed."""
    journal = beside(tmp_path, "run.jsonl")
    n = 12
    script = []
    for i in range(1, n + 1):
        script += [{"next_cell": {"code": big_cell(i), "summary": f"c{i}"}},
                   {"text": "ok"}]
    last = code("""
        import json, time
        r = CELL_OUTPUTS[1]
        json.dump({"head": r["output"][:100], "bytes": r["output_bytes"],
                   "code": CELL_INPUTS[1]["code"], "n": len(CELL_OUTPUTS)},
                  open("first.json", "w"))
        call_me(input="HIST")
        print("HANG-MARK", flush=True)
        time.sleep(300)
        """)
    script += [{"next_cell": {"code": last, "summary": "last"}}, {"text": "ok"},
               {"calls": [{"name": "get_history_cells", "call_id": "h1",
                           "arguments": {"start": 1, "end": 3}},
                          {"name": "get_history_cells", "call_id": "h2",
                           "arguments": {"start": 1}}]},
               {"text": "ok"}]
    args = ["--cell-timeout", "60", "--max-frame", "8M", "--journal",
            str(journal)]
    with ModelServer(script) as srv:
        p = subprocess.Popen([AGENTZ, "--base-url", srv.base_url, *args,
                              "the task"], cwd=tmp_path, env=env(tmp_path),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            while True:
                line = p.stdout.readline()
                assert line, p.stderr.read()
                if line == b"HANG-MARK\n":
                    break
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        hist = [r["body"] for r in srv.requests
                if isinstance(r["body"].get("input"), list)
                and any(isinstance(it, dict) and it.get("call_id") == "h1"
                        and it.get("type") == "function_call_output"
                        for it in r["body"]["input"])]
    first = json.loads((tmp_path / "first.json").read_text())
    assert first == {"head": "1" * 100, "bytes": MIB + 1,
                     "code": big_cell(1), "n": n + 1}
    assert hist, "get_history_cells was never answered"
    outs = {it["call_id"]: json.loads(it["output"]) for it in hist[0]["input"]
            if it.get("type") == "function_call_output"
            and it.get("call_id") in ("h1", "h2")}
    res = outs["h1"]
    assert res["total"] == n + 2 and "truncated" not in res
    assert [c["cell"] for c in res["cells"]] == [1, 2]
    assert res["cells"][0]["output"].startswith("1" * 1000)
    assert res["cells"][1]["code"] == big_cell(2)
    # history[1:] is 13 MiB: cut at the 4 MiB bound, saying where to go on
    res = outs["h2"]
    got = [c["cell"] for c in res["cells"]]
    assert got == list(range(1, 1 + len(got))) and 1 < len(got) < 5, got
    assert res["truncated"]["next_start"] == got[-1] + 1
    assert f"start={got[-1] + 1}" in res["truncated"]["note"]

    repair = code("""
        import json
        r = CELL_OUTPUTS[1]
        json.dump({"head": r["output"][:100], "bytes": r["output_bytes"],
                   "dropped": r["output_dropped"],
                   "code": CELL_INPUTS[2]["code"],
                   "n": len(CELL_OUTPUTS),
                   "err": get_last_error()["cell"]},
                  open("resumed.json", "w"))
        quit()
        """)
    script2 = [{"match": "Repair the failed cell",
                "next_cell": {"code": repair, "summary": "check"}},
               {"text": "ok"}]
    with ModelServer(script2) as srv:
        p2 = subprocess.run([AGENTZ, "--base-url", srv.base_url, *args,
                             "--resume"], cwd=tmp_path, env=env(tmp_path),
                            stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=120 * SLOW)
    assert p2.returncode == 0, p2.stderr.decode(errors="replace")[-3000:]
    got = json.loads((tmp_path / "resumed.json").read_text())
    assert got == {"head": "1" * 100, "bytes": MIB + 1, "dropped": 1,
                   "code": big_cell(2), "n": n + 2, "err": n + 1}
