"""The app half of the hostile-input table: every case opens, shows, previews and announces its
blocks without crashing, and no escape sequence or markup from a file reaches the screen as
anything but visible text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hitl_tui.inbox.inbox import Delta
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.hostile_cases import CASES, Case
from tests.tui_support import SIZE, make_app

APP_CASES = [c for c in CASES if c.fault is None]


@pytest.mark.parametrize("case", APP_CASES, ids=[c.name for c in APP_CASES])
async def test_app_survives_and_shows_text_literally(case: Case, tmp_path: Path) -> None:
    repo = case.build(tmp_path)
    app = make_app([repo])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            await pilot.pause()
            if app.loaded:
                break
            await asyncio.sleep(0.02)
        assert app.loaded
        table = app.query_one(BlockList)
        blocks = [table.blocks[k] for k in table.order]
        # A new-block toast, the title bar and every row carry the agent's text.
        app.apply_delta(Delta(added=blocks), announce=True)
        for index, block in enumerate(blocks[:3]):
            table.move_cursor(row=index)
            await pilot.press("r", "r", "1" if block.choices else "o")
            # Either the answer can be previewed, or it is refused with a message (a symlink
            # out of the repo, say): never a crash, never a silent nothing.
            opened = isinstance(app.screen, PreviewScreen | TextAnswerScreen)
            refused = any(n.severity == "error" for n in app._notifications)
            assert opened or refused
            await pilot.press("escape")
        screen = app.export_screenshot()
        assert "\x1b" not in screen and "\x00" not in screen
        assert app.is_running
        if "markup" in case.name and "BLOCKED" not in case.name and "every field" in case.name:
            assert "[@click=app.quit]" in screen.replace("&#160;", " ")
