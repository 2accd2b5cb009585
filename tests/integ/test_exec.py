"""agentz exec: the supervised persistent interpreter, end to end."""
import json
import os
import subprocess

import pytest

from agentz_util import AGENTZ, cells, exec_json, run


def test_files_share_one_namespace(tmp_path):
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text("x = 41\nprint('from a')\n")
    b.write_text("x += 1\nprint('x is', x)\n")
    p = run(["exec", str(a), str(b)])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "from a\nx is 42\n"
    assert f"cell 0 ({a}): ok" in p.stderr
    assert f"cell 1 ({b}): ok" in p.stderr


def test_stdin_cells_and_json_record_fields():
    recs, p = exec_json("y = 2", "print(y * 21)")
    assert p.returncode == 0, p.stderr
    assert [r["cell"] for r in recs] == [0, 1]
    r = recs[1]
    assert r["status"] == "ok" and r["kind"] is None
    assert r["output"] == "42\n" and r["output_bytes"] == 3
    assert r["output_dropped"] == 0
    assert r["source"] == "-" and r["code"] == "print(y * 21)\n"
    assert r["finished_at"] >= r["started_at"] > 1.7e9
    assert r["duration_us"] > 0
    w = r["worker"]
    assert w["pid"] > 0 and w["generation"] == 1
    assert w["python"].startswith("3.")
    assert 0 < w["spawn_ready_us"] < 10_000_000


def test_separator_variants_and_leading_separator():
    src = "# %%\na = 1\n# %% second cell\nb = a + 1\n#%% not a separator\nprint(b)\n"
    p = run(["exec", "--json", "-"], stdin=src)
    recs = [json.loads(l) for l in p.stdout.splitlines()]
    assert len(recs) == 2, recs
    assert recs[1]["output"] == "2\n"


def test_expression_values_are_not_echoed():
    recs, _ = exec_json("1 + 1", "'text'")
    assert [r["output"] for r in recs] == ["", ""]


def test_engine_source_is_every_engine_file_in_ascii():
    # SPEC section 5: the engine's own source text, embedded at build
    # time, each file under its "# ==== path ====" line, by path
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    recs, p = exec_json(
        "import re\n"
        "names = re.findall(r'^# ==== (\\S+) ====$', ENGINE_SOURCE, re.M)\n"
        "print(len(ENGINE_SOURCE), ENGINE_SOURCE.isascii(), names == "
        "sorted(names), ' '.join(names))")
    assert p.returncode == 0, recs
    size, ascii_, ordered, names = recs[0]["output"].split(" ", 3)
    names = names.split()
    assert ascii_ == "True" and ordered == "True", recs[0]["output"][:300]
    for f in ("worker/runtime.py", "supervisor/front/main.c",
              "sandbox/seccomp.c", "proto/frame.c", "common/buf.c"):
        assert f in names, names
    text = open(os.path.join(root, "worker", "runtime.py")).read()
    assert int(size) > len(text) * 10, size


def test_exit_status_one_when_a_cell_fails():
    recs, p = exec_json("x = 1", "raise ValueError('boom')", "print(x)")
    assert p.returncode == 1
    assert [r["status"] for r in recs] == ["ok", "error", "ok"]
    assert recs[1]["exception_type"] == "ValueError"
    assert recs[1]["kind"] == "exception"
    assert recs[2]["output"] == "1\n", "namespace survives an exception"


