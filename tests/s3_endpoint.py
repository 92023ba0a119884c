"""A real S3 endpoint on 127.0.0.1 for tests (moto's server mode), and a TCP proxy in front of
it that can cut uploads part-way through (the body stops, the connection closes)."""

from __future__ import annotations

import socket
import threading

BUCKET = "judgecal-test"
SECRET = "test-secret-never-logged"


def start_moto():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    return server, server._server.server_port


def aws_env(port: int) -> dict:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class CuttingProxy:
    """Forwards HTTP requests to ``upstream``, one per connection. While ``cut`` is set, a PUT
    whose path contains ``cut_path`` gets its headers and half its body forwarded, and then
    both connections are closed: an upload cut part-way, over the real protocol."""

    def __init__(self, upstream_port: int, cut_path: str = "/responses/part-"):
        self.upstream = ("127.0.0.1", upstream_port)
        self.cut_path = cut_path
        self.cut = False
        self.cuts = 0
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
            lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
            head = b"\r\n".join(lines + [b"Connection: close"])
            method, path = lines[0].split(b" ")[:2]
            with socket.create_connection(self.upstream) as up:
                if self.cut and method == b"PUT" and self.cut_path.encode() in path:
                    self.cuts += 1
                    up.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
                    return  # both sides closed mid-body
                up.sendall(head + b"\r\n\r\n" + body)
                while chunk := up.recv(65536):
                    conn.sendall(chunk)
