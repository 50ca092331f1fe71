"""Issue 27, item 3: the cursor is predictable. After an answer it is on the next open block,
never on an answer's row waiting for its loop; `g` and the cursor after a snooze are on a
block, never on a group's header row (where `z` or `1` said "No block is highlighted").

The demo's mixed fleet (agenticloop tasks, loopkit repos), the real app under Pilot, the
state folder in tmp; each step is keys the operator presses and what the list then shows.
"""

from __future__ import annotations

from pathlib import Path

from hitl_tui.inbox.view import is_answer
from hitl_tui.tui.screens import PreviewScreen
from hitl_tui.tui.snooze_screen import SnoozeScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until
from tests.support.pilot import preview_of, select, settle
from tests.tui_support import SIZE, demo_workspace, make_app


def _rows(table: BlockList) -> list[tuple[str, str]]:
    return [(table.blocks[rk].id, table.blocks[rk].state) for rk in table.order]


def _toasts(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


async def _go(pilot, table: BlockList, block_id: str) -> None:
    """Home, then j until `block_id` is highlighted (group header rows count as rows)."""
    await pilot.press("home")
    for _ in range(len(table.drawn)):
        if table.current is not None and table.current.id == block_id:
            return
        await pilot.press("j")
    raise AssertionError(f"{block_id} is not in the list: {_rows(table)}")


async def _answer(pilot, app, block_id: str) -> None:
    """Choice 1 of `block_id`, applied; back in the inbox once its answer's row is listed."""
    table = app.query_one(BlockList)
    await preview_of(pilot, app, block_id, "1")
    await pilot.press("y")
    await until(
        pilot,
        lambda: (block_id, "waiting") in _rows(table) and not isinstance(app.screen, PreviewScreen),
        what=f"the answer to {block_id} waiting for its loop",
        saw=lambda: (_rows(table), _toasts(app)),
    )
    await settle(pilot, app)


async def test_after_an_answer_the_cursor_is_on_the_next_open_block_not_a_waiting_row(
    tmp_path: Path,
) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await _answer(pilot, app, "billing/T-007")  # an agenticloop task
        assert table.current.id == "billing/T-012"
        await _answer(pilot, app, "shop")  # a loopkit block: its row waits at the bottom
        assert table.current.id == "mobile"
        await select(pilot, app, "docs")
        await pilot.press("z", "2")  # docs set aside: api is the last open block
        await until(pilot, lambda: "docs" not in [i for i, _ in _rows(table)])
        assert _rows(table)[-1] == ("shop", "waiting")
        # The last open block answered: the row after it is shop's answer, waiting for its
        # loop. The cursor goes back to the nearest open block instead, where 1 answers.
        await _answer(pilot, app, "api")
        assert table.current.id == "mobile" and not is_answer(table.current)
        await pilot.press("1")
        await until(
            pilot,
            lambda: isinstance(app.screen, PreviewScreen),
            what="the preview of mobile's choice 1",
            saw=lambda: (type(app.screen).__name__, _toasts(app)),
        )
        assert "waits for its loop" not in _toasts(app)


async def test_g_and_the_cursor_after_a_snooze_skip_group_header_rows(tmp_path: Path) -> None:
    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        await pilot.press("v")  # grouped by repo: a header row before each repo's blocks
        assert table.rows.spec.group == "repo" and table.current_group is None
        await pilot.press("G", "g")
        assert table.current_group is None and table.current.id == "billing/T-007"
        await pilot.press("G")
        assert table.current.id == "docs"
        # mobile is alone in its group: snoozed, the next row drawn is api's header.
        await _go(pilot, table, "mobile")
        await pilot.press("z", "2")
        await until(
            pilot,
            lambda: "mobile" not in [i for i, _ in _rows(table)],
            what="mobile snoozed",
            saw=lambda: _rows(table),
        )
        assert table.current_group is None and table.current.id == "api"
        await pilot.press("z")  # on a block: the snooze dialog, not "No block is highlighted"
        await until(pilot, lambda: isinstance(app.screen, SnoozeScreen), saw=lambda: _toasts(app))
        assert "No block is highlighted" not in _toasts(app)
        await pilot.press("escape")
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, PreviewScreen), saw=lambda: _toasts(app))
