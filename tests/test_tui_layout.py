"""The space is shared: the list takes half the screen at most (issue 27: it holds still
whatever block is highlighted; tests/test_tui_list_height.py), the detail the rest, 80x24 keeps
six rows of the list and a readable detail, the focused pane is drawn in the accent colour, and
a list key pressed in the detail says where it works."""

from __future__ import annotations

from pathlib import Path

from hitl_tui.tui.widgets import BlockList
from tests.support.pilot import settle
from tests.test_small_terminals import drawn
from tests.test_tui_screen import fleet, list_lines
from tests.tui_support import demo_workspace, make_app


async def test_at_150x45_the_list_takes_half_and_the_panes_are_whole(tmp_path: Path) -> None:
    app = make_app([fleet(tmp_path)])
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot, app)
        # Half of 45 rows: its border and titles, and 19 rows of the 30 (the rest scroll).
        assert len(list_lines(app)) == 19, "\n".join(drawn(app))
        lines = drawn(app)
        assert any("A) Yes" in line for line in lines)
        assert any("Nothing." in line for line in lines)  # the last pane, whole


async def test_at_150x45_a_long_detail_is_shown_whole(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot, app)
        lines = drawn(app)
        assert any("answer in your own words" in line for line in lines)
        assert any("Add `src/storage/postgres.js`" in line for line in lines)  # More, whole
        assert len([line for line in lines if " 2d " in line or " 17m " in line]) == 2


async def test_at_80x24_six_rows_of_the_list_and_a_readable_detail(tmp_path: Path) -> None:
    for root in (fleet(tmp_path / "fleet"), demo_workspace(tmp_path / "demo")):
        app = make_app([root])
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            table = app.query_one(BlockList)
            rows = min(len(table.order), 6)
            assert table.scrollable_content_region.height >= rows
            block = table.current
            lines = drawn(app)
            # The question's first words and the first choice are drawn.
            assert any(block.question.split()[0] in line for line in lines[10:])
            assert any("1 " in line and "A)" in line for line in lines), "\n".join(lines)
            detail = app.query_one("#detail")
            assert detail.region.height >= 8


async def test_the_focused_pane_is_drawn_in_another_colour(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        inbox, question = app.query_one("#inbox"), app.query_one("#question")
        assert app.focused is app.query_one(BlockList)
        list_focused = (inbox.styles.border_top[1], question.styles.border_top[1])
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is app.query_one("#story")
        story_focused = (inbox.styles.border_top[1], question.styles.border_top[1])
        assert list_focused[0] != story_focused[0]  # the list's border dims ...
        assert list_focused[1] != story_focused[1]  # ... the story's lights up
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is app.query_one("#actions")
        assert app.query_one("#choices").styles.border_top[0] == "heavy"


async def test_a_list_key_in_the_detail_says_where_it_works(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is app.query_one("#story")
        await pilot.press("j")
        await pilot.pause()
        assert table.cursor_row == 0
        note = list(app._notifications)[-1]
        assert note.message == "j works in the list: press Esc to return to it"
        await pilot.press("escape", "j")
        await pilot.pause()
        assert app.focused is table and table.cursor_row == 1
