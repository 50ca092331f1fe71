"""A large workspace is scanned by worker processes; the result must be exactly the same."""

from __future__ import annotations

import pickle
from pathlib import Path

from hitl_tui.inbox import codec, parsecache, workers
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


def test_a_workers_cache_entries_come_back_as_the_blocks_it_sent(
    tmp_path: Path, monkeypatch
) -> None:
    """A worker sends each parsed block once: its cache entry comes back as the block the app
    holds (its own `since`), sharing its texts, and is saved and read back as that block."""
    monkeypatch.setattr(parsecache, "RACY_NS", 0)  # files written just now are cached
    _fleet(tmp_path / "fleet", 12)
    workspace = Workspace.discover([tmp_path / "fleet"])
    blocks, entries = workers.scan_chunk(workspace.repos, dict(workspace.ids))
    assert sum(e[2] is not None for _, _, e in entries) == len(blocks) == 12
    assert sum(e[2] is None for _, _, e in entries) == 4  # the tasks not blocked
    # What the app reads from the worker's frames (`scan.run_workers`).
    received = pickle.loads(pickle.dumps(blocks))
    sent = pickle.loads(pickle.dumps([(n, k, workers.sent(e)) for n, k, e in entries]))
    assert all(e[2] is None or e[2][0] == parsecache.SENT for _, _, e in sent)
    held = {(b.source, b.path): b for b in received}
    cache = parsecache.ParseCache(tmp_path / "cache")
    cache.adopt(sent, held)
    adopted = {k: e for _, k, e in cache.entries()}
    assert len(adopted) == len(entries)
    for _, key, (sig, label, block) in entries:
        assert adopted[key][:2] == (sig, label)
        if block is None:
            assert adopted[key][2] is None
            continue
        came = adopted[key][2]
        assert came == block and came.since == block.since and came.meta == block.meta
        assert came.raw is held[(block.source, block.path)].raw  # one copy of the text
    cache.save()
    saved = {k: e for _, k, e in parsecache.ParseCache(tmp_path / "cache").entries()}
    for _, key, (_sig, _label, block) in entries:
        if block is not None:
            thawed = codec.thaw(saved[key][2], block.repo, block.path)
            assert thawed == block and thawed.since == block.since and thawed.meta == block.meta
    # An entry whose block the app does not hold is left out (parsed again when met).
    partial = parsecache.ParseCache()
    partial.adopt(sent, {})
    assert all(e[2] is None for _, _, e in partial.entries())
