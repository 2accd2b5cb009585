"""agentz's image (make image) under rootful Podman (issue 24, item 2):
what holds under the runtime's defaults (no view: seccomp, rlimits and a
Landlock domain that keeps the cells to what the view would show), said
where the operator and the cell look; and with /proc unmasked (the one setting the full world needs
under Podman 4.3's default seccomp profile and capabilities) the world
holds inside the container as on the host: the view, the network, no
set-id bits, nothing of the state folder but the workspace.

Run by `make check-container` (root, Podman, the image), never by make
check. Podman is run as this machine needs it: runc (crun refuses the
hybrid cgroup layout), cgroupfs, and ulimits within this machine's hard
limits (Podman's defaults exceed them). Every container has a unique name
and is removed (`podman rm -f`) whatever the test did; the state volume
is a folder of the test's own.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integ"))

from agentz_util import BUILD  # noqa: E402

IMAGE_TAR = os.path.join(BUILD, "agentz-image.tar")
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
STATE = "/var/lib/agentz"
TIMEOUT = 120
VIEW = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
        "sbin", "tmp", "usr", "var"}

if os.geteuid() != 0 or shutil.which("podman") is None:
    pytest.skip("needs root and podman (make check-container)",
                allow_module_level=True)


# Podman's default RLIMIT_NOFILE and RLIMIT_NPROC are above what runc may
# set here (seen: "error setting rlimit type 6: operation not permitted"
# for 65536 processes under a hard limit of 96367); 4096 each is taken.
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


@pytest.fixture(scope="module")
def image():
    p = subprocess.run(PODMAN + ["load", "-i", IMAGE_TAR],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    m = re.search(r"Loaded image(?:\(s\))?: (\S+)", p.stdout + p.stderr)
    assert m, p.stdout + p.stderr
    return m.group(1)


@pytest.fixture
def state():
    """The state volume: a folder of the test's own, owned by the image's
    user, with the workspace in it and a secret beside it."""
    d = tempfile.mkdtemp(prefix="agentz-ct-state-", dir="/var/tmp")
    os.makedirs(os.path.join(d, "workspace"))
    with open(os.path.join(d, "beside"), "w") as f:
        f.write("not for cells\n")
    for p in (d, os.path.join(d, "workspace"), os.path.join(d, "beside")):
        os.chown(p, 1000, 1000)
    os.chmod(d, 0o750)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(image, state, args, cells, opts=()):
    name = "agentz-test-" + uuid.uuid4().hex[:12]
    cmd = PODMAN + ["run", "--rm", "-i", "--name", name, *ULIMITS, *opts,
                    "-v", "%s:%s" % (state, STATE), image, *args]
    try:
        p = subprocess.run(cmd, input="\n# %%\n".join(cells) + "\n",
                           capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        subprocess.run(PODMAN + ["rm", "-f", name], capture_output=True,
                       timeout=TIMEOUT)
    recs = [json.loads(line) for line in p.stdout.splitlines()
            if line.startswith("{")]
    return p, recs


PROBE = r'''
import errno, json, os, socket
def _err(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def _connect():
    socket.create_connection(("192.0.2.1", 53), timeout=5).close()
def _root():
    try:
        return sorted(os.listdir("/"))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def _setuid():
    open("f", "w").close()
    os.chmod("f", 0o4755)
print(json.dumps({
    "uid": os.getuid(),
    "root": _root(),
    "beside": _err(lambda: open("%s/beside" % os.path.dirname(os.getcwd()))),
    "connect": _err(_connect),
    "setuid": _err(_setuid),
    "cwd": os.getcwd(),
}))
'''


def probe(rec):
    assert rec["status"] == "ok", rec
    return json.loads(rec["output"])


def test_the_runtimes_defaults_run_cells_and_say_what_holds(image, state):
    p, recs = run(image, state, ["exec", "--json", "-"], [PROBE])
    assert p.returncode == 0, p.stderr
    # said at the start, and in the record: Landlock instead of the view
    assert "isolation incomplete: landlock=7 (no view: cannot build the " \
        "worker's view: mount /proc /proc: Operation not permitted; files " \
        "outside what it would show are out of reach)" in p.stderr, p.stderr
    w = recs[0]["worker"]
    assert w["isolation"].startswith("landlock=7 (no view: cannot build "
                                     "the worker's view"), w
    assert w["network"] == "host", w
    assert "seccomp=default" in w["sandbox"], w
    got = probe(recs[0])
    assert got["uid"] == 1000 and got["cwd"] == STATE + "/workspace", got
    assert got["setuid"] == "EPERM", got      # seccomp holds without a view
    assert got["beside"] == "EACCES", got     # Landlock: only the workspace
    assert got["root"] == "EACCES", got       # and what the view would show
    # --isolation required refuses to start, and says why
    p, recs = run(image, state, ["exec", "--json", "--isolation", "required",
                                 "-"], ["print(1)"])
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "isolation required but unavailable" in p.stderr, p.stderr
    assert recs == []


def test_with_proc_unmasked_the_world_holds_in_the_container(image, state):
    p, recs = run(image, state, ["exec", "--json", "-"], [PROBE, "print(2)"],
                  opts=["--security-opt", "unmask=/proc/*"])
    assert p.returncode == 0, p.stderr
    assert "isolation incomplete" not in p.stderr, p.stderr
    w = recs[0]["worker"]
    for part in ("mountns", "pidns", "view", "netns", "landlock"):
        assert part in w["isolation"].split(",") or \
            w["isolation"].startswith(part) or \
            any(x.startswith(part) for x in w["isolation"].split(",")), w
    assert w["network"] == "none", w
    got = probe(recs[0])
    assert set(got["root"]) <= VIEW, got
    assert got["beside"] == "ENOENT", got       # the state folder: only
    assert got["connect"] == "ENETUNREACH", got  # the workspace; only lo
    assert got["setuid"] == "EPERM", got
    assert recs[1]["output"] == "2\n", recs[1]


# --- a killed container resumes from its volume ---------------------------

HANG = "print('{marker}', flush=True)\nimport time\ntime.sleep(3600)\n"


def _turn(match, code):
    return [{"match": match, "next_cell": {"code": code, "summary": "s"}},
            {"text": "ok"}]


def _agent(image, state, srv, name, *args):
    """agentz in a container on the host's network (the test model server
    listens on its 127.0.0.1), journal and workspace in the volume."""
    return subprocess.Popen(
        PODMAN + ["run", "--rm", "--name", name, *ULIMITS, "--network",
                  "host", "--security-opt", "unmask=/proc/*", "-v",
                  "%s:%s" % (state, STATE), image, "--base-url",
                  srv.base_url, "--journal", STATE + "/journal.jsonl",
                  "--max-retries", "0", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_a_killed_container_resumes_from_its_volume(image, state):
    from model_server import ModelServer

    name = "agentz-test-" + uuid.uuid4().hex[:12]
    first = ("open('done-once', 'a').write('x')\n" +
             HANG.format(marker="MID-CELL"))
    try:
        with ModelServer(_turn("Submit the first Python cell", first)) as srv:
            p = _agent(image, state, srv, name, "the task")
            try:
                for line in p.stdout:       # ends at the marker or EOF
                    if "MID-CELL" in line:
                        break
                else:
                    pytest.fail("no MID-CELL: %s" % p.stderr.read())
                k = subprocess.run(PODMAN + ["kill", name],
                                   capture_output=True, text=True,
                                   timeout=TIMEOUT)
                assert k.returncode == 0, k.stderr
                p.wait(timeout=TIMEOUT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        repair = "print('went on')\nquit()\n"
        with ModelServer(_turn("Repair the failed cell", repair)) as srv:
            p = _agent(image, state, srv, name, "--resume")
            out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
        assert "went on" in out, (out, err)
    finally:
        subprocess.run(PODMAN + ["rm", "-f", name], capture_output=True,
                       timeout=TIMEOUT)
    # the killed cell ran once; its record came with the resume, and the
    # run ended by quit()
    assert open(os.path.join(state, "workspace", "done-once")).read() == "x"
    recs = [json.loads(line) for line in
            open(os.path.join(state, "journal.jsonl"))]
    kinds = [(r["type"], r.get("cell")) for r in recs]
    assert ("output", 0) in kinds and ("resume", None) in kinds, kinds
    assert kinds[-1] == ("stop", None) and recs[-1]["exit"] == 0, recs[-1]
    # cell 0 asks for the first cell, 1 was killed, 2 repaired it
    outs = {r["cell"]: r for r in recs if r["type"] == "output"}
    assert sorted(outs) == [0, 1, 2], kinds
    assert outs[1]["kind"] == "restart", outs[1]
