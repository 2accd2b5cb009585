"""README's quick start, run as written, with the bundled model server
standing in for each provider (issue 22: "a person following only the
quick start gets from clone to a first real-provider run").

The quick start's shell blocks are the fenced blocks whose info string
says `quickstart` (build, the OpenAI variables, the run) or
`provider=NAME` (the alternatives to the OpenAI variables). For each
provider the test runs, in one `bash -e`, the build block, that
provider's block and the run block, in this checkout (the clone), with a
HOME of its own; the only changes: a base URL the block exports points
at the bundled server (its host and port, the block's path kept: the
server answers /v1/responses and OpenRouter's /api/v1/responses only),
and OpenAI's default base URL, which the OpenAI block relies on, is the
server too. Under ASan the build and PATH lines use this build's
variant. The run must end by quit() (exit 0), the model the block names
must be the one asked for, and the task's file must be there.

Also: README links to each doc and each doc exists; every example's
command line in examples/README.md parses (see test_examples_parse).
"""
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_util import SLOW, submit  # noqa: E402
from agentz_util import BUILD, ROOT, SAN  # noqa: E402
from model_server import ModelServer  # noqa: E402

README = os.path.join(ROOT, "README.md")
FENCE = re.compile(r"^```(sh[^\n]*)\n(.*?)^```", re.M | re.S)


def blocks(path=README):
    """[(info words, text)] of the shell blocks of path, in order."""
    with open(path, encoding="utf-8") as f:
        return [(m.group(1).split(), m.group(2))
                for m in FENCE.finditer(f.read())]


def quickstart():
    """(build block, {provider: block}, run block) of README."""
    qs = [t for w, t in blocks() if "quickstart" in w]
    prov = {}
    for w, t in blocks():
        for x in w:
            if x.startswith("provider="):
                prov[x.split("=", 1)[1]] = t
    assert len(qs) == 3, "README: build, OpenAI and run blocks " \
        "marked quickstart, in this order"
    assert "provider=openai" in [x for w, t in blocks() for x in w
                                 if t == qs[1]]
    return qs[0], prov, qs[2]


def variant(text):
    """The build block for this test's build (release or ASan)."""
    rel = os.path.relpath(BUILD, ROOT)
    if rel == "build":
        return text
    assert re.search(r"^make\b", text, re.M), text
    text = re.sub(r"^make\b", "make SAN=1" if SAN else "make O=" + rel,
                  text, flags=re.M)
    return text.replace("$PWD/build", "$PWD/" + rel)


def to_server(text, srv):
    """The block with each exported base URL's host moved to srv."""
    host = srv.base_url.split("/v1")[0]

    def move(m):
        return m.group(1) + re.sub(r"^https?://[^/]+", host, m.group(2))
    return re.sub(r"^(export OPENAI_BASE_URL=)(\S+)", move, text,
                  flags=re.M)


# The model's first cell: what the task asks, then quit().
SCRIPT = submit("""
    primes = [n for n in range(2, 100)
              if all(n % d for d in range(2, int(n ** 0.5) + 1))]
    with open("primes.txt", "w") as f:
        f.write("\\n".join(map(str, primes)) + "\\n")
    quit()
    """)


def run_quickstart(tmp_path, provider):
    build, prov, run = quickstart()
    home = tmp_path / "home"
    home.mkdir()
    with ModelServer(SCRIPT) as srv:
        script = "\n".join([variant(build), to_server(prov[provider], srv),
                            run])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": str(home), "LANG": "C.UTF-8"}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                  "RUNTIME_DIRECTORY"):
            if k in os.environ:
                env[k] = os.environ[k]
        if provider == "openai":    # api.openai.com, played by the server
            env["OPENAI_BASE_URL"] = srv.base_url
        p = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300 * SLOW)
        models = {b.get("model") for b in srv.bodies if b}
        auth = {r.get("authorization") for r in srv.requests}
    return p, models, auth, home, prov[provider]


@pytest.mark.parametrize("provider", ["openai", "openrouter", "ollama",
                                      "vllm"])
def test_quickstart_runs_against_the_stand_in(tmp_path, provider):
    p, models, auth, home, block = run_quickstart(tmp_path, provider)
    out = f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert p.returncode == 0, out
    want = re.search(r"^export AGENTZ_MODEL=(\S+)", block, re.M).group(1)
    assert models == {want}, (models, out)
    primes = (home / "agentz-first" / "primes.txt").read_text().split()
    assert primes[:4] == ["2", "3", "5", "7"] and primes[-1] == "97", out
    # cat primes.txt printed it: the block ran to its end
    assert "97" in p.stdout.split(), out
    if "unset OPENAI_API_KEY" in block:     # a local server gets no key
        assert auth == {None}, auth
    else:
        assert auth != {None}, auth


def test_quickstart_names_what_it_promises():
    """The variables and the limits the issue asks the quick start to
    give, and the fences the test above runs."""
    build, prov, run = quickstart()
    assert set(prov) == {"openai", "openrouter", "ollama", "vllm"}
    assert "OPENAI_API_KEY" in prov["openai"]
    assert "OPENAI_BASE_URL" not in prov["openai"]
    assert "https://openrouter.ai/api/v1" in prov["openrouter"]
    assert re.search(r"--max-(tokens|cost)", run), run
    text = open(README, encoding="utf-8").read()
    qs = text[text.index("## Quick start"):text.index("## The two commands")]
    for needle in ("--max-cost", "--price", "/responses", "404"):
        assert needle in qs, needle


def test_readme_links_each_doc():
    text = open(README, encoding="utf-8").read()
    for doc in ("docs/operating.md", "docs/security.md",
                "docs/internals.md", "examples/README.md"):
        assert f"]({doc}" in text, doc
        assert os.path.isfile(os.path.join(ROOT, doc)), doc
    # each doc's relative links lead to files that exist
    for doc in ("README.md", "docs/operating.md", "docs/security.md",
                "docs/internals.md", "examples/README.md"):
        path = os.path.join(ROOT, doc)
        body = open(path, encoding="utf-8").read()
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", body):
            target = os.path.join(os.path.dirname(path), link)
            assert os.path.exists(target), (doc, link)


EXAMPLES = os.path.join(ROOT, "examples")


def example_env(srv, home):
    env = {"PATH": os.path.dirname(BUILD + "/agentz") + ":" +
           os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": str(home), "LANG": "C.UTF-8",
           "OPENAI_BASE_URL": srv.base_url}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "RUNTIME_DIRECTORY"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


@pytest.mark.parametrize("name", ["memory-ceiling.sh", "survive-kill.sh"])
def test_examples_parse(tmp_path, name):
    """Each example's command line runs (its options parse, its folders
    are made) against the bundled server, whose model quits at once."""
    with open(os.path.join(EXAMPLES, "README.md"), encoding="utf-8") as f:
        assert f"sh examples/{name}" in f.read(), name
    with ModelServer(submit("quit()")) as srv:
        p = subprocess.run(["sh", os.path.join(EXAMPLES, name)],
                           cwd=tmp_path, env=example_env(srv, tmp_path),
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60 * SLOW)
        asked = len(srv.requests)
    out = f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert p.returncode == 0 and asked >= 1, out
    base = tmp_path / "agentz-examples" / name[:-3]
    assert (base / "journal.jsonl").is_file(), out
    assert (base / "workspace" / ".agentz-workspace").exists(), out


def read_env_file(path):
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them (comments,
    blank lines, one pair of double quotes removed)."""
    env = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            k, v = line.split("=", 1)
            if len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            env[k] = v
    return env


def test_example_env_file_parses(tmp_path):
    """The instance file, run as the unit's ExecStart runs it (its
    AGENTZ_OPTS split at spaces, the task one argument), against the
    bundled server."""
    f = read_env_file(os.path.join(EXAMPLES, "agentz-example.env"))
    assert set(f) == {"AGENTZ_TASK", "AGENTZ_MODEL", "OPENAI_BASE_URL",
                      "AGENTZ_OPTS"}, f
    unit = open(os.path.join(ROOT, "systemd", "agentz@.service")).read()
    assert "--resume $AGENTZ_OPTS" in unit and '"${AGENTZ_TASK}"' in unit
    state = tmp_path / "state"
    (state / "workspace").mkdir(parents=True)
    with ModelServer(submit("quit()")) as srv:
        env = example_env(srv, tmp_path)
        env.update({k: v for k, v in f.items() if k != "OPENAI_BASE_URL"})
        p = subprocess.run(
            [BUILD + "/agentz", "--journal", str(state / "journal.jsonl"),
             "--workspace", str(state / "workspace"), "--resume",
             *f["AGENTZ_OPTS"].split(), f["AGENTZ_TASK"]],
            cwd=state, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=60 * SLOW)
        models = {b.get("model") for b in srv.bodies if b}
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert models == {f["AGENTZ_MODEL"]}, models
