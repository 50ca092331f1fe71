"""Issue 16: the first scan fills the inbox as it goes.

A source slowed on purpose (each BLOCKED.md waits for the test to let it through) scans a
dozen repositories in the real app under Pilot: rows arrive while the header says how far the
scan is, keys work before it ends, the highlighted block keeps the cursor while rows arrive
above and below it, and at the end every block is listed once, including one a "loop" wrote
into a repository not read yet and one written into a repository already read (the watcher's
catch-up finds that one).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from hitl_tui.config import Config
from hitl_tui.inbox import scan as scan_module
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.view import row_of
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.tui.app import HitlApp
from tests.support import until

BLOCKED = """\
# Blocked

## Question:
Should repo {n} keep its legacy endpoint?

## Choices:
- A) Keep it
- B) Remove it
"""

REPOS = 12
#: Repositories with no block at the start; the loop writes one into each during the scan.
LATE_AHEAD = 9  # not read yet when its block is written: the scan finds it
LATE_BEHIND = 1  # read already: the watcher's catch-up finds it


class GatedLoopkit(LoopkitSource):
    """loopkit, each parse held until the test lets one more through (one per repository:
    the file is asked for whether it exists or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Semaphore(0)
        self.parsed: list[Path] = []

    def parse(self, repo, path, label):
        if not self.gate.acquire(timeout=20):
            raise AssertionError("the test never let this parse through")
        self.parsed.append(path)
        return super().parse(repo, path, label)


def fleet(root: Path) -> None:
    base = time.time() - 86400
    for n in range(REPOS):
        repo = root / f"repo-{n:02d}"
        (repo / ".git").mkdir(parents=True)
        if n in (LATE_AHEAD, LATE_BEHIND):
            continue
        blocked = repo / "BLOCKED.md"
        blocked.write_text(BLOCKED.format(n=n))
        # Ages that do not follow the scan's order: later repos land above and below.
        age = (n * 7) % REPOS
        os.utime(blocked, (base + age * 60, base + age * 60))


async def test_rows_arrive_during_a_slow_scan_under_a_steady_cursor(tmp_path, monkeypatch):
    # Every repository read is its own batch: the test decides when each arrives.
    monkeypatch.setattr(scan_module, "BATCH_FIRST", 0.0)
    monkeypatch.setattr(scan_module, "BATCH_MAX", 0.0)
    root = tmp_path / "fleet"
    fleet(root)
    source = GatedLoopkit()
    inbox = Inbox(Workspace.discover([root]), sources=[source])
    app = HitlApp(inbox, Config(operator="Ada", bell=False), watch=True)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.inbox_screen
        table = screen.blocklist
        topbar = screen.query_one("#topbar")

        def listed() -> int:
            return len(table.rows.blocks)

        # Four repositories through (the second has no block): three rows, the scan still
        # running, its progress said.
        source.gate.release(4)
        await until(pilot, lambda: listed() == 3, saw=listed)
        assert not app.loaded
        header = str(topbar.render())
        assert f"reading 4 of {REPOS} repos" in header, header
        assert "3 blocks so far" in header, header

        # Keys work before the scan is done: the second row is highlighted.
        await pilot.press("down")
        await pilot.pause()
        held = table.current
        assert held is not None and table.cursor_row == 1

        def steady() -> bool:
            return table.current is not None and row_of(table.current) == row_of(held)

        # The loop writes a block into a repository the scan has not reached yet.
        (root / f"repo-{LATE_AHEAD:02d}" / "BLOCKED.md").write_text(BLOCKED.format(n=99))

        above = below = 0
        for count in range(4, REPOS - 1):
            before_rows = list(table.rows.order)
            source.gate.release(1)
            await until(pilot, lambda c=count: listed() == c, saw=lambda c=count: (c, listed()))
            assert steady(), "a row that arrived moved the cursor off its block"
            new = next(rk for rk in table.rows.order if rk not in before_rows)
            if table.rows.order.index(new) < table.rows.order.index(row_of(held)):
                above += 1
            else:
                below += 1
            assert not app.loaded
            header = str(topbar.render())
            assert f"reading {count + 1} of {REPOS} repos · {count} blocks so far" in header
        assert above and below, (above, below)

        # The loop writes into a repository the scan has read already; then the scan ends.
        (root / f"repo-{LATE_BEHIND:02d}" / "BLOCKED.md").write_text(BLOCKED.format(n=98))
        source.gate.release(1000)
        await until(pilot, lambda: app.loaded)
        assert steady()
        await until(pilot, lambda: listed() == REPOS, 30, saw=listed)

        order = table.rows.order
        assert len(order) == len(set(order)) == REPOS
        ids = sorted(table.rows.blocks[rk].id for rk in order)
        assert ids == sorted(f"repo-{n:02d}" for n in range(REPOS))
        assert steady()
        header = str(topbar.render())
        assert header.startswith(f"hitl · {REPOS} blocks in {REPOS} repos"), header
        assert "reading" not in header
        await asyncio.sleep(0)


async def test_a_first_run_marks_no_block_of_a_progressive_scan_new(tmp_path, monkeypatch):
    """seen.json absent (a first run): every batch counts as seen, not only the first."""
    monkeypatch.setattr(scan_module, "BATCH_FIRST", 0.0)
    monkeypatch.setattr(scan_module, "BATCH_MAX", 0.0)
    root = tmp_path / "fleet"
    fleet(root)
    source = GatedLoopkit()
    source.gate.release(1000)
    inbox = Inbox(Workspace.discover([root]), sources=[source])
    app = HitlApp(inbox, Config(operator="Ada", bell=False), watch=False)
    batches: list[int] = []
    real = app.inbox_screen.add_batch

    def counting(blocks, done, total):
        batches.append(len(blocks))
        real(blocks, done, total)

    app.inbox_screen.add_batch = counting
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.loaded)
        assert sum(1 for n in batches if n) > 1, batches  # it did come in batches
        screen = app.inbox_screen
        blocks = list(screen.blocklist.rows.blocks.values())
        assert len(blocks) == REPOS - 2
        assert not [b.id for b in blocks if screen._is_new(b)]


def test_scan_reports_each_block_once_in_process_and_in_workers(tmp_path, monkeypatch):
    """The domain's batches: every block once, repos counted up to the last call."""
    monkeypatch.setattr(scan_module, "BATCH_FIRST", 0.0)
    monkeypatch.setattr(scan_module, "BATCH_MAX", 0.0)
    monkeypatch.setattr(scan_module, "PARALLEL_MIN_REPOS", 2)
    monkeypatch.setattr(scan_module, "HEAD_REPOS", 3)  # read here; the rest by the workers
    root = tmp_path / "fleet"
    fleet(root)
    for workers in (1, 2):
        inbox = Inbox(Workspace.discover([root]))
        calls: list[tuple[list, int, int]] = []
        inbox.scan(workers=workers, on_batch=lambda b, d, t, calls=calls: calls.append((b, d, t)))
        got = [row_of(b) for blocks, _, _ in calls for b in blocks]
        assert sorted(got) == sorted(row_of(b) for b in inbox.blocks.values())
        assert len(got) == len(set(got)) == REPOS - 2
        assert calls[-1][1:] == (REPOS, REPOS)
        assert [d for _, d, _ in calls] == sorted(d for _, d, _ in calls)
        assert len(calls) > 2, workers
        if workers > 1:  # the first batch is the repositories read while the workers start
            assert calls[0][1] == 3
