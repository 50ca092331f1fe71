"""`hitl mcp` through the official MCP SDK's client, over stdio, against the real `hitl mcp`
process: the tools and their schemas, each tool's JSON, bad input, waiting (with progress), and
the permission prompt's whole contract (deny while unanswered, allow once, allow always, own
words), with the operator answering through the real `hitl answer` and `hitl grants`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support import until

HITL = str(Path(sys.executable).parent / "hitl")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _env() -> dict[str, str]:
    keep = ("HITL_STATE_DIR", "HITL_CONFIG", "PATH", "HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


@asynccontextmanager
async def session(repo: Path, *args: str):
    params = StdioServerParameters(command=HITL, args=["mcp", str(repo), *args], env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


def payload(result: Any) -> dict[str, Any]:
    """The one JSON object of a tool's result (its one text block)."""
    assert len(result.content) == 1, result.content
    # Plain content only: Claude Code refuses a permission answer with structured content.
    assert result.structured_content is None
    block = result.content[0]
    assert block.type == "text"
    data = json.loads(block.text)
    assert isinstance(data, dict)
    return data


def hitl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([HITL, *args], capture_output=True, text=True, timeout=60, env=_env())
    if check:
        assert done.returncode == 0, done.stderr
    return done


def listed(repo: Path) -> list[dict[str, Any]]:
    return json.loads(hitl("list", "--json", str(repo)).stdout)


def open_asks(repo: Path) -> list[Path]:
    folder = repo / ".hitl" / "asks"
    return sorted(folder.glob("ask-*.json")) if folder.is_dir() else []


async def test_the_tools_and_their_input_schemas(repo: Path) -> None:
    async with session(repo) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"ask_operator", "check_answer", "approve"}
    ask = tools["ask_operator"].input_schema
    assert ask["required"] == ["question"]
    assert set(ask["properties"]) == {"question", "choices", "context", "attempted", "wait_seconds"}
    assert "required" not in tools["check_answer"].input_schema
    approve = tools["approve"].input_schema
    assert approve["required"] == ["tool_name", "input"]
    assert approve["properties"]["input"]["type"] == "object"
    for tool in tools.values():
        assert tool.description and "operator" in tool.description
        assert tool.output_schema is None  # no structured output (see `payload`)


async def test_a_queued_question_is_listed_answered_and_checked(repo: Path) -> None:
    async with session(repo) as client:
        queued = payload(
            await client.call_tool(
                "ask_operator",
                {
                    "question": "Delete archived invoices with the workspace?",
                    "choices": ["Cascade — simplest", "Keep invoices — needs a migration"],
                    "context": "billing keeps 7 years",
                    "attempted": ["searched PROMPT.md"],
                },
            )
        )
        assert queued["status"] == "queued"
        ask_id = queued["id"]
        assert ask_id.startswith("shop/ask-")
        assert "check_answer" in queued["instruction"] and ask_id in queued["instruction"]
        assert payload(await client.call_tool("check_answer", {"id": ask_id})) == {
            "status": "waiting",
            "id": ask_id,
            "choice": None,
            "answer": None,
        }
    # The block is where hitl lists blocks, with the id hitl answers by.
    (block,) = [b for b in listed(repo) if b["id"] == ask_id]
    assert block["question"] == "Delete archived invoices with the workspace?"
    assert [c["option"] for c in block["choices"]] == ["Cascade", "Keep invoices"]
    assert block["attempted"] == ["searched PROMPT.md"]
    guard = hitl("guard", str(repo), check=False)
    assert guard.returncode == 2, guard
    hitl("answer", ask_id, "--choice", "B", "--no-restart", str(repo))
    assert hitl("guard", str(repo), check=False).returncode == 0
    # A second run of the agent: a new server process reads the answer from the repository.
    async with session(repo) as client:
        answered = payload(await client.call_tool("check_answer", {"id": ask_id}))
        again = payload(await client.call_tool("check_answer", {}))
    assert answered == {
        "status": "answered",
        "id": ask_id,
        "choice": "Keep invoices",
        "answer": "Keep invoices",
    }
    assert again == answered  # no id: the newest question; asked twice, the same answer
    data = json.loads(open_asks(repo)[0].read_bytes())
    assert data["status"] == "delivered"


