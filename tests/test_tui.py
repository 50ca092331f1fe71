"""The app driven by keys, asserting what the operator sees and what lands on disk."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from textual.widgets import Static, TextArea

from hitl_tui.inbox.inbox import Delta, key_of
from hitl_tui.model import Block
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.tui.screens import HelpScreen, PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import preview_of, select, settle, static_text
from tests.tui_support import NOW, SIZE, demo_workspace, make_app


async def _open(pilot, app, block_id: str, key: str):
    """Highlight `block_id`, press `key` (a choice's number), and return the screen it opens."""
    await select(pilot, app, block_id)
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, PreviewScreen), type(app.screen).__name__
    return app.screen


async def _type_in_decision(pilot, screen, *keys: str) -> None:
    """Press e in a preview and type `keys` at the end of its decision text."""
    await pilot.press("e")
    area = screen.query_one("#decision", TextArea)
    assert area.has_focus
    area.move_cursor(area.document.end)
    await pilot.press(*keys)
    await pilot.pause()


def _diff(screen) -> str:
    return str(screen.query_one("#diff", Static).render())


async def test_start_highlights_oldest_and_shows_four_panes(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        oldest = min(table.blocks.values(), key=lambda b: b.since)
        assert table.current is not None and table.current.id == oldest.id
        assert "6 blocks in 5 repos" in static_text(app, "#topbar")
        await select(pilot, app, "shop")
        assert "archived invoices" in static_text(app, "#question")
        assert "delete workspace" in static_text(app, "#context")
        assert "cascade delete" in static_text(app, "#attempted")
        choices = static_text(app, "#choices")
        assert "B) Keep invoices" in choices and "needs a migration" in choices


async def test_two_then_enter_answers_with_the_second_choice(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "2")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not (shop / "BLOCKED.md").exists()
        prompt = (shop / "PROMPT.md").read_text()
        assert prompt.endswith(
            "## Decisions\n- 2026-11-29: Should deleting a workspace also delete its archived "
            "invoices, or keep them for 7 years? → B) Keep invoices, detach them from the "
            "workspace — needs a migration adding owner_id.\n"
        )
        plan = (shop / "IMPLEMENTATION_PLAN.md").read_text()
        assert plan.startswith("STATUS: in-progress\n")
        assert "- 2026-11-29: Block answered by Ada via hitl:" in plan
        # The block left; the answer's row waits for the loop, at the bottom.
        rows = list(app.query_one(BlockList).blocks.values())
        assert [b.state for b in rows if b.id == "shop"] == ["waiting"]
        assert rows[-1].id == "shop"
        assert any("Answered" in n.title for n in app._notifications)


async def test_escape_in_preview_writes_nothing(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    before = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("1")
        await until(
            pilot,
            lambda: isinstance(app.screen, PreviewScreen),
            what="the preview",
            saw=lambda: type(app.screen).__name__,
        )
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert "Answer shop with A)" in title, title
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)
    after = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    assert after == before


async def test_edited_decision_is_what_gets_written(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = await _open(pilot, app, "shop", "3")
        await _type_in_decision(pilot, screen, *" per legal", "enter", *"Second line")
        assert "+  Second line" in _diff(screen)
        screen.query_one("#apply").focus()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    prompt = (root / "shop" / "PROMPT.md").read_text()
    assert "users must contact support. per legal\n  Second line\n" in prompt


async def test_the_preview_screen_is_reused_with_nothing_left_from_before(tmp_path: Path) -> None:
    """One preview screen serves every answer: each open shows only its own block's plan."""
    root = demo_workspace(tmp_path)
    shop_before = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        first = await _open(pilot, app, "shop", "3")
        await _type_in_decision(pilot, first, *" per legal")
        assert "per legal" in _diff(first)
        await pilot.press("escape", "d")  # leave, discarding the edit (asked first)
        await pilot.pause()

        assert await _open(pilot, app, "mobile", "1") is first  # loaded with mobile's plan
        assert "Answer mobile with A)" in str(first.query_one("#preview-title", Static).render())
        assert "Ship the [b]bold[/b]" in _diff(first) and "per legal" not in _diff(first)
        assert "per legal" not in first.query_one("#decision", TextArea).text
        assert first.query_one("#apply").has_focus
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not (root / "mobile" / "BLOCKED.md").exists()

        # Back to shop: its decision text is generated afresh, not the abandoned edit.
        await pilot.press("g")
        assert await _open(pilot, app, "shop", "3") is first
        assert "per legal" not in first.query_one("#decision", TextArea).text
        assert "per legal" not in _diff(first)
        await pilot.press("escape")
        await pilot.pause()
    after = {p: p.read_bytes() for p in (root / "shop").iterdir() if p.is_file()}
    assert after == shop_before


async def test_undo_in_a_reused_preview_cannot_replay_an_abandoned_edit(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = await _open(pilot, app, "shop", "3")
        generated = _diff(screen)
        await _type_in_decision(pilot, screen, "Z", "backspace")  # back to the same text
        await pilot.press("escape")
        await pilot.pause()
        assert await _open(pilot, app, "shop", "3") is screen
        await pilot.press("e", "ctrl+z")
        await pilot.pause()
        area = screen.query_one("#decision", TextArea)
        assert "Z" not in area.text and _diff(screen) == generated


async def test_an_edit_undone_by_hand_previews_the_generated_plan(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = await _open(pilot, app, "shop", "2")
        generated = _diff(screen)
        await _type_in_decision(pilot, screen, "x")
        assert _diff(screen) != generated
        await pilot.press("backspace")
        await pilot.pause()
        assert _diff(screen) == generated


async def test_own_words_answer(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
        await pilot.press(*"Keep them, anonymised")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
    prompt = (root / "shop" / "PROMPT.md").read_text()
    assert "keep them for 7 years? → Keep them, anonymised\n" in prompt
    assert not (root / "shop" / "BLOCKED.md").exists()


async def test_block_changed_after_preview_writes_nothing(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    prompt_before = (shop / "PROMPT.md").read_bytes()
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("2")
        await pilot.pause()
        (shop / "BLOCKED.md").write_text("## Question\nA different question now?\n")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (shop / "PROMPT.md").read_bytes() == prompt_before
        assert (shop / "BLOCKED.md").exists()
        assert any("Block changed" in n.title for n in app._notifications)
        current = app.query_one(BlockList).current
        assert current is not None and current.question == "A different question now?"
        assert "A different question now?" in static_text(app, "#question")


async def test_markup_and_escapes_are_shown_literally(tmp_path: Path) -> None:
    repo = tmp_path / "evil"
    (repo / ".git").mkdir(parents=True)
    (repo / "BLOCKED.md").write_text(
        "## Question\n[@click=app.quit]Quit?[/] [b \x1b[31mred\x1b[0m\n"
        "## Context\n[/x] unbalanced [link=file:///etc/passwd]x\n"
        "## Choices\n- A) [bold]yes[/bold] — [@click=app.quit]boom\n"
    )
    app = make_app([repo])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        question = static_text(app, "#question")
        assert "[@click=app.quit]Quit?[/] [b ␛[31mred␛[0m" in question
        assert "\x1b" not in question
        assert "[/x] unbalanced" in static_text(app, "#context")
        assert "[bold]yes[/bold]" in static_text(app, "#choices")
        await pilot.click("#question")
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running


async def test_keys_move_help_raw_and_out_of_range_choice(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "shop")
        await pilot.press("j")
        assert table.current.id == "mobile"
        await pilot.press("k")
        assert table.current.id == "shop"
        await pilot.press("9")
        await pilot.pause()
        assert not isinstance(app.screen, PreviewScreen)
        assert any("3 choices" in n.message for n in app._notifications)
        await pilot.press("r")
        assert app.query_one("#detail").has_class("raw")
        assert "## Question:" in app.query_one("#raw", TextArea).text
        await pilot.press("r")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_rows_do_not_move_under_the_cursor(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await select(pilot, app, "shop")
        highlighted = table.current
        # An older block arrives (it sorts above the cursor) and the first one leaves.
        older = root / "zzz"
        (older / ".git").mkdir(parents=True)
        (older / "BLOCKED.md").write_text("## Question\nOld one?\n")
        stamp = NOW.timestamp() - 10 * 86400
        os.utime(older / "BLOCKED.md", (stamp, stamp))
        block = LoopkitSource().parse(older, older / "BLOCKED.md", "zzz")
        assert isinstance(block, Block)
        first_key = key_of(table.blocks[table.order[0]])
        app.apply_delta(Delta(added=[block], removed=[first_key]))
        await pilot.pause()
        assert table.current is not None and table.current.id == highlighted.id
        assert table.order[0].endswith("zzz/BLOCKED.md")


async def test_new_block_appears_live_with_a_toast(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await asyncio.sleep(0.3)
        (root / "infra" / "BLOCKED.md").write_text("## Question\nRotate the password now?\n")
        table = app.query_one(BlockList)
        for _ in range(100):
            await asyncio.sleep(0.05)
            await pilot.pause()
            if any(b.id == "infra" for b in table.blocks.values()):
                break
        assert any(b.id == "infra" for b in table.blocks.values())

        def toasted() -> bool:
            return any(
                n.title == "New block" and "Rotate the password now?" in n.message
                for n in app._notifications
            )

        for _ in range(40):  # the toast comes when the burst of arrivals ends (0.5 s)
            if toasted():
                break
            await asyncio.sleep(0.05)
            await pilot.pause()
        assert toasted()
        oldest = min(table.blocks.values(), key=lambda b: b.since)
        assert table.current.id == oldest.id
        app.stop_event.set()


async def test_empty_inbox_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "quiet"
    (repo / ".git").mkdir(parents=True)
    app = make_app([repo])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.screen.has_class("empty")
        assert "No open blocks in 1 repo." in static_text(app, "#empty")
        await pilot.press("2")
        await pilot.press("o")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, PreviewScreen)


async def test_u_undoes_the_last_answer_byte_for_byte(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    shop = root / "shop"
    before = {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()}
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        await pilot.press("1", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not (shop / "BLOCKED.md").exists()
        await pilot.press("u")  # asks first (tests/test_undo_confirm.py): y undoes it
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()} == before
        assert any(b.id == "shop" for b in app.query_one(BlockList).blocks.values())
        assert any(n.title == "Undone" for n in app._notifications)
        # Nothing left to undo: refused with a message, nothing changes.
        await pilot.press("u")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any(n.title == "Not undone" for n in app._notifications)
        assert {p.name: p.read_bytes() for p in shop.iterdir() if p.is_file()} == before


async def test_h_shows_the_history(tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from hitl_tui.tui.screens import HistoryScreen

    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "api")
        await pilot.press("2", "enter")
        await app.workers.wait_for_complete()
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        table = app.screen.query_one("#history-table", DataTable)
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[1:3] == ["Ada", "api"]
        assert row[3].startswith("2) Per IP address")
        assert row[4] == "done"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HistoryScreen)


async def test_recovery_notices_are_shown(tmp_path: Path) -> None:
    from tests.tui_support import make_app as build

    app = build([demo_workspace(tmp_path)])
    app.notices = ["rolled back an interrupted answer to shop"]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert any(
            n.title == "Recovered" and "rolled back" in n.message for n in app._notifications
        )


async def test_the_answered_toast_says_how_to_restart_this_repos_loop(tmp_path: Path) -> None:
    """shop has an executable run.sh; mobile has none: each toast says what is true there."""
    root = demo_workspace(tmp_path)
    (root / "shop" / "run.sh").write_text("#!/usr/bin/env bash\n")
    (root / "shop" / "run.sh").chmod(0o755)
    app = make_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for block_id in ("shop", "mobile"):
            await select(pilot, app, block_id)
            await pilot.press("1")
            await pilot.pause()
            assert isinstance(app.screen, PreviewScreen)
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
        answered = [n.message for n in app._notifications if n.title == "Answered"]
        assert len(answered) == 2
        assert answered[0].splitlines()[-1] == f"Restart the loop: cd {root / 'shop'} && ./run.sh"
        assert answered[1].splitlines()[-1] == (
            "The loop can resume: restart it the way you started it (mobile has no run.sh)."
        )
