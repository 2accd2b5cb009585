"""The worker's seccomp profiles, probed from outside (SPEC section 7).

tests/try_syscall applies a profile to itself, then makes each named call
with arguments the kernel rejects, and prints "NAME errno=ENAME".  Allowed
calls therefore show the kernel's answer (EBADF, EFAULT, EINVAL, ENOENT or
0) and filtered ones the policy's (EPERM, ENOSYS, EAFNOSUPPORT).  The "off"
column is what the kernel says when run as root; it proves each probe can
tell the two apart.  Without root a few kernel answers become EPERM
themselves (ROOT_ONLY_OFF): those are then not checked in "off", and their
EPERM in the other profiles proves less.

Safety: every kill-style probe sends signal 0, so even a broken filter can
only ask whether the protected `sleep` exists; the test still checks that it
survived.  The x32 probe kills its own process and is run alone.
"""
import json
import os
import platform
import signal
import subprocess

import pytest

BUILD = os.environ.get("AGENTZ_BUILD", "/work/main/build")
TRY = os.path.join(BUILD, "tests", "try_syscall")
SECCOMP_EXIT = 159  # WEXIT_SECCOMP in proto/proto.h

OK = "0"
# Whether open_tree_attr (Linux 6.15) exists decides the kernel's answer.
OLD_OR_NEW = frozenset({"EINVAL", "ENOSYS"})

