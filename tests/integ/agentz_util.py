"""Shared helpers for the integration tests: run the real binaries."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("AGENTZ_BUILD", os.path.join(ROOT, "build"))
# The recorded Responses API streams live in the sibling shared/ folder
# (as the Makefile says); tests that need them fail when it is missing.
FIXTURES = os.environ.get("AGENTZ_FIXTURES", os.path.join(
    ROOT, "..", "shared", "fixtures", "responses"))
AGENTZ = os.path.join(BUILD, "agentz")
WORKER = os.path.join(BUILD, "agentz-worker")
SAN = os.environ.get("AGENTZ_SAN") == "1"


def beside(tmp_path, name="run.jsonl"):
    """A journal path beside tmp_path (a test's workspace), never in it:
    agentz refuses a journal inside the workspace, which cells can write."""
    d = tmp_path.parent / (tmp_path.name + "-journal")
    d.mkdir(exist_ok=True)
    return d / name


# A cell asking the model once: RESULT <text>, or MODELERROR <why>; quit().
PROBE = """
    try:
        r = call_me(input='PROBE-REQ')
        print('RESULT', r.output_text)
    except ModelError as e:
        print('MODELERROR', e)
    quit()
    """

# Cell code defining count_marked(mark): processes whose command line or
# environment holds mark, as the cell sees /proc.
COUNT_MARKED = r'''
import os
def count_marked(mark):
    n = 0
    for d in os.listdir('/proc'):
        if d.isdigit():
            for what in ('cmdline', 'environ'):
                try:
                    with open('/proc/%s/%s' % (d, what), 'rb') as f:
                        if mark.encode() in f.read():
                            n += 1
                            break
                except OSError:
                    pass
    return n
'''

def status_kb(pid, field):
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM), 0 if absent."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_file(path, proc, timeout):
    """Polls for the file a cell creates to say it got there: True once it
    exists, False when proc exited or timeout seconds passed first."""
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def run(args, stdin=None, env=None, timeout=60, **kw):
    """Run the agentz binary; returns CompletedProcess with text output."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([AGENTZ] + list(args), input=stdin, env=full_env,
                          capture_output=True, timeout=timeout, text=True, **kw)


def cells(*codes):
    """Join cell sources into the stdin form separated by '# %%' lines."""
    return "\n# %%\n".join(codes) + "\n"


def exec_json(*codes, args=(), env=None, timeout=60):
    """Run codes as cells via `agentz exec --json -`; returns (records, proc)."""
    p = run(["exec", "--json", *args, "-"], stdin=cells(*codes), env=env,
            timeout=timeout)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return recs, p


@contextlib.contextmanager
def binaries_for_any_user():
    """Copies of agentz and agentz-worker that any user can reach and run
    (the build folder may sit under a 0700 home such as /root); yields the
    path of the copy of agentz."""
    d = tempfile.mkdtemp(prefix="agentz-bin-")
    try:
        os.chmod(d, 0o755)
        for name in ("agentz", "agentz-worker"):
            shutil.copy2(os.path.join(BUILD, name), d)
        yield os.path.join(d, "agentz")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def new_marker():
    """A unique word to find a test's processes by (12 chars: fits in
    comm)."""
    return "hz" + uuid.uuid4().hex[:10]


def read_proc(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def marked_processes(marker):
    """Live (non-zombie) host processes whose cmdline, comm or environ
    holds marker: {pid: (cmdline, state)}."""
    m = marker.encode()
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        base = "/proc/" + d
        if m in read_proc(base + "/cmdline") or \
                m in read_proc(base + "/comm") or \
                m in read_proc(base + "/environ"):
            st = read_proc(base + "/stat")
            state = st.rsplit(b")", 1)[-1].split()[:1]
            if state and state[0] == b"Z":
                continue
            found[int(d)] = (read_proc(base + "/cmdline")[:80], state)
    return found


def kill_marked(marker):
    """Cleanup when containment failed: SIGKILL what still carries marker
    (polled: this is cleanup after the assertions, the kernel reaping)."""
    for _ in range(40):
        left = marked_processes(marker)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def pty_run(argv, cwd, env, cols=100, rows=24, timeout=60):
    """Runs argv on a real pseudo-terminal of rows x cols; returns
    (exit code, everything it wrote, decoded)."""
    import fcntl
    import select
    import struct
    import termios
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols,
                                                       0, 0))
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                         stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1)
        if not r:
            if p.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:         # EIO: the slave side closed
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=30)
    os.close(master)
    return p.returncode, out.decode("utf-8", "replace")
