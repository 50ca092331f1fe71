"""Snapshots of the palette with a query typed, of the history with its cursor on an answer,
and of the grants (SVGs in tests/__snapshots__/test_snapshots_more/). The history's entries
and the grants are built here, with fixed times and ids, so that no clock reaches the screen."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Input

from hitl_tui.journal import Entry
from hitl_tui.tui.grants_screen import GrantsScreen
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


def test_grants_with_the_cursor_on_one(snap_compare, tmp_path: Path, utc) -> None:
    """The grants screen (A): written here with fixed ids and times; one summary is markup."""
    root = demo_workspace(tmp_path)
    lines = {
        "shop": [
            ("grant-0a1b2c3d4e", "Bash: rm -rf build/", "Ada", "2026-11-29T09:15:00+00:00"),
            ("grant-5f6a7b8c9d", "Bash: npm test -- [b]x[/b] [@click=app.quit]", "Grace",
             "2026-11-29T10:40:00+00:00"),
        ],
        "api": [
            ("grant-e1f2a3b4c5", "Edit: src/rate_limit.py", "Ada", "2026-11-28T17:05:00+00:00")
        ],
    }  # fmt: skip
    for name, grants in lines.items():
        folder = root / name / ".hitl"
        folder.mkdir()
        rows = [
            json.dumps(
                {"id": g, "tool": s.split(":")[0], "input_sha": "sha256:" + "0" * 64,
                 "summary": s, "granted": at, "by": by, "ask": "ask-23456789ab"}
            )
            for g, s, by, at in grants
        ]  # fmt: skip
        (folder / "grants.jsonl").write_text("".join(r + "\n" for r in rows))

    async def grants(pilot) -> None:
        await ready(pilot)
        await pilot.press("A")
        for _ in range(100):
            await pilot.pause(0.02)
            screen = pilot.app.screen
            if isinstance(screen, GrantsScreen) and screen.rows is not None:
                break
        await pilot.press("j", "j")
        await pilot.pause()

    app = make_app([root])
    assert snap_compare(app, terminal_size=SIZE, run_before=grants)
