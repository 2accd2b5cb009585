"""Checks the machine before the integration tests run; the suite's
markers and its order.

make integ runs the suite in three pytest invocations: first every test
marked neither serial nor alone, in parallel (pytest-xdist, -n INTEG_JOBS
--dist loadgroup: the tests mostly wait on processes), then the serial
ones, which measure the wall clock, one per core (-n NPROC) on a machine
the first invocation no longer loads, then the alone ones, which flood
the machine, one at a time. Each test runs once per pass either way."""
import os
import shutil
import tempfile

import pytest


def pytest_configure(config):
    """Each pytest process (the controller and every xdist worker) gives
    the runs it starts a private RUNTIME_DIRECTORY: their control sockets
    never go to the machine's /run/agentz (nor stay there when a test
    kills a run). Sticky and open to all, like /tmp, for the runs made as
    a plain user. Test helpers that build an environment from scratch
    copy it (with the sanitizer variables)."""
    rt = tempfile.mkdtemp(prefix="agentz-rt-")
    os.chmod(rt, 0o1777)
    os.environ["RUNTIME_DIRECTORY"] = rt
    config._agentz_rt = rt
    config.addinivalue_line(
        "markers", "serial(why): the test measures time against the wall "
        "clock (a deadline plus its grace, a wait that must end by a "
        "bound): make integ runs it after the parallel part, beside at "
        "most one other per core; why says what it measures")
    config.addinivalue_line(
        "markers", "alone(why): the test floods the machine (a fork flood, "
        "a connection or request flood) and measures the wall clock "
        "through it: make integ runs it by itself, last; why says which")
    config.addinivalue_line(
        "markers", "early(why): the test is long (why says what takes the "
        "time); it is started first so it overlaps the others instead of "
        "ending the parallel part alone")


def pytest_unconfigure(config):
    rt = getattr(config, "_agentz_rt", None)
    if rt is not None:
        shutil.rmtree(rt, ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    """A serial mark must say why; the early tests go first (a stable
    sort: the rest keep their order). serial and alone exclude each
    other."""
    for item in items:
        if item.get_closest_marker("serial") and \
                item.get_closest_marker("alone"):
            raise pytest.UsageError(
                f"{item.nodeid}: marked both serial and alone; alone "
                f"already runs after the serial part")
        for name in ("serial", "alone", "early"):
            m = item.get_closest_marker(name)
            if m is not None and not (m.args and isinstance(m.args[0], str)
                                      and m.args[0]):
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.{name} needs its reason "
                    f"(a string), e.g. @pytest.mark.{name}(\"...\")")
    items.sort(key=lambda it: it.get_closest_marker("early") is None)


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
