#!/usr/bin/python3
"""make demo: a real agentz run against the bundled local test model server.

Starts tests/integ/model_server.py on 127.0.0.1 with scripts/demo.json,
runs build/agentz on a task in BUILD_DIR/demo (no API key needed; the
folder is emptied first and kept afterwards, so what the agent wrote can
be read), and stops the server. The run: the engine's cell 0 asks the model for the
first cell; the model writes cells that compute, read the history, hit an
error, get repaired from the error record, and quit.

usage: scripts/demo.py [BUILD_DIR]
"""
import os
import subprocess
import sys
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
TASK = "Find the primes below 60 and the largest gap between them."


def run_agent(work):
    """Start the test model server, run agentz in work, stop the server."""
    server = subprocess.Popen(
        ["/usr/bin/python3", os.path.join(ROOT, "tests/integ/model_server.py"),
         "--script", os.path.join(ROOT, "scripts/demo.json"), "--quiet"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()      # "PORT <n>" once listening
        if not line.startswith("PORT "):
            sys.exit("demo: the test model server did not start")
        base = f"http://127.0.0.1:{line.split()[1]}/v1"
        print(f"demo: test model server at {base}; task: {TASK!r}\n", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        return subprocess.run([os.path.join(BUILD, "agentz"), "-v", "--base-url", base,
                               "--cell-timeout", "60", TASK],
                              cwd=work, env=env, stdin=subprocess.DEVNULL,
                              timeout=300).returncode
    finally:
        server.terminate()
        server.wait(timeout=10)


def main():
    work = os.path.join(BUILD, "demo")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rc = run_agent(work)
    out = os.path.join(work, "primes.txt")
    wrote = os.path.exists(out)
    print(f"\ndemo: agentz exited with {rc}; the agent's workspace is kept in {work}")
    if wrote:
        with open(out, encoding="utf-8", errors="replace") as f:
            print(f"demo: {out}:\n" + "".join(f.readlines()[:10]), end="")
    else:
        print(f"demo: {out} was not written")
    sys.exit(0 if rc == 0 and wrote else 1)


main()
