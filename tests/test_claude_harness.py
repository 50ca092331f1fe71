"""The harness that drives the real Claude Code CLI offline (tests/support/claude.py and
messages_api.py), proved against a tiny MCP server of the test's own: `claude mcp list` connects
to it, a scripted `claude -p` calls its tool and the result reaches the model's next request,
and `--permission-prompt-tool` asks its `approve` tool before a Bash command runs, which runs
only when approve allows (and runs the input approve gave back).

What these pin of Claude Code's contract (2.1.332), for `hitl mcp`: approve's arguments are
exactly tool_name, input (the tool's whole input) and tool_use_id; the call's _meta carries a
progressToken and claudecode/toolUseId; the answer is one text block holding
{"behavior": "allow", "updatedInput": {...}} or {"behavior": "deny", "message": "..."}, and
a structured result (the SDK's default for `-> str`) is refused.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.claude import ClaudeCode, result_of, stdio_server
from tests.support.messages_api import MessagesAPI, result_text, text, tool_use

pytestmark = pytest.mark.timeout(120)

#: The tiny server: echo, and approve, which records each call (its arguments and _meta) in
#: calls.jsonl and answers as the file `decision` says: allow, deny, `edit COMMAND` (allow,
#: with the command changed) or wait (20 s, sending progress, then allow). approve_structured
#: answers allow the SDK's default way.
SERVER = '''
import json, os, sys
from pathlib import Path

import anyio
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

HERE = Path(os.environ["ECHO_DIR"])
server = MCPServer("echo")


def record(tool: str, ctx: Context) -> None:
    with open(HERE / "calls.jsonl", "a") as out:
        out.write(json.dumps({"tool": tool, "params": ctx.request_context.params}) + "\\n")


@server.tool(structured_output=False)
def echo(text: str, ctx: Context) -> str:
    """Say the text back."""
    record("echo", ctx)
    return f"echo: {text}"


@server.tool(structured_output=False)
async def approve(
    tool_name: str, input: dict[str, Any], ctx: Context, tool_use_id: str = ""
) -> str:
    """Allow or deny a tool call, as the file `decision` says."""
    record("approve", ctx)
    decision = (HERE / "decision").read_text()
    if decision == "wait":  # an operator who takes 20 s, the call kept alive by progress
        for step in range(100):
            await ctx.report_progress(step, None, "waiting for the operator")
            await anyio.sleep(0.2)
        decision = "allow"
    if decision == "allow":
        return json.dumps({"behavior": "allow", "updatedInput": input})
    if decision.startswith("edit "):
        edited = {**input, "command": decision[len("edit "):]}
        return json.dumps({"behavior": "allow", "updatedInput": edited})
    return json.dumps({"behavior": "deny", "message": "the operator said no"})


@server.tool()
def approve_structured(tool_name: str, input: dict[str, Any], ctx: Context) -> str:
    """Allow, with the SDK's structured output."""
    record("approve_structured", ctx)
    return json.dumps({"behavior": "allow", "updatedInput": input})


if __name__ == "__main__":
    server.run("stdio")