# probe: (off, default, strict)
EXPECT = {
    # other processes' memory and descriptors
    "ptrace": ("ESRCH", "EPERM", "EPERM"),
    "stacked_ptrace": ("ESRCH", "EPERM", "EPERM"),
    "process_vm_readv": ("EINVAL", "EPERM", "EPERM"),
    "pidfd_getfd": ("EBADF", "EPERM", "EPERM"),
    # mounts and namespaces
    "mount": ("EFAULT", "EPERM", "EPERM"),
    "umount2": ("EINVAL", "EPERM", "EPERM"),
    "pivot_root": ("EFAULT", "EPERM", "EPERM"),
    "chroot": ("ENOENT", "EPERM", "EPERM"),
    "unshare_user": ("EINVAL", "EPERM", "EPERM"),
    "setns": ("EBADF", "EPERM", "EPERM"),
    "clone_newuser": ("EINVAL", "EPERM", "EPERM"),
    "clone3": ("EINVAL", "ENOSYS", "ENOSYS"),
    "open_tree": ("EINVAL", "ENOSYS", "ENOSYS"),
    "fsopen": ("EINVAL", "ENOSYS", "ENOSYS"),
    "open_tree_attr": (OLD_OR_NEW, "ENOSYS", "ENOSYS"),
    # kernel attack surface and whole-system state
    "bpf": ("EINVAL", "EPERM", "EPERM"),
    "perf_event_open": ("EFAULT", "EPERM", "EPERM"),
    "keyctl": ("EOPNOTSUPP", "EPERM", "EPERM"),
    "add_key": ("EFAULT", "EPERM", "EPERM"),
    "io_uring_setup": ("EFAULT", "EPERM", "EPERM"),
    "userfaultfd": ("EINVAL", "EPERM", "EPERM"),
    "userfaultfd_dev": ("EBADF", "EPERM", "EPERM"),
    "syslog": ("EINVAL", "EPERM", "EPERM"),
    "clock_settime": ("EINVAL", "EPERM", "EPERM"),
    "mbind": ("EINVAL", "EPERM", "EPERM"),
    # terminal injection, including garbage in the high 32 bits
    "tiocsti": ("EBADF", "EPERM", "EPERM"),
    "tiocsti_highbits": ("EBADF", "EPERM", "EPERM"),
    "tioclinux": ("EBADF", "EPERM", "EPERM"),
    "ioctl_tcgets": ("EBADF", "EBADF", "EBADF"),
    "ioctl_other": ("EBADF", "EBADF", "ENOSYS"),
    # personality: only PER_LINUX and the query
    "personality_rie": (OK, "EPERM", "EPERM"),
    "personality_highbits": (OK, "EPERM", "EPERM"),
    "personality_bit31": (OK, "EPERM", "EPERM"),
    "personality_wrap": (OK, "EPERM", "EPERM"),
    "personality_query": (OK, OK, OK),
    "personality_linux": (OK, OK, OK),
    # the supervisor (signal 0 only)
    "kill_protect": (OK, "EPERM", "EPERM"),
    "kill_protect_highbits": (OK, "EPERM", "EPERM"),
    "kill_minus1": (OK, "EPERM", "EPERM"),
    "killpg_protect": (OK, "EPERM", "EPERM"),
    "kill_self": (OK, OK, OK),
    "kill_group": (OK, OK, OK),
    "tgkill_protect": (OK, "EPERM", "EPERM"),
    "tkill_protect": (OK, "EPERM", "EPERM"),
    "sigqueue_protect": ("EFAULT", "EPERM", "EPERM"),
    "pidfd_open_protect": (OK, "EPERM", "EPERM"),
    "pidfd_send_signal": ("EBADF", "EPERM", "EPERM"),
    "prlimit_protect": (OK, "EPERM", "EPERM"),
    "prlimit_self": (OK, OK, OK),
    "sched_setaffinity_protect": ("EFAULT", "EPERM", "EPERM"),
    # network: default allows it, strict keeps AF_UNIX streams only
    "socket_inet": (OK, OK, "EAFNOSUPPORT"),
    "socket_inet6": (OK, OK, "EAFNOSUPPORT"),
    "socket_netlink": (OK, OK, "EAFNOSUPPORT"),
    "socket_packet": (OK, OK, "EAFNOSUPPORT"),
    "socket_unix": (OK, OK, OK),
    "socket_unix_dgram": (OK, OK, "EPERM"),
    "socket_unix_highbits": (OK, OK, "EAFNOSUPPORT"),
    "socketpair_unix": (OK, OK, OK),
    "socketpair_dgram": (OK, OK, "EPERM"),
    "socketpair_inet": ("EOPNOTSUPP", "EOPNOTSUPP", "EAFNOSUPPORT"),
    "connect_unix": ("EBADF", "EBADF", "EPERM"),
    "bind_unix": ("EBADF", "EBADF", "EPERM"),
    "listen": ("EBADF", "EBADF", "EPERM"),
    "accept": ("EBADF", "EBADF", "EPERM"),
    # programs and processes: default allows them, strict keeps threads
    "execve": ("ENOENT", "ENOENT", "EPERM"),
    "execveat": ("EBADF", "EBADF", "EPERM"),
    "fork": (OK, OK, "EPERM"),
    "vfork": (OK, OK, "EPERM"),
    "spawn": ("ENOENT", "ENOENT", "EPERM"),
    "thread": (OK, OK, OK),
    # what CPython needs everywhere
    "getrandom": (OK, OK, OK),
    "mmap": (OK, OK, OK),
    "openat": ("ENOENT", "ENOENT", "ENOENT"),
    "prctl_name": (OK, OK, OK),
    "prctl_unknown": ("EINVAL", "EINVAL", "ENOSYS"),
    "unlisted": ("EINVAL", "EINVAL", "ENOSYS"),
    # no set-id mode and no xattr (file capabilities) from a cell; plain
    # modes stay allowed (issue 18 section 5)
    "chmod_plain": ("ENOENT", "ENOENT", "ENOENT"),
    "chmod_setuid": ("ENOENT", "EPERM", "EPERM"),
    "chmod_setgid": ("ENOENT", "EPERM", "EPERM"),
    "chmod_setuid_highbits": ("ENOENT", "EPERM", "EPERM"),
    "fchmod_setuid": ("EBADF", "EPERM", "EPERM"),
    "fchmodat_setgid": ("ENOENT", "EPERM", "EPERM"),
    "fchmodat2_setuid": (frozenset({"ENOENT", "ENOSYS"}), "EPERM", "EPERM"),
    "mknod_setuid": ("ENOENT", "EPERM", "EPERM"),
    "mknodat_setgid": ("ENOENT", "EPERM", "EPERM"),
    "open_setuid": ("ENOENT", "EPERM", "EPERM"),
    "openat_setuid": ("ENOENT", "EPERM", "EPERM"),
    "openat_plain": ("ENOENT", "ENOENT", "ENOENT"),
    "creat_setgid": ("ENOENT", "EPERM", "EPERM"),
    "mkdir_setgid": ("ENOENT", "EPERM", "EPERM"),
    "mkdirat_setuid": ("ENOENT", "EPERM", "EPERM"),
    "mkdir_plain": ("ENOENT", "ENOENT", "ENOENT"),
    "openat2": ("EINVAL", "ENOSYS", "ENOSYS"),
    "setxattr": ("ENOENT", "EOPNOTSUPP", "EOPNOTSUPP"),
    "lsetxattr": ("ENOENT", "EOPNOTSUPP", "EOPNOTSUPP"),
    "fsetxattr": ("EBADF", "EOPNOTSUPP", "EOPNOTSUPP"),
    "setxattrat": (frozenset({"EBADF", "ENOSYS", "EINVAL"}), "EOPNOTSUPP",
                   "EOPNOTSUPP"),
    "getxattr": ("ENOENT", "ENOENT", "ENOENT"),
}
PROFILES = ("off", "default", "strict")
ROOT_ONLY_OFF = {  # kernel answers that change without capabilities
    "bpf", "perf_event_open", "userfaultfd", "mount", "pivot_root",
    "unshare_user", "fsopen", "open_tree", "socket_packet", "syslog",
    "clock_settime", "stacked_ptrace",
}
X86_64 = platform.machine() == "x86_64"


