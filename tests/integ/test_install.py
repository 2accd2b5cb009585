"""make install / make uninstall into a DESTDIR, the man page and the bash
completion (issue 22).

install puts exactly the binaries, the unit (its paths under PREFIX, its
Documentation= an installed file), the man page, the completion, the
docs and examples, and /etc/agentz/example.env (never over one that is
there); uninstall removes exactly that, keeping an /etc file the
operator changed. The man page renders without warnings and names every
option each subcommand's --help names; the completion offers them.
"""
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentz_util import AGENTZ, BUILD, ROOT, SAN  # noqa: E402

MAN = os.path.join(ROOT, "man", "agentz.1")
COMPLETION = os.path.join(ROOT, "man", "agentz.bash")
DOCS = ["README.md", "docs/operating.md", "docs/security.md",
        "docs/internals.md", "docs/report-demo.png", "examples/README.md",
        "examples/memory-ceiling.sh", "examples/survive-kill.sh",
        "examples/agentz-example.env"]


def expected(prefix):
    p = prefix.lstrip("/")
    return sorted([f"{p}/bin/agentz", f"{p}/bin/agentz-worker",
                   "etc/systemd/system/agentz@.service",
                   "etc/agentz/example.env",
                   f"{p}/share/man/man1/agentz.1",
                   f"{p}/share/bash-completion/completions/agentz"] +
                  [f"{p}/share/doc/agentz/{d}" for d in DOCS])


def make(*args):
    """make in this checkout for this test's build variant, outside the
    make that may be running the tests (no jobserver of its)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    rel = os.path.relpath(BUILD, ROOT)
    var = ["SAN=1"] if SAN else ([] if rel == "build" else ["O=" + rel])
    p = subprocess.run(["make", "--no-print-directory", *var, *args],
                       cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"make {args}: {p.returncode}\n{p.stdout}" \
        f"\n{p.stderr}"
    return p


def files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/agentz"])
def test_install_then_uninstall(tmp_path, prefix):
    dest = tmp_path / "root"
    make("install", f"DESTDIR={dest}", f"PREFIX={prefix}")
    assert files(dest) == expected(prefix)
    unit = (dest / "etc/systemd/system/agentz@.service").read_text()
    doc = re.search(r"^Documentation=file://(\S+)$", unit, re.M).group(1)
    assert (dest / doc.lstrip("/")).is_file(), doc
    exe = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)
    assert exe == prefix + "/bin/agentz" and (dest / exe.lstrip("/")).is_file()
    assert "/usr/local" not in unit or prefix == "/usr/local"
    env = dest / "etc/agentz/example.env"
    assert oct(env.stat().st_mode & 0o777) == "0o600"
    assert env.read_text() == open(os.path.join(
        ROOT, "examples", "agentz-example.env")).read()
    make("uninstall", f"DESTDIR={dest}", f"PREFIX={prefix}")
    assert files(dest) == []
    assert not (dest / prefix.lstrip("/") / "share/doc/agentz").exists()
    assert not (dest / "etc/agentz").exists()


def test_install_keeps_what_the_operator_has(tmp_path):
    """An /etc/agentz/example.env that is there is never overwritten, and
    an installed file the operator edited survives uninstall."""
    dest = tmp_path / "root"
    (dest / "etc/agentz").mkdir(parents=True)
    mine = dest / "etc/agentz/example.env"
    mine.write_text("AGENTZ_TASK=mine\n")
    (dest / "etc/agentz/nightly.env").write_text("AGENTZ_TASK=x\n")
    make("install", f"DESTDIR={dest}")
    assert mine.read_text() == "AGENTZ_TASK=mine\n"
    unit = dest / "etc/systemd/system/agentz@.service"
    unit.write_text(unit.read_text() + "# the operator's line\n")
    p = make("uninstall", f"DESTDIR={dest}")
    assert "was changed since install: kept" in p.stdout, p.stdout
    assert files(dest) == ["etc/agentz/example.env", "etc/agentz/nightly.env",
                           "etc/systemd/system/agentz@.service"]
    assert mine.read_text() == "AGENTZ_TASK=mine\n"


def help_options(*sub):
    p = subprocess.run([AGENTZ, *sub, "--help"], capture_output=True,
                       text=True, timeout=30)
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", p.stdout + p.stderr))


def test_man_page_renders_without_warnings_and_names_every_option():
    p = subprocess.run(["man", "--warnings", "-l", MAN],
                       env=dict(os.environ, MANWIDTH="80"),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    text = re.sub(".\b", "", p.stdout).replace("\u2010", "-")
    for sub in ((), ("exec",), ("report",), ("runs",), ("ctl",)):
        for opt in help_options(*sub):
            assert opt in text, (sub, opt)
    for status in ("130", "143"):
        assert status in text


def complete(*words):
    """What the completion offers for the words typed (the last one being
    completed), agentz being this build's."""
    script = f"""
. {COMPLETION}
COMP_WORDS=({' '.join(repr(w) for w in (AGENTZ,) + words)})
COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
_agentz
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    p = subprocess.run(["bash", "-c", script], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.split())


def test_bash_completion_offers_the_options_of_help():
    assert complete("") == {"exec", "report", "ctl", "runs"}
    assert complete("--") == help_options()
    assert complete("exec", "--") == help_options("exec")
    assert "--max-cells" not in complete("exec", "--max")
    assert complete("--snapshot", "") == {"auto", "always", "never"}
    assert complete("ctl", "somerun", "") == {
        "status", "note", "stop", "pause", "resume", "kill-cell", "budgets",
        "allow", "deny", "network", "approve", "reject"}
