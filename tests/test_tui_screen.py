"""What the operator sees on screen: the whole list, whole categories, a preview that keeps
edits and drafts, and arrivals that do not bury the screen (issue 12, "On screen")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl_tui.inbox import Delta
from hitl_tui.sources.loopkit import LoopkitSource
from hitl_tui.tui.widgets import BlockList
from tests.test_tui import _settle
from tests.tui_support import NOW, make_app

#: The sizes the issue names; each overflows the list with FLEET blocks.
SIZES = [(150, 45), (100, 30), (80, 24)]
FLEET = 30


def drawn(app) -> list[str]:
    """Every line of the screen as drawn (the active screen, modals included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def fleet(root: Path, count: int = FLEET) -> Path:
    """`count` loopkit repos, repo-01 the oldest, each asking its own numbered question."""
    for index in range(1, count + 1):
        repo = root / f"repo-{index:02d}"
        (repo / ".git").mkdir(parents=True)
        path = repo / "BLOCKED.md"
        path.write_text(
            f"## Question\nQuestion number {index:02d}?\n"
            "## Context\nA fleet.\n## Attempted\n- Nothing.\n"
            "## Choices\n- A) Yes — fine.\n- B) No — also fine.\n"
        )
        stamp = NOW.timestamp() - (count + 1 - index) * 600
        os.utime(path, (stamp, stamp))
    return root


def list_lines(app) -> list[str]:
    """The drawn lines that are rows of the inbox (they name a repo-NN block)."""
    return [line for line in drawn(app) if "repo-" in line and "Question number" in line]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("key", ["G", "end"])
async def test_the_last_row_is_drawn_after_g_or_end(
    tmp_path: Path, size: tuple[int, int], key: str
) -> None:
    app = make_app([fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await _settle(pilot, app)
        assert app.query_one(BlockList).current.id == "repo-01"
        await pilot.press(key)
        await pilot.pause()
        assert app.query_one(BlockList).current.id == f"repo-{FLEET:02d}"
        rows = list_lines(app)
        assert rows, drawn(app)
        assert f"Question number {FLEET:02d}?" in rows[-1], "\n".join(drawn(app))
        # And back at the top, the first row is drawn again.
        await pilot.press("g")
        await pilot.pause()
        assert "Question number 01?" in list_lines(app)[0]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_moving_down_row_by_row_keeps_the_cursor_row_drawn(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await _settle(pilot, app)
        table = app.query_one(BlockList)
        for _ in range(FLEET - 1):
            await pilot.press("j")
            await pilot.pause()
            wanted = table.current.one_line_question()
            assert any(wanted in row for row in list_lines(app)), (wanted, drawn(app))


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_blocks_that_arrive_at_the_bottom_are_drawn_after_g(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """The toast names the newest block: G shows its row, and every line of the list is a row
    (no scrollbar or blank line takes the place of one), while the list fills and overflows."""
    root = fleet(tmp_path, 3)
    app = make_app([root])
    async with app.run_test(size=size) as pilot:
        await _settle(pilot, app)
        table = app.query_one(BlockList)
        for number in range(50, 70):
            repo = root / f"repo-{number}"
            (repo / ".git").mkdir(parents=True)
            (repo / "BLOCKED.md").write_text(f"## Question\nQuestion number {number}?\n")
            block = LoopkitSource().parse(repo, repo / "BLOCKED.md", f"repo-{number}")
            app.apply_delta(Delta(added=[block]), announce=True)
            await pilot.pause()
            await pilot.press("G")
            await pilot.pause()
            assert table.current.id == f"repo-{number}"
            rows = list_lines(app)
            assert f"Question number {number}?" in rows[-1], "\n".join(drawn(app))
            assert len(rows) == table.size.height, "\n".join(drawn(app))


# -- 2. categories are shown whole ------------------------------------------------------------

#: FORMATS.md §2.2's documented categories, and agenticloop's own in the real fixtures.
CATEGORIES = [
    "transient",
    "credentials",
    "contract",
    "review-exhausted",
    "review-unknown",
    "merge-conflict",
    "ci-failure",
    "tooling-failure",
    "no-artifact",
    "no-progress",
]


def categorised(root: Path) -> Path:
    """An agenticloop repo with one blocked task per documented category."""
    repo = root / "cats"
    (repo / ".git").mkdir(parents=True)
    tasks = repo / ".agenticloop" / "tasks"
    tasks.mkdir(parents=True)
    (repo / ".agenticloop" / "project.md").write_text(
        "---\ntask_backend: files\ntask_file_template: .agenticloop/tasks/{taskId}.md\n---\n"
    )
    for index, category in enumerate(CATEGORIES, 101):
        path = tasks / f"T-{index}.md"
        path.write_text(
            f"---\ntask_id: T-{index}\nstatus: blocked\nblock_category: {category}\n"
            f"backend: files\n---\n\n# T-{index} - Task {index}\n\n## Comments\n"
            f"- 2026-11-2{index % 10}: Blocked ({category}): stuck. Needed: a human decides "
            f"task {index}.\n"
        )
        stamp = NOW.timestamp() - (200 - index) * 600
        os.utime(path, (stamp, stamp))
    return repo


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_every_documented_category_is_shown_whole(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([categorised(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await _settle(pilot, app)
        table = app.query_one(BlockList)
        seen = set()
        for _ in range(len(CATEGORIES)):
            block = table.current
            row = next(line for line in drawn(app) if f"{block.id} " in line)
            assert f" {block.category} " in row, (block.category, row)
            assert "…" not in row.split(block.category)[0], row
            seen.add(block.category)
            await pilot.press("j")
            await pilot.pause()
        assert seen == set(CATEGORIES)
        header = next(line for line in drawn(app) if "question" in line and "state" in line)
        assert header.index("question") > header.index("state") + len("review-exhausted")
