"""Answer each question once, in the app (issue 26): marks (Space, Esc, M), grouping by
question, and one answer previewed and written for every marked block. Driven by keys;
asserting what the list, the header and the screens show, and the files on disk."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static, TextArea

from hitl_tui.cli import commands as cli
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import batch_fleet, until
from tests.support.pilot import select, settle
from tests.tui_support import NOW, SIZE, make_app


def _fleet(tmp_path: Path, **kw) -> list[Path]:
    return batch_fleet.build(tmp_path, NOW.timestamp(), **kw)


def _header(app) -> str:
    return str(app.query_one("#topbar", Static).content)


def _rows(app) -> list[str]:
    """Each drawn row's text, as the list shows it (the first cell: the marks)."""
    table = app.query_one(BlockList)
    return [table.render_line(y).text for y in range(len(table.drawn))]


def _marked_ids(app) -> set[str]:
    table = app.query_one(BlockList)
    return {table.blocks[rk].id for rk in table.rows.marked}


def _row_of(app, block_id: str) -> str:
    return next(r for r in _rows(app) if r[1:].startswith(block_id + " "))


async def test_space_marks_esc_clears_and_the_header_counts_marks_the_filter_hides(tmp_path):
    app = make_app(_fleet(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await select(pilot, app, "node-1")
        await pilot.press("space")
        await select(pilot, app, "db-1")
        await pilot.press("space")
        assert _marked_ids(app) == {"node-1", "db-1"}
        assert _row_of(app, "node-1").startswith("✓")
        assert _row_of(app, "db-1").startswith("✓")
        assert not _row_of(app, "node-2").startswith("✓")
        assert "· 2 marked" in _header(app)
        # Space again unmarks.
        await pilot.press("space")
        assert _marked_ids(app) == {"node-1"}
        assert not _row_of(app, "db-1").startswith("✓")
        await pilot.press("space")
        # A filter that hides one: the marks stay, the header says how many are hidden.
        await pilot.press("slash", *"db", "enter")
        await pilot.pause()
        assert [r[1:5] for r in _rows(app)] == ["db-1", "db-2"]
        assert "· 2 marked (1 hidden by the filter)" in _header(app)
        assert _marked_ids(app) == {"node-1", "db-1"}
        # Another order, a grouping: the marks stay.
        await pilot.press("s", "v")
        await pilot.pause()
        assert _marked_ids(app) == {"node-1", "db-1"}
        # Cleared filter: both shown marked again; Esc clears every mark.
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert _row_of(app, "node-1").startswith("✓")
        assert "· 2 marked ·" in _header(app) or _header(app).endswith("· 2 marked")
        await pilot.press("escape")
        await pilot.pause()
        assert _marked_ids(app) == set()
        assert "marked" not in _header(app)
        assert not any(r.startswith("✓") for r in _rows(app))


# -- p: reuse an earlier answer -------------------------------------------------------------


async def test_p_offers_another_repos_decision_as_own_words_never_as_a_draft(tmp_path):
    """svc's tasks list no "Node 22": p offers node-1's decision (its option's text, not its
    label and consequence) in the own-words box, titled with where it comes from."""
    repos = _fleet(tmp_path, node=1, db=0, tasks=1)
    assert cli.main(["answer", str(repos[0]), "--choice", "B"]) == 0
    app = make_app(repos)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await until(pilot, lambda: app.asked.index is not None, what="the memory of answers")
        await select(pilot, app, "svc/T-001")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, TextAnswerScreen), what="the text box")
        title = str(app.screen.query_one("#answer-title", Static).content)
        assert "from the answer given in node-1" in title, title
        assert "your draft" not in title
        assert not app.screen.query("#discard")
        text = app.screen.query_one("#answer-1", TextArea).text
        assert text == "Node 22", text
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        assert app.screen.plan.answer.choice is None
        assert app.screen.plan.answer.texts == ("Node 22",)


# -- M, and grouping by question ------------------------------------------------------------


async def test_M_marks_every_open_block_asking_the_same_question(tmp_path):
    app = make_app(_fleet(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        # A filter hides the agenticloop tasks: M marks them all the same, and says so.
        await pilot.press("slash", *"src:loopkit", "enter")
        await select(pilot, app, "node-2")
        await pilot.press("M")
        await pilot.pause()
        node = {"node-1", "node-2", "node-3", "node-4", "svc/T-001", "svc/T-002"}
        assert _marked_ids(app) == node
        assert "· 6 marked (2 hidden by the filter)" in _header(app)
        for block_id in ("node-1", "node-2", "node-3", "node-4"):
            assert _row_of(app, block_id).startswith("✓"), _rows(app)
        assert not _row_of(app, "db-1").startswith("✓")
        toast = str(list(app._notifications)[-1].message)
        assert "6 blocks asking this question: 6 newly marked" in toast
        # The other question: its own two.
        await select(pilot, app, "db-2")
        await pilot.press("M")
        await pilot.pause()
        assert _marked_ids(app) == node | {"db-1", "db-2"}


async def test_v_groups_by_question_and_space_on_a_header_marks_the_group(tmp_path):
    repos = _fleet(tmp_path)
    # A question no other block asks.
    batch_fleet.loopkit(tmp_path, "lone", "## Question\nShould the logo be blue?\n", 0)
    app = make_app([*repos, tmp_path / "lone"])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for _ in range(4):
            await pilot.press("v")
        await pilot.pause()
        assert "grouped by question" in _header(app)
        rows = _rows(app)
        assert rows[0].startswith(" ▾ Which Node version should CI use? · 6 blocks"), rows
        assert rows[7].startswith(" ▾ Which DB migration tool should we use? · 2 blocks"), rows
        assert rows[10].startswith(" ▾ questions asked once · 1 block"), rows
        assert {r[1:10].strip() for r in rows[1:7]} == {
            "svc/T-001",
            "svc/T-002",
            "node-1",
            "node-2",
            "node-3",
            "node-4",
        }
        # Space on the DB header marks its two blocks; the header row counts them.
        table = app.query_one(BlockList)
        table.move_cursor(7)
        await pilot.press("space")
        await pilot.pause()
        assert _marked_ids(app) == {"db-1", "db-2"}
        assert _rows(app)[7].startswith(
            " ▾ Which DB migration tool should we use? · 2 blocks · 2 marked"
        )
        assert _rows(app)[8].startswith("✓db-")
        assert "· 2 marked" in _header(app)
        # Space again: all were marked, so all are unmarked; Enter still folds.
        await pilot.press("space")
        assert _marked_ids(app) == set()
        await pilot.press("enter")
        await pilot.pause()
        assert "(folded)" in _rows(app)[7]
