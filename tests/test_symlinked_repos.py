"""One repository reachable by two spellings (a symlink beside it, or a PATH given both ways)
is one repository: one block, one row, in `list`, `list --json`, `guard` and the app."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from hitl_tui.tui.widgets import BlockList
from tests.hostile_cases import run_hitl
from tests.support.pilot import settle
from tests.tui_support import SIZE, make_app

BLOCK = "## Question\n{q}\n## Choices\n- A) yes\n- B) no\n"


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    root = tmp_path / "loops"
    shop = root / "shop"
    (shop / ".git").mkdir(parents=True)
    (shop / "BLOCKED.md").write_text(BLOCK.format(q="Ship it?"))
    (root / "shop-link").symlink_to(shop)
    return root


def test_list_json_and_guard_show_one_block(loops: Path) -> None:
    # With several PATHs an id starts with its PATH's name (issue 12): `loops/shop`.
    for paths, wanted in (
        ([loops], "shop"),
        ([loops / "shop", loops / "shop-link"], "shop"),
        ([loops, loops / "shop-link"], "loops/shop"),
    ):
        listed = run_hitl("list", *paths)
        assert listed.returncode == 0, listed.err
        assert listed.out.count("Ship it?") == 1, listed.out
        as_json = run_hitl("list", "--json", *paths)
        assert [b["id"] for b in json.loads(as_json.out)] == [wanted], paths
        guard = run_hitl("guard", *paths[:1])
        assert guard.returncode == 2 and guard.out.count("Ship it?") == 1, guard.out


async def test_the_app_shows_one_row_even_when_a_link_appears_live(loops: Path) -> None:
    app = make_app([loops], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.query_one(BlockList)
        assert [b.id for b in table.blocks.values()] == ["shop"]
        await asyncio.sleep(0.3)
        (loops / "a-link").symlink_to("shop")  # sorts first; the known spelling stays
        await asyncio.sleep(0.5)
        # Then a real new repo: once its block is in, the link has surely been seen.
        (loops / "zzz" / ".git").mkdir(parents=True)
        (loops / "zzz" / "BLOCKED.md").write_text(BLOCK.format(q="New one?"))
        for _ in range(100):
            await asyncio.sleep(0.05)
            await pilot.pause()
            if any(b.id == "zzz" for b in table.blocks.values()):
                break
        assert sorted(b.id for b in table.blocks.values()) == ["shop", "zzz"]
        assert len(table.order) == 2
        assert not any(
            n.title == "New block" and "Ship it?" in n.message for n in app._notifications
        )
        app.stop_event.set()