'''


@pytest.fixture
def echo(tmp_path: Path) -> dict[str, Any]:
    """The tiny server's file, its folder (calls.jsonl, decision) and its mcpServers entry."""
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "server.py").write_text(SERVER)
    entry = stdio_server(sys.executable, str(folder / "server.py"), env={"ECHO_DIR": str(folder)})
    return {"folder": folder, "servers": {"echo": entry}}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def calls(echo: dict[str, Any]) -> list[dict[str, Any]]:
    path = echo["folder"] / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_mcp_list_says_the_server_is_connected(claude_code: ClaudeCode, echo, work, tmp_path):
    broken = stdio_server(sys.executable, str(tmp_path / "no-such-server.py"))
    done = claude_code.mcp_list({**echo["servers"], "broken": broken}, cwd=work)
    assert done.returncode == 0, done
    said = {line.split(":")[0]: line for line in done.stdout.splitlines() if ": " in line}
    assert said["echo"].endswith(" - ✔ Connected"), done.stdout
    # The check tells: a server that cannot start is not Connected.
    assert "Connected" not in said["broken"], done.stdout


def test_a_scripted_mcp_tool_call_returns_its_result_to_the_model(
    claude_code: ClaudeCode, echo, work
):
    call = tool_use("mcp__echo__echo", {"text": "hello from the script"})
    with MessagesAPI([call, text("All done.")]) as api:
        done = claude_code.print_run(
            "Echo something.",
            api_url=api.url,
            servers=echo["servers"],
            cwd=work,
            allowed_tools=("mcp__echo__echo",),
        )
    assert done.returncode == 0, done
    assert result_of(done)["result"] == "All done."
    assert len(api.turns) == 2, api.summary()
    answer = api.tool_result(1, call.id)
    assert result_text(answer) == "echo: hello from the script"
    assert not answer.get("is_error")
    assert [c["params"]["arguments"] for c in calls(echo)] == [{"text": "hello from the script"}]


def bash_through_approve(
    claude_code: ClaudeCode,
    echo,
    work,
    decision: str,
    *,
    tool: str = "approve",
    env: dict[str, str] | None = None,
) -> tuple[Any, MessagesAPI, Any]:
    """A scripted Bash `touch SOMEFILE` in `work`, asked of echo's `tool` first."""
    (echo["folder"] / "decision").write_text(decision)
    call = tool_use("Bash", {"command": "touch SOMEFILE", "description": "Make a file"})
    with MessagesAPI([call, text("Finished.")]) as api:
        done = claude_code.print_run(
            "Make a file.",
            api_url=api.url,
            servers=echo["servers"],
            cwd=work,
            permission_prompt_tool=f"mcp__echo__{tool}",
            env=env,
        )
    assert done.returncode == 0, done
    return done, api, call


def test_approve_gets_the_tool_call_and_a_deny_stops_it(claude_code: ClaudeCode, echo, work):
    done, api, call = bash_through_approve(claude_code, echo, work, "deny")
    assert not (work / "SOMEFILE").exists()
    answer = api.tool_result(1, call.id)
    assert answer.get("is_error") is True
    assert result_text(answer) == "the operator said no"
    assert [d["tool_use_id"] for d in result_of(done)["permission_denials"]] == [call.id]
    # What approve is asked: exactly these arguments; the call's _meta names the tool use and
    # carries a progress token (so a waiting approve can send progress).
    (asked,) = calls(echo)
    assert asked["tool"] == "approve"
    assert asked["params"]["arguments"] == {
        "tool_name": "Bash",
        "input": {"command": "touch SOMEFILE", "description": "Make a file"},
        "tool_use_id": call.id,
    }
    meta = asked["params"]["_meta"]
    assert meta["claudecode/toolUseId"] == call.id
    assert isinstance(meta["progressToken"], int | str)


def test_an_allow_from_approve_runs_the_command(claude_code: ClaudeCode, echo, work):
    _, api, call = bash_through_approve(claude_code, echo, work, "allow")
    assert (work / "SOMEFILE").exists()
    assert not api.tool_result(1, call.id).get("is_error")
    assert [c["tool"] for c in calls(echo)] == ["approve"]


def test_an_allow_runs_the_input_approve_gave_back(claude_code: ClaudeCode, echo, work):
    bash_through_approve(claude_code, echo, work, "edit touch EDITED")
    assert (work / "EDITED").exists()
    assert not (work / "SOMEFILE").exists()


def test_a_structured_answer_from_approve_is_refused(claude_code: ClaudeCode, echo, work):
    """The SDK's default for `-> str` adds structuredContent; Claude Code reads that and
    refuses it, so the allow it holds never runs the command."""
    _, api, call = bash_through_approve(claude_code, echo, work, "", tool="approve_structured")
    assert [c["tool"] for c in calls(echo)] == ["approve_structured"]
    assert not (work / "SOMEFILE").exists()
    answer = api.tool_result(1, call.id)
    assert answer.get("is_error") is True
    assert "invalid result" in result_text(answer)


def test_an_approve_past_the_tool_timeout_runs_nothing_though_it_sent_progress(
    claude_code: ClaudeCode, echo, work
):
    """MCP_TOOL_TIMEOUT is a hard bound on a call: progress does not stretch it, and a call past
    it is an error, not an allow. (The other bound, 30 min without a response or progress for a
    stdio server, CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT, is checked every 30 s: too slow to test.)"""
    started = time.monotonic()
    _, api, call = bash_through_approve(
        claude_code, echo, work, "wait", env={"MCP_TOOL_TIMEOUT": "2000"}
    )
    assert time.monotonic() - started < 15
    answer = api.tool_result(1, call.id)
    assert answer.get("is_error") is True
    assert 'tool "approve" timed out after 2s' in result_text(answer)
    assert not (work / "SOMEFILE").exists()


def test_the_stub_answers_side_requests_without_spending_a_turn():
    """Only a request with the tools list is a turn of the conversation; a side request (no
    tools), a token count or another endpoint is answered and recorded, and a turn past the
    script gets the end-of-script text. A turn not streamed is one JSON message."""
    call = tool_use("mcp__echo__echo", {"text": "hi"})
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    asked = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    with MessagesAPI([call]) as api, httpx.Client(base_url=api.url, timeout=10) as client:
        side = client.post("/v1/messages?beta=true", json={**asked, "stream": True}).text
        count = client.post("/v1/messages/count_tokens", json=asked).json()
        other = client.get("/api/oauth/usage").json()
        first = client.post("/v1/messages", json={**asked, "tools": tools}).json()
        streamed = client.post("/v1/messages", json={**asked, "tools": tools, "stream": True})
    assert "event: message_start" in side and '"text_delta"' in side
    assert count == {"input_tokens": 10} and other == {}
    assert first["content"] == [call.blocks[0]] and first["stop_reason"] == "tool_use"
    lines = streamed.text.splitlines()
    events = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    assert events == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert "(end of script)" in streamed.text and '"end_turn"' in streamed.text
    assert len(api.requests) == 5 and len(api.turns) == 2
