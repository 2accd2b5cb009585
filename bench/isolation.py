#!/usr/bin/python3
"""What the per-run isolation costs at start-up (issue 8, "Benchmark").

    /usr/bin/python3 bench/isolation.py [BUILD_DIR] [--n N] [--crashes K]
                                        [--no-user]

Figures side by side, medians and p90; never a test. Every agentz figure
is taken with `--isolation required` (the full view: the jail's init as
PID 1 of new mount/PID/IPC/UTS namespaces and a network namespace of its
own, as root a dedicated worker uid and an id-mapped workspace, as a plain
user a user namespace), with `--isolation required --network host` (the
same without the network namespace: the start-up rows only) and with
`--isolation off` (the previous behaviour, no view), as root and, when
this script runs as root, as `nobody` (copies of the binaries in a 0755
folder under /var/tmp, a workspace and HOME owned by nobody; the child
drops to nobody with setgroups([]), setgid, setuid).

Per variant:
  run: one `agentz exec --json -` process with the single cell `x = 1`,
       --n times. Rows:
         start -> ready   time.time() just before Popen -> the cell's
                          started_at (the supervisor dispatches it once
                          the first worker said READY): process start,
                          the jail's set-up (namespaces, init, view) and
                          the first worker's spawn.
         worker spawn     the record's worker.spawn_ready_us (fork ->
                          READY frame); the jail already exists by then.
         start - spawn    the two above subtracted per run: agentz's own
                          start plus, with the view, building the jail.
         whole run        Popen -> exit, incl. the teardown (the init
                          killing the namespace, its PID 1 reaped).
  respawn: runs of `x = 1` then --crashes times (`os.kill(os.getpid(),
       9)`, `x = 1`), until --n respawned workers were seen: each `x = 1`
       after a crash runs in a new worker spawned inside the existing
       jail; its spawn_ready_us is one sample (a crash, then an ok cell:
       never three failures in a row, which would end the run).
References, same machine, same way of timing (Popen -> wait, wall):
  `true` (the floor: fork/exec/wait from Python), `bwrap --unshare-all
  --ro-bind / / --dev /dev --proc /proc true` (Debian's bubblewrap), and
  the same bwrap with the minimal view's binds (an empty root, /usr, the
  /lib* links, the kept /etc entries, /dev, /proc, /tmp: bwrap-min), and
  `unshare --mount --pid --fork --ipc --uts true` (as nobody with
  `--user --map-root-user` in front: no other way to unshare them).
All variants are interleaved, one sample of each per round, in a
shuffled order per round, so drift on a shared machine hits them alike.

Then: isolation cost = required - off (difference of the medians) next to
bwrap's own start-up = bwrap - true, and whether the issue's target is
met: "our full isolation costs no more than bubblewrap's own start-up on
top of today's spawn", i.e. start -> ready(required) - start ->
ready(off) <= bwrap - true, judged per user (root against bwrap run as
root, nobody against bwrap run as nobody).

bwrap missing (Debian package bubblewrap, `scripts/install-deps bench`)
or agentz not built: those rows say so. Exit 0 whenever the figures were
produced, PASS or MISS; 1 if a measurement failed; 2 on bad usage.
"""

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

SYS_PY = "/usr/bin/python3"
if os.path.realpath(sys.executable) != os.path.realpath(SYS_PY) \
        and os.environ.get("AGENTZ_BENCH_REEXEC") != "1":
    os.environ["AGENTZ_BENCH_REEXEC"] = "1"
    os.execv(SYS_PY, [SYS_PY] + sys.argv)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import fmt_us, first_line, kill_group, pct  # noqa: E402

WATCHDOG_S = 300
RUN_TIMEOUT = 30
# Visible in the view (its /tmp is private) and traversable by nobody.
VISIBLE = "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()
BWRAP = ["--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
         "--proc", "/proc", "true"]
