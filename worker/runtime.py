"""agentz worker runtime: runs cells in one persistent namespace.

Embedded into agentz-worker at build time and executed as the module
``agentz_runtime``. The C side calls ``run_cell(n, code)`` for every EXEC
frame and sends the returned (status, exception_type, traceback) as DONE.
Everything the cell needs from outside the namespace goes through the
builtin module ``_agentz`` as a request to the supervisor.

Start-up time is the worker's spawn-to-ready time and a one-shot exec's
first cell, so heavy modules are imported where first needed, never by a
cell that does not need them: only builtin and frozen modules and what
site loads are in at READY. json (re, enum, functools: ~10 ms) is not
needed to read a host reply (_loads); linecache (tokenize, re, enum:
~10 ms), which shows a cell's source lines in tracebacks, gets the cells'
sources when something imports it (_LinecacheFiller); traceback (~6 ms
more) is imported by the first cell that raises, asyncio (~40 ms) by the
first that awaits.
"""
import _signal
import builtins
import faulthandler
import sys

import _agentz

DONE_OK, DONE_ERROR, DONE_INTERRUPTED, DONE_EXITED = 0, 1, 2, 3

NAMESPACE = {"__name__": "__main__", "__builtins__": builtins}
sys.modules["__main__"].__dict__.update(NAMESPACE)
NAMESPACE = sys.modules["__main__"].__dict__

# asyncio costs ~40 ms to import: it is loaded by the first cell that needs
# it, and the loop made then persists for the worker's life.
_loop = None
_current_cell = -1
_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect


def event_loop():
    """The worker's persistent asyncio event loop (created on first use)."""
    global _loop
    if _loop is None:
        import asyncio
        _loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_loop)
    return _loop


class AgentQuit(BaseException):
    """Raised by quit(): the cell is `exited` and the run ends normally."""


class HostError(Exception):
    """The supervisor refused or failed a host request."""


_ERROR_TYPES = {
    "EOFError": EOFError,
    "KeyboardInterrupt": KeyboardInterrupt,
    "ValueError": ValueError,
    "TypeError": TypeError,
    "RuntimeError": RuntimeError,
    "TimeoutError": TimeoutError,
    "PermissionError": PermissionError,
}


class _ScanContext:
    """What _json's scanner reads of a decoder: json.loads's defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # "NaN", "Infinity", "-Infinity"


_scan = None


def _loads(body):
    """json.loads(body) for a host reply (UTF-8 JSON the supervisor wrote).

    While nothing has imported json, the reply is read by _json's scanner,
    the C code json.loads runs, without json's own import (re, enum,
    functools: ~10 ms, most of a one-shot exec's first cell); anything the
    scanner does not take whole goes to json.loads, errors included.
    """
    global _scan
    json = sys.modules.get("json")
    if json is None:
        try:
            text = body.decode("utf-8") if isinstance(body, bytes) else body
            if _scan is None:
                import _json
                _scan = _json.make_scanner(_ScanContext)
            value, end = _scan(text, 0)
            if end == len(text):
                return value
        except Exception:  # StopIteration, JSONDecodeError, UnicodeError
            pass
        import json
    return json.loads(body)


def _raise_reply_error(body):
    try:
        err = _loads(body)
        kind, message = err.get("type", "HostError"), err.get("message", "")
    except (ValueError, AttributeError):
        kind, message = "HostError", body.decode("utf-8", "replace")
    raise _ERROR_TYPES.get(kind, HostError)(message)


def host_request(method, payload, cell=None):
    """Send one request to the supervisor and return the reply body (bytes).

    Blocks only the calling thread (the GIL is released); several requests
    may be outstanding at once from threads or asyncio tasks.
    """
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogateescape")
    rid = _agentz.begin(method, payload, _current_cell if cell is None else cell)
    try:
        while True:
            kind, status, body = _agentz.wait(rid)
            if kind == "reply":
                if status != 0:
                    _raise_reply_error(body)
                return body
    finally:
        _agentz.end(rid)


async def host_request_async(method, payload, cell=None):
    """host_request for asyncio code: waits in a thread, not on the loop."""
    import asyncio
    cell = _current_cell if cell is None else cell
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, host_request, method, payload, cell)


def _input(prompt=""):
    """input() through the supervisor's terminal (EOFError when it has none)."""
    import json
    sys.stdout.flush()
    body = host_request("input", json.dumps({"prompt": str(prompt)}))
    return body.decode("utf-8", "replace")


def _strip_runtime(te):
    """Drop the runtime's frames from a TracebackException, chains included."""
    import traceback
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename not in RUNTIME_FILES])
        if te.__cause__ is not None:
            _strip_runtime(te.__cause__)
        te = te.__context__


def _cell_traceback(exc):
    """Format exc without the runtime's own frames (the cell's only)."""
    import linecache
    import traceback
    _sources_to_linecache(linecache)
    # The limit keeps a RecursionError 10**6 frames deep cheap to format
    # (the whole walk takes longer than a cell timeout).
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__,
                                      limit=TRACEBACK_LIMIT, compact=True)
    _strip_runtime(te)
    text = "".join(te.format())
    if not isinstance(exc, SyntaxError) and not text.startswith("Traceback"):
        text = "Traceback (most recent call last):\n" + text
    return text


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # a cell may have replaced or closed them
            pass


