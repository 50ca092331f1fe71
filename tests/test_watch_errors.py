"""A bug while handling one batch of events must not end live watching for every repo."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.watch import watch_inbox
from hitl_tui.sources.loopkit.source import parse_blocked


class FlakyInbox(Inbox):
    """Raises on the first batch that names a file called boom.md, then behaves."""

    exploded = False

    def handle(self, paths):
        paths = list(paths)
        if not self.exploded and any(p.name == "boom.md" for p in paths):
            self.exploded = True
            raise RuntimeError("simulated bug")
        return super().handle(paths)


async def test_watching_survives_an_error_in_handle(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    inbox = FlakyInbox.open([repo])
    stop = asyncio.Event()
    deltas: list[Delta] = []
    errors: list[Exception] = []
    task = asyncio.create_task(watch_inbox(inbox, deltas.append, stop, on_error=errors.append))
    await asyncio.sleep(0.5)
    (repo / "boom.md").write_text("x")
    for _ in range(100):
        if errors:
            break
        await asyncio.sleep(0.05)
    assert [str(e) for e in errors] == ["simulated bug"]
    (repo / "BLOCKED.md").write_text("## Question\nStill watching?\n")
    for _ in range(100):
        if any(d.added for d in deltas):
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 5)
    added = [b for d in deltas for b in d.added]
    assert [b.question for b in added] == [
        parse_blocked("## Question\nStill watching?\n")[0]["question"]
    ]
