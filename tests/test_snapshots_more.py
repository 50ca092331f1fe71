"""Snapshots of the palette with a query typed, and of the history with its cursor on an
answer (SVGs in tests/__snapshots__/test_snapshots_more/). The history's entries are built
here, with fixed times and ids, so that no clock reaches the screen."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Input

from hitl_tui.journal import Entry
from hitl_tui.tui.screens import HistoryScreen
from tests.support.pilot import ready
from tests.tui_support import NOW, SIZE, demo_workspace, make_app


@pytest.fixture
def utc(monkeypatch):
    """Times on screen are local: UTC here, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _entry(n: int, block: str, answered: str, operator: str = "Ada", **more) -> Entry:
    return Entry(
        id=f"20261129-1{n}0000-00000{n}",
        time=NOW - timedelta(hours=n),
        kind="answer",
        operator=operator,
        repo=Path("/loops") / block,
        block_id=block,
        block_source="loopkit",
        block_path=Path("/loops") / block / "BLOCKED.md",
        block_fingerprint="0" * 64,
        question="?",
        answered=answered,
        summary=answered,
        files=(),
        status="done",
        **more,
    )


def test_palette_with_a_query(snap_compare, tmp_path: Path) -> None:
    async def search(pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+p")
        for _ in range(50):
            await pilot.pause()
            if isinstance(pilot.app.screen, CommandPalette):
                break
        pilot.app.screen.query_one(Input).cursor_blink = False
        await pilot.press(*"shop")
        for _ in range(50):
            await pilot.pause(0.02)
            if len(pilot.app.screen.query("CommandList Option")) >= 2:
                break
        await pilot.pause(0.2)

    app = make_app([demo_workspace(tmp_path)])
    assert snap_compare(app, terminal_size=SIZE, run_before=search)


def test_history_with_the_cursor_on_an_answer(snap_compare, tmp_path: Path, utc) -> None:
    entries = [
        _entry(1, "shop", "B) Keep invoices — archive them for 7 years"),
        _entry(2, "api", "2) Per IP address", operator="Grace"),
        _entry(3, "mobile", "[b]own words[/b] [@click=app.quit]", undone_by="x-undo"),
        _entry(4, "billing/T-007", "A) Accept the recommended default"),
    ]

    async def history(pilot) -> None:
        await ready(pilot)
        await pilot.app.push_screen(HistoryScreen(entries))
        await pilot.pause()
        pilot.app.screen.query_one(Input).cursor_blink = False
        await pilot.press("j", "j")
        await pilot.pause()

    app = make_app([demo_workspace(tmp_path)])
    assert snap_compare(app, terminal_size=SIZE, run_before=history)
