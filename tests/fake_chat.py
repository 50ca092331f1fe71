"""A stand-in for Slack, Telegram and any webhook, on 127.0.0.1: records each POST and answers
with the status a test sets (escalate's channels, the app's `[notify]` webhook)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    path: str
    content_type: str
    body: bytes


@dataclass
class FakeChat:
    """Records requests, answers with `status` (after `delay` s, unless `release` is set);
    `reason`, when given, is the reason phrase of an error status (`{path}` in it: the path
    asked, as a server that echoes it back, key and all)."""

    url: str = ""
    status: int = 200
    delay: float = 0.0
    reason: str | None = None
    requests: list[Request] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def bodies(self) -> list[bytes]:
        return [r.body for r in self.requests]

    def texts(self) -> list[str]:
        """The `text` of each Slack-style POST."""
        return [json.loads(b)["text"] for b in self.bodies]


def serve_chat(fake: FakeChat, path: str = "") -> Iterator[FakeChat]:
    """Serve `fake` (its url: the server, then `path`) until the generator is closed: a
    fixture's body."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            fake.requests.append(Request(self.path, self.headers.get("Content-Type", ""), body))
            if fake.delay:
                fake.release.wait(fake.delay)
            reason = fake.reason.format(path=self.path) if fake.reason else None
            self.send_response(fake.status, reason if fake.status >= 400 else None)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:
            pass  # the client gave up (a timeout test): not a test failure

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        yield fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()
