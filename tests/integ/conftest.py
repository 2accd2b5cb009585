"""Checks the machine before the integration tests run."""
import os
import tempfile

import pytest


def pytest_sessionstart(session):
    """A folder an agentz run used as its workspace (it holds the
    .agentz-workspace marker) loads no .env below it: the tests' own .env
    files under the temporary folder would be refused. Said once, here,
    instead of as failures of the .env tests."""
    d = os.path.realpath(tempfile.gettempdir())
    while True:
        marker = os.path.join(d, ".agentz-workspace")
        if os.path.exists(marker):
            pytest.exit(f"{marker}: an agentz run used {d} as its workspace, "
                        f"so no .env below it is loaded and the .env tests "
                        f"would fail; remove the marker (or set TMPDIR to "
                        f"another folder) and run again", returncode=3)
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent
