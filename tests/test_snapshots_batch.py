"""Snapshots of answering each question once (SVGs in tests/__snapshots__/): the list grouped
by question with marks, and the preview of a batch (a section per block, a count). Made as
tests/test_snapshots.py makes its own: a fixed clock, a fixed size, no watcher; regenerate with
`--snapshot-update -k` these tests only."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hitl_tui.answers import batch as batch_module
from hitl_tui.tui.batch_screens import BatchPreviewScreen
from tests.support import batch_fleet, until
from tests.support.pilot import ready
from tests.tui_support import NOW, SIZE, make_app


@pytest.fixture
def fleet(tmp_path: Path) -> list[Path]:
    return batch_fleet.build(tmp_path, NOW.timestamp())


class _Fixed(datetime):
    """The batch's time (the date in each diff) is the tests' NOW."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return NOW if tz is None else NOW.astimezone(tz)


def test_grouped_by_question_with_marks(snap_compare, fleet: list[Path]) -> None:
    async def grouped(pilot) -> None:
        await ready(pilot)
        await pilot.press("v", "v", "v", "v")  # none -> repo -> source -> state -> question
        await pilot.press("j", "j", "space", "j", "j", "j", "space")  # node-1, node-4 marked
        await pilot.pause()

    assert snap_compare(make_app(fleet), terminal_size=SIZE, run_before=grouped)


def test_batch_preview(snap_compare, fleet: list[Path], monkeypatch) -> None:
    monkeypatch.setattr(batch_module, "datetime", _Fixed)

    async def previewing(pilot) -> None:
        await ready(pilot)
        await pilot.press("j", "j", "M", "2")  # node-1: the same question, B) Node 22
        await until(pilot, lambda: isinstance(pilot.app.screen, BatchPreviewScreen))
        pilot.app.clear_notifications()
        await pilot.press("n", "n")  # node-1's section at the top
        await pilot.pause()

    assert snap_compare(make_app(fleet), terminal_size=SIZE, run_before=previewing)
