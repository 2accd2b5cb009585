"""--workspace-size bounds what the workspace holds (issue 20, item 4): the
supervisor measures the workspace while the run lives and kills the
worker's processes when it grows past its size, whoever writes (the cell, a
thread or a child it left behind, between cells too); no file can be larger
than the size (RLIMIT_FSIZE); a workspace the supervisor cannot measure is
not let grow; a cell after a kill can make room, and cannot grow it back.
Through `agentz exec --json -` and an agent run (the model is told why its
cell ended and makes room), as root and as a plain user.

Safety: a broken guard lets the writers run to their own end: each writes
at most FILES_MAX files of one MiB (512 MiB of the test's own workspace,
removed after; a working guard stops it after what the page cache takes
between two walks, tens of MiB), and every process a cell starts carries the test's marker
and a `timeout -s KILL`. Nothing waits on time: a writer ends by the kill
(the record says so) or by its own bound (the test fails).
"""
import os
import subprocess

import pytest

from model_server import ModelServer
from isolation_util import IS_ROOT, RUN_TIMEOUT, brief, cell_ends, turns
from isolation_util import ctx, who  # noqa: F401 (the fixtures)

MIB = 1 << 20
FILES_MAX = 512
SIZE = "4M"


def fill(prefix, files=FILES_MAX):
    """A cell writing files of one MiB until it is killed (or `files`)."""
    return ("for _i in range(%d):\n"
            "    with open('%s%%d' %% _i, 'wb') as _f:\n"
            "        _f.write(b'x' * %d)\n"
            "print('wrote all')\n" % (files, prefix, MIB))


def write_mib(name, n):
    return ("with open(%r, 'wb') as _f:\n"
            "    _f.write(b'y' * %d)\n" % (name, n * MIB))


def held_code():
    """Prints the bytes the workspace's files hold (not its folders)."""
    return ("import os\n"
            "_t = 0\n"
            "for _d, _s, _fs in os.walk('.'):\n"
            "    for _n in _fs:\n"
            "        _t += os.lstat(os.path.join(_d, _n)).st_blocks * 512\n"
            "print(_t)\n")


# Waits (a minute at most) for its kill: a later cell that a leftover's
# growth ends. Counts nothing: it only outlives the walk that stops it.
WAIT_FOR_KILL = ("import time\n"
                 "_end = time.monotonic() + 60\n"
                 "while time.monotonic() < _end:\n"
                 "    time.sleep(0.02)\n"
                 "print('never killed')\n")


def assert_killed(rec, why="over its size (4 MiB, --workspace-size)"):
    assert rec["status"] == "error", brief(rec)
    assert why in (rec["detail"] or ""), brief(rec)
    assert "wrote all" not in (rec.get("output") or ""), brief(rec)


def files_in(ws, prefix):
    return [n for n in os.listdir(ws) if n.startswith(prefix)]


def test_growth_past_the_size_kills_the_cell_and_the_next_runs(ctx):
    run = ctx.run([fill("f"), "print('ok')"], args=("--workspace-size", SIZE),
                  expect_rc=1)
    assert_killed(run.recs[0])
    assert run.recs[1]["status"] == "ok", brief(run.recs[1])
    assert run.recs[1]["output"] == "ok\n"
    # stopped well before its own end
    assert 4 <= len(files_in(ctx.ws, "f")) < FILES_MAX
    assert "workspace 4 MiB (measured by the supervisor, RLIMIT_FSIZE a " \
        "file)" in run.recs[1]["worker"]["limits"]


def test_no_file_larger_than_the_size(ctx):
    """RLIMIT_FSIZE: a write past the size fails at once (EFBIG), even one
    that would hold nothing (a byte past a hole)."""
    code = ("import os\n"
            "_fd = os.open('big', os.O_WRONLY | os.O_CREAT)\n"
            "try:\n"
            "    os.pwrite(_fd, b'x', %d)\n"
            "except OSError as e:\n"
            "    print(e.errno)\n"
            "print(os.pwrite(_fd, b'x', %d))\n" % (4 * MIB, 4 * MIB - 1))
    run = ctx.run([code], args=("--workspace-size", SIZE))
    assert run.recs[0]["output"] == "27\n1\n", brief(run.recs[0])  # EFBIG
    assert os.path.getsize(os.path.join(ctx.ws, "big")) == 4 * MIB