UNSHARE = ["--mount", "--pid", "--fork", "--ipc", "--uts", "true"]
# /etc entries the minimal view takes (sandbox/viewetc.c's list)
ETC_KEPT = ("hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
            "protocols", "services", "networks", "rpc", "ssl",
            "ca-certificates", "ca-certificates.conf", "pki", "localtime",
            "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
            "alternatives", "os-release", "debian_version", "mime.types",
            "locale.alias", "mtab", "passwd", "group")


def bwrap_min():
    """bwrap with the same binds as agentz's minimal view (issue 20, item
    1): an empty root, /usr read-only, the /bin /sbin /lib* links made
    again, the kept /etc entries, /dev, /proc, a private /tmp."""
    argv = ["--unshare-all", "--tmpfs", "/", "--ro-bind", "/usr", "/usr"]
    for n in sorted(os.listdir("/")):
        p = "/" + n
        if n in ("bin", "sbin") or n.startswith("lib"):
            argv += (["--symlink", os.readlink(p), p] if os.path.islink(p)
                     else ["--ro-bind", p, p])
    for n in sorted(os.listdir("/etc")):
        p = "/etc/" + n
        if n in ETC_KEPT or n.startswith("python3"):
            argv += ["--ro-bind-try", p, p]
    return argv + ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                   "--remount-ro", "/", "true"]
CRASH = "import os\nos.kill(os.getpid(), 9)"


def sfmt(v):
    """A signed difference."""
    return ("-" if v < 0 else "+") + fmt_us(abs(v))


def diff_ci(samples, reps=2000):
    """med(a) - med(b) [+ med(c) ... alternating signs: a - b - c + d],
    with a bootstrap 95% interval (each series resampled on its own;
    fixed seed, so a rerun on the same data prints the same interval)."""
    rng = random.Random(8)
    sign = [1, -1, -1, 1][:len(samples)]

    def est(series):
        return sum(sg * statistics.median(x) for sg, x in zip(sign, series))
    point = est(samples)
    boots = sorted(est([rng.choices(x, k=len(x)) for x in samples])
                   for _ in range(reps))
    return point, boots[int(0.025 * reps)], boots[int(0.975 * reps) - 1]


class BenchAbort(BaseException):
    pass


def _abort(signum, _frame):
    raise BenchAbort(signal.Signals(signum).name)


