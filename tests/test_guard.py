"""`hitl guard`: the gate a loop runner checks before each iteration, and the README's run.sh."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hitl_tui.inbox import Inbox
from hitl_tui.sources import default_sources

SHOP_QUESTION = (
    "Should deleting a workspace also delete its archived invoices, or keep them for 7 years?"
)

TASK = """\
---
task_id: T-007
status: {status}
block_category: contract
backend: files
type: change-request
---

# T-007 - Switch session storage from SQLite to Postgres

## Task
Move sessions to Postgres.

## Comments
- 2026-08-21: Blocked (contract): change-request approval gate. Needed: a human approves.
- 2026-08-19: Started.
"""

#: The loop the README shows, word for word.
RUN_SH = """\
#!/usr/bin/env bash
while true; do
  hitl guard || exit $?
  grep -q '^STATUS: done' IMPLEMENTATION_PLAN.md 2>/dev/null && exit 0
  claude -p "$(cat PROMPT.md)"
done
"""


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


def hitl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl_tui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def task_repo(tmp_path: Path) -> Path:
    """A repository whose only block is an agenticloop task file."""
    repo = tmp_path / "billing"
    (repo / ".agenticloop" / "tasks").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".agenticloop" / "tasks" / "T-007.md").write_text(TASK.format(status="blocked"))
    return repo


def _agenticloop_registered() -> bool:
    return "agenticloop" in [s.name for s in default_sources()]


def test_a_blocked_repo_exits_2_with_its_question(shop: Path) -> None:
    result = guard(str(shop), cwd=shop.parent)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"
    assert result.stderr == ""


def test_an_unblocked_repo_exits_0_silently(shop: Path) -> None:
    (shop / "BLOCKED.md").unlink()
    result = guard(str(shop), cwd=shop.parent)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_default_is_the_git_top_level_of_the_cwd(shop: Path) -> None:
    deep = shop / "src" / "workspaces"
    deep.mkdir(parents=True)
    result = guard(cwd=deep)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"


def test_a_folder_of_repos_is_blocked_while_any_is(shop: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    (clean / ".git").mkdir(parents=True)
    result = guard(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == f"shop: blocked: {SHOP_QUESTION}\n"
    (shop / "BLOCKED.md").unlink()
    assert guard(str(tmp_path), cwd=tmp_path).returncode == 0


def test_hostile_text_is_printed_inert(tmp_path: Path) -> None:
    repo = tmp_path / "evil"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_bytes(
        b"## Question:\n\x1b]0;pwned\x07[b]Really\x1b[2J? [@click=app.quit]\n## Choices:\n- A) x\n"
    )
    result = guard(str(repo), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "evil: blocked: ␛]0;pwned␇[b]Really␛[2J? [@click=app.quit]\n"
    assert "\x1b" not in result.stdout


def test_an_unreadable_block_still_blocks(tmp_path: Path) -> None:
    repo = tmp_path / "locked"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text("## Question:\nq?\n")
    (repo / "BLOCKED.md").chmod(0)
    if os.access(repo / "BLOCKED.md", os.R_OK):
        pytest.skip("running as root: the file stays readable")
    result = guard(str(repo), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "locked: blocked: (BLOCKED.md could not be read)\n"


def test_a_missing_path_stops_the_loop_too(tmp_path: Path) -> None:
    result = guard(str(tmp_path / "nope"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"hitl: no such folder: {tmp_path / 'nope'}\n"


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
def test_a_task_file_blocked_repo_exits_2(task_repo: Path) -> None:
    inbox = Inbox.open([task_repo])
    assert [b.source for b in inbox.sorted_blocks()] == ["agenticloop"]
    result = guard(str(task_repo), cwd=task_repo)
    assert result.returncode == 2
    assert result.stdout.startswith("billing/T-007: blocked (contract): ")
    assert result.stdout.count("\n") == 1


@pytest.mark.skipif(not _agenticloop_registered(), reason="the agenticloop source is not landed")
@pytest.mark.parametrize(("status", "code"), [("needs_context", 2), ("agent-ready", 0)])
def test_task_status_decides(task_repo: Path, status: str, code: int) -> None:
    task = task_repo / ".agenticloop" / "tasks" / "T-007.md"
    task.write_text(TASK.format(status=status))
    result = guard(cwd=task_repo)
    assert result.returncode == code
    assert result.stdout.startswith("billing/T-007: needs_context: ") if code else not result.stdout


def test_escalate_then_guard_then_answer(tmp_path: Path) -> None:
    repo = tmp_path / "shopx"
    (repo / ".git").mkdir(parents=True)
    assert guard(cwd=repo).returncode == 0
    escalated = hitl(
        "escalate",
        "--question",
        "Keep invoices?",
        "--context",
        "delete workspace",
        "--attempted",
        "read PROMPT.md",
        "--choice",
        "Cascade — loses invoices",
        "--choice",
        "Keep — needs a migration",
        cwd=repo,
    )
    assert escalated.returncode == 2, escalated.stderr
    blocked = guard(cwd=repo)
    assert (blocked.returncode, blocked.stdout) == (2, "shopx: blocked: Keep invoices?\n")
    answered = hitl("answer", str(repo), "--choice", "B", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    assert guard(cwd=repo).returncode == 0


def test_the_readme_run_sh_stops_on_a_block_and_resumes(tmp_path: Path) -> None:
    """The five-line loop, with a fake agent that escalates on its second session."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "hitl"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m hitl_tui "$@"\n')
    shim.chmod(0o755)
    agent = bin_dir / "claude"
    agent.write_text(
        "#!/bin/sh\n"
        "echo session >> sessions.log\n"
        'n=$(wc -l < sessions.log | tr -d " ")\n'
        'if [ "$n" = 2 ]; then\n'
        "  hitl escalate --question 'Which DB?' --context 'storage layer' \\\n"
        "    --attempted 'read PROMPT.md' --choice 'SQLite — simple' --choice 'Postgres — ops'\n"
        '  echo "escalate exited $?" >> sessions.log\n'
        'elif [ "$n" -ge 4 ]; then\n'
        "  echo 'STATUS: done' > IMPLEMENTATION_PLAN.md\n"
        "fi\n"
    )
    agent.chmod(0o755)
    repo = tmp_path / "loop"
    (repo / ".git").mkdir(parents=True)
    (repo / "PROMPT.md").write_text("# Goal\nBuild it.\n")
    (repo / "run.sh").write_text(RUN_SH)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env = {k: v for k, v in env.items() if not k.startswith("LOOPKIT_HITL_")}
    bash = shutil.which("bash") or "/bin/bash"

    first = subprocess.run([bash, "run.sh"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert first.returncode == 2, first.stderr
    assert b"loop: blocked: Which DB?\n" in first.stdout
    log = (repo / "sessions.log").read_text()
    assert log == "session\nsession\nescalate exited 2\n"
    assert (repo / "BLOCKED.md").exists()

    answered = hitl("answer", str(repo), "--choice", "B", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    second = subprocess.run([bash, "run.sh"], cwd=repo, env=env, capture_output=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert (repo / "sessions.log").read_text() == log + "session\n"
    assert (repo / "IMPLEMENTATION_PLAN.md").read_text() == "STATUS: done\n"