def test_after_a_kill_a_cell_makes_room_and_cannot_grow_it_back(ctx):
    delete = ("import os\n"
              "for _n in os.listdir('.'):\n"
              "    if _n.startswith('f'):\n"
              "        os.unlink(_n)\n" + write_mib("g", 3) + "print('ok')\n")
    run = ctx.run([fill("f"), held_code(), delete, fill("h")],
                  args=("--workspace-size", SIZE), expect_rc=1)
    assert_killed(run.recs[0])
    # what the kill left over the size: the next cell runs all the same
    assert run.recs[1]["status"] == "ok", brief(run.recs[1])
    assert int(run.recs[1]["output"]) > 4 * MIB, brief(run.recs[1])
    # room made: 3 MiB under the size
    assert run.recs[2]["output"] == "ok\n", brief(run.recs[2])
    # growing again is stopped again (past the size, or past what the
    # walks found after the room was made: cells 2 and 3 may both run
    # between two walks)
    assert_killed(run.recs[3], "--workspace-size")
    assert len(files_in(ctx.ws, "h")) < FILES_MAX


def test_a_workspace_over_its_size_at_the_start_may_not_grow(ctx):
    ctx.write(os.path.join(ctx.ws, "old"), b"o" * (6 * MIB))
    run = ctx.run(["print('ok')", write_mib("new", 1) + WAIT_FOR_KILL],
                  args=("--workspace-size", SIZE), expect_rc=1)
    assert run.recs[0]["output"] == "ok\n", brief(run.recs[0])
    assert_killed(run.recs[1], "past the 6.1 MiB it already held over its "
                  "size (4 MiB, --workspace-size)")


def leftover(kind, mark):
    """A cell leaving a writer behind (a thread of the worker's, or a
    child), and a later cell that says whether a marked process is left."""
    if kind == "thread":
        start = ("import threading\n"
                 "def _w():\n" + "".join("    " + line + "\n" for line in
                                         fill("t").splitlines()) +
                 "threading.Thread(target=_w, daemon=True).start()\n")
    else:
        start = ("import subprocess\n"
                 "subprocess.Popen(['timeout', '-s', 'KILL', '60', 'sh', "
                 "'-c', 'i=0; while [ $i -lt %d ]; do head -c %d /dev/zero "
                 "> t$i; i=$((i+1)); done', %r])\n" % (FILES_MAX, MIB, mark))
    left = ("import os\n"
            "_n = 0\n"
            "for _d in os.listdir('/proc'):\n"
            "    try:\n"
            "        with open('/proc/%%s/cmdline' %% _d, 'rb') as _f:\n"
            "            _n += %r in _f.read()\n"
            "    except OSError:\n"
            "        pass\n"
            "print('left', _n)\n" % (mark.encode(),))
    return start + "print('started')\n", left


@pytest.mark.parametrize("kind", ["thread", "child"])
def test_a_leftover_writing_between_cells_is_stopped(ctx, kind):
    start, left = leftover(kind, ctx.marker())
    run = ctx.run([start, WAIT_FOR_KILL, left],
                  args=("--workspace-size", SIZE), expect_rc=1)
    assert run.recs[0]["output"] == "started\n", brief(run.recs[0])
    # the growth is the leftover's; the cell running at the walk goes with
    # the worker's tree (had it ended, the tree between cells)
    assert_killed(run.recs[1])
    assert run.recs[2]["output"] == "left 0\n", brief(run.recs[2])
    assert len(files_in(ctx.ws, "t")) < FILES_MAX


@pytest.fixture
def own_fs(ctx):
    """The workspace on a filesystem of the test's own (a 256 MiB tmpfs,
    root only): what a walk cannot measure is judged by what its
    filesystem loses, which the other tests' writes must not reach."""
    if not IS_ROOT:
        pytest.skip("mounting the test's own filesystem needs root")
    d = ctx.visible_dir("agentz-wsfs-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,mode=0755",
                    "agentz-wsfs", d], check=True)
    try:
        ws = ctx.mkdir(os.path.join(d, "ws"))
        yield ws
    finally:
        subprocess.run(["umount", "-l", d], check=False)


