"""The real watcher over task folders: a task that blocks, and a task folder that appears."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.watch import watch_inbox

BLOCKED = (
    "---\nstatus: blocked\nblock_category: transient\n---\n\n"
    "## Comments\n- 2026-11-10: Blocked (transient): API down. Needed: wait for it.\n"
)


async def _run_until(inbox: Inbox, action, wanted, timeout: float = 10.0) -> list[Delta]:
    """Start the watcher, run `action` once it watches, stop when `wanted(inbox)` holds."""
    stop = asyncio.Event()
    ready = asyncio.Event()
    deltas: list[Delta] = []

    def on_delta(delta: Delta) -> None:
        deltas.append(delta)
        if wanted(inbox):
            stop.set()

    task = asyncio.create_task(watch_inbox(inbox, on_delta, stop, on_ready=lambda _: ready.set()))
    try:
        await asyncio.wait_for(ready.wait(), timeout)
        await asyncio.sleep(0.2)
        action()
        await asyncio.wait_for(stop.wait(), timeout)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout)
    return deltas


async def test_a_task_that_blocks_arrives(billing: Path) -> None:
    inbox = Inbox.open([billing])
    assert billing / ".agenticloop" / "tasks" in inbox.watch_dirs()
    path = billing / ".agenticloop" / "tasks" / "T-003.md"

    def block_it() -> None:
        path.write_text(BLOCKED)

    deltas = await _run_until(inbox, block_it, lambda ib: ("agenticloop", path) in ib.blocks)
    added = [b.id for d in deltas for b in d.added]
    assert added == ["billing/T-003"]
    assert inbox.blocks[("agenticloop", path)].question == "wait for it."


async def test_a_task_folder_created_later_is_watched(tmp_path: Path) -> None:
    repo = tmp_path / "late"
    (repo / ".git").mkdir(parents=True)
    inbox = Inbox.open([repo])
    tasks = repo / ".agenticloop" / "tasks"

    def create() -> None:
        tasks.mkdir(parents=True)
        (tasks / "T-001.md").write_text(BLOCKED)

    await _run_until(inbox, create, lambda ib: ("agenticloop", tasks / "T-001.md") in ib.blocks)
    assert tasks in inbox.watch_dirs()
    # Now that the folder is watched, a second task arrives through its own event.
    second = tasks / "T-002.md"

    def write_second() -> None:
        second.write_text(BLOCKED)

    await _run_until(inbox, write_second, lambda ib: ("agenticloop", second) in ib.blocks)
