"""A worker that fails says so: the header and a toast name the error, and the app runs on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Static

from hitl_tui.inbox.inbox import Inbox
from tests.tui_support import SIZE, make_app


async def test_a_first_scan_that_raises_is_shown_and_the_app_keeps_running(
    tmp_path: Path, monkeypatch
) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text("## Question\nGo?\n## Choices\n- A) yes\n")

    def unreadable(self, workers: int = 1, on_batch=None) -> None:
        raise PermissionError(13, "Permission denied", str(repo))

    monkeypatch.setattr(Inbox, "scan", unreadable)
    app = make_app([repo])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause()
            if any(n.severity == "error" for n in app._notifications):
                break
            await asyncio.sleep(0.02)
        header = str(app.query_one("#topbar", Static).render())
        assert "reading repositories" not in header
        assert "PermissionError" in header and "Permission denied" in header
        toasts = [n.message for n in app._notifications if n.severity == "error"]
        assert any("Reading the repositories failed: PermissionError" in t for t in toasts)
        await pilot.press("question_mark")  # still answering keys
        await pilot.pause()
        assert app.is_running
        assert type(app.screen).__name__ == "HelpScreen"


async def test_an_answer_whose_writer_raises_is_reported_and_the_app_runs_on(
    tmp_path: Path, monkeypatch
) -> None:
    """Not a refusal (a HitlError) but a bug or a disk gone: the worker fails, and says so."""
    from hitl_tui.tui.widgets import BlockList
    from tests.tui_support import demo_workspace

    def broken(plan):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("hitl_tui.answers.apply.apply_plan", broken)
    root = demo_workspace(tmp_path)
    before = (root / "shop" / "BLOCKED.md").read_bytes()
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause()
            if app.loaded:
                break
            await asyncio.sleep(0.02)
        table = app.query_one(BlockList)
        await pilot.press("home")
        while table.current.id != "shop":
            await pilot.press("j")
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause()
            if any(n.severity == "error" for n in app._notifications):
                break
            await asyncio.sleep(0.02)
        toasts = [n.message for n in app._notifications if n.severity == "error"]
        assert any("Writing an answer (or an undo) failed: OSError" in t for t in toasts)
        assert app.is_running
        assert table.current.id == "shop"  # still listed: nothing was answered
    assert (root / "shop" / "BLOCKED.md").read_bytes() == before
