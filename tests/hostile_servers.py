"""Hostile HTTP servers on 127.0.0.1 for the network tests: slow, endless, huge, echoing.

Each runs in daemon threads, counts what it was asked, and stops by itself: every loop is
bounded in count and in time, and a client that hangs up ends its connection. `stop()` ends
everything at once. Nothing here talks to any address but 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: What the slow-loris server dribbles: a status line and headers that never end.
SLOW_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 400


class SlowLoris:
    """Reads each request, then sends one byte every `interval` seconds.

    `body=False` dribbles the status line and headers (they never complete); `body=True`
    sends complete headers at once, then dribbles a body that never completes. A connection
    ends after `max_bytes` bytes, `max_seconds`, or when the client hangs up; the server
    accepts at most `max_connections` and lives at most `max_seconds` past the last one.
    """

    def __init__(
        self,
        interval: float = 0.3,
        body: bool = False,
        max_bytes: int = 300,
        max_seconds: float = 90.0,
        max_connections: int = 50,
    ) -> None:
        self.interval = interval
        self.body = body
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.max_connections = max_connections
        self.connections = 0
        self.stopped = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> SlowLoris:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        ends = time.monotonic() + self.max_seconds
        while not self.stopped.is_set() and time.monotonic() < ends:
            if self.connections >= self.max_connections:
                self.stopped.wait(0.1)
                continue
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._dribble, args=(conn,), daemon=True).start()

    def _dribble(self, conn: socket.socket) -> None:
        ends = time.monotonic() + self.max_seconds
        with conn:
            conn.settimeout(1.0)
            try:
                conn.recv(65536)  # the request (its first packet is enough here)
                if self.body:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100000\r\n\r\n["
                    )
                    stream = b"0," * self.max_bytes
                else:
                    stream = SLOW_HEAD
                for i in range(min(self.max_bytes, len(stream))):
                    if self.stopped.wait(self.interval) or time.monotonic() > ends:
                        return
                    conn.sendall(stream[i : i + 1])
            except OSError:
                return  # the client gave up: that is the point


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gives up half-way is what these tests expect


class _Base:
    """A ThreadingHTTPServer that counts requests and refuses to serve past `max_requests`."""

    def __init__(self, max_requests: int) -> None:
        self.max_requests = max_requests
        self.requests: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with owner.lock:
                    owner.requests.append(self.path)
                    over = len(owner.requests) > owner.max_requests
                if over:  # the bound that makes the server stop by itself
                    self._json(200, [])
                    return
                owner.handle(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.do_GET()

            def _json(self, status: int, data: object, headers: dict | None = None) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, handler) -> None:
        raise NotImplementedError


class EndlessPages(_Base):
    """GitHub's issue list and every issue's comments, each paginating forever.

    Every issue page holds one blocked issue with comments, every comment page one comment,
    and every page links to a next page that has never been seen: only a client's own bound
    stops it (or this server's `max_requests`).
    """

    def handle(self, handler) -> None:
        path, _, query = handler.path.partition("?")
        page = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("page", 1))
        link = {"Link": f'<{self.url}{path}?per_page=100&page={page + 1}>; rel="next"'}
        if path == "/user":
            handler._json(200, {"login": "loop-bot"})
        elif path.endswith("/comments"):
            comment = {
                "id": page,
                "body": "AGENT_TASK_STATUS: blocked\n",
                "user": {"login": "loop-bot"},
                "author_association": "NONE",
                "created_at": "2026-11-28T09:00:00Z",
                "updated_at": "2026-11-28T09:00:00Z",
            }
            handler._json(200, [comment], link)
        elif path.endswith("/issues"):
            issue = {
                "number": page,
                "title": f"Task {page}",
                "body": "",
                "state": "open",
                "labels": [{"name": "blocked"}],
                "comments": 1,
                "created_at": "2026-11-28T09:00:00Z",
                "updated_at": "2026-11-28T09:00:00Z",
                "html_url": f"https://github.example/acme/shop/issues/{page}",
                "user": {"login": "someone"},
            }
            handler._json(200, [issue], link)
        else:
            handler._json(404, {"message": "Not Found"})


class HugeBody(_Base):
    """Answers the issue list with a valid JSON list of `size` bytes, streamed in 1 MiB chunks
    without a Content-Length (or with one, `declare=True`); stops when the client hangs up."""

    def __init__(self, size: int, declare: bool = False, max_requests: int = 20) -> None:
        super().__init__(max_requests)
        self.size = size
        self.declare = declare
        self.sent = 0

    def handle(self, handler) -> None:
        path = handler.path.partition("?")[0]
        if not path.endswith("/issues"):
            handler._json(200, {"login": "loop-bot"} if path == "/user" else [])
            return
        chunk = b"0," * (1 << 19)  # 1 MiB
        count = max(1, self.size // len(chunk))
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.declare:
            handler.send_header("Content-Length", str(1 + count * len(chunk) + 2))
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        try:
            handler.wfile.write(b"[")
            for _ in range(count):
                handler.wfile.write(chunk)
                self.sent += len(chunk)
            handler.wfile.write(b"0]")
        except OSError:
            return


class Echo(_Base):
    """Answers every request 404 with a reason phrase that quotes the request's path, query
    and the given `extra` words back (as a misconfigured proxy or gateway might)."""

    def __init__(self, extra: str = "", max_requests: int = 20) -> None:
        super().__init__(max_requests)
        self.extra = extra

    def handle(self, handler) -> None:
        path, _, query = handler.path.partition("?")
        words = " ".join(p for p in path.split("/") if p)
        reason = f"no such hook {words} {query} {self.extra}".strip()
        handler.send_response(404, reason)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
