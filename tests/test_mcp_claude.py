"""`hitl mcp` driven by the real Claude Code CLI (the version scripts/install-claude-code pins),
offline against a scripted Messages API on 127.0.0.1 (tests/support: claude.py, messages_api.py).

- The README's setup line, `claude mcp add hitl -- hitl mcp`, run in a project: `claude mcp
  list` starts the server there and says it is Connected.
- A scripted agent calls `mcp__hitl__ask_operator`: its block is in `hitl list --json`, `hitl
  answer` answers it, and a second run's `check_answer` returns the choice to the model.
- A scripted `Bash` call through `--permission-prompt-tool mcp__hitl__approve`: denied while
  unanswered (the command does not run), allowed once after the operator's answer, and asked
  again the time after.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.claude import ClaudeCode, result_of, stdio_server
from tests.support.messages_api import MessagesAPI, result_text, text, tool_use

pytestmark = pytest.mark.timeout(180)

HITL = str(Path(sys.executable).parent / "hitl")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def hitl(*args: str) -> str:
    done = subprocess.run([HITL, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def listed(repo: Path) -> list[dict[str, Any]]:
    return json.loads(hitl("list", "--json", str(repo)))


def run(
    claude_code: ClaudeCode, repo: Path, turns: list[Any], **options: Any
) -> tuple[subprocess.CompletedProcess[str], MessagesAPI]:
    """One scripted `claude -p` in `repo`, with `hitl mcp` (started there) as its server."""
    args = options.pop("server_args", ())
    servers = {"hitl": stdio_server(HITL, "mcp", *args)}
    with MessagesAPI(turns) as api:
        done = claude_code.print_run(
            "Work on the task.", api_url=api.url, servers=servers, cwd=repo, **options
        )
    assert done.returncode == 0, done
    return done, api


def tool_json(api: MessagesAPI, call: Any) -> dict[str, Any]:
    """What the tool returned to the model: its one JSON object."""
    answer = api.tool_result(1, call.id)
    return json.loads(result_text(answer))


def test_claude_mcp_add_then_list_says_connected(claude_code: ClaudeCode, repo: Path) -> None:
    env = claude_code.env("http://127.0.0.1:9")
    added = subprocess.run(
        [str(claude_code.binary), "mcp", "add", "hitl", "--", HITL, "mcp"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0, added
    done = subprocess.run(
        [str(claude_code.binary), "mcp", "list"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("hitl:")]
    assert line.endswith("✔ Connected"), done.stdout


def test_an_agents_question_is_answered_in_hitl_and_read_on_its_next_run(
    claude_code: ClaudeCode, repo: Path
) -> None:
    ask = tool_use(
        "mcp__hitl__ask_operator",
        {
            "question": "Keep archived invoices when a workspace is deleted?",
            "choices": ["Cascade — simplest", "Keep them — needs a migration"],
            "context": "billing keeps 7 years",
        },
    )
    allowed = ("mcp__hitl__ask_operator", "mcp__hitl__check_answer")
    _, api = run(claude_code, repo, [ask, text("Waiting.")], allowed_tools=allowed)
    queued = tool_json(api, ask)
    assert queued["status"] == "queued", queued
    (block,) = listed(repo)
    assert block["id"] == queued["id"] and block["source"] == "ask"
    assert block["question"] == "Keep archived invoices when a workspace is deleted?"
    assert [c["option"] for c in block["choices"]] == ["Cascade", "Keep them"]
    hitl("answer", block["id"], "--choice", "B", "--no-restart", str(repo))
    assert listed(repo) == []

    check = tool_use("mcp__hitl__check_answer", {"id": queued["id"]})
    done, api = run(claude_code, repo, [check, text("Keeping them.")], allowed_tools=allowed)
    assert tool_json(api, check) == {
        "status": "answered",
        "id": queued["id"],
        "choice": "Keep them",
        "answer": "Keep them",
    }
    assert result_of(done)["result"] == "Keeping them."


def test_a_bash_call_waits_for_the_operator_through_approve(
    claude_code: ClaudeCode, repo: Path
) -> None:
    def attempt() -> tuple[dict[str, Any], Any]:
        call = tool_use("Bash", {"command": "touch RAN", "description": "Make a file"})
        done, api = run(
            claude_code,
            repo,
            [call, text("Done.")],
            permission_prompt_tool="mcp__hitl__approve",
            server_args=("--approve-wait", "1s"),
        )
        return result_of(done), api.tool_result(1, call.id)

    # Unanswered: denied, nothing runs, the agent is told which ask to wait for.
    result, answer = attempt()
    assert not (repo / "RAN").exists()
    assert answer.get("is_error") is True
    (block,) = listed(repo)
    assert block["question"] == "Allow Bash: `touch RAN`?"
    assert block["id"] in result_text(answer) and "end your turn" in result_text(answer)
    assert len(result["permission_denials"]) == 1

    # Allowed once: the same request on the next run runs.
    hitl("answer", block["id"], "--choice", "A", "--no-restart", str(repo))
    result, answer = attempt()
    assert (repo / "RAN").exists()
    assert not answer.get("is_error")
    assert result["permission_denials"] == []
    (repo / "RAN").unlink()

    # Once: the run after is asked again, a new block, and nothing runs.
    result, answer = attempt()
    assert not (repo / "RAN").exists()
    (again,) = listed(repo)
    assert again["id"] != block["id"] and again["id"] in result_text(answer)