async def test_own_words_come_back_as_the_answer_with_no_choice(repo: Path) -> None:
    async with session(repo) as client:
        ask_id = payload(await client.call_tool("ask_operator", {"question": "Which port?"}))["id"]
        hitl("answer", ask_id, "--text", "use 8443, not 443", "--no-restart", str(repo))
        result = payload(await client.call_tool("check_answer", {"id": ask_id.split("/")[-1]}))
    assert result["status"] == "answered"
    assert result["choice"] is None
    assert result["answer"] == "use 8443, not 443"


async def test_a_waiting_ask_reports_progress_and_returns_the_answer(repo: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    result: dict[str, Any] = {}
    async with session(repo) as client:

        async def ask() -> None:
            got = await client.call_tool(
                "ask_operator",
                {"question": "Ship it?", "choices": ["Yes", "No"], "wait_seconds": 999},
                progress_callback=on_progress,
            )
            result.update(payload(got))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await until(None, lambda: progress, 30, what="a progress notification while waiting")
            (path,) = open_asks(repo)
            await anyio.run_process(
                [HITL, "answer", path.stem, "--choice", "A", "--no-restart", str(repo)]
            )
    assert result["status"] == "answered"
    assert result["choice"] == "Yes"
    assert result["id"] == f"shop/{path.stem}"
    done, total, message = progress[0]
    assert total == 50  # wait_seconds is clamped to 0..50
    assert 0 < done < 50
    assert message and path.stem in message


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("ask_operator", {}, "question"),
        ("ask_operator", {"question": 5}, "question"),
        ("ask_operator", {"question": "   "}, "question is empty"),
        ("ask_operator", {"question": "x" * 4001}, "at most 4,000"),
        ("ask_operator", {"question": "q", "choices": "A or B"}, "choices"),
        ("ask_operator", {"question": "q", "choices": [f"c{i}" for i in range(21)]}, "at most 20"),
        ("ask_operator", {"question": "q", "wait_seconds": "soon"}, "wait_seconds"),
        ("check_answer", {"id": "../../etc/passwd"}, "not an ask id"),
        ("approve", {"tool_name": "Bash"}, "input"),
        ("approve", {"tool_name": "Bash", "input": "rm -rf /"}, "input"),
        ("approve", {"tool_name": "", "input": {}}, "tool_name is empty"),
        ("approve", {"tool_name": "Bash", "input": {"c": "x" * 300_000}}, "at most 262,144"),
        ("no_such_tool", {}, "no_such_tool"),
    ],
)
async def test_bad_input_is_one_line_and_writes_nothing(
    repo: Path, tool: str, arguments: dict[str, Any], said: str
) -> None:
    async with session(repo) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    message = payload(result)["error"]
    assert "\n" not in message and said in message, message
    assert not (repo / ".hitl").exists()


async def test_approve_denies_while_unanswered_allows_once_then_asks_again(repo: Path) -> None:
    request = {"tool_name": "Bash", "input": {"command": "rm -rf build/"}, "tool_use_id": "t1"}
    async with session(repo, "--approve-wait", "1s") as client:
        first = payload(await client.call_tool("approve", request))
        assert first["behavior"] == "deny"
        (block,) = listed(repo)
        assert block["question"] == "Allow Bash: `rm -rf build/`?"
        assert block["category"] == "permission"
        assert [c["option"] for c in block["choices"]] == ["Allow once", "Allow always", "Deny"]
        assert block["id"] in first["message"] and "end your turn" in first["message"]
        # Asking again before the operator answers waits on the same ask: no second block.
        assert payload(await client.call_tool("approve", request))["behavior"] == "deny"
        assert [b["id"] for b in listed(repo)] == [block["id"]]
        hitl("answer", block["id"], "--choice", "A", "--no-restart", str(repo))
        allowed = payload(await client.call_tool("approve", request))
        assert allowed == {"behavior": "allow", "updatedInput": {"command": "rm -rf build/"}}
        # Once: the time after, the operator is asked again.
        third = payload(await client.call_tool("approve", request))
        assert third["behavior"] == "deny"
        (again,) = listed(repo)
        assert again["id"] != block["id"] and again["id"] in third["message"]
        # Another input is another request.
        other = {"tool_name": "Bash", "input": {"command": "rm -rf /"}}
        assert payload(await client.call_tool("approve", other))["behavior"] == "deny"
    assert len(listed(repo)) == 2


