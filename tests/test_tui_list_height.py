"""The list holds still (issue 27, item 1): as tall as its rows, at most its share of the
screen, whatever block is highlighted; the detail scrolls in its own panes. `+` / `-` change
the share and `L` zooms the list, and the app opens the way it was left (seen.json).

Counted as the operator counts: the rows of the list drawn on the screen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hitl_tui.agent.asking import Asker
from hitl_tui.paths import state_dir
from hitl_tui.tui.widgets import BlockList
from tests.conftest import FIXTURES
from tests.support.pilot import settle
from tests.test_small_terminals import drawn
from tests.test_tui_screen import fleet
from tests.tui_support import make_app

SIZES = [(160, 45), (100, 30), (80, 24)]


def mixed_fleet(root: Path) -> Path:
    """24 loopkit repos, agenticloop's own `shop` (four tasks with the whole template) and an
    MCP ask and a permission prompt: every kind of detail, short and long."""
    fleet(root, count=24)
    shop = root / "shop"
    shutil.copytree(FIXTURES / "agenticloop-real" / "shop", shop)
    (shop / ".git").mkdir()
    asker = Asker(shop, client="claude-code")
    asker.ask("Which store for sessions?", ["A — Postgres", "B — Redis: faster"], "Sessions.")
    asker.ask_permission("Bash", {"command": "rm -rf build/\nmake all\n"})
    return root


def list_rows(app) -> list[str]:
    """The ids of the blocks whose rows are drawn in the list, top to bottom."""
    table = app.query_one(BlockList)
    ids = {b.id for b in table.blocks.values()}
    rows = []
    for line in drawn(app):
        words = line.strip("│ ").split()
        if words and words[0].lstrip("●") in ids:
            rows.append(words[0].lstrip("●"))
    return rows


async def walk(pilot, app) -> list[tuple[str, int, int]]:
    """Every block highlighted in turn: (its id, list rows drawn, the list's height)."""
    table = app.query_one(BlockList)
    inbox = app.query_one("#inbox")
    seen = []
    await pilot.press("home")
    for _ in range(len(table.order)):
        await pilot.pause()
        seen.append((table.current.id, len(list_rows(app)), inbox.region.height))
        await pilot.press("j")
    return seen


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_list_keeps_its_height_over_every_block_of_a_mixed_fleet(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app([mixed_fleet(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        sources = {b.source for b in table.blocks.values()}
        assert sources == {"loopkit", "agenticloop", "ask"}, sources
        seen = await walk(pilot, app)
        # Every block was highlighted, once.
        assert sorted(s[0] for s in seen) == sorted(b.id for b in table.blocks.values())
        assert len({(rows, height) for _, rows, height in seen}) == 1, seen
        rows, height = seen[0][1], seen[0][2]
        # Half the screen (but the header and footer lines), the rest is the detail's.
        assert size[1] // 2 - 1 <= height <= size[1] // 2, seen[0]
        assert rows >= 3, "\n".join(drawn(app))
        assert app.query_one("#detail").region.height >= size[1] - height - 2 - 1


async def test_a_filter_of_six_blocks_leaves_the_room_to_the_detail(tmp_path: Path) -> None:
    app = make_app([mixed_fleet(tmp_path)])
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        await pilot.press("slash", *"repo-0", "enter")
        await pilot.pause()
        # repo-01 .. repo-09: nine rows, the list as tall as them and no taller.
        assert len(list_rows(app)) == 9, "\n".join(drawn(app))
        inbox, detail = app.query_one("#inbox"), app.query_one("#detail")
        assert inbox.region.height == 9 + 3  # the rows, the column titles, the border
        assert detail.region.height >= 45 - 2 - 1 - inbox.region.height - 1


async def test_plus_minus_and_zoom_are_kept_for_the_next_start(tmp_path: Path) -> None:
    root = mixed_fleet(tmp_path)
    app = make_app([root])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        before = len(list_rows(app))
        await pilot.press("plus", "plus")
        await pilot.pause()
        taller = len(list_rows(app))
        assert taller == before + 6, (before, taller)  # 20% of 30 rows
        await pilot.press("minus")
        await pilot.pause()
        assert len(list_rows(app)) == before + 3
    saved = json.loads((state_dir() / "seen.json").read_text())
    assert saved["list"] == {"share": 60, "zoom": False}

    app = make_app([root])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        assert len(list_rows(app)) == before + 3  # as it was left
        await pilot.press("L")
        await pilot.pause()
        assert not app.query_one("#detail").display or app.query_one("#detail").region.height == 0
        assert len(list_rows(app)) == 30 - 1 - 1 - 3  # header, footer; border and titles
    app = make_app([root])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        assert len(list_rows(app)) == 30 - 5, "\n".join(drawn(app))  # still zoomed
        await pilot.press("L")
        await pilot.pause()
        assert len(list_rows(app)) == before + 3
        assert app.query_one("#detail").region.height > 0
        for _ in range(8):  # never less than its least
            await pilot.press("minus")
        await pilot.pause()
        assert len(list_rows(app)) >= 3, "\n".join(drawn(app))
        assert "its least" in list(app._notifications)[-1].message
