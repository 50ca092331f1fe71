"""Issue 30, row 2: a repository without task or asks folders costs a stat or two, not five.

At 10,000 repositories most have no `.agenticloop` and no `.hitl/asks`; the warm scan listed
their task folder anyway (a failed listing, then two looks at why) and looked at `.hitl` and
its asks folder for symlinks before a listing that failed too. Now a layout read with nothing
at `.agenticloop` lists nothing, and the asks source stats its folder first. These tests check
that what each source lists (and warns) is what the full path gives, on every shape of those
folders (absent, files, dangling and loop symlinks, symlinked folders, FIFOs, empty folders),
and that `hitl list --json` is the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path

import pytest

from hitl_tui.sources.agenticloop import source as agentic_source
from hitl_tui.sources.agenticloop.source import AgenticloopSource
from hitl_tui.sources.asks import format as fmt
from hitl_tui.sources.asks import grants as grantfile
from hitl_tui.sources.asks.source import AskSource

TASK = "---\nstatus: blocked\ntitle: T\n---\n\n## Comments\n\n- 2026-01-01: needs a call\n"
ASK = '{"id": "a1", "status": "open"}'


def _shapes(base: Path) -> list[Path]:
    """Repositories with every shape of `.agenticloop` and `.hitl/asks`."""
    outside = base / "outside"
    (outside / "asks").mkdir(parents=True)
    (outside / "asks" / "a1.json").write_text(ASK)
    (outside / "tasks").mkdir()
    (outside / "tasks" / "t.md").write_text(TASK)
    repos = []

    def repo(name: str) -> Path:
        path = base / name
        path.mkdir()
        repos.append(path)
        return path

    repo("bare")
    (repo("agentic-file") / ".agenticloop").write_text("x")
    (repo("agentic-dangling") / ".agenticloop").symlink_to(base / "nowhere")
    loop = repo("agentic-loop")
    (loop / ".agenticloop").symlink_to(loop / ".agenticloop")
    (repo("agentic-empty") / ".agenticloop").mkdir()
    tasks_file = repo("tasks-file")
    (tasks_file / ".agenticloop").mkdir()
    (tasks_file / ".agenticloop" / "tasks").write_text("x")
    fifo = repo("tasks-fifo")
    (fifo / ".agenticloop").mkdir()
    os.mkfifo(fifo / ".agenticloop" / "tasks")
    linked = repo("agentic-linked")
    (linked / ".agenticloop").symlink_to(outside)
    real = repo("tasks-real")
    (real / ".agenticloop" / "tasks").mkdir(parents=True)
    (real / ".agenticloop" / "tasks" / "t.md").write_text(TASK)
    project = repo("project-only")
    (project / ".agenticloop").mkdir()
    (project / ".agenticloop" / "project.md").write_text("---\ntask_backend: files\n---\n")
    (repo("hitl-file") / ".hitl").write_text("x")
    (repo("hitl-empty") / ".hitl").mkdir()
    (repo("hitl-linked") / ".hitl").symlink_to(outside)
    asks_link = repo("asks-linked")
    (asks_link / ".hitl").mkdir()
    (asks_link / ".hitl" / "asks").symlink_to(outside / "asks")
    asks_file = repo("asks-file")
    (asks_file / ".hitl").mkdir()
    (asks_file / ".hitl" / "asks").write_text("x")
    asks_dangling = repo("asks-dangling")
    (asks_dangling / ".hitl").mkdir()
    (asks_dangling / ".hitl" / "asks").symlink_to(base / "nowhere")
    asks = repo("asks-real")
    (asks / ".hitl" / "asks").mkdir(parents=True)
    (asks / ".hitl" / "asks" / "a1.json").write_text(ASK)
    (asks / ".hitl" / "asks" / "b.txt").write_text("x")
    return repos


def _asks_before(repo: Path) -> list[Path]:
    """The asks source's listing as it was (symlinks looked at, then the listing)."""
    folder = grantfile.asks_dir(repo)
    if os.path.islink(repo / fmt.HITL_DIR) or os.path.islink(folder):
        return []
    try:
        names = [e.name for e in os.scandir(folder) if e.name.endswith(".json")]
    except OSError:
        return []
    return [folder / name for name in sorted(names)]


