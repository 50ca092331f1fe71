"""Small terminals: the preview never applies a diff it could not show, and the inbox always
shows the highlighted block's id and question (60x15 and 40x10, as tmux panes often are)."""

from __future__ import annotations

from pathlib import Path

from textual import events

from hitl_tui.tui.screens import PreviewScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import select, settle
from tests.tui_support import demo_workspace, make_app


def drawn(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def _preview(pilot, app, block_id: str = "shop", key: str = "2") -> PreviewScreen:
    await settle(pilot, app)
    await select(pilot, app, block_id)
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, PreviewScreen)
    return app.screen


async def test_at_60x15_the_preview_shows_the_diff_and_enter_applies(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=(60, 15)) as pilot:
        await _preview(pilot, app)
        lines = drawn(app)
        assert any("+++ b/PROMPT.md" in line for line in lines), "\n".join(lines)
        assert any("Apply" in line for line in lines), "\n".join(lines)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert not (root / "shop" / "BLOCKED.md").exists()


async def test_a_preview_built_in_a_big_window_fits_a_small_one_later(tmp_path: Path) -> None:
    """The preview screen is built once and reused: it must take the new size's layout too."""
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=(120, 40)) as pilot:
        await _preview(pilot, app)
        await pilot.press("escape")
        await pilot.resize_terminal(60, 15)
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert any("+++ b/PROMPT.md" in line for line in drawn(app)), "\n".join(drawn(app))
        await pilot.press("escape")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        assert not app.screen.has_class("-short")


async def test_where_no_diff_line_fits_enter_and_y_refuse(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    blocked = (root / "shop" / "BLOCKED.md").read_bytes()
    app = make_app([root])
    async with app.run_test(size=(60, 15)) as pilot:
        await settle(pilot, app)
        await pilot.resize_terminal(60, 5)
        await pilot.pause()
        await _preview(pilot, app)
        assert not any("+++ b/PROMPT.md" in line for line in drawn(app))
        for key in ("enter", "y"):
            await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
            assert isinstance(app.screen, PreviewScreen)
        assert (root / "shop" / "BLOCKED.md").read_bytes() == blocked
        assert (
            not (root / "shop" / "PROMPT.md").exists()
            or "B)" not in (root / "shop" / "PROMPT.md").read_text()
        )
        notices = [n.message for n in app._notifications]
        assert any("too small to show the diff" in m and "enlarge" in m for m in notices), notices
        # Enlarged, the diff is in view, and the same keypress applies.
        await pilot.resize_terminal(60, 15)
        await pilot.pause()
        assert any("+++ b/PROMPT.md" in line for line in drawn(app))
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert not (root / "shop" / "BLOCKED.md").exists()


async def test_at_40x10_the_highlighted_block_shows_its_id_and_question(tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=(40, 10)) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        for _ in range(3):
            block = table.current
            assert block is not None
            rows = [line for line in drawn(app) if block.id in line]
            start = block.one_line_question()[:8]
            assert any(start in row for row in rows), (block.id, start, drawn(app))
            await pilot.press("j")
            await pilot.pause()


async def test_a_choice_and_y_typed_at_once_apply_before_the_first_frame(tmp_path: Path) -> None:
    """A fast typist's `1` `y`: the `y` reaches the preview before its first layout, when no
    diff line is on screen yet. It applies once the diff is drawn, never 'too small'."""
    root = demo_workspace(tmp_path)
    app = make_app([root])
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        screen = app.screen
        # Both keys in one turn of the app's loop, as a terminal delivers a burst.
        app.post_message(events.Key("2", "2"))
        app.post_message(events.Key("y", "y"))
        blocked = root / "shop" / "BLOCKED.md"

        def warned() -> list[str]:
            return [str(n.title) for n in app._notifications]

        await until(pilot, lambda: not blocked.exists() or "Not applied" in warned(), saw=warned)
        assert "Not applied" not in warned()
        await app.workers.wait_for_complete()
        await until(pilot, lambda: app.screen is screen, what="back in the inbox")