def _run(code):
    if code.co_flags & _CO_COROUTINE:
        loop = event_loop()
        task = loop.create_task(eval(code, NAMESPACE))
        try:
            loop.run_until_complete(task)
        except BaseException:
            task.cancel()
            raise
    else:
        exec(code, NAMESPACE)


def _prepare(n):
    builtins.input = _input
    NAMESPACE["input"] = _input
    for hook in _CELL_HOOKS:
        hook(n)


_CELL_HOOKS = []
TRACEBACK_LIMIT = 200
# Source files of this runtime: their frames never show in a cell's traceback.
RUNTIME_FILES = {_cell_traceback.__code__.co_filename}

# Before a kill the supervisor sends SIGRTMIN+3 (proto.h
# WORKER_DUMP_SIGNAL_OFFSET) and reads every thread's stack from fd 4
# (WORKER_DUMP_FD); faulthandler writes it from the signal handler itself,
# so it works while the cell sits in C code.
try:
    faulthandler.register(_signal.SIGRTMIN + 3, file=4, all_threads=True)
except (OSError, ValueError, RuntimeError):
    pass


# Cell sources for linecache (tracebacks, warnings, inspect show a cell's
# lines from it), kept here until something imports linecache: then
# _LinecacheFiller hands them over and later cells go to linecache.cache.
_SOURCES = {}


def _sources_to_linecache(linecache):
    linecache.cache.update(_SOURCES)
    _SOURCES.clear()


def _register_source(name, text):
    _SOURCES[name] = (len(text), None, text.splitlines(True), name)
    linecache = sys.modules.get("linecache")
    if linecache is not None:
        _sources_to_linecache(linecache)


class _LinecacheFiller:
    """A meta path finder that only acts on linecache's import: the module
    is loaded by the finder that would have loaded it, then its cache gets
    the cells' sources and this finder leaves sys.meta_path. (A loader
    that is a class, frozen or builtin, is left alone: the next cell's
    registration and a cell's own traceback hand the sources over.)"""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "linecache":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is cls or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or isinstance(spec.loader, type):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_fill(module):
            exec_module(module)
            _sources_to_linecache(module)
            if cls in sys.meta_path:
                sys.meta_path.remove(cls)
        spec.loader.exec_module = exec_and_fill
        return spec


if "linecache" not in sys.modules:
    sys.meta_path.insert(0, _LinecacheFiller)


def run_cell(n, source):
    """Run cell n (source: bytes). Returns (status, exception_type, traceback)."""
    global _current_cell
    _current_cell = n
    name = f"<cell-{n}>"
    text = source.decode("utf-8", "replace")
    if not text.endswith("\n"):
        text += "\n"  # 3.11 misplaces the caret under an unterminated line
    _register_source(name, text)
    status, etype, tb = DONE_OK, None, None
    try:
        _prepare(n)
        code = compile(source, name, "exec",
                       flags=_agentz.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        _run(code)
    except AgentQuit:
        status = DONE_EXITED
    except (KeyboardInterrupt, SystemExit) as e:
        status, etype, tb = DONE_INTERRUPTED, type(e).__name__, _cell_traceback(e)
    except BaseException as e:
        status, etype, tb = DONE_ERROR, type(e).__name__, _cell_traceback(e)
    finally:
        _current_cell = -1
        _flush()
    return status, etype, tb


# Snapshots (worker/snap.c). The snapshot is a fork of the worker taken
# between cells; promoted, it has only the main thread, a new channel and
# new pipes on the same fd numbers, and shares with the dead worker every
# kernel object the fork duplicated, epoll sets included.
_STALE = []  # replaced objects, kept so their finalisers never run


def _before_snapshot():
    """Flush the output streams; the other threads' names, comma-separated.
    Called in the worker once the snapshot is forked (never before: this
    is Python a cell may have changed)."""
    _flush()
    threading = sys.modules.get("threading")
    if threading is None:
        return ""
    main = threading.main_thread()
    return ",".join(t.name.replace(",", " ")
                    for t in threading.enumerate() if t is not main)


def _fresh_stdio():
    import io
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, "__" + name + "__")
        if not isinstance(old, io.TextIOWrapper):
            continue
        new = io.TextIOWrapper(io.FileIO(fd, "wb", closefd=False),
                               encoding=old.encoding, errors=old.errors,
                               line_buffering=old.line_buffering,
                               write_through=True)
        _STALE.append(old)
        setattr(sys, "__" + name + "__", new)
        if getattr(sys, name) is old:
            setattr(sys, name, new)


def _fresh_loop():
    """A new event loop where the dead worker's was the current one: the
    old selector's epoll set is shared with that worker (closing it or
    removing a reader there would act on the shared set)."""
    global _loop
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return
    policy = asyncio.get_event_loop_policy()
    current = getattr(getattr(policy, "_local", None), "_loop", None)
    if _loop is None and current is None:
        return
    _STALE.extend(x for x in (_loop, current) if x is not None)
    _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)


_PROMOTE_HOOKS = []


def _after_promotion():
    """Repairs after a promotion (the C side reset the channel)."""
    global _current_cell
    _current_cell = -1
    _fresh_stdio()
    _fresh_loop()
    for hook in _PROMOTE_HOOKS:
        hook()