def test_each_source_lists_what_the_full_listing_gives(tmp_path: Path, monkeypatch) -> None:
    repos = _shapes(tmp_path)
    asks = AskSource()
    for repo in repos:
        assert asks.block_files(repo) == _asks_before(repo), repo.name
    new = AgenticloopSource()
    listed = {r: (new.block_files(r), new.warnings(r)) for r in repos}
    absent = {r for r in repos if new.layout(r).absent}
    assert absent == {r for r in repos if not os.path.lexists(r / ".agenticloop")}
    assert len(absent) == 8
    # The full path: every layout as if something were there (the listing tried, and why it
    # failed looked at), as before.
    read = agentic_source.read_layout
    monkeypatch.setattr(
        agentic_source, "read_layout", lambda repo: dataclasses.replace(read(repo), absent=False)
    )
    old = AgenticloopSource()
    for repo in repos:
        assert listed[repo] == (old.block_files(repo), old.warnings(repo)), repo.name
    # (and the shapes do list something: the real folders, the unreadable ones)
    assert listed[tmp_path / "tasks-real"][0] and listed[tmp_path / "tasks-fifo"][0]
    assert asks.block_files(tmp_path / "asks-real") == [
        tmp_path / "asks-real" / ".hitl" / "asks" / "a1.json"
    ]


@pytest.mark.parametrize("made", [".agenticloop/tasks", ".hitl/asks"])
def test_a_folder_made_after_a_scan_is_listed_by_the_next(tmp_path: Path, made: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    agentic, asks = AgenticloopSource(), AskSource()
    assert agentic.block_files(repo) == [] and asks.block_files(repo) == []
    (repo / made).mkdir(parents=True)
    name = "t.md" if "tasks" in made else "a1.json"
    (repo / made / name).write_text(TASK if "tasks" in made else ASK)
    assert [*agentic.block_files(repo), *asks.block_files(repo)] == [repo / made / name]


def test_reports_grow_apart_with_the_rows_listed(monkeypatch) -> None:
    """Each report costs the app a pass over the rows it lists: a quarter of a second apart at
    a thousand repositories' 5,000 blocks, as before; up to a second apart at 50,000."""
    from hitl_tui.inbox import scan

    clock = [0.0]
    monkeypatch.setattr(scan.time, "monotonic", lambda: clock[0])
    reported: list[tuple[float, int]] = []
    batches = scan.Batches(lambda blocks, done, total: reported.append((clock[0], done)), 10)

    def run(blocks: int, seconds: float) -> list[float]:
        """`blocks` found every 10 ms for `seconds`: the gaps between reports."""
        reported.clear()
        start = clock[0]
        while clock[0] < start + seconds:
            clock[0] = round(clock[0] + 0.01, 2)
            batches.add([None] * blocks, 1)  # type: ignore[list-item]
        times = [t for t, _ in reported]
        return [round(b - a, 2) for a, b in itertools.pairwise(times)]

    assert run(1, 0.5)[:3] == [0.06, 0.12, 0.24]  # the first at 30 ms, then doubling
    assert all(0.25 <= gap <= 0.26 for gap in run(1, 2.0))  # (10 ms steps)
    assert batches.reported < 1000
    run(100, 6.0)  # 50,000 blocks and a few
    assert 50_000 <= batches.reported <= 60_000
    gaps = run(1, 5.0)
    assert len(gaps) >= 3 and all(1.0 <= gap <= 1.3 for gap in gaps), gaps
    run(1000, 10.0)  # a million: never more than BATCH_SLOWEST apart
    assert set(run(1000, 10.0)) == {scan.BATCH_SLOWEST}
