"""agentz report JOURNAL -o run.html: a real run's journal (a timeout that
is killed, one that is only interrupted, repairs, hostile output and a
budget stop) rendered as one self-contained page and loaded in a real
headless chromium (Debian's package; scripts/install-deps installs it for
make check); bad journals give a page or a clear error, never a crash.
Chromium starts in seconds: the tests launch it twice in all."""
import html
import json
import os
import re
import shutil
import subprocess

import pytest

from model_server import ModelServer

from agentz_util import AGENTZ, beside

# One worker runs the whole module: its tests share the module's run.
pytestmark = [pytest.mark.xdist_group("report"),
              pytest.mark.early("a real run, then chromium loads its report")]

CHROMIUM = shutil.which("chromium")
HOSTILE_SCRIPT = "</script><script>alert(1)</script>"
HOSTILE_IMG = "<img src=x onerror=alert(2)>"

# Cell 1 prints markup, invalid UTF-8 and control bytes, then asks on.
HOSTILE_CELL = (
    "import sys\n"
    f"print({HOSTILE_SCRIPT!r})\n"
    f"print({HOSTILE_IMG!r})\n"
    "sys.stdout.flush()\n"
    "sys.stdout.buffer.write(b'bad utf-8: \\xff\\xfe end\\n\\x1b[2J\\n')\n"
    "sys.stdout.flush()\n"
    "r = call_me(input='step two')\n")
# Ignores the interrupt at its deadline: killed after the grace period.
STUBBORN = ("import time\nwhile True:\n    try:\n        time.sleep(30)\n"
            "    except BaseException:\n        pass\n")
GENTLE = "import time\ntime.sleep(30)\n"   # interrupted at its deadline


def turn(code, summary, match=None):
    t = {"next_cell": {"code": code, "summary": summary}}
    if match:
        t["match"] = match
    return [t, {"text": "ok"}]


SCRIPT = (
    turn(HOSTILE_CELL, "hostile output", "Submit the first Python cell")
    + turn(STUBBORN, "hangs, ignoring the interrupt", "step two")
    + turn("print('repaired')\nr = call_me(input='step four')\n",
           "repair", "Repair the failed cell")
    + turn(GENTLE, "sleeps past its deadline", "step four")
    + turn("print('second repair')\nr = call_me(input='step six')\n",
           "repair again", "Repair the failed cell")
    + turn("print('never runs')\n", "over the budget", "step six"))


def env():
    return {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}


def report(*args, timeout=60):
    return subprocess.run([AGENTZ, "report", *map(str, args)], env=env(),
                          stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout)


def chromium(tmp, url, *args):
    """Headless chromium on url; (stdout, stderr) as text."""
    assert CHROMIUM is not None, "chromium is missing: `scripts/install-" \
        "deps check` (run by make check) installs it"
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--enable-logging=stderr",
         "--v=0", "--user-data-dir=%s" % (tmp / "chromium-profile"),
         "--window-size=1280,1600", *args, url],
        capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    return p.stdout.decode(), p.stderr.decode(errors="replace")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One real run: cells 0-5 (1 hostile, 2 killed at its deadline, 3 a
    repair, 4 interrupted at its deadline, 5 a repair), then the budget
    of 6 cells stops it. Its journal, and one with a hand-edited line.
    --cell-timeout 5: the cells that ask the model have time to spare on
    a loaded machine."""
    tmp = tmp_path_factory.mktemp("report")
    journal = beside(tmp)
    with ModelServer(SCRIPT) as srv:
        p = subprocess.run(
            [AGENTZ, "--base-url", srv.base_url, "--journal", str(journal),
             "--cell-timeout", "5", "--grace", "1", "--max-cells", "6",
             "the report task <b>bold?</b>"], cwd=tmp, env=env(),
            stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert p.returncode == 4, p.stderr.decode(errors="replace")
    recs = [json.loads(line) for line in open(journal)]
    outs = {r["cell"]: r for r in recs if r["type"] == "output"}
    assert sorted(outs) == [0, 1, 2, 3, 4, 5]
    # the killed cell's snapshot took over: a real rollback
    assert outs[2]["kind"] == "timeout" and \
        outs[2]["namespace"] == "rolled back to before cell 2"
    assert outs[2]["timeout"]["stage"] == "killed"
    assert outs[4]["kind"] == "timeout" and outs[4]["namespace"] == "kept"
    # HAND-EDITED (marked): an interrupted cell is never rolled back; cell
    # 4's output record gets a rollback with threads_lost, so the page is
    # checked with names of lost threads (and hostile ones) too.
    edited = tmp / "edited.jsonl"
    with open(journal) as src, open(edited, "w") as dst:
        for line in src:
            r = json.loads(line)
            if r["type"] == "output" and r["cell"] == 4:
                r["namespace"] = "rolled back to before cell 4"
                r["threads_lost"] = ["pump", "<b>evil</b>", "t3"]
                r["hand_edited"] = "test_report.py: a rollback"
                line = json.dumps(r) + "\n"
            dst.write(line)
    return tmp, journal, edited


def bar_tags(dom):
    return re.findall(r'<a class="bar [^>]*>', dom)


def cell_of(tag):
    return int(re.search(r'data-cell="(\d+)"', tag).group(1))


def test_report_in_chromium(run):
    tmp, _, edited = run
    page = tmp / "run.html"
    p = report(edited, "-o", page)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    assert os.stat(page).st_mode & 0o777 == 0o600
    text = page.read_text()
    # self-contained: nothing that loads, links out or runs but our script
    assert not re.search(r'(src|href)="(https?:|//)', text)
    assert "<link" not in text and "@import" not in text
    assert text.count("<script") == 1
    dom, err = chromium(tmp, page.as_uri(), "--dump-dom")
    # the page's own script ran to its end and found what it counts
    assert 'data-report-check="ok"' in dom, dom[:400]
    console = [l for l in err.splitlines() if ":CONSOLE" in l]
    assert console == [], console          # no JS error, no CSP violation
    # one bar per cell, in order; kills and the rollback marked
    bars = bar_tags(dom)
    assert [cell_of(b) for b in bars] == [0, 1, 2, 3, 4, 5]
    killed = [cell_of(b) for b in bars if 'data-killed="1"' in b]
    rolled = [cell_of(b) for b in bars if 'data-rollback="1"' in b]
    assert killed == [2] and rolled == [2, 4]
    assert "k-timeout" in bars[2] and "k-timeout" in bars[4]
    assert "threads lost: pump, &lt;b&gt;evil&lt;/b&gt;, t3" in dom
    assert "rolled back to before cell 4" in dom
    assert "repair of cell 2" in dom and "repair of cell 4" in dom
    # failed cells are open, with their detail; the others closed
    opened = re.findall(r'<details class="cell" id="cell-(\d+)"[^>]* open', dom)
    assert opened == ["2", "4"]
    assert "its whole process tree was killed" in dom
    # the budget stop and its reason
    outcome = re.search(r'<dd id="outcome">(.*?)</dd>', dom).group(1)
    assert "exit 4" in outcome and "the budget of 6 cells" in outcome
    # hostile output is text: no element from it
    assert html.escape(HOSTILE_SCRIPT, quote=False) in dom
    assert html.escape(HOSTILE_IMG, quote=False) in dom
    assert dom.count("<script") == 1 and "<img" not in dom
    assert "alert(" not in "".join(re.findall(r"<script[^>]*>.*?</script>",
                                              dom, re.S))
    assert "bad utf-8: \ufffd\ufffd end" in dom and "\\x1b[2J" in dom
    assert "&lt;b&gt;bold?&lt;/b&gt;" in dom        # the task, escaped


def test_bad_lines_render_in_chromium(run, tmp_path):
    """Unreadable lines mid-journal and a torn last line: named on stderr
    with file and line, shown in the page, the rest still rendered."""
    _, journal, _ = run
    lines = open(journal).read().splitlines(True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:3]) + "{not json <img src=x>\n" +
                   '["an", "array"]\n' + "".join(lines[3:]) +
                   '{"v":1,"type":"note","from":"operator","text":'
                   '"look <here>","at":1796280884.5}\n'
                   '{"v":1,"type":"paused","by":"<someone>","at":1.5}\n'
                   '{"v":1,"type":"stop","exit":6,"reason":"the operator '
                   'said <stop>","at":1796280885}\n' +
                   '{"v":1,"type":"stop","exi')
    page = tmp_path / "bad.html"
    p = report(bad, "-o", page)
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert f"{bad}:4: unreadable journal line (not JSON" in err
    assert f"{bad}:5: unreadable journal line (not a JSON object)" in err
    n = len(lines) + 6
    assert f"{bad}:{n}: unreadable journal line (a last line without its " \
           "newline" in err
    dom, _ = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert 'data-report-check="ok"' in dom
    assert 'data-unreadable="3"' in dom
    assert len(bar_tags(dom)) == 6
    for i in (4, 5, n):
        assert f'id="line-{i}"' in dom
    assert "{not json &lt;img src=x&gt;" in dom and "<img" not in dom
    # an entry of a type this version does not know, shown generically
    # the operator's note (agentz ctl note), an operator's stop, and an
    # entry of a type this version does not know, shown generically
    note = re.search(r'<li class="note">(.*?)</li>', dom).group(1)
    assert "from operator: look &lt;here&gt;" in note
    assert "2026-12-03 " in note
    assert '<td>paused</td><td class="rec"><span class="k">by</span>=' \
        '&lt;someone&gt; ' in dom
    stops = re.search(r'<section id="stops">(.*?)</section>', dom,
                      re.S).group(1)
    assert "exit 6: the operator stopped the run" in stops
    assert "the operator said &lt;stop&gt;" in stops


def test_missing_journal(tmp_path):
    p = report(tmp_path / "nope.jsonl", "-o", tmp_path / "x.html")
    assert p.returncode == 1
    assert f"cannot read the journal {tmp_path}/nope.jsonl: No such file" \
        in p.stderr.decode()
    assert not (tmp_path / "x.html").exists()


def test_usage_errors(tmp_path):
    assert report().returncode == 2
    assert report("a", "b").returncode == 2
    p = report(tmp_path / "j", "--max-shown", "bogus")
    assert p.returncode == 2 and b"--max-shown 'bogus'" in p.stderr
    p = report("--help")
    assert p.returncode == 0 and b"agentz report JOURNAL" in p.stdout
    h = subprocess.run([AGENTZ, "--help"], capture_output=True)
    assert b"agentz report JOURNAL [-o FILE]" in h.stdout


def test_a_directory_or_an_unwritable_page(tmp_path):
    p = report(tmp_path, "-o", tmp_path / "x.html")
    assert p.returncode == 1 and b"cannot read" in p.stderr
    j = tmp_path / "j.jsonl"
    j.write_text('{"v":1,"type":"run","task":"t","model":"m","at":1.5}\n')
    p = report(j, "-o", tmp_path / "no" / "such" / "dir.html")
    assert p.returncode == 1 and b"cannot create" in p.stderr
    assert os.listdir(tmp_path) == ["j.jsonl"]


def test_the_page_never_replaces_the_journal(tmp_path):
    j = tmp_path / "j.jsonl"
    j.write_text('{"v":1,"type":"run","task":"t","model":"m","at":1.5}\n')
    os.link(j, tmp_path / "same.jsonl")
    for out in (j, tmp_path / "same.jsonl"):
        p = report(j, "-o", out)
        assert p.returncode == 2 and b"is the journal itself" in p.stderr
    assert j.read_text().startswith('{"v":1,"type":"run"')


def test_a_file_that_is_not_a_journal_is_refused(tmp_path):
    """An empty file, a README, JSON lines of something else: not a
    journal (it starts with its run record), one line naming the file and
    what is wrong, exit 1 (the journal cannot be read), no page (issue
    22; an empty file was rendered as "the journal is empty" before)."""
    j = tmp_path / "empty.jsonl"
    j.write_text("")
    readme = tmp_path / "README.md"
    readme.write_text("# agentz\n\nA supervisor.\n")
    other = tmp_path / "other.jsonl"
    other.write_text('{"v":1,"type":"note","text":"hi","at":1.5}\n')
    array = tmp_path / "array.jsonl"
    array.write_text('["v", 1]\n{"v":1,"type":"run","task":"t"}\n')
    tail = " (a journal starts with its run record)"
    for f, why in (
            ("/dev/null", "it is empty"),
            (j, "it is empty"),
            (readme, "its first line is not a run record: not JSON: '[' "
                     "or '{' expected near '#', at column 1"),
            (other, 'its first line is a "note" record'),
            (array, "its first line is not a run record: not a JSON "
                    "object")):
        out = tmp_path / "x.html"
        p = report(f, "-o", out)
        assert p.returncode == 1, (f, p.stderr)
        assert p.stderr.decode().splitlines() == [
            f"agentz: report: {f} is not a journal: {why}{tail}"], p.stderr
        assert not out.exists() and p.stdout == b""
    # a bad first line's bytes quoted in the error reach no terminal raw
    j.write_bytes(b'{"a":\x1b]0;title\x07}\n')
    p = report(j)
    assert p.returncode == 1
    assert b"\x1b" not in p.stderr and b"\x07" not in p.stderr
    assert "its first line is not a run record: not JSON: invalid token " \
        "near '\\x1b" in p.stderr.decode()


def test_a_journal_of_only_its_run_record(tmp_path):
    """A run killed right after it began (or one being started now)."""
    j = tmp_path / "begun.jsonl"
    j.write_text('{"v":1,"type":"run","task":"t","model":"m","at":1.5}\n')
    p = report(j)
    assert p.returncode == 0 and p.stderr == b""
    page = p.stdout.decode()
    assert 'data-cells="0"' in page and "No cell was recorded" in page
    assert "no stop record" in page


def test_torn_and_non_json_lines_without_a_browser(run, tmp_path):
    _, journal, _ = run
    lines = open(journal).read().splitlines(True)
    j = tmp_path / "torn.jsonl"
    j.write_text("".join(lines[:-1]) + lines[-1][:-7])   # the stop, torn
    p = report(j)
    assert p.returncode == 0
    assert f"{j}:{len(lines)}: unreadable journal line (a last line " \
        "without its newline" in p.stderr.decode()
    page = p.stdout.decode()
    assert 'data-cells="6"' in page and "no stop record" in page
    # after its run record (a first line that is not one: not a journal)
    j.write_bytes(lines[0].encode() + b"\x00\xff garbage\n" + b"".join(
        l.encode() for l in lines[1:5]))
    p = report(j)
    assert p.returncode == 0
    assert f"{j}:2: unreadable journal line (not JSON: " in p.stderr.decode()
    assert "\ufffd garbage" in p.stdout.decode() and "\\x00" in \
        p.stdout.decode()
    # a bad line's bytes quoted in the error reach no terminal raw
    j.write_bytes(lines[0].encode() + b'{"a":\x1b]0;title\x07}\n')
    p = report(j)
    assert p.returncode == 0
    assert b"\x1b" not in p.stderr and b"\x07" not in p.stderr
    assert f"{j}:2: unreadable journal line (not JSON: invalid token near " \
        "'\\x1b" in p.stderr.decode()


def test_huge_output_is_capped(tmp_path):
    """A cell's output of 3 MB: its record keeps 1 MB (--output-limit),
    the page shows 4 KiB of it, head and tail, and says how much not."""
    script = turn("print('H' * 3_000_000 + 'TAIL')\nquit()\n", "big",
                  "Submit the first Python cell")
    journal = beside(tmp_path, "big.jsonl")
    with ModelServer(script) as srv:
        p = subprocess.run([AGENTZ, "--base-url", srv.base_url, "--journal",
                            str(journal), "big"], cwd=tmp_path, env=env(),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=60)
    assert p.returncode == 0, p.stderr
    out = [json.loads(l) for l in open(journal)
           if '"type":"output"' in l][-1]
    kept = len(out["output"].encode())
    page = report(journal, "--max-shown", "4K")
    assert page.returncode == 0
    text = page.stdout.decode()
    assert len(text) < 200_000
    shown = re.search(r"H+(?=<span class=\"cut\">)", text).group(0)
    tail = re.search(r'\[(\d+) bytes not shown\]</span>([^<]*)</pre>', text)
    assert len(shown) == 3072
    assert tail.group(2).endswith("TAIL\n") and "dropped" in text
    assert int(tail.group(1)) == kept - 4096


def test_a_cell_cut_off_by_a_crash(run, tmp_path):
    """The journal of a supervisor killed while cell 4 ran (the real one,
    cut after cell 4's input): cell 4 has no output record and no stop
    follows. Then (HAND-WRITTEN, marked) the resume record a restarted
    supervisor writes first: cell 4 was interrupted by the restart."""
    _, journal, _ = run
    lines = open(journal).read().splitlines(True)
    cut = next(i for i, l in enumerate(lines)
               if json.loads(l)["type"] == "input" and
               json.loads(l)["cell"] == 4) + 1
    j = tmp_path / "cut.jsonl"
    j.write_text("".join(lines[:cut]))
    page = report(j).stdout.decode()
    bar4 = [b for b in bar_tags(page) if cell_of(b) == 4][0]
    assert "st-running" in bar4 and "no output record" in bar4
    assert "no stop record" in page and 'data-cells="5"' in page
    resume = {"v": 1, "type": "resume", "task": "t", "model": "m",
              "at": json.loads(lines[cut - 1])["started_at"] + 1,
              "hand_written": "test_report.py"}
    j.write_text("".join(lines[:cut]) + json.dumps(resume) + "\n")
    page = report(j).stdout.decode()
    bar4 = [b for b in bar_tags(page) if cell_of(b) == 4][0]
    assert "st-interrupted" in bar4
    assert "interrupted by a supervisor restart" in bar4
