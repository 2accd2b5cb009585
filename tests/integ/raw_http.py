"""Client-side helpers of the model server tests (test_model_server*.py): a
raw-socket HTTP request that keeps chunk boundaries and an unterminated
chunked body (raw_request, Reply, decode_chunked), SSE parsing (sse_events,
types, check_seq) and a request body builder (req).
"""
import json
import socket


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

class Reply:
    def __init__(self, status, headers, body, chunks, complete):
        self.status = status
        self.headers = headers
        self.body = body
        self.chunks = chunks          # sizes of the HTTP chunks received
        self.complete = complete      # terminating zero chunk seen

    def json(self):
        return json.loads(self.body)

    def events(self):
        return sse_events(self.body)


def decode_chunked(data):
    """(body, chunk sizes, complete) of a possibly cut chunked body."""
    body, sizes, pos = bytearray(), [], 0
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return bytes(body), sizes, False
        n = int(data[pos:eol].split(b";")[0], 16)
        if n == 0:
            return bytes(body), sizes, data[eol + 2:eol + 4] == b"\r\n"
        start = eol + 2
        piece = data[start:start + n]
        body += piece
        if len(piece) < n or data[start + n:start + n + 2] != b"\r\n":
            return bytes(body), sizes, False
        sizes.append(n)
        pos = start + n + 2


def raw_request(port, body=None, path="/v1/responses", method="POST",
                headers=None, raw_body=None):
    """One request on a fresh connection (Connection: close); read to EOF."""
    if raw_body is None:
        raw_body = b"" if body is None else json.dumps(body).encode()
    h = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
         "Content-Length": str(len(raw_body)), "Connection": "close"}
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + raw_body)
        data = bytearray()
        while True:
            try:
                b = s.recv(1 << 16)
            except ConnectionResetError:
                break
            if not b:
                break
            data += b
    data = bytes(data)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("transfer-encoding") == "chunked":
        body, sizes, complete = decode_chunked(rest)
    else:
        n = int(hdrs.get("content-length", len(rest)))
        body, sizes, complete = rest[:n], [], len(rest) >= n
    return Reply(status, hdrs, body, sizes, complete)


def sse_events(body):
    """Parse SSE; return event dicts, checking `event:` equals data.type."""
    out = []
    for block in body.decode("utf-8").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if not data:
            continue
        d = json.loads("\n".join(data))
        if name is not None:
            assert name == d["type"]
        out.append(d)
    return out


def types(evs):
    return [e["type"] for e in evs]


def check_seq(evs):
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))


def req(input="hi", stream=True, **kw):
    d = {"model": "gpt-test", "input": input, "stream": stream}
    d.update(kw)
    return d
