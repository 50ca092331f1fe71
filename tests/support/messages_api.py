"""A scripted stand-in for Anthropic's Messages API, for driving the real Claude Code CLI offline.

`MessagesAPI(script)` serves HTTP on 127.0.0.1 (a thread, a free port); point Claude Code at it
with `ANTHROPIC_BASE_URL=api.url`. Each turn of the conversation, a POST /v1/messages that
carries the session's tools list, is answered with the script's next turn (`tool_use(...)` or
`text(...)`), streamed as server-sent events when the request asks for `"stream": true`, else as
one JSON message. Every request is recorded (`api.requests`); the conversation's own requests are
`api.turns` in order, so a test reads what Claude Code sent back (`api.tool_results(i)`: the
tool_result blocks of the i-th turn's request, e.g. what an MCP tool returned).

Anything else the CLI asks (a side request without tools: a title, a quota check; a token count;
an unknown endpoint) never consumes a turn: side requests get a short text, count_tokens a count,
other GETs an empty JSON object. Once the script has run out, a turn gets the text
"(end of script)" with stop_reason end_turn, so a run always ends.

The event shapes are the documented stream: message_start (a Message with empty content), per
block content_block_start / content_block_delta (text_delta or input_json_delta) /
content_block_stop, then message_delta (stop_reason, usage) and message_stop; a ping first.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-test-stub"
END_OF_SCRIPT = "(end of script)"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Turn:
    """One assistant message: content blocks and the stop_reason they end with."""

    blocks: tuple[dict[str, Any], ...]
    stop_reason: str

    @property
    def id(self) -> str:
        """The id of the turn's tool_use block."""
        return next(b["id"] for b in self.blocks if b["type"] == "tool_use")


def text(words: str) -> Turn:
    return Turn(({"type": "text", "text": words},), "end_turn")


def tool_use(name: str, tool_input: dict[str, Any], tool_use_id: str = "") -> Turn:
    """A tool call; its id is `toolu_stub_N` unless given."""
    block = {
        "type": "tool_use",
        "id": tool_use_id or f"toolu_stub_{next(_ids):04d}",
        "name": name,
        "input": tool_input,
    }
    return Turn((block,), "tool_use")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or the raw text when it is not JSON, or None


@dataclass
class MessagesAPI:
    script: list[Turn]
    requests: list[Request] = field(default_factory=list)
    turns: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life --------------------------------------------------------------------------------
    def __enter__(self) -> MessagesAPI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        api = self

        class Handler(_Handler):
            stub = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the stub is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- what a test reads --------------------------------------------------------------------
    def tool_results(self, turn: int) -> list[dict[str, Any]]:
        """The tool_result blocks in the last user message of the `turn`-th conversation request
        (0-based: turn 1 carries the results of the script's first tool_use)."""
        with self._lock:
            if turn >= len(self.turns):
                raise AssertionError(
                    f"only {len(self.turns)} conversation requests came; wanted #{turn}; "
                    f"all requests: {self.summary()}"
                )
            messages = self.turns[turn].body["messages"]
        content = messages[-1].get("content") if messages else None
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

    def tool_result(self, turn: int, tool_use_id: str) -> dict[str, Any]:
        """The one tool_result for `tool_use_id` in the `turn`-th request."""
        found = [b for b in self.tool_results(turn) if b.get("tool_use_id") == tool_use_id]
        assert len(found) == 1, f"tool_results of turn {turn}: {self.tool_results(turn)!r}"
        return found[0]

    def summary(self) -> list[str]:
        """One line per request, for failure messages."""
        return [f"{r.method} {r.path}" + _shape(r.body) for r in list(self.requests)]

    # -- answering ------------------------------------------------------------------------------
    def _record(self, request: Request) -> Turn | None:
        """Record the request; return the turn it consumes when it is a conversation turn."""
        with self._lock:
            self.requests.append(request)
            if not _is_turn(request):
                return None
            self.turns.append(request)
            index = len(self.turns) - 1
            return self.script[index] if index < len(self.script) else text(END_OF_SCRIPT)


def result_text(block: dict[str, Any]) -> str:
    """A tool_result's content as text: a string as it is, text blocks joined."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _is_turn(request: Request) -> bool:
    body = request.body
    return (
        request.method == "POST"
        and request.path.split("?")[0].rstrip("/") == "/v1/messages"
        and isinstance(body, dict)
        and bool(body.get("tools"))
    )


def _shape(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    tools = len(body.get("tools") or [])
    messages = len(body.get("messages") or [])
    return f" (tools={tools}, messages={messages}, stream={body.get('stream')})"


def _message(turn: Turn, *, with_content: bool) -> dict[str, Any]:
    return {
        "id": f"msg_stub_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(turn.blocks) if with_content else [],
        "stop_reason": turn.stop_reason if with_content else None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1 if not with_content else 5},
    }


def _events(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": _message(turn, with_content=False)}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(turn.blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


class _Handler(BaseHTTPRequestHandler):
    stub: MessagesAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _read(self) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        return Request(self.command, self.path, dict(self.headers.items()), body)

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_stub_{next(_ids):04d}")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.stub._record(self._read())
        self._json(200, {})

    def do_HEAD(self) -> None:
        # Without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC the CLI first sends HEAD /api/hello.
        self.stub._record(self._read())
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        request = self._read()
        turn = self.stub._record(request)
        path = request.path.split("?")[0].rstrip("/")
        if path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": 10})
            return
        if path != "/v1/messages":
            self._json(200, {})
            return
        answer = turn if turn is not None else text("ok")
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("stream"):
            self._stream(answer)
        else:
            self._json(200, _message(answer, with_content=True))

    def _stream(self, turn: Turn) -> None:
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
            for name, payload in _events(turn)
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_stub_{next(_ids):04d}")
        self.end_headers()
        self.wfile.write(data)
