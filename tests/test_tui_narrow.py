"""Issue 27 item 8: narrow terminals and honest counts. At 80 and 100 columns every id is
whole (the state column narrows or leaves first); the header is shortened before it is cut;
"N of M" only with a filter, the answers waiting counted apart; the footer hints the keys
that matter; the help's wrapped lines indent to the description column."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import until
from tests.support.pilot import settle
from tests.tui_support import demo_workspace, make_app

#: Repositories renamed so their blocks' ids are as long as a real fleet's.
LONG = {"billing": "al-subscriptions-billing", "shop": "payments-reconciliation"}


def _fleet(root: Path) -> Path:
    demo_workspace(root)
    for old, new in LONG.items():
        shutil.move(root / old, root / new)
    return root


def _list_lines(app) -> list[str]:
    from hitl_tui.tui.widgets import BlockList

    table = app.inbox_screen.query_one(BlockList)
    return [table.render_line(y).text for y in range(table.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_every_id_is_whole_in_the_list_at_80_and_100_columns(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    from hitl_tui.tui.widgets import BlockList

    app = make_app([_fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        table = app.inbox_screen.query_one(BlockList)
        ids = [table.blocks[rk].id for rk in table.order]
        assert any(len(i) > 20 for i in ids), ids  # longer than the block column was
        lines = _list_lines(app)
        for y, block_id in enumerate(ids[: len(lines)]):
            assert f" {block_id} " in lines[y] + " ", (block_id, lines[y])
        # The question keeps its room.
        assert all(len(line.rstrip()) > 60 for line in lines[: len(ids)]), lines


def test_the_header_is_shortened_before_it_is_cut() -> None:
    """A 40-loop fleet's header (answers waiting, one not resumed, snoozed, a warning) at 100
    and 80 columns: every count is there ("snoozed" was cut at 100); the long words go
    first, then "watching". With an order and a grouping too, at 100."""
    from hitl_tui.tui.header import HeaderParts, ViewState, header_line

    parts = HeaderParts(31, 28, 40, " · 1 warning")
    view = ViewState(listed=31, known=31, snoozed=4, waiting=3, late=1)
    assert header_line(parts, view, 160) == (
        "hitl · 31 blocks in 28 repos · watching 40 · 3 waiting for their loop (1 not "
        "resumed) · 4 snoozed · 1 warning"
    )
    for width in (100, 80):
        line = header_line(parts, view, width)
        assert len(line) <= width, (width, line)
        for word in ("31 blocks", "28 repos", "3 waiting", "1 not resumed", "4 snoozed"):
            assert word in line, (width, word, line)
        assert line.endswith("1 warning"), line
    sorted_view = ViewState(
        listed=31, known=31, snoozed=4, waiting=3, late=1, order="newest", group="repo"
    )
    line = header_line(parts, sorted_view, 100)
    assert len(line) <= 100 and "4 snoozed · newest · by repo · 1 warning" in line, line


async def test_n_of_m_only_with_a_filter_and_answers_counted_apart(tmp_path: Path) -> None:
    """No filter: "6 blocks", never "5 of 6" (a snooze is counted on its own). A filter that
    lists only answers waiting for their loop: its count says so, not "0 of 5 blocks"
    alone while rows show."""
    from tests.support.pilot import preview_of, static_text

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        screen = app.inbox_screen

        def header() -> str:
            return static_text(screen, "#topbar")

        assert header().startswith("hitl · 6 blocks in 5 repos")
        await preview_of(pilot, app, "shop", "1")
        await until(pilot, lambda: app.screen.diff_lines_in_view() > 0)
        await pilot.press("y")
        await until(pilot, lambda: "1 waiting for their loop" in header(), saw=header)
        assert header().startswith("hitl · 5 blocks in"), header()
        screen.set_filter("state:waiting")
        await pilot.pause()
        assert len(screen.blocklist.order) == 1  # the answer's row shows
        assert "0 of 5 blocks" in header() and "1 of 1 waiting" in header(), header()
        screen.set_filter("")
        await pilot.pause()
        assert " of " not in header(), header()


def _footer(app) -> list[str]:
    """The footer's keys the terminal shows whole: "z Snooze", left to right."""
    from textual.widgets._footer import FooterKey

    width = app.size.width
    keys = sorted(app.screen.query(FooterKey), key=lambda k: k.region.x)
    return [
        f"{k.key_display} {k.description}".strip()
        for k in keys
        if k.region.width and k.region.right <= width
    ]


