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


def test_a_cold_hitl_list_of_a_large_fleet_is_read_by_workers_and_prints_the_same(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """`hitl list --json` with nothing cached, on a fleet of CLI_PARALLEL_MIN_REPOS or more,
    starts scan workers (a cold list at 10,000 repositories is seconds of parsing); what it
    prints is what a run in-process prints, and what the next (warm) run prints."""
    import json
    import subprocess

    from hitl_tui.cli.commands import main

    fleet = tmp_path / "fleet"
    _fleet(fleet, PARALLEL_MIN_REPOS + 6)
    monkeypatch.setenv("HITL_CONFIG", str(tmp_path / "no-config.toml"))
    from hitl_tui.inbox import parsecache

    monkeypatch.setattr(parsecache, "RACY_NS", 0)  # files just written are cached all the same
    started: list[object] = []
    popen = subprocess.Popen

    def counting(*args, **kwargs):
        started.append(args[0])
        return popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", counting)

    def listed(state: str) -> list[dict]:
        monkeypatch.setenv("HITL_STATE_DIR", str(tmp_path / state))
        assert main(["list", "--json", str(fleet)]) == 0
        return json.loads(capsys.readouterr().out)

    monkeypatch.setattr(scan_module, "CLI_PARALLEL_MIN_REPOS", 10**9)
    alone = listed("alone")
    assert started == [] and len(alone) == sum(2 if i % 3 == 1 else i % 3 == 0 for i in range(70))
    monkeypatch.setattr(scan_module, "CLI_PARALLEL_MIN_REPOS", PARALLEL_MIN_REPOS)
    monkeypatch.setattr(scan_module, "default_workers", lambda: 2)  # (a one-core machine too)
    cold = listed("parallel")
    assert len(started) == 2
    assert cold == alone
    started.clear()
    assert listed("parallel") == alone and started == []  # warm: from the cache, in-process