def test_missing_file_is_a_usage_error_and_runs_nothing(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("open(%r, 'w').write('ran')\n" % str(tmp_path / "marker"))
    p = run(["exec", str(ok), str(tmp_path / "missing.py")])
    assert p.returncode == 2
    assert "missing.py" in p.stderr and "No such file" in p.stderr
    assert not (tmp_path / "marker").exists()


def test_unreadable_file_is_a_usage_error(tmp_path):
    p = run(["exec", str(tmp_path)])        # a directory cannot be read
    assert p.returncode == 2
    assert str(tmp_path) in p.stderr and "Is a directory" in p.stderr


def test_usage_errors():
    assert run(["exec"]).returncode == 2
    p = run(["exec", "--output-limit", "lots", "-"], stdin="")
    assert p.returncode == 2 and "--output-limit" in p.stderr and "lots" in p.stderr
    p = run(["exec", "--sandbox", "maybe", "-"], stdin="")
    assert p.returncode == 2 and "maybe" in p.stderr
    assert run(["frobnicate"]).returncode == 2
    assert run(["exec", "--help"]).returncode == 0


def test_option_errors_name_the_command_once_and_what_is_wrong():
    p = run(["--model"])
    assert p.returncode == 2
    assert p.stderr.startswith("agentz: option --model needs a value"), p.stderr
    p = run(["--bogus", "task"])
    assert p.returncode == 2
    assert p.stderr.startswith("agentz: unknown option --bogus"), p.stderr
    p = run(["exec", "--grace"])
    assert p.returncode == 2
    assert p.stderr.startswith("agentz exec: option --grace needs a value"), \
        p.stderr
    p = run(["exec", "--grace", "soon", "-"], stdin="")
    assert p.returncode == 2
    assert p.stderr.startswith("agentz exec: invalid --grace 'soon'"), p.stderr
    assert "agentz agentz" not in run(["--max-cells", "0", "t"]).stderr


@pytest.mark.parametrize("opt,val,want", [
    # a value the timers would round to 0 (which means none), overflow
    # (1e99 s in ms), or silently treat as "never": refused with the range
    ("--cell-timeout", "0.0001", "expected seconds from 0.001 to 31536000"),
    ("--cell-timeout", "0", "expected seconds from 0.001 to 31536000"),
    ("--grace", "1e99", "expected seconds from 0.001 to 3600"),
    ("--grace", "nan", "expected seconds from 0.001 to 3600"),
    ("--deadline", "1e20", "expected seconds from 0.001 to 31536000"),
    ("--request-timeout", "inf", "expected seconds from 0.001 to 86400"),
    ("--outage-patience", "-1", "expected seconds from 0 to 604800"),
    ("--memory-limit", "1M", "too small: at least 64M (or 0: none)"),
    ("--output-limit", "3", "too small: at least 64 bytes"),
    ("--max-frame", "1K", "too small: at least 4K"),
    ("--max-cells", "1e20", "out of range: expected a whole number from 1 "
                            "to 1073741824"),
])
def test_numbers_that_cannot_be_honoured_are_refused_with_the_range(
        opt, val, want):
    p = run([opt, val, "task"])
    assert p.returncode == 2, p.stderr
    assert p.stderr == "agentz: invalid %s '%s': %s\n" % (opt, val, want)


def test_the_smallest_and_largest_seconds_are_honoured():
    # a millisecond is a deadline, not "none": a 1 s sleep is interrupted
    p = run(["exec", "--cell-timeout", "0.001", "-"],
            stdin="import time\ntime.sleep(1)\n")
    assert p.returncode == 1, p.stderr
    assert "exceeded its 0.001 s timeout" in p.stderr, p.stderr
    for opt, val in (("--grace", "3600"), ("--cell-timeout", "31536000")):
        p = run(["exec", opt, val, "-"], stdin="print(1)\n")
        assert p.returncode == 0, (opt, val, p.stderr)


@pytest.mark.parametrize("opt", [
    ["--model", "m"], ["--base-url", "http://127.0.0.1:9/v1"],
    ["--journal", "j.jsonl"], ["--resume"], ["--max-cells", "3"],
    ["--deadline", "5"], ["--max-tokens", "9"], ["--max-cost", "1"],
    ["--max-parallel-calls", "2"], ["--outage-patience", "0"],
])
def test_agent_only_options_are_refused_by_exec(opt):
    # they would do nothing in exec (no model, no journal): said, exit 2,
    # nothing run
    p = run(["exec", *opt, "-"], stdin="print('RAN')\n")
    assert p.returncode == 2, p.stderr
    assert p.stderr == ("agentz exec: %s is for agent runs (agentz \"TASK\"); "
                        "exec runs no model\n" % opt[0]), p.stderr
    assert "RAN" not in p.stdout


def test_help_names_exec_exit_codes_and_environment():
    h = run(["--help"])
    assert h.returncode == 0
    for word in ("agentz exec", "exit status", "130", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "AGENTZ_MODEL", "AGENTZ_JOURNAL",
                 "AGENTZ_SECRETS", "CREDENTIALS_DIRECTORY"):
        assert word in h.stdout, word
    h = run(["exec", "--help"])
    assert h.returncode == 0 and "exit status" in h.stdout
    assert "# %%" in h.stdout


def test_syntax_error_reports_line():
    recs, p = exec_json("x = 1\ny = (\n")
    assert p.returncode == 1
    r = recs[0]
    assert r["status"] == "error" and r["exception_type"] == "SyntaxError"
    assert '"<cell-0>", line 2' in r["traceback"]


def test_traceback_shows_cell_lines_without_worker_frames():
    recs, _ = exec_json("def f():\n    return 1 / 0\n", "x = 5\nf()\n")
    tb = recs[1]["traceback"]
    assert 'File "<cell-1>", line 2' in tb and 'File "<cell-0>", line 2' in tb
    assert "return 1 / 0" in tb and "f()" in tb
    assert "runtime" not in tb and "agentz" not in tb
    assert tb.startswith("Traceback (most recent call last):")


def test_cell_sources_reach_linecache_however_it_is_imported():
    # the worker imports linecache only when something needs it (it costs
    # ~10 ms of a one-shot exec); the cells' sources are handed to it then:
    # by the import itself (cell 2), and by a cell's own traceback (cell 3)
    recs, p = exec_json(
        "import sys\n"
        "def f():\n    return 'line of f'\n"
        "print(sorted(m for m in ('json', 'linecache', 're', 'traceback')"
        " if m in sys.modules))\n",
        "g = lambda: 'line of g'\n",
        "import inspect, linecache\n"
        "print(linecache.getline('<cell-0>', 3).strip())\n"
        "print(inspect.getsource(g).strip())\n",
        "import traceback\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    print([l.strip() for l in traceback.format_exc().splitlines()"
        " if '/' in l])\n",
        "raise ValueError('five')\n")
    assert p.returncode == 1, p.stderr
    assert recs[0]["output"] == "[]\n"  # nothing of them before it is needed
    assert recs[2]["output"] == "return 'line of f'\ng = lambda: 'line of g'\n"
    assert recs[3]["output"] == "['1 / 0']\n"
    assert "raise ValueError('five')" in recs[4]["traceback"]


def test_host_replies_read_without_json_as_json_reads_them():
    # a host reply is read by _json's scanner while json is not imported
    # (agentz_runtime._loads); the same values as json.loads, and what
    # the scanner does not take whole is json.loads's, errors included
    samples = [b'{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "\\u00e9\\ud83d\\ude00"}}',
               '{"x":"caf\u00e9"}'.encode(), b'12345678901234567890123', b'"s"',
               b' {"lead": 1}', b'{"trail": 1}  ', b'[NaN, Infinity, -Infinity]',
               b'{"a": 1} x', b'{"a": ', b'\xff']
    code = (
        "import sys, agentz_runtime as rt\n"
        f"samples = {samples!r}\n"
        "def attempt(f, s):\n"
        "    try:\n        return ('ok', repr(f(s)))\n"
        "    except Exception as e:\n        return ('error', type(e).__name__)\n"
        "fast = [attempt(rt._loads, s) for s in samples]\n"
        "had_json = 'json' in sys.modules\n"
        "import json\n"
        "slow = [attempt(json.loads, s) for s in samples]\n"
        "print(had_json, fast == slow, fast)\n")
    recs, p = exec_json(code)
    assert p.returncode == 0, p.stderr
    had_json, same = recs[0]["output"].split()[:2]
    assert same == "True", recs[0]["output"]
    # json came in only for the samples the scanner leaves to it
    assert "error" in recs[0]["output"]


def test_a_worker_that_dies_with_a_reply_unread_exited_all_the_same():
    # the supervisor's reply sits unread in the worker's end of the
    # channel when the worker exits: the supervisor reads ECONNRESET, not
    # EOF, and that is the worker's exit all the same, not a failed
    # channel (an agent's worker dying between cells with a PIPES unread
    # was said to be "killed: control channel read failed")
    code = ("import _agentz, os, select\n"
            "_agentz.begin('runtime_info', b'{}', 0)\n"
            "select.select([3], [], [], 30)  # the reply is there\n"
            "os._exit(7)\n")
    recs, p = exec_json(code, "print('next')")
    r = recs[0]
    assert r["status"] == "error", r
    assert "exited with code 7" in (r.get("detail") or ""), r
    assert recs[1]["status"] == "ok" and recs[1]["output"] == "next\n", recs


def test_invalid_utf8_and_nul_bytes_in_output():
    recs, p = exec_json("import os, sys\nos.write(1, b'a\\xff\\xfeb\\x00c\\n')\n"
                        "sys.stdout.write('\\udcff ok\\n')")
    assert p.returncode == 0, p.stderr
    out = recs[0]["output"]
    assert out.startswith("a\ufffd\ufffdb\x00c\n")
    assert "ok" in out


def test_cell_of_several_megabytes():
    big = "data = '" + "x" * (6 << 20) + "'\nprint(len(data))\n"
    recs, p = exec_json(big, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert recs[0]["output"] == str(6 << 20) + "\n"


def test_output_cap_keeps_head_and_tail():
    recs, p = exec_json("print('HEAD')\nfor i in range(200000): print('line', i)\nprint('TAIL')",
                        args=["--output-limit", "64K"])
    r = recs[0]
    assert r["status"] == "ok"
    assert r["output"].startswith("HEAD\n") and r["output"].endswith("TAIL\n")
    assert r["output_dropped"] > 0
    assert r["output_bytes"] == r["output_dropped"] + 65536
    assert "bytes dropped" in r["output"]


@pytest.mark.parametrize("code,exit_code,signal", [
    ("import os\nos._exit(3)", 3, None),
    ("import os\nos.kill(os.getpid(), 9)", None, 9),
    ("import os\nos._exit(0)", 0, None),
])
def test_worker_death_mid_cell_then_fresh_worker(code, exit_code, signal):
    recs, p = exec_json("x = 1", code, "print('x' in dir())")
    assert p.returncode == 1
    dead = recs[1]
    assert dead["status"] == "error" and dead["kind"] == "crashed"
    assert dead["exit_code"] == exit_code and dead["signal"] == signal
    assert recs[2]["status"] == "ok"
    assert recs[2]["output"] == "False\n", "a fresh worker has a fresh namespace"
    assert recs[2]["worker"]["pid"] != recs[0]["worker"]["pid"]
    assert recs[2]["worker"]["generation"] == 2


def test_garbage_on_the_control_channel_is_a_protocol_error():
    recs, p = exec_json("import os\nos.write(3, b'\\x00\\x00\\x00\\x10\\xff\\xff\\x00\\x00' + b'g' * 16)\n"
                        "import time\ntime.sleep(30)",
                        "print('next')")
    assert p.returncode == 1
    assert recs[0]["kind"] == "protocol" and "protocol error" in recs[0]["detail"]
    assert recs[0]["duration_us"] < 20_000_000
    assert recs[1]["output"] == "next\n"
    assert "protocol error" in p.stderr


def test_forged_done_frame_is_a_protocol_error():
    # A well-formed DONE for a cell that is not running.
    forge = ("import os, struct\n"
             "body = bytes([0x94, 0xcd, 0x03, 0xe7, 0x00, 0xa0, 0xa0])\n"
             "os.write(3, struct.pack('>IHH', len(body), 3, 0) + body)\n"
             "import time\ntime.sleep(30)")
    recs, p = exec_json(forge, "print('ok')")
    assert recs[0]["kind"] == "protocol"
    assert recs[1]["status"] == "ok"


def test_oversized_frame_is_rejected_without_allocating():
    code = ("import os, struct\nos.write(3, struct.pack('>IHH', 0xfffffff0, 3, 0))\n"
            "import time\ntime.sleep(30)")
    recs, p = exec_json(code, "print('ok')")
    assert recs[0]["kind"] == "protocol"
    assert recs[1]["status"] == "ok"


def test_sigint_becomes_keyboard_interrupt_and_worker_survives():
    code = ("import os, signal, time\nx = 7\nos.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(10)")
    recs, p = exec_json(code, "print(x)")
    assert recs[0]["status"] == "interrupted"
    assert recs[0]["exception_type"] == "KeyboardInterrupt"
    assert recs[0]["duration_us"] < 5_000_000
    assert recs[1]["output"] == "7\n"
    assert recs[1]["worker"]["pid"] == recs[0]["worker"]["pid"]


def test_system_exit_is_interrupted_not_a_crash():
    recs, _ = exec_json("x = 3\nraise SystemExit(4)", "print(x)")
    assert recs[0]["status"] == "interrupted"
    assert recs[1]["output"] == "3\n"


def test_top_level_await_on_a_persistent_loop():
    recs, p = exec_json(
        "import asyncio\nloop1 = asyncio.get_running_loop()\nawait asyncio.sleep(0)",
        "import asyncio\nprint(asyncio.get_running_loop() is loop1)\n"
        "print(await asyncio.gather(asyncio.sleep(0, 'a'), asyncio.sleep(0, 'b')))")
    assert p.returncode == 0, recs
    assert recs[1]["output"] == "True\n['a', 'b']\n"


def test_input_reads_a_line_from_our_stdin(tmp_path):
    f = tmp_path / "ask.py"
    f.write_text("a = input('name? ')\nb = input()\nprint('got', repr(a), repr(b))\n"
                 "try:\n    input()\nexcept EOFError:\n    print('eof')\n")
    p = run(["exec", str(f)], stdin="alice\nbob\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "name? got 'alice' 'bob'\neof\n"


def test_input_without_a_terminal_is_eof():
    recs, _ = exec_json("try:\n    input('? ')\nexcept EOFError as e:\n    print('EOF', e)")
    assert recs[0]["output"].startswith("EOF")


def test_concurrent_host_requests_are_matched_by_id():
    code = ("import threading, agentz_runtime\nres = {}\n"
            "def ask(i):\n"
            "    try:\n        agentz_runtime.host_request('nope%d' % i, b'')\n"
            "    except Exception as e:\n        res[i] = type(e).__name__\n"
            "ts = [threading.Thread(target=ask, args=(i,)) for i in range(8)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "print(sorted(res.items()))")
    recs, _ = exec_json(code)
    assert recs[0]["output"] == str([(i, "RuntimeError") for i in range(8)]) + "\n"


def test_host_request_after_cell_end_is_refused():
    # The thread made in cell 0 asks only once cell 1 runs (the event is
    # set there): its request is still bound to cell 0, which has ended.
    code0 = ("import threading, agentz_runtime\nout = []\n"
             "go = threading.Event()\n"
             "def late():\n    go.wait()\n"
             "    try:\n        agentz_runtime.host_request('input', b'{}', 0)\n"
             "    except Exception as e:\n        out.append(str(e))\n"
             "t = threading.Thread(target=late); t.start()")
    recs, _ = exec_json(code0, "go.set()\nt.join()\nprint(out)")
    assert "refused once their cell is inactive" in recs[1]["output"]


def test_worker_environment_is_allow_listed_and_fds_are_clean():
    code = ("import os\nprint(sorted(os.environ))\n"
            "print(open('/proc/self/environ','rb').read().count(b'canary'))\n"
            "print(sorted(int(f) for f in os.listdir('/proc/self/fd')))\n"
            "print(sorted({os.readlink('/proc/self/fd/%d' % f) "
            "for f in (7, 8, 9)}))")
    env = {"MY_API_KEY": "canary-1", "SOME_TOKEN": "canary-2",
           "OPENAI_API_KEY": "canary-3", "RANDOM_VAR": "canary-4",
           "AGENTZ_SECRETS": "RANDOM_VAR2", "RANDOM_VAR2": "canary-5"}
    recs, _ = exec_json(code, env=env)
    names, canaries, fds, reserve = recs[0]["output"].splitlines()
    assert "PATH" in names
    for bad in ("MY_API_KEY", "SOME_TOKEN", "OPENAI_API_KEY", "RANDOM_VAR"):
        assert f"'{bad}'" not in names
    assert canaries == "0"
    # stdio, the channel (3), the stack-dump pipe (4), the spare socket
    # (5), the output socket (6), the reserve for the next pipes (7-9: one
    # empty memfd of the worker's), and listdir's own fd
    assert eval(fds)[:10] == list(range(10)) and len(eval(fds)) == 11
    assert eval(reserve) == ["/memfd:agentz-reserve (deleted)"]


def test_pass_env_adds_a_variable_but_never_a_secret():
    recs, _ = exec_json("import os\nprint(os.environ.get('EXTRA'), os.environ.get('X_TOKEN'))",
                        args=["--pass-env", "EXTRA", "--pass-env", "X_TOKEN"],
                        env={"EXTRA": "yes", "X_TOKEN": "canary"})
    assert recs[0]["output"] == "yes None\n"


def test_worker_that_cannot_start_ends_the_run_with_exit_3(tmp_path):
    fake = tmp_path / "agentz-worker"
    fake.write_text("#!/bin/sh\nexit 9\n")
    fake.chmod(0o755)
    p = run(["exec", "--worker", str(fake), "-"], stdin="x = 1\n", timeout=60)
    assert p.returncode == 3
    assert "cannot be started" in p.stderr and "code 9" in p.stderr


def test_worker_that_cannot_be_executed_says_which_step_and_errno(tmp_path):
    """The exec of agentz-worker fails in the forked child (not a script,
    not an ELF: ENOEXEC): the operator reads which step failed and why,
    not only "exited with code 127"."""
    fake = tmp_path / "agentz-worker"
    fake.write_bytes(b"\x00not an executable\n")
    fake.chmod(0o755)
    p = run(["exec", "--worker", str(fake), "-"], stdin="x = 1\n", timeout=60)
    assert p.returncode == 3, p.stderr
    assert "cannot start the worker: exec agentz-worker: ENOEXEC" in \
        p.stderr, p.stderr


def test_worker_refuses_to_run_by_hand():
    from agentz_util import WORKER
    p = subprocess.run([WORKER], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 64 and "started by agentz" in p.stderr
