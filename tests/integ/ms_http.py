"""The model server's HTTP side: the request handler that reads a request,
asks the ModelServer for a plan and sends it (chunked, held, cut off), and
the threading HTTP server that tracks live connections."""

import json
import os
import secrets
import select
import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ms_plans import error_body, json_plan


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

class _Stop(Exception):
    """The server is stopping or the client went away: abandon the reply."""


class _Gone(Exception):
    """The client closed the connection while its answer was held."""


class ChunkWriter:
    """Writes HTTP/1.1 chunks; optionally re-slices into chunk_size pieces."""

    def __init__(self, wfile, chunk_size=None):
        self.wfile = wfile
        self.size = int(chunk_size) if chunk_size else None
        self.buf = bytearray()

    def _chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n" % len(data) + bytes(data) + b"\r\n")

    def send(self, data):
        if self.size is None:
            self._chunk(data)
            return
        self.buf += data
        while len(self.buf) >= self.size:
            self._chunk(self.buf[:self.size])
            del self.buf[:self.size]

    def flush(self):
        if self.buf:
            self._chunk(self.buf)
            self.buf.clear()

    def raw(self, data):
        """Bytes outside chunk framing (the part of a cut-off chunk)."""
        self.flush()
        self.wfile.write(data)

    def finish(self):
        self.flush()
        self.wfile.write(b"0\r\n\r\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "agentz-model-server/1"

    def log_message(self, fmt, *args):
        pass

    def log_error(self, fmt, *args):
        self.server.owner.log("error: " + (fmt % args))

    # -- routing ------------------------------------------------------------

    def do_POST(self):
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_POST

    def _handle(self):
        owner = self.server.owner
        try:
            raw = self._read_body()
        except ValueError as e:
            self._send_plan(json_plan(400, error_body(400, {"message": str(e)})))
            self.close_connection = True
            return
        path = self.path.split("?", 1)[0]
        body, body_err = None, None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body_err = raw.decode("utf-8", "replace")
        rec = {"method": self.command, "path": path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "authorization": self.headers.get("Authorization"),
               "body": body}
        if body_err is not None:
            rec["body_text"] = body_err
        owner.active_change(1)
        try:
            self._answer(owner, rec, raw, body_err)
        finally:
            owner.active_change(-1)

    def _answer(self, owner, rec, raw, body_err):
        plan = owner.dispatch(rec, raw, body_err is not None)
        plan.index = rec.get("index")
        try:
            self._send_plan(plan)
        except _Gone:
            self.close_connection = True
        except (_Stop, OSError) as e:
            self.close_connection = True
            if isinstance(e, OSError) and not owner.stopping.is_set():
                owner.disconnected(plan.index, "sending")

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                try:
                    n = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise ValueError("bad chunked request body") from None
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(n)
                self.rfile.readline(1024)
        cl = self.headers.get("Content-Length")
        if not cl:
            return b""
        try:
            n = int(cl)
        except ValueError:
            raise ValueError("bad Content-Length") from None
        return self.rfile.read(n)

    # -- sending ------------------------------------------------------------

    def _headers(self, plan, chunked):
        self.send_response(plan.status)
        h = {"x-request-id": "req_" + secrets.token_hex(16)}
        h.update(plan.headers)
        for k, v in plan.extra_headers.items():
            for old in [x for x in h if x.lower() == k.lower()]:
                del h[old]
            if v is not None:
                h[k] = str(v)
        if chunked:
            h["transfer-encoding"] = "chunked"
        elif not plan.no_length and "content-length" not in {k.lower()
                                                             for k in h}:
            h["content-length"] = str(len(plan.body or b""))
        for k, v in h.items():
            self.send_header(k, v)
        self.end_headers()

    def _wait(self, seconds):
        if seconds and seconds > 0 and self.server.owner.stopping.wait(seconds):
            raise _Stop()

    def _hold(self, plan):
        """Wait at plan's gate while a thread watches the client: EOF (or
        an error) on the socket before the gate opens is a disconnect."""
        owner = self.server.owner
        rfd, wfd = os.pipe()
        gone = threading.Event()

        def watch():
            try:
                r, _, _ = select.select([self.connection, rfd], [], [])
                if self.connection in r:
                    try:
                        data = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        gone.set()
                        owner.disconnected(plan.index, "held")
            finally:
                os.close(rfd)

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        try:
            ok = owner.wait_gate(plan.hold, gone)
        finally:
            os.write(wfd, b"x")
            os.close(wfd)
            t.join(5)
        if gone.is_set():
            raise _Gone()
        if not ok:
            raise _Stop()

    def _send_plan(self, plan):
        if plan.hold is not None:
            self._hold(plan)
        self._wait(plan.initial_delay)
        if plan.pieces is None:
            self._headers(plan, chunked=False)
            if plan.end == "truncate":
                self.wfile.write(plan.partial)
                self._abort(plan)
                return
            if self.command != "HEAD":
                self.wfile.write(plan.body or b"")
            return
        self._headers(plan, chunked=True)
        w = ChunkWriter(self.wfile, plan.chunk_size)
        delay, pause_after, pause = plan.delay, plan.pause_after, plan.pause
        n = 0
        for piece in plan.pieces:
            if n and delay:
                w.flush()
                self._wait(delay)
            w.send(piece)
            n += 1
            if pause_after is not None and n == pause_after and pause:
                w.flush()
                self._wait(pause)
            if self.server.owner.stopping.is_set():
                raise _Stop()
        if plan.end == "drop":
            w.flush()
            if plan.partial:
                w.raw(b"%x\r\n" % (len(plan.partial) + 64) + plan.partial)
            self._wait(plan.stall)
            self._abort(plan)
            return
        w.finish()

    def _abort(self, plan):
        """Close the connection without finishing the body."""
        self.close_connection = True
        try:
            self.wfile.flush()
            if plan.reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Eight parallel call_me connect at once: the default backlog (5) would
    # drop one and the client would retry a second later.
    request_queue_size = 128

    def __init__(self, addr, owner):
        self.owner = owner
        self._live = {}
        self._live_lock = threading.Lock()
        super().__init__(addr, Handler)

    def process_request_thread(self, request, client_address):
        with self._live_lock:
            self._live[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(request, None)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if not isinstance(exc, (OSError, _Stop)):
            super().handle_error(request, client_address)

    def close_live(self):
        """Unblock every handler thread (idle keep-alive reads included)."""
        with self._live_lock:
            live = list(self._live.items())
        for sock, _ in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return [t for _, t in live]
