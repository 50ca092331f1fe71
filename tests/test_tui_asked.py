"""Asked again, and asked before, in the app (tui/asked.py): a block that comes back with the
question just answered shows the earlier answer and a ↻; `p` opens the preview of an earlier
answer (a picker first when there are several). Real answers, by `hitl answer` or the app."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from textual.widgets import Static, TextArea

from hitl_tui.cli import commands as cli
from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.tui.app import HitlApp
from hitl_tui.tui.asked import ReuseScreen
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import settle
from tests.test_similar import QUESTION, REWORDED
from tests.tui_support import SIZE


def _app(repo: Path) -> HitlApp:
    inbox = Inbox(Workspace.discover([repo]))
    config = Config(operator="Ada", bell=False)
    return HitlApp(inbox, config=config, watch=False, clock=lambda: datetime.now(UTC))


def _reblock(repo: Path, question: str, fixtures_dir: Path) -> None:
    text = (fixtures_dir / "loopkit-shop" / "BLOCKED.md").read_text()
    (repo / "BLOCKED.md").write_text(text.replace(QUESTION, question))


def _answer(repo: Path, *args: str) -> None:
    assert cli.main(["answer", str(repo), *args]) == 0


async def _settle(pilot, app) -> None:
    """Settled, and the memory of answers loaded."""
    await settle(pilot, app)
    await until(pilot, lambda: app.asked.index is not None, what="the memory of answers")


def _text(app, selector: str) -> str:
    pane = app.query_one(selector, Static)
    if not pane.has_class("shown"):
        return ""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(pane.content)
    return " ".join(console.export_text().split())


def _row(app, row: int = 0) -> str:
    return app.query_one(BlockList).render_line(row).text


async def test_a_block_asked_again_shows_the_earlier_answer_and_a_mark(shop, fixtures_dir):
    _answer(shop, "--choice", "B")
    _reblock(shop, REWORDED, fixtures_dir)
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        again = _text(app, "#asked-again")
        assert "You answered this 0s ago in shop: B) Keep invoices, detach them" in again
        assert "it asked again" in again and "tighten PROMPT.md" in again
        before = _text(app, "#asked-before")
        assert "shop · B) Keep invoices, detach them from the workspace" in before
        assert "p reuses it" in before
        assert _row(app).startswith("↻shop")
        # p: the preview of that answer, the same choice; nothing written yet.
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert app.screen.plan.answer.choice.key == "B"
        assert (shop / "BLOCKED.md").exists()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)


async def test_a_new_question_is_not_asked_again(shop):
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        assert _text(app, "#asked-again") == "" and _text(app, "#asked-before") == ""
        assert not _row(app).startswith("↻")
        await pilot.press("p")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen | ReuseScreen)


async def test_several_earlier_answers_open_a_picker(shop, fixtures_dir):
    _answer(shop, "--choice", "B")
    _reblock(shop, QUESTION, fixtures_dir)
    _answer(shop, "--choice", "A")
    _reblock(shop, REWORDED, fixtures_dir)
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        before = _text(app, "#asked-before")
        assert "1 " in before and "· shop · A) Cascade delete everything" in before
        assert "· shop · B) Keep invoices" in before and "p picks one to reuse" in before
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ReuseScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ReuseScreen | PreviewScreen)
        await pilot.press("p")
        await pilot.pause()
        await pilot.press("2")  # the older answer: B
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert app.screen.plan.answer.choice.key == "B"


async def test_own_words_come_back_in_the_text_box(shop, fixtures_dir):
    words = "Keep them for 7 years; archive them to cold storage"
    _answer(shop, "--text", words)
    _reblock(shop, REWORDED, fixtures_dir)
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        assert app.screen.query_one("#answer-1", TextArea).text == words
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert app.screen.plan.answer.texts == (words,)


async def test_answered_in_the_app_then_asked_again(shop, fixtures_dir):
    """The loop's round trip: answered in the app, the index reads the new answer, the loop
    escalates the same question again: the new block is flagged at once."""
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("y")
        await _settle(pilot, app)
        assert not (shop / "BLOCKED.md").exists()
        assert len(app.asked.index) == 1
        rows = app.inbox_screen.blocklist.rows
        assert [rows.blocks[rk].state for rk in rows.order] == ["waiting"]
        _reblock(shop, REWORDED, fixtures_dir)
        app.apply_delta(app.inbox.handle([shop / "BLOCKED.md"]), announce=True)
        await _settle(pilot, app)
        assert _row(app).startswith("↻shop")
        assert "in shop: B) Keep invoices" in _text(app, "#asked-again")
        # The answer's row left: the loop ran, and asked again (its record says so).
        assert [rows.blocks[rk].state for rk in rows.order] == ["blocked"]
        assert any("ran and asked again" in str(n.message) for n in app._notifications)
        [record] = app.inbox.resumes.recent()
        assert record.state == "resumed" and record.how.startswith("asked again")


async def test_journal_text_is_shown_literally(shop, fixtures_dir):
    """What the journal holds was typed by an operator or written by an agent: markup in it
    is text, never styles or actions."""
    words = "[@click=app.quit]Quit[/] [b unclosed \x1b]2;title\x07"
    _answer(shop, "--text", words)
    _reblock(shop, REWORDED, fixtures_dir)
    app = _app(shop)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot, app)
        again = _text(app, "#asked-again")
        assert "in shop: [@click=app.quit]Quit[/] [b unclosed" in again
        assert "\x1b" not in again and "\x07" not in again
        assert app.is_running
