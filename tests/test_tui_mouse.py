"""The mouse: a click on a choice in the detail pane opens its preview, as its number does."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import select, settle
from tests.test_small_terminals import drawn
from tests.tui_support import SIZE, demo_workspace, make_app


def _row_of(app, text: str) -> tuple[int, int]:
    """Where on screen the choices pane shows `text`: (x, y) of its first character."""
    region = app.query_one("#choices").region
    lines = drawn(app)
    for y in range(region.y, region.bottom):
        x = lines[y].find(text, region.x)
        if region.x <= x < region.right:
            return x, y
    raise AssertionError(f"{text!r} is not in the choices pane:\n" + "\n".join(lines))


async def test_clicking_a_choice_opens_its_preview(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "shop")
        block = app.query_one(BlockList).current
        second = block.choices[1]
        x, y = _row_of(app, second.option[:12])
        await pilot.click(offset=(x + 2, y))
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert title == f"Answer shop with {second.label()}"
        await pilot.press("escape")
        await pilot.pause()
        # The number badge works too, and nothing was written by a preview left.
        x, y = _row_of(app, " 1 ")
        await pilot.click(offset=(x + 1, y))
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen)
        assert str(app.screen.query_one("#preview-title", Static).render()).endswith(
            block.choices[0].label()
        )
        await pilot.press("escape")
        await pilot.pause()
    assert (tmp_path / "shop" / "BLOCKED.md").exists()


async def test_clicking_own_words_opens_the_text_box_and_elsewhere_nothing(tmp_path: Path):
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        region = app.query_one("#question").region
        await pilot.click(offset=(region.x + 2, region.y + 1))
        await pilot.pause()
        assert not isinstance(app.screen, (PreviewScreen, TextAnswerScreen))
        x, y = _row_of(app, "answer in your own words")
        await pilot.click(offset=(x + 3, y))
        await pilot.pause()
        assert isinstance(app.screen, TextAnswerScreen)
