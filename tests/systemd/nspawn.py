"""A booted systemd for tests: a Debian 12 root from scripts/systemd-root,
booted with `systemd-nspawn -b` in cgroups of its own (the pieces of
tests/integ/test_systemd_boot.py, shared), with agentz put in by
`make install DESTDIR=ROOT`.

    root = new_root()
    make_install(root)                    # the build in $AGENTZ_BUILD
    ct = Container(root, machine, log)
    ct.boot(); ct.run(["systemctl", ...]); ct.stop()
    remove_root(root)

Every wait is bounded; Container.stop() kills the container, whatever is
left in its cgroups and the cgroups; remove_root() unmounts and removes
the copy. Names are unique, so two runs can overlap.
"""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integ"))

from agentz_util import BUILD, ROOT  # noqa: E402

SYSTEMD_ROOT = os.path.join(ROOT, "scripts", "systemd-root")

# Bounds (seconds), against a hang, not measurements. scripts/systemd-root
# runs debootstrap the first time (about a minute alone; over 150 s in a
# fresh root beside make integ's parallel workers, seen); afterwards it
# unpacks a tarball (0.5-5 s). The boot takes under a second.
ROOT_TIMEOUT = 900
BOOT_TIMEOUT = 30
INSTALL_TIMEOUT = 60


def run(args, timeout):
    return subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


# -- cgroups: each container in groups of its own ---------------------------

def _own_cgroups(tag):
    """Creates a new group below ours in the hierarchies systemd-nspawn
    uses (name=systemd, the cgroup2 at unified, or a pure cgroup2), so
    its payload/ and supervisor/ subgroups cannot meet another run's and
    everything it starts can be killed together. Returns the paths."""
    mine = {}
    for line in open("/proc/self/cgroup"):
        _, ctl, path = line.rstrip("\n").split(":", 2)
        mine[ctl] = path
    fstype = {}
    for line in open("/proc/self/mounts"):
        f = line.split()
        fstype[f[1]] = f[2]
    wanted = []
    if fstype.get("/sys/fs/cgroup") == "cgroup2":
        wanted.append(("/sys/fs/cgroup", mine.get("")))
    else:
        if fstype.get("/sys/fs/cgroup/systemd") == "cgroup":
            wanted.append(("/sys/fs/cgroup/systemd", mine.get("name=systemd")))
        if fstype.get("/sys/fs/cgroup/unified") == "cgroup2":
            wanted.append(("/sys/fs/cgroup/unified", mine.get("")))
    if not wanted:
        pytest.fail("no cgroup hierarchy systemd-nspawn can use under "
                    "/sys/fs/cgroup (mounts: %r)" % sorted(
                        k for k in fstype if k.startswith("/sys/fs/cgroup")))
    made = []
    for mnt, path in wanted:
        if path is None:
            pytest.fail("/proc/self/cgroup names no group of ours in %s"
                        % mnt)
        d = os.path.join(mnt + path.rstrip("/"), tag)
        try:
            os.mkdir(d)
        except OSError as e:
            _remove_cgroups(made)
            pytest.fail("cannot create the container's cgroup %s: %s" % (d, e))
        made.append(d)
    return made


def _cgroup_pids(d):
    pids = set()
    for sub, _, files in os.walk(d):
        if "cgroup.procs" in files:
            try:
                pids.update(int(x) for x in open(os.path.join(sub,
                                                              "cgroup.procs")))
            except OSError:
                pass
    return pids


def _remove_cgroups(dirs):
    """Kills whatever is left in the groups, then removes them (bounded)."""
    deadline = time.monotonic() + 10
    for d in dirs:
        kill = os.path.join(d, "cgroup.kill")
        while os.path.isdir(d):
            if os.path.exists(kill):
                try:
                    open(kill, "w").write("1")
                except OSError:
                    pass
            for pid in _cgroup_pids(d):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass
            if not os.path.isdir(d) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    left = [d for d in dirs if os.path.isdir(d)]
    assert not left, "cgroups left behind: %r" % left


# -- the container --------------------------------------------------------

def _children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            out += open("/proc/%d/task/%s/children" % (pid, t)).read().split()
    except OSError:
        pass
    return [int(p) for p in out]


def _comm(pid):
    try:
        return open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        return None


