"""A large workspace is scanned by worker processes; the result must be exactly the same."""

from __future__ import annotations

from pathlib import Path

from hitl_tui.inbox import scan as scan_module
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.scan import PARALLEL_MIN_REPOS
from hitl_tui.inbox.workspace import Workspace

TASK = """\
---
task_id: T-{n:03d}
status: {status}
block_category: credentials
---

# T-{n:03d} - Task {n}

## Comments
- 2026-11-20: Blocked (credentials): Needed: a token {n}.
"""


def _fleet(root: Path, count: int) -> None:
    for i in range(count):
        repo = root / f"r{i:03d}"
        (repo / ".git").mkdir(parents=True)
        if i % 3 == 0:
            (repo / "BLOCKED.md").write_text(f"## Question\nRepo {i}?\n## Choices\n- A) x\n")
        if i % 3 == 1:
            tasks = repo / ".agenticloop" / "tasks"
            tasks.mkdir(parents=True)
            for n in range(3):
                status = "blocked" if n < 2 else "agent-ready"
                (tasks / f"T-{n:03d}.md").write_text(TASK.format(n=n, status=status))


def test_parallel_scan_equals_serial_scan(tmp_path: Path) -> None:
    count = PARALLEL_MIN_REPOS + 6
    _fleet(tmp_path, count)
    serial = Inbox(Workspace.discover([tmp_path]))
    serial.scan(workers=1)
    parallel = Inbox(Workspace.discover([tmp_path]))
    parallel.scan(workers=2)
    expected = sum(1 if i % 3 == 0 else 2 if i % 3 == 1 else 0 for i in range(count))
    assert len(serial.blocks) == expected
    assert [b.to_json() for b in parallel.sorted_blocks()] == [
        b.to_json() for b in serial.sorted_blocks()
    ]
    assert parallel.watch_dirs() == serial.watch_dirs()
    # Incremental updates work on a parallel-scanned inbox as on any other.
    first = tmp_path / "r000" / "BLOCKED.md"
    first.unlink()
    delta = parallel.handle([first])
    assert delta.removed == [("loopkit", first)]


def test_scan_falls_back_in_process_when_workers_cannot_start(tmp_path: Path, monkeypatch) -> None:
    _fleet(tmp_path, PARALLEL_MIN_REPOS)
    monkeypatch.setattr(scan_module.sys, "executable", str(tmp_path / "no-such-python"))
    fallback = Inbox(Workspace.discover([tmp_path]))
    fallback.scan(workers=2)
    serial = Inbox(Workspace.discover([tmp_path]))
    serial.scan(workers=1)
    assert sorted(fallback.blocks) == sorted(serial.blocks)
