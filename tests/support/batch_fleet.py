"""A fleet that asks the same questions in many repos (issue 26): loopkit repos and agenticloop
tasks asking which Node version CI should use, and loopkit repos asking which migration tool
to use. For the batch tests of the app (marks, by question, one answer for many blocks)."""

from __future__ import annotations

import os
from pathlib import Path

NODE = "Which Node version should CI use?"
DB = "Which DB migration tool should we use?"

NODE_BLOCKED = f"""\
# Blocked

## Question:
{NODE}

## Context:
.github/workflows/ci.yml pins no version; package.json has no engines field.

## Choices:
- A) Node 20 — the LTS the servers run.
- B) Node 22 — the newest LTS; two dependencies warn.
- C) Keep whatever the runner has — nothing changes.
"""

DB_BLOCKED = f"""\
# Blocked

## Question:
{DB}

## Context:
Two migrations were written by hand; nothing runs them.

## Choices:
- A) Alembic — the services are Python.
- B) Flyway — plain SQL files.
"""

TASK = """\
---
task_id: {task}
status: blocked
block_category: decision
backend: files
type: change
---

# {task} - Pin the CI Node version

## Task
Pin the Node version CI runs.

## Comments
- 2026-11-27: Blocked (decision): which version to pin. Checked: ci.yml pins none. \
Needed: {question} Who can unblock: the maintainer.{recommended}
"""


def loopkit(root: Path, name: str, text: str, mtime: float) -> Path:
    repo = root / name
    (repo / ".git").mkdir(parents=True)
    (repo / "PROMPT.md").write_text("# PROMPT.md\n\n## Goal\nShip it.\n")
    path = repo / "BLOCKED.md"
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return repo


def agentic(root: Path, name: str, tasks: list[str], mtime: float) -> Path:
    repo = root / name
    (repo / ".git").mkdir(parents=True)
    folder = repo / ".agenticloop" / "tasks"
    folder.mkdir(parents=True)
    (repo / ".agenticloop" / "project.md").write_text(
        "---\ntask_file_template: .agenticloop/tasks/{taskId}.md\n---\n\n# Project\n"
    )
    for number, task in enumerate(tasks):
        path = folder / f"{task}.md"
        # Every other task recommends a default: a choice that needs no words.
        recommended = " Recommended default: Node 22." if number % 2 else ""
        path.write_text(TASK.format(task=task, question=NODE, recommended=recommended))
        os.utime(path, (mtime, mtime))
    return repo


def build(root: Path, now: float, node: int = 4, db: int = 2, tasks: int = 2) -> list[Path]:
    """`node` loopkit repos asking NODE (node-1 ...), `db` asking DB (db-1 ...), and one
    agenticloop repo (`svc`) with `tasks` tasks asking NODE (T-002, T-004 ... recommend a
    default); each block an hour older than the next, in that order. The repos' paths are
    returned."""
    repos = []
    age = 3600 * (node + db + tasks + 1)
    for i in range(1, node + 1):
        repos.append(loopkit(root, f"node-{i}", NODE_BLOCKED, now - age))
        age -= 3600
    for i in range(1, db + 1):
        repos.append(loopkit(root, f"db-{i}", DB_BLOCKED, now - age))
        age -= 3600
    if tasks:
        repos.append(agentic(root, "svc", [f"T-{i:03}" for i in range(1, tasks + 1)], now - age))
    return repos