def progress(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Who:
    """root, or a plain user: nobody when we are root (the child drops to
    it), else ourselves."""

    def __init__(self, name):
        self.name = name
        self.kw = {}
        if name == "root":
            self.uid = self.gid = 0
        elif os.geteuid() == 0:
            pw = pwd.getpwnam("nobody")
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            # setgroups([]), setgid, setuid in the child
            self.kw = {"user": self.uid, "group": self.gid,
                       "extra_groups": []}
        else:
            self.uid, self.gid = os.getuid(), os.getgid()

    def label(self):
        if self.name == "root":
            return "root"
        return pwd.getpwuid(self.uid).pw_name

    def own(self, path):
        if os.geteuid() == 0:
            os.lchown(path, self.uid, self.gid)


class World:
    """Binaries, workspace and environment for one user."""

    def __init__(self, who, build, tmps):
        self.who = who
        self.ws = tempfile.mkdtemp(prefix="agentz-bench-iso-ws-",
                                   dir=VISIBLE)
        tmps.append(self.ws)
        os.chmod(self.ws, 0o755)
        who.own(self.ws)
        if who.name == "root":
            self.agentz = os.path.join(build, "agentz")
            home = os.environ.get("HOME", "/root")
        else:
            d = tempfile.mkdtemp(prefix="agentz-bench-iso-bin-",
                                 dir=VISIBLE)
            tmps.append(d)
            os.chmod(d, 0o755)
            for name in ("agentz", "agentz-worker"):
                shutil.copy2(os.path.join(build, name), d)
                who.own(os.path.join(d, name))
            who.own(d)
            self.agentz = os.path.join(d, "agentz")
            home = self.ws
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:"
                            "/usr/sbin:/sbin",
                    "HOME": home, "LANG": "C.UTF-8"}

    def popen(self, argv, stdin_text=None):
        return subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_text is not None
            else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=self.ws, env=self.env,
            start_new_session=True, text=True, **self.who.kw)

    def run(self, argv, stdin_text=None):
        """(rc, stdout, stderr, t_start_wall, wall_s, t_end_wall)."""
        tw0 = time.time()
        t0 = time.perf_counter()
        p = self.popen(argv, stdin_text)
        try:
            out, err = p.communicate(stdin_text, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(p)
            p.communicate()
            raise TimeoutError(f"{' '.join(argv[:3])} still running after "
                               f"{RUN_TIMEOUT} s (killed)")
        except BaseException:
            kill_group(p)
            raise
        wall = time.perf_counter() - t0
        return p.returncode, out, err, tw0, wall, time.time()

    def agentz_exec(self, mode, cells):
        rc, out, err, tw0, wall, tw1 = self.run(
            [self.agentz, "exec", "--json", *MODE_ARGS[mode], "-"],
            "\n# %%\n".join(cells) + "\n")
        recs = []
        for line in out.splitlines():
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
        return rc, recs, err, tw0, wall, tw1


# the variants: the full world, the same on the host's network, none
MODE_ARGS = {"required": ["--isolation", "required"],
             "nethost": ["--isolation", "required", "--network", "host"],
             "off": ["--isolation", "off"]}


class Series:
    def __init__(self):
        self.v = []
        self.note = ""

    def add(self, us):
        self.v.append(us)

    def med(self):
        return statistics.median(self.v) if self.v else None

    def p90(self):
        return pct(self.v, 90) if self.v else None


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.tmps = []
        self.errors = []
        self.s = {}          # (who, what) -> Series
        self.desc = {}       # (who, mode) -> worker.isolation
        self.skip = {}       # (who, what) -> why it has no figures
        self.who = {}        # "root"/"user" -> the account's name
        self.bwrap = shutil.which("bwrap")
        self.unshare = shutil.which("unshare")
        self.true = shutil.which("true") or "/bin/true"

    def series(self, who, what):
        return self.s.setdefault((who, what), Series())

    def built(self):
        return all(os.access(os.path.join(self.build, n), os.X_OK)
                   for n in ("agentz", "agentz-worker"))

    # ------------------------------------------------------- one sample

    def one_run(self, w, mode):
        rc, recs, err, tw0, wall, tw1 = w.agentz_exec(mode, ["x = 1"])
        if rc != 0 or len(recs) != 1 or recs[0].get("status") != "ok":
            raise RuntimeError(f"agentz exec {' '.join(MODE_ARGS[mode])} as "
                               f"{w.who.name}: rc={rc}, {len(recs)} "
                               f"records; {first_line(err)}")
        r = recs[0]
        wk = r.get("worker") or {}
        spawn = float(wk["spawn_ready_us"])
        ready = (float(r["started_at"]) - tw0) * 1e6
        k = w.who.name
        self.desc[(k, mode)] = wk.get("isolation")
        self.series(k, f"{mode}.ready").add(ready)
        self.series(k, f"{mode}.spawn").add(spawn)
        self.series(k, f"{mode}.pre").add(ready - spawn)
        self.series(k, f"{mode}.wall").add(wall * 1e6)
        self.series(k, f"{mode}.teardown").add(
            (tw1 - float(r["finished_at"])) * 1e6)

    def respawn_run(self, w, mode):
        cells = ["x = 1"]
        for _ in range(self.args.crashes):
            cells += [CRASH, "x = 1"]
        rc, recs, err, *_ = w.agentz_exec(mode, cells)
        if len(recs) != len(cells):
            raise RuntimeError(f"respawn run --isolation {mode} as "
                               f"{w.who.name}: rc={rc}, {len(recs)}/"
                               f"{len(cells)} records; {first_line(err)}")
        seen = set()
        for i, r in enumerate(recs):
            wk = r.get("worker") or {}
            gen = wk.get("generation")
            if i % 2 == 1:
                if r.get("status") == "ok":
                    raise RuntimeError("a crash cell came back ok")
                continue
            if r.get("status") != "ok":
                raise RuntimeError(f"cell {i} after a crash: "
                                   f"{r.get('status')} "
                                   f"{r.get('exception_type')}")
            if i == 0 or gen in seen or not gen or gen < 2:
                continue
            seen.add(gen)
            self.series(w.who.name, f"{mode}.respawn").add(
                float(wk["spawn_ready_us"]))
        if len(seen) != self.args.crashes:
            raise RuntimeError(f"expected {self.args.crashes} respawned "
                               f"workers, saw generations {sorted(seen)}")

    def one_ref(self, w, what):
        if what == "true":
            argv = [self.true]
        elif what == "bwrap":
            argv = [self.bwrap, *BWRAP]
        elif what == "bwrap-min":
            argv = [self.bwrap, *bwrap_min()]
        else:
            argv = [self.unshare, *UNSHARE]
            if w.who.name != "root":
                argv[1:1] = ["--user", "--map-root-user"]
        rc, _, err, _, wall, _ = w.run(argv)
        if rc != 0:
            raise RuntimeError(f"{' '.join(argv)} as {w.who.name}: "
                               f"rc={rc}; {first_line(err)}")
        self.series(w.who.name, what).add(wall * 1e6)

    # ------------------------------------------------------------ rounds

    def measure(self):
        if os.geteuid() != 0:
            users = ["user"]
        else:
            users = ["root"] + ([] if self.args.no_user else ["user"])
        worlds = {u: World(Who(u), self.build, self.tmps) for u in users}
        self.who = {u: w.who.label() for u, w in worlds.items()}
        jobs = []
        for u, w in worlds.items():
            if self.built():
                for mode in ("required", "nethost", "off"):
                    jobs.append((f"{u} run {mode}",
                                 lambda w=w, m=mode: self.one_run(w, m)))
            else:
                self.skip[(u, "agentz")] = f"agentz: not built " \
                                           f"({self.args.build})"
            refs = ["true", "bwrap", "bwrap-min", "unshare"]
            if not self.bwrap:
                refs.remove("bwrap")
                refs.remove("bwrap-min")
                for k in ("bwrap", "bwrap-min"):
                    self.skip[(u, k)] = "bwrap: not installed " \
                                        "(Debian package bubblewrap)"
            if not self.unshare:
                refs.remove("unshare")
                self.skip[(u, "unshare")] = "unshare: not installed"
            for r in refs:
                jobs.append((f"{u} {r}",
                             lambda w=w, r=r: self.one_ref(w, r)))
        failed = set()
        n = self.args.n
        # one warm-up round (page cache, first cgroup), not counted
        rounds = [False] + [True] * n
        for i, keep in enumerate(rounds):
            if i % 10 == 0:
                progress(f"start-up round {i}/{n}")
            order = jobs[:]
            random.shuffle(order)
            for label, fn in order:
                if label in failed:
                    continue
                saved = {k: len(v.v) for k, v in self.s.items()}
                try:
                    fn()
                except BenchAbort:
                    raise
                except Exception as e:
                    failed.add(label)
                    self.errors.append(f"{label}: {e!r}")
                    if os.environ.get("AGENTZ_BENCH_DEBUG"):
                        traceback.print_exc()
                if not keep:
                    for k, v in self.s.items():
                        del v.v[saved.get(k, 0):]
        if not self.built():
            return
        progress("respawn inside an existing jail")
        runs = -(-n // self.args.crashes)
        for i in range(runs):
            for u, w in worlds.items():
                for mode in random.sample(("required", "off"), 2):
                    label = f"{u} respawn {mode}"
                    if label in failed:
                        continue
                    try:
                        self.respawn_run(w, mode)
                    except BenchAbort:
                        raise
                    except Exception as e:
                        failed.add(label)
                        self.errors.append(f"{label}: {e!r}")

    # ------------------------------------------------------------ report

    def row(self, name, ser, note=""):
        if ser is None or not ser.v:
            print(f"  {name:<42} {'n/a':>10}")
            return
        print(f"  {name:<42} {fmt_us(ser.med()):>10} {fmt_us(ser.p90()):>10}"
              f" {len(ser.v):>4}  {note}")

    def med(self, who, what):
        ser = self.s.get((who, what))
        return ser.med() if ser is not None and ser.v else None

    def report(self):
        users = sorted({k[0] for k in self.s} | {k[0] for k in self.skip},
                       key=lambda u: u != "root")
        print("Isolation start-up: agentz --isolation required vs off, "
              "and bubblewrap")
        hdr = f"  {'':<42} {'median':>10} {'p90':>10} {'n':>4}  notes"
        verdicts = []
        for u in users:
            who = self.who.get(u, u)
            print()
            print(f" as {who}")
            print(hdr)
            print("  " + "-" * (len(hdr) + 10))
            if (u, "agentz") in self.skip:
                print(f"  {self.skip[(u, 'agentz')]}")
            for mode in ("required", "nethost", "off"):
                if (u, f"{mode}.ready") not in self.s:
                    continue
                d = self.desc.get((u, mode)) or "?"
                print(f"  agentz {' '.join(MODE_ARGS[mode])}: {d}")
                self.row("  start -> first cell dispatched (ready)",
                         self.s.get((u, f"{mode}.ready")),
                         "Popen -> started_at: exec+jail+spawn")
                self.row("  worker spawn -> ready, first worker",
                         self.s.get((u, f"{mode}.spawn")),
                         "worker.spawn_ready_us")
                self.row("  start - spawn (agentz start + jail)",
                         self.s.get((u, f"{mode}.pre")), "per run")
                self.row("  respawned worker, spawn -> ready",
                         self.s.get((u, f"{mode}.respawn")),
                         "after os.kill(getpid(), 9), same run")
                self.row("  whole 1-cell run, wall",
                         self.s.get((u, f"{mode}.wall")),
                         "Popen -> exit")
                self.row("  teardown (cell done -> exit)",
                         self.s.get((u, f"{mode}.teardown")),
                         "finished_at -> exit seen")
            print("  references (Popen -> wait, wall)")
            for what, label in (
                    ("true", "true"),
                    ("bwrap", "bwrap --unshare-all ... true"),
                    ("bwrap-min", "bwrap, the minimal view's binds"),
                    ("unshare", "unshare -m -p -f -i -u true"
                     if u == "root" else "unshare -U -r -m -p -f -i -u "
                     "true")):
                if (u, what) in self.skip:
                    print(f"  {'  ' + label:<42} {self.skip[(u, what)]}")
                else:
                    self.row("  " + label, self.s.get((u, what)))

            print()
            print(f"  costs, as {who}: differences of medians "
                  f"[bootstrap 95% interval]")
            bw, tr, un = (self.med(u, k) for k in ("bwrap", "true",
                                                    "unshare"))

            def cost(label, *keys):
                sers = [self.s.get((u, k)) for k in keys]
                if any(x is None or not x.v for x in sers):
                    print(f"    {label:<44} {'n/a':>11}")
                    return None
                d, lo, hi = diff_ci([x.v for x in sers])
                print(f"    {label:<44} {sfmt(d):>11}  "
                      f"[{sfmt(lo)} .. {sfmt(hi)}]")
                return d
            c_ready = cost("isolation cost, start -> ready (req - off)",
                           "required.ready", "off.ready")
            cost("  jail set-up (start - spawn, req - off)",
                 "required.pre", "off.pre")
            cost("  network namespace (req - nethost)",
                 "required.ready", "nethost.ready")
            cost("  first worker spawn (req - off)",
                 "required.spawn", "off.spawn")
            c_resp = cost("isolation cost, respawned worker",
                          "required.respawn", "off.respawn")
            c_wall = cost("isolation cost, whole 1-cell run",
                          "required.wall", "off.wall")
            ref = cost("bubblewrap's own start-up (bwrap - true)",
                       "bwrap", "true")
            cost("unshare (unshare - true)", "unshare", "true")
            if c_ready is None or ref is None:
                verdicts.append(f"  --    as {who}: n/a (missing figures)")
                continue
            ex, lo, hi = diff_ci([self.s[(u, k)].v for k in (
                "required.ready", "off.ready", "bwrap", "true")])
            noise = "within noise" if lo <= 0 <= hi else "beyond noise"
            verdicts.append(
                f"  {'PASS' if ex <= 0 else 'MISS'}  as {who}: full "
                f"isolation adds {sfmt(c_ready)} to start -> ready, "
                f"bwrap's own start-up is {fmt_us(ref)}: excess "
                f"{sfmt(ex)} [{sfmt(lo)} .. {sfmt(hi)}], {noise}")

            def opt(v):
                return "n/a" if v is None else sfmt(v)
            verdicts.append(
                f"        also: respawned worker {opt(c_resp)}, whole "
                f"1-cell run {opt(c_wall)}, unshare alone "
                f"{opt(None if un is None or tr is None else un - tr)}")
        print()
        print("Target: our full isolation costs no more than bubblewrap's "
              "own start-up on top of today's spawn")
        for v in verdicts:
            print(v)
        print()


def machine_facts(b):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    bw = "not installed"
    if b.bwrap:
        try:
            bw = first_line(subprocess.run(
                [b.bwrap, "--version"], capture_output=True, text=True,
                timeout=10).stdout)
        except Exception:
            bw = "?"
    u = os.uname()
    print("agentz isolation bench")
    print(f"  date      {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print(f"  cpu       {cpu}; nproc {len(os.sched_getaffinity(0))}")
    print(f"  kernel    {u.sysname} {u.release} {u.machine}")
    print(f"  load avg  {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  bwrap     {b.bwrap or ''} {bw}")
    print(f"  agentz    {b.build}/agentz" if b.built()
          else f"  agentz    not built ({b.build})")
    print(f"  samples   {b.args.n} per row (one warm-up round dropped), "
          f"respawn: runs of {b.args.crashes} crashes; variants "
          f"interleaved in shuffled order")
    print()


def main():
    ap = argparse.ArgumentParser(
        description="isolation start-up cost (figures, not a test)")
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--n", type=int, default=100,
                    help="samples per row (default 100)")
    ap.add_argument("--crashes", type=int, default=6,
                    help="worker crashes per respawn run (default 6)")
    ap.add_argument("--no-user", action="store_true",
                    help="as root: skip the runs as nobody")
    args = ap.parse_args()
    if args.n < 2 or args.crashes < 1:
        ap.error("--n >= 2, --crashes >= 1")
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, _abort)
    signal.alarm(int(os.environ.get("AGENTZ_BENCH_WATCHDOG", WATCHDOG_S)))
    b = Bench(args)
    rc = 0
    t0 = time.perf_counter()
    try:
        machine_facts(b)
        b.measure()
        b.report()
        print(f"  load avg after: "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    except (BenchAbort, KeyboardInterrupt) as e:
        what = "watchdog" if str(e) == "SIGALRM" else (str(e) or "SIGINT")
        print(f"\nbench: aborted ({what}) after "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        rc = 1
    finally:
        signal.alarm(0)
        for d in b.tmps:
            shutil.rmtree(d, ignore_errors=True)
    if b.errors:
        print("Errors (the figures above are incomplete):")
        for e in b.errors:
            print(f"  {e}")
        rc = 1
    print(f"bench: done in {time.perf_counter() - t0:.1f} s "
          f"(exit {rc}; PASS/MISS never changes the exit status)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