async def test_the_footer_hints_the_keys_of_the_row_under_the_cursor_at_80_columns(
    tmp_path: Path,
) -> None:
    """On a block, at 80 columns: z, p, v, ? and q are hinted whole; on an answer waiting
    for its loop: R, x and t."""
    from tests.support.pilot import preview_of

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        shown = _footer(app)
        for hint in ("z Snooze", "p Reuse", "v Group", "? Keys", "q Quit", "o Own words"):
            assert hint in shown, shown
        await preview_of(pilot, app, "shop", "1")
        await until(pilot, lambda: app.screen.diff_lines_in_view() > 0)
        await pilot.press("y")
        screen = app.inbox_screen
        await until(pilot, lambda: any(b.state == "waiting" for b in screen.rows.blocks.values()))
        await pilot.press("G")
        await until(pilot, lambda: "R Restart loop" in _footer(app), saw=lambda: _footer(app))
        shown = _footer(app)
        for hint in ("x Drop waiting", "t To the loop", "? Keys", "q Quit"):
            assert hint in shown, shown
        assert "z Snooze" not in shown and "o Own words" not in shown, shown


async def test_in_the_help_wrapped_lines_indent_to_the_description_column(
    tmp_path: Path,
) -> None:
    from textual.widgets import Static

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.pause()
        text = app.screen.query_one("#help-text", Static)
        rows = [text.render_line(y).text.rstrip() for y in range(text.size.height)]
        box = app.screen.query_one("#help")
        assert box.region.right <= 80, box.region  # the box is on the screen, whole
        at = rows.index(next(r for r in rows if r.lstrip().startswith("Space ")))
        # "Space  mark / unmark ..." wraps: its next lines start at the description column.
        description = rows[at].index("mark / unmark")
        follow = rows[at + 1]
        assert follow[:description].strip() == "" and follow[description] != " ", rows[at : at + 3]
        for row in rows:  # no line starts left of the description but a key's or a heading
            stripped = row.lstrip()
            if row and len(row) - len(stripped) not in (0, 2, description):
                raise AssertionError(row)


async def test_the_id_column_widens_for_a_long_id_and_narrows_when_it_goes(
    tmp_path: Path,
) -> None:
    """The id column is as wide as the longest id known: a block with a longer id widens it
    (the question's column title moves right), and when that block goes, or changes to a
    short id, it narrows back (a Delta measures its own blocks, not the whole list)."""
    from dataclasses import replace

    from hitl_tui.inbox.inbox import Delta
    from hitl_tui.inbox.view import key_of

    app = make_app([demo_workspace(tmp_path)])
    async with app.run_test(size=(200, 45)) as pilot:
        await settle(pilot, app)
        table = app.inbox_screen.blocklist

        def question_column() -> int:
            return table.titles(200).text.index("question")

        start = question_column()
        some = next(iter(table.blocks.values()))
        long = replace(some, id="x" * 50, path=some.path.with_name("LONG.md"))
        app.apply_delta(Delta(added=[long]))
        assert question_column() > start + 20, table.titles(200).text
        app.apply_delta(Delta(removed=[key_of(long)]))
        assert question_column() == start, table.titles(200).text
        app.apply_delta(Delta(changed=[replace(some, id="y" * 50)]))
        assert question_column() > start + 20, table.titles(200).text
        app.apply_delta(Delta(changed=[some]))
        assert question_column() == start, table.titles(200).text
