"""A real S3 endpoint on 127.0.0.1 for tests (moto's server mode), and a TCP proxy in front of
it that can cut uploads part-way through (the body stops, the connection closes), or for a
while refuse every request (HTTP 503 SlowDown) or stall (hold every request unanswered)."""

from __future__ import annotations

import socket
import threading
import time

BUCKET = "judgecal-test"
SECRET = "test-secret-never-logged"


def start_moto():
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    return server, server._server.server_port


def aws_env(port: int) -> dict:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


# S3's throttling reply (what a busy or overloaded endpoint answers)
SLOW_DOWN_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your '
                 b"request rate.</Message><RequestId>0000000000000000</RequestId></Error>")
SLOW_DOWN = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: "
             + str(len(SLOW_DOWN_XML)).encode() + b"\r\nConnection: close\r\n\r\n" + SLOW_DOWN_XML)


# S3's reply to credentials that may not do what they ask
ACCESS_DENIED_XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access '
                     b"Denied</Message><RequestId>0000000000000000</RequestId></Error>")
ACCESS_DENIED = (b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: "
                 + str(len(ACCESS_DENIED_XML)).encode() + b"\r\nConnection: close\r\n\r\n" + ACCESS_DENIED_XML)


class CuttingProxy:
    """Forwards HTTP requests to ``upstream``, one per connection. While ``cut`` is set, a PUT
    whose path contains ``cut_path`` gets its headers and half its body forwarded, and then
    both connections are closed: an upload cut part-way, over the real protocol.

    ``outage(kind, after, seconds)``: from the ``after``-th request counted from the first PUT
    whose path contains ``cut_path`` (that request included) and for ``seconds``, every
    request is refused (``"refuse"``: read whole, answered 503 SlowDown with S3's XML error
    body, nothing forwarded) or stalled (``"stall"``: read whole and held, not one byte
    answered; at the end of the stall it is forwarded and answered, whether or not the client
    still waits, as an endpoint that stalls and resumes would). ``met`` counts the requests
    that met it, ``first`` is the one it began with, ``started`` / ``ended`` when it began
    and ends, ``log`` every request since it was armed; ``upstream`` may be set after start.
    ``read_only``: every PUT, POST and DELETE is answered 403 AccessDenied, as S3 answers
    credentials that may read but not write."""

    def __init__(self, upstream_port: int | None, cut_path: str = "/responses/part-"):
        self.upstream = ("127.0.0.1", upstream_port)
        self.cut_path = cut_path
        self.cut = False
        self.cuts = 0
        self.read_only = False
        self.denied = 0
        self.lock = threading.Lock()
        self.outage_kind: str | None = None
        self.outage_after, self.outage_s = 0, 0.0
        self.counted = 0  # requests since the first PUT to cut_path
        self.first: tuple[str, str] | None = None
        self.started = self.ended = None  # time.monotonic() of the outage's start and end
        self.met = 0  # requests that met the outage
        self.held = 0  # stalled requests not yet answered
        self.log: list[tuple[str, str]] = []  # (method, path) of every request since the outage was armed
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self):
        self._stop = True
        self.sock.close()

    def outage(self, kind: str, after: int, seconds: float) -> None:
        assert kind in ("refuse", "stall") and after >= 1
        with self.lock:
            self.outage_kind, self.outage_after, self.outage_s = kind, after, seconds
            self.counted, self.first, self.started, self.ended, self.held = 0, None, None, None, 0
            self.met = 0
            self.log.clear()

    def settled(self) -> bool:
        """The outage (if it began) is over and every request it held was answered."""
        with self.lock:
            return self.started is None or (time.monotonic() >= self.ended and not self.held)

    def _meets(self, method: bytes, path: bytes) -> str | None:
        """The outage this request meets, if any."""
        with self.lock:
            if self.outage_kind is None:
                return None
            now = time.monotonic()
            self.log.append((method.decode(), path.decode()))
            if self.started is None and (self.counted or (method == b"PUT" and self.cut_path.encode() in path)):
                self.counted += 1
                if self.counted >= self.outage_after:
                    self.started, self.ended, self.first = now, now + self.outage_s, self.log[-1]
            if self.started is None or now >= self.ended:
                return None
            self.met += 1
            self.held += self.outage_kind == "stall"
            return self.outage_kind

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn) -> tuple[bytes, bytes] | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
            if k.strip().lower() == b"expect" and v.strip().lower() == b"100-continue" and not body:
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # as S3 does (boto3 waits 1 s for it)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head, body

    def _handle(self, conn):
        with conn:
            req = self._read_request(conn)
            if req is None:
                return
            head, body = req
            lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith((b"connection:", b"expect:"))]
            head = b"\r\n".join(lines + [b"Connection: close"])
            method, path = lines[0].split(b" ")[:2]
            if self.read_only and method in (b"PUT", b"POST", b"DELETE"):
                self.denied += 1
                conn.sendall(ACCESS_DENIED)
                return
            fault = self._meets(method, path)
            if fault == "refuse":
                conn.sendall(SLOW_DOWN)
                return
            if fault == "stall":
                while time.monotonic() < self.ended and not self._stop:
                    time.sleep(0.05)
            try:
                self._forward(conn, head, body, method, path)
            except OSError:  # the client gave up on a stalled request: its answer has nowhere to go
                if fault != "stall":
                    raise
            finally:
                if fault == "stall":
                    with self.lock:
                        self.held -= 1

    def _forward(self, conn, head: bytes, body: bytes, method: bytes, path: bytes) -> None:
        with socket.create_connection(self.upstream) as up:
            if self.cut and method == b"PUT" and self.cut_path.encode() in path:
                self.cuts += 1
                up.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
                return  # both sides closed mid-body
            up.sendall(head + b"\r\n\r\n" + body)
            while chunk := up.recv(65536):
                conn.sendall(chunk)
