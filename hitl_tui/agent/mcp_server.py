"""`hitl mcp`: the MCP server (stdio) through which any agent asks the operator.

Built on the official `mcp` SDK (`MCPServer`); the work is `agent.asking`'s, in plain Python.
Three tools, each answering with one text content block holding one JSON object:

- `ask_operator(question, choices, context, attempted, wait_seconds)`: files a question; it
  waits up to `wait_seconds` (0..50) for the answer, with progress notifications every few
  seconds, and returns `answered` (with `choice` and `answer`) or `queued` (with an
  `instruction` to end the turn and call `check_answer` on the next run).
- `check_answer(id)`: `waiting`, `answered` or `unknown`, read from the repository.
- `approve(tool_name, input, tool_use_id)`: Claude Code's `--permission-prompt-tool`:
  `{"behavior": "allow", "updatedInput": ...}` or `{"behavior": "deny", "message": ...}`.

Bad input is an `isError` result whose one JSON object is `{"error": "<one line>"}`, and
nothing is written. The SDK is imported only by `hitl mcp`.

Layer: agent (a client of `agent.asking`, as the CLI is).
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from hitl_tui import __version__
from hitl_tui.agent.asking import MAX_WAIT, Asker, AskError
from hitl_tui.model import HitlError

INSTRUCTIONS = (
    "hitl puts your questions in the human operator's inbox. When you cannot decide something "
    "yourself, call ask_operator once with the question, the choices you see, the context and "
    "what you tried. If it returns status 'queued', end your turn now; on your next run, call "
    "check_answer (with the id) before anything else and follow the operator's answer."
)


def _result(data: dict[str, Any], error: bool = False) -> CallToolResult:
    text = orjson.dumps(data).decode("utf-8")
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def _error(message: str) -> CallToolResult:
    return _result({"error": " ".join(message.split())}, error=True)


class HitlMCP(MCPServer[Any]):
    """The SDK's server with bad arguments answered in one line (the SDK's own message for a
    schema mismatch spans several)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems = []
                for err in cause.errors()[:5]:
                    where = ".".join(str(part) for part in err["loc"]) or "arguments"
                    problems.append(f"{where}: {err['msg']}")
                return _error(f"bad arguments for {name}: " + "; ".join(problems))
            if cause is None and "Unknown tool" in str(exc):
                return _error(str(exc))
            raise


def build(asker: Asker, approve_wait: float) -> MCPServer[Any]:
    """The server for one repository's asks."""
    server = HitlMCP(
        name="hitl",
        title="hitl: ask the human operator",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    def named(ctx: Context[Any, Any]) -> None:
        """Learn the client's name (shown with each ask) from its `initialize`."""
        if asker.client:
            return
        try:
            params = ctx.session.client_params
        except (AttributeError, ValueError):
            return
        info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
        if info is not None:
            asker.client = f"{info.name} {info.version}"[:200]

    async def progress(ctx: Context[Any, Any], ask_id: str, total: float) -> Any:
        async def tick(elapsed: float) -> None:
            message = f"waiting for the operator to answer {asker.public_id(ask_id)}"
            await ctx.report_progress(round(elapsed, 1), total, message)

        return tick

    @server.tool(
        annotations=ToolAnnotations(title="Ask the operator", read_only_hint=False),
    )
    async def ask_operator(
        question: str,
        ctx: Context[Any, Any],
        choices: list[str] | None = None,
        context: str = "",
        attempted: list[str] | None = None,
        wait_seconds: float = 0,
    ) -> CallToolResult:
        """Ask the human operator a question you cannot answer yourself. It lands in the
        operator's hitl inbox. `choices`: the options you see, each "option — consequence".
        `context`: what the operator needs to decide. `attempted`: what you tried.
        `wait_seconds` (0-50): how long to wait for the answer now. Returns
        {"status": "answered", "id", "choice", "answer"} or {"status": "queued", "id",
        "instruction"}: then end your turn and call check_answer(id) on your next run."""
        named(ctx)
        try:
            ask = asker.ask(question, choices or [], context, attempted or [])
        except HitlError as exc:
            return _error(str(exc))
        wait = min(max(float(wait_seconds), 0.0), MAX_WAIT) if wait_seconds == wait_seconds else 0
        public = asker.public_id(ask.id)
        if wait > 0:
            got = await asker.wait(ask.id, wait, anyio.sleep, await progress(ctx, ask.id, wait))
            if got is not None and got.status != "open":
                return _result(asker.result(asker.deliver(ask.id), public))
        return _result(
            {
                "status": "queued",
                "id": public,
                "instruction": (
                    f"The operator has not answered yet. End your turn now. On your next run, "
                    f'call check_answer with id "{public}" first and follow the answer.'
                ),
            }
        )

    @server.tool(annotations=ToolAnnotations(title="Check an answer", read_only_hint=False))
    async def check_answer(id: str = "") -> CallToolResult:
        """Where an ask stands: {"status": "waiting" | "answered" | "unknown", "id", "choice",
        "answer"}. With no id: the newest ask of this repository. `choice` is the option the
        operator chose (null for their own words); `answer` is the decision to follow. While
        waiting, `notes` (when there are any) lists the operator's notes ({"note", "by",
        "at"}, oldest first): read them, and keep waiting; the ask stays open."""
        try:
            return _result(asker.check(id))
        except HitlError as exc:
            return _error(str(exc))

    @server.tool(annotations=ToolAnnotations(title="Approve a tool call", read_only_hint=False))
    async def approve(
        tool_name: str,
        input: dict[str, Any],
        ctx: Context[Any, Any],
        tool_use_id: str = "",
    ) -> CallToolResult:
        """Claude Code's permission prompt (--permission-prompt-tool mcp__hitl__approve): asks
        the operator whether `tool_name` may run with `input`. Returns {"behavior": "allow",
        "updatedInput": {...}} or {"behavior": "deny", "message": "..."}."""
        named(ctx)
        try:
            verdict, ask_id = asker.approve_at_once(tool_name, input, tool_use_id)
        except HitlError as exc:
            return _error(str(exc))
        if verdict is None:
            got = await asker.wait(
                ask_id, approve_wait, anyio.sleep, await progress(ctx, ask_id, approve_wait)
            )
            if got is not None and got.status != "open":
                verdict = asker.settle(ask_id)
                if verdict is None:  # an Allow once another identical call took: ask again
                    try:
                        verdict, ask_id = asker.approve_at_once(tool_name, input, tool_use_id)
                    except HitlError as exc:
                        return _error(str(exc))
            verdict = verdict or asker.unanswered(ask_id)
        return _result(verdict.to_json(input))

    return server


async def serve(asker: Asker, approve_wait: float) -> None:
    """Serve on stdin/stdout until the client closes them."""
    await build(asker, approve_wait).run_stdio_async()


__all__ = ["AskError", "build", "serve"]