def test_a_tree_too_deep_to_walk_may_not_grow_and_can_be_removed(ctx,
                                                                 own_fs):
    """Deeper than the walk goes (an open folder a level): what the
    filesystem loses counts instead, so a cell filling the deep folder is
    killed; removing the tree needs no walk, and then walks count again."""
    deep = ("import os\n"
            "os.makedirs('/'.join(['d'] * 300))\n"
            "os.chdir('/'.join(['d'] * 300))\n" + fill("x"))
    remove = "import shutil\nshutil.rmtree('d')\nprint('removed')\n"
    run = ctx.run([deep, remove, fill("f")], args=("--workspace-size", SIZE),
                  expect_rc=1, cwd=own_fs)
    assert_killed(run.recs[0], "a walk cannot measure it, 'd' in it: more "
                  "than 256 folders deep), over its size (4 MiB, "
                  "--workspace-size)")
    assert run.recs[1]["output"] == "removed\n", brief(run.recs[1])
    assert_killed(run.recs[2])
    assert len(files_in(own_fs, "f")) < FILES_MAX


def test_a_folder_made_unreadable_is_counted_all_the_same(ctx):
    """A plain user's supervisor has no DAC override: the folder gets its
    owner's read and search bits back and is walked (root reads it)."""
    hide = ("import os\n"
            "os.mkdir('hid')\n" + write_mib("hid/a", 3) +
            "os.chmod('hid', 0)\n" + fill("f"))
    run = ctx.run([hide, "print('ok')"], args=("--workspace-size", SIZE),
                  expect_rc=1)
    assert_killed(run.recs[0])
    assert len(files_in(ctx.ws, "f")) < FILES_MAX - 3
    assert run.recs[1]["output"] == "ok\n", brief(run.recs[1])
    if ctx.who.name == "user":
        assert os.stat(os.path.join(ctx.ws, "hid")).st_mode & 0o777 == 0o500


def test_hard_links_count_once(ctx):
    links = (write_mib("one", 3) + "import os\n"
             "for _i in range(20):\n"
             "    os.link('one', 'link%d' % _i)\n"
             "print('ok')\n")
    run = ctx.run([links, "print('ok')"], args=("--workspace-size", SIZE))
    assert [r["output"] for r in run.recs] == ["ok\n", "ok\n"], run


def test_bad_sizes_are_refused_with_the_value(ctx):
    for val, why in (("12x", "invalid --workspace-size '12x'"),
                     ("1K", "invalid --workspace-size '1K'")):
        rc, out, err = ctx.run_raw(["--workspace-size", val, "-"],
                                   "print(1)\n")
        assert rc == 2, (val, rc, err)
        assert why in err, (val, err)
    # 0: no bound
    run = ctx.run([write_mib("a", 5) + "print('ok')\n"],
                  args=("--workspace-size", "0"))
    assert run.recs[0]["output"] == "ok\n", brief(run.recs[0])


def test_an_agent_is_told_and_makes_room(ctx):
    room = ("import os\n"
            "for _n in os.listdir('.'):\n"
            "    if _n.startswith('f'):\n"
            "        os.unlink(_n)\n"
            "call_me(input='ROOM-MADE')\n")
    script = (turns(fill("f") + "call_me(input='NOT-HERE')\n",
                     "Submit the first Python cell") +
              turns(room, "over its size (4 MiB, --workspace-size)") +
              turns("quit()\n", "ROOM-MADE"))
    with ModelServer(script) as srv:
        p, f = ctx.start([ctx.agentz, "--json", "--base-url", srv.base_url,
                          "--max-retries", "0", "--workspace-size", SIZE,
                          "Fill the workspace."])
        try:
            out, err = ctx.communicate(p, RUN_TIMEOUT)
        finally:
            f.close()
    assert p.returncode == 0, err[-3000:]
    ends = cell_ends(out)
    assert sorted(ends) == [0, 1, 2, 3], (sorted(ends), err[-2000:])
    assert_killed(ends[1])
    assert ends[2]["status"] == "ok", brief(ends[2])
    assert files_in(ctx.ws, "f") == []
