"""Bindings with ids: the help lists every one, and the config's [keys] table remaps them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Static

from hitl_tui.config import Config, load_config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.keys import IDS, KEYS
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.asked import ReuseScreen
from hitl_tui.tui.batch_screens import BatchPreviewScreen, BatchResultScreen
from hitl_tui.tui.bindings import help_text, key_name
from hitl_tui.tui.filter_bar import FilterInput
from hitl_tui.tui.grants_screen import ConfirmRevoke, GrantsScreen
from hitl_tui.tui.inbox_screen import InboxScreen
from hitl_tui.tui.loop_actions import ConfirmAct
from hitl_tui.tui.screens import (
    ConfirmDiscard,
    HelpScreen,
    HistoryScreen,
    PreviewScreen,
    TextAnswerScreen,
)
from hitl_tui.tui.snooze_screen import SnoozeScreen
from hitl_tui.tui.stats_screen import StatsScreen
from hitl_tui.tui.undo_flow import ConfirmUndo
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import palette
from tests.tui_support import NOW, SIZE, demo_workspace

SCREENS = (InboxScreen, BlockList, PreviewScreen, TextAnswerScreen, ConfirmDiscard, HelpScreen)
SCREENS += (HistoryScreen, FilterInput, SnoozeScreen, ReuseScreen, ConfirmUndo)
SCREENS += (GrantsScreen, ConfirmRevoke, ConfirmAct)
SCREENS += (BatchPreviewScreen, BatchResultScreen, StatsScreen)


def test_every_binding_has_an_id_of_the_key_table() -> None:
    found = [b for cls in SCREENS for b in cls.BINDINGS]
    assert all(b.id for b in found)
    assert {b.id for b in found} == IDS
    assert len(IDS) == len(KEYS)


def test_the_help_lists_every_binding_and_each_of_its_keys() -> None:
    text = help_text()
    for cls in SCREENS:
        for binding in cls.BINDINGS:
            for key in binding.key.split(","):
                assert key_name(key) in text, (binding.id, key)
    for spec in KEYS:
        assert spec.help in text, spec.id


def test_the_help_shows_remapped_keys() -> None:
    text = help_text({"hitl.undo": "ctrl+z"})
    assert "Ctrl+Z" in text
    inbox = text.split("In the inbox")[1].split("In the preview")[0]
    assert "\n  u " not in inbox  # the history's own u is another key


def test_keys_table_is_read_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[keys]\n"hitl.answer-1" = "f1"\n"hitl.quit" = "ctrl+q"\n')
    assert load_config(path).keys == {"hitl.answer-1": "f1", "hitl.quit": "ctrl+q"}


async def test_a_remapped_key_answers_and_the_old_one_does_not(tmp_path: Path) -> None:
    inbox = Inbox(Workspace.discover([demo_workspace(tmp_path)]))
    config = Config(operator="Ada", bell=False, keys={"hitl.answer-1": "f1"})
    app = HitlApp(inbox, config=config, watch=False, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause()
            if app.loaded:
                break
            await asyncio.sleep(0.02)
        await pilot.press("1")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = str(app.screen.query_one("#help-text", Static).render())
        assert "f1" in shown


async def test_the_palette_answers_and_goes_to_a_block_by_id(tmp_path: Path) -> None:
    inbox = Inbox(Workspace.discover([demo_workspace(tmp_path)]))
    app = HitlApp(inbox, config=Config(operator="Ada", bell=False), watch=False, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause()
            if app.loaded:
                break
            await asyncio.sleep(0.02)
        table = app.query_one(BlockList)
        first = table.current.id
        await palette(pilot, app, "go to block mobile")
        assert table.current.id == "mobile" != first
        await palette(pilot, app, "answer with choice 1")
        assert isinstance(app.screen, PreviewScreen)
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert "Answer mobile with" in title


async def test_the_palette_runs_own_words_raw_file_and_undo(tmp_path: Path) -> None:
    from hitl_tui.tui.detail import BlockDetail

    inbox = Inbox(Workspace.discover([demo_workspace(tmp_path)]))
    app = HitlApp(inbox, config=Config(operator="Ada", bell=False), watch=False, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause()
            if app.loaded:
                break
            await asyncio.sleep(0.02)
        await palette(pilot, app, "answer in your own words")
        assert isinstance(app.screen, TextAnswerScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not app.query_one(BlockDetail).has_class("raw")
        await palette(pilot, app, "raw file on")
        assert app.query_one(BlockDetail).has_class("raw")
        await palette(pilot, app, "undo the last answer")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any(n.title == "Not undone" for n in app._notifications)