class Container:
    """A root booted with systemd-nspawn -b, in cgroups of its own."""

    def __init__(self, root, machine, log):
        self.root, self.machine, self.log = root, machine, log
        self.cgroups = _own_cgroups("agentz-" + machine)
        self.proc = None
        self.init = None

    def boot(self):
        # The shell moves itself into the new groups, then becomes nspawn.
        move = 'for g in $AGENTZ_CGROUPS; do echo $$ > "$g/cgroup.procs"; ' \
               'done; exec "$@"'
        env = dict(os.environ, AGENTZ_CGROUPS=" ".join(self.cgroups))
        self.logf = open(self.log, "wb")
        self.proc = subprocess.Popen(
            ["/bin/sh", "-ec", move, "sh", "systemd-nspawn", "--quiet",
             "--register=no", "--keep-unit", "--link-journal=no",
             "--console=read-only", "-M", self.machine, "-D", self.root,
             # nspawn 252's own filter refuses Landlock (EPERM), which a
             # host's systemd does not: let the unit's filter decide.
             "--system-call-filter=landlock_create_ruleset "
             "landlock_add_rule landlock_restrict_self", "-b"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.logf,
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + BOOT_TIMEOUT
        # The container's init: the child of nspawn that became systemd
        # in a PID namespace other than ours.
        myns = os.readlink("/proc/self/ns/pid")
        while self.init is None:
            if self.proc.poll() is not None:
                pytest.fail("systemd-nspawn exited with %s before the "
                            "container's systemd started:\n%s"
                            % (self.proc.returncode, self.log_tail()))
            for c in _children(self.proc.pid):
                try:
                    ns = os.readlink("/proc/%d/ns/pid" % c)
                except OSError:
                    continue
                if _comm(c) == "systemd" and ns != myns:
                    self.init = c
            if self.init is None:
                if time.monotonic() > deadline:
                    pytest.fail("no container init after %d s:\n%s"
                                % (BOOT_TIMEOUT, self.log_tail()))
                time.sleep(0.05)
        # Then its manager: is-system-running --wait returns once the boot
        # is done; before the manager listens it fails at once ("offline":
        # systemctl found no manager to ask; seen early in a boot with both
        # cores busy), so retry until the deadline.
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail("the container's systemd did not finish booting "
                            "in %d s:\n%s" % (BOOT_TIMEOUT, self.log_tail()))
            try:
                p = self.run(["systemctl", "is-system-running", "--wait"],
                             timeout=left)
            except subprocess.TimeoutExpired:
                continue
            state = p.stdout.strip()
            if state in ("running", "degraded"):
                self.state = state
                return
            if state == "stopping" or \
                    self.proc.poll() is not None:
                pytest.fail("the container's systemd is %r:\n%s"
                            % (state or p.stderr, self.log_tail()))
            time.sleep(0.1)

    def run(self, args, timeout=30):
        """Runs a command in the container's namespaces, as its root."""
        return run(["nsenter", "-t", str(self.init), "-m", "-u", "-i", "-n",
                     "-p", "-C", "-r", "-w", "--"] + args, timeout)

    def log_tail(self, n=40):
        try:
            lines = open(self.log, errors="replace").read().splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def stop(self):
        """Kills the container (its PID namespace dies with its init) and
        nspawn, then anything left in its cgroups, then the cgroups."""
        try:
            if self.init is not None:
                try:
                    os.kill(self.init, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            try:
                _remove_cgroups(self.cgroups)
            finally:
                if self.proc is not None:
                    self.logf.close()
                # nspawn's per-machine folders on a /run that is not tmpfs
                for d in ("propagate", "unix-export"):
                    p = os.path.join("/run/systemd/nspawn", d, self.machine)
                    if os.path.isdir(p) and not os.path.ismount(p):
                        shutil.rmtree(p, ignore_errors=True)


def _mounts_under(path):
    path = os.path.realpath(path)
    out = []
    for line in open("/proc/self/mountinfo"):
        mp = line.split()[4].replace("\\040", " ")
        if mp == path or mp.startswith(path + "/"):
            out.append(mp)
    return out


def new_root():
    try:
        p = run([SYSTEMD_ROOT], timeout=ROOT_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail("scripts/systemd-root took over %d s:\n%s"
                    % (ROOT_TIMEOUT, (e.stderr or b"")[-3000:]))
    root = p.stdout.strip()
    if p.returncode != 0 or not os.path.isdir(root):
        pytest.fail("scripts/systemd-root failed (%d):\n%s"
                    % (p.returncode, p.stderr[-3000:]))
    return root


def remove_root(root):
    left = _mounts_under(root)
    for mp in sorted(left, key=len, reverse=True):
        subprocess.run(["umount", mp], capture_output=True, timeout=10)
    left = _mounts_under(root)
    assert not left, "still mounted under %s (not removed): %r" % (root, left)
    shutil.rmtree(root)


def machine_name():
    return "agentz-%d-%s" % (os.getpid(), secrets.token_hex(4))


def make_install(root, build=BUILD):
    """`make install DESTDIR=root` from a copy of the build (the build
    folder may be rewritten while the tests run; `-o all` installs what is
    built without remaking it). Checks the root has every library the
    binaries need."""
    snap = tempfile.mkdtemp(prefix="agentz-install-")
    try:
        for b in ("agentz", "agentz-worker"):
            shutil.copy2(os.path.join(build, b), snap)
        p = run(["make", "-C", ROOT, "-s", "-o", "all", "install",
                 "O=" + snap, "DESTDIR=" + root], timeout=INSTALL_TIMEOUT)
        assert p.returncode == 0, "make install DESTDIR=%s failed:\n%s%s" % (
            root, p.stdout, p.stderr)
    finally:
        shutil.rmtree(snap, ignore_errors=True)
    for b in ("agentz", "agentz-worker"):
        assert os.path.exists(os.path.join(root, "usr/local/bin", b)), b
        p = run(["chroot", root, "ldd", "/usr/local/bin/" + b], timeout=30)
        missing = [ln for ln in p.stdout.splitlines() if "not found" in ln]
        assert p.returncode == 0 and not missing, \
            "%s in the root: %s%s (add the package to scripts/systemd-root)" \
            % (b, p.stderr, missing)
    assert os.path.exists(os.path.join(root,
                                       "etc/systemd/system/agentz@.service"))


def unit_pids(ct, unit):
    """Host pids of every process in the container's cgroups for UNIT
    (its group and the groups below it, in every hierarchy)."""
    pids = set()
    for d in ct.cgroups:
        for sub, ds, _ in os.walk(d):
            if os.path.basename(sub) == unit:
                pids |= _cgroup_pids(sub)
    return pids


def host_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