async def test_allow_always_is_a_grant_until_revoked(repo: Path) -> None:
    request = {"tool_name": "Bash", "input": {"command": "make test", "timeout": 60}}
    async with session(repo, "--approve-wait", "0s") as client:
        assert payload(await client.call_tool("approve", request))["behavior"] == "deny"
        (block,) = listed(repo)
        hitl("answer", block["id"], "--choice", "B", "--no-restart", str(repo))
        for _ in range(3):
            got = payload(await client.call_tool("approve", request))
            assert got == {"behavior": "allow", "updatedInput": request["input"]}
        # The same input with its keys in another order is the same request.
        swapped = {"tool_name": "Bash", "input": {"timeout": 60, "command": "make test"}}
        assert payload(await client.call_tool("approve", swapped))["behavior"] == "allow"
        (grant,) = json.loads(hitl("grants", "--json", str(repo)).stdout)
        assert grant["tool"] == "Bash" and grant["summary"] == "Bash: make test"
        hitl("grants", "--revoke", grant["id"], str(repo))
        assert payload(await client.call_tool("approve", request))["behavior"] == "deny"
    assert len(listed(repo)) == 1


async def test_own_words_deny_with_that_message(repo: Path) -> None:
    request = {"tool_name": "Write", "input": {"file_path": "/etc/hosts", "content": "x"}}
    async with session(repo, "--approve-wait", "0s") as client:
        payload(await client.call_tool("approve", request))
        (block,) = listed(repo)
        assert block["question"] == "Allow Write: `/etc/hosts`?"
        hitl(
            "answer",
            block["id"],
            "--text",
            "never touch /etc; write ./hosts",
            "--no-restart",
            str(repo),
        )
        denied = payload(await client.call_tool("approve", request))
    assert denied["behavior"] == "deny"
    assert denied["message"].startswith("never touch /etc; write ./hosts")


async def test_an_answer_while_approve_waits_is_returned_at_once(repo: Path) -> None:
    request = {"tool_name": "Bash", "input": {"command": "npm publish"}}
    result: dict[str, Any] = {}
    async with session(repo, "--approve-wait", "60s") as client:

        async def approve() -> None:
            result.update(payload(await client.call_tool("approve", request)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(approve)
            await until(None, lambda: open_asks(repo), 30, what="the permission ask file")
            (path,) = open_asks(repo)
            await anyio.run_process(
                [HITL, "answer", path.stem, "--choice", "A", "--no-restart", str(repo)]
            )
    assert result == {"behavior": "allow", "updatedInput": {"command": "npm publish"}}


@pytest.mark.parametrize("client", ["claude", "codex", "cursor"])
def test_print_config_gives_each_clients_setup(client: str) -> None:
    out = hitl("mcp", "--print-config", client).stdout
    if client == "claude":
        assert "claude mcp add hitl -- " in out and out.split("-- ")[1].split()[1] == "mcp"
        assert "--permission-prompt-tool mcp__hitl__approve" in out
    elif client == "codex":
        assert "codex mcp add hitl -- " in out and "[mcp_servers.hitl]" in out
    else:
        body = "\n".join(line for line in out.splitlines() if not line.startswith("//"))
        server = json.loads(body)["mcpServers"]["hitl"]
        assert server["args"] == ["mcp"]
        assert os.path.basename(server["command"]) == "hitl"


def test_bad_approve_wait_is_one_line(tmp_path: Path) -> None:
    done = hitl("mcp", "--approve-wait", "11m", str(tmp_path), check=False)
    assert done.returncode == 2 and "--approve-wait" in done.stderr
    assert done.stderr.count("\n") == 1
    config = tmp_path / "config.toml"
    config.write_text("[mcp]\napprove_wait = 30\n")
    done = hitl("mcp", "--config", str(config), str(tmp_path), check=False)
    assert done.returncode == 2 and "[mcp]: approve_wait" in done.stderr


async def test_started_below_the_root_it_asks_at_the_repositorys_root(repo: Path) -> None:
    below = repo / "src" / "billing"
    below.mkdir(parents=True)
    params = StdioServerParameters(command=HITL, args=["mcp"], env=_env(), cwd=below)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        queued = payload(await client.call_tool("ask_operator", {"question": "Which tax rule?"}))
    assert queued["id"].startswith("shop/ask-")
    assert [b["id"] for b in listed(repo)] == [queued["id"]]
    assert not (below / ".hitl").exists()