def run(*args, timeout=60):
    return subprocess.run([TRY, *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def parse(stdout):
    got = {}
    for line in stdout.splitlines():
        name, _, value = line.partition(" errno=")
        got[name] = value
    return got


@pytest.fixture(scope="module", autouse=True)
def binary():
    assert os.access(TRY, os.X_OK), \
        f"{TRY} missing: make O=<build> <build>/tests/try_syscall"


@pytest.fixture
def protected():
    """A process standing in for the supervisor, in its own session."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield proc
        assert proc.poll() is None, "the protected process died"
    finally:
        proc.kill()
        proc.wait()


def matches(want, got):
    return got in want if isinstance(want, frozenset) else got == want


@pytest.mark.parametrize("profile", PROFILES)
def test_profile(profile, protected):
    column = PROFILES.index(profile)
    r = run("--protect-pid", str(protected.pid),
            "--protect-pgid", str(protected.pid), profile, *EXPECT)
    assert r.returncode == 0, r.stderr
    got = parse(r.stdout)
    wrong = []
    for probe, want in EXPECT.items():
        want = want[column]
        if profile == "off" and probe in ROOT_ONLY_OFF and os.geteuid():
            continue
        if not matches(want, got.get(probe)):
            wrong.append(f"{probe}: want {want}, got {got.get(probe)}")
    assert not wrong, f"{profile}:\n  " + "\n  ".join(wrong)
    assert protected.poll() is None, "the protected process died"


def test_every_probe_has_expectations():
    r = run()
    assert r.returncode == 2
    listed = set(r.stderr.split("probes:", 1)[1].split())
    assert listed - {"x32"} == set(EXPECT)


def test_kill_zero_denied_while_sharing_the_supervisors_group(protected):
    # try_syscall inherits our process group: name it the supervisor's.
    r = run("--protect-pid", str(protected.pid),
            "--protect-pgid", str(os.getpgrp()), "default",
            "kill_group", "kill_self", "killpg_protect", "kill_protect")
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout) == {"kill_group": "EPERM", "kill_self": OK,
                               "killpg_protect": "EPERM",
                               "kill_protect": "EPERM"}


@pytest.mark.parametrize("profile,probe,name", [
    ("default", "ptrace", "ptrace"),
    ("default", "kill_minus1", "kill"),
    ("default", "personality_bit31", "personality"),
    ("strict", "socket_inet", "socket"),
    ("strict", "unlisted", "shmget"),
    ("strict", "execve", "execve"),
])
def test_debug_names_the_blocked_syscall(profile, probe, name):
    r = run("--debug", profile, "thread", "clone3", probe, "getrandom")
    assert r.returncode == SECCOMP_EXIT, (r.returncode, r.stderr)
    # clone3 still answers ENOSYS: glibc probes it on every thread start.
    assert parse(r.stdout) == {"thread": OK, "clone3": "ENOSYS"}
    assert f"agentz-worker: seccomp blocked syscall {name} (" in r.stderr


def test_debug_keeps_allowed_calls_working(protected):
    probes = [p for p, w in EXPECT.items() if w[2] == OK]
    r = run("--debug", "--protect-pid", str(protected.pid), "strict", *probes)
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout) == {p: OK for p in probes}


@pytest.mark.skipif(not X86_64, reason="x32 is an x86_64 ABI")
@pytest.mark.parametrize("profile", PROFILES)
def test_foreign_abi_kills(profile):
    r = run(profile, "x32")
    if profile == "off":
        assert r.returncode == 0  # ENOSYS, or a pid where x32 is built in
        return
    assert r.returncode == -signal.SIGSYS, (r.returncode, r.stderr)
    r = run("--debug", profile, "x32")
    assert r.returncode == SECCOMP_EXIT
    assert "x32 ABI" in r.stderr


def test_bad_usage():
    assert run("bogus", "ptrace").returncode == 2
    assert run("default", "no_such_probe").returncode == 2


WORKLOAD = r"""
import asyncio, ctypes, faulthandler, io, json, mmap, os, signal, socket
import sqlite3, tempfile, threading, zlib
res = []
t = threading.Thread(target=lambda: res.append(sum(range(1000))))
t.start(); t.join()
async def main():
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: 6 * 7)
res.append(asyncio.run(main()))
res.append(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(1))
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "f"), "w").write("x")
    res.append(os.listdir(d))
m = mmap.mmap(-1, 4096); m[:2] = b"ok"; res.append(bytes(m[:2]))
a, b = socket.socketpair(); a.sendall(b"hi"); res.append(b.recv(2))
res.append(sqlite3.connect(":memory:").execute("select 1").fetchone())
res.append(len(zlib.compress(b"x" * 1000)) < 100)
faulthandler.dump_traceback(file=open(os.devnull, "w"))
print(res)
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_python_workload_under_each_profile(profile):
    """Threads, asyncio, ctypes callbacks, mmap, socketpair, sqlite and
    faulthandler work in the real worker under every profile."""
    agentz = os.path.join(BUILD, "agentz")
    p = subprocess.run([agentz, "exec", "--json", "--sandbox", profile, "-"],
                       input=WORKLOAD, capture_output=True, text=True,
                       timeout=120)
    rec = json.loads(p.stdout.splitlines()[0])
    assert rec["status"] == "ok", rec["traceback"]
    assert rec["worker"]["sandbox"].startswith("seccomp=" + profile)
    assert rec["output"] == ("[499500, 42, 2, ['f'], b'ok', b'hi', (1,), "
                             "True]\n")
