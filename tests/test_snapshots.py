"""Snapshots of the screens an operator sees (SVGs in tests/__snapshots__/).

Regenerate after an intended change with `pytest tests/test_snapshots.py --snapshot-update`,
then look at the report before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pilot import ready
from tests.tui_support import SIZE, demo_workspace, make_app


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return demo_workspace(tmp_path)


def test_inbox(snap_compare, demo: Path) -> None:
    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=ready)


def test_detail_of_another_block(snap_compare, demo: Path) -> None:
    assert snap_compare(make_app([demo]), press=["j"], terminal_size=SIZE, run_before=ready)


def test_preview(snap_compare, demo: Path) -> None:
    assert snap_compare(make_app([demo]), press=["2"], terminal_size=SIZE, run_before=ready)


def test_unparseable_block(snap_compare, demo: Path) -> None:
    async def to_docs(pilot) -> None:
        await ready(pilot)
        table = pilot.app.query_one("#blocks")
        while table.current is not None and table.current.id != "docs":
            await pilot.press("j")

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=to_docs)


def test_raw_view(snap_compare, demo: Path) -> None:
    assert snap_compare(make_app([demo]), press=["r"], terminal_size=SIZE, run_before=ready)


def test_empty_inbox(snap_compare, tmp_path: Path) -> None:
    repo = tmp_path / "quiet"
    (repo / ".git").mkdir(parents=True)
    assert snap_compare(make_app([repo]), terminal_size=SIZE, run_before=ready)


# -- small terminals (tmux panes): the highlighted block and the diff stay in view -------------


@pytest.mark.parametrize("size", [(60, 15), (40, 10)], ids=["60x15", "40x10"])
def test_inbox_in_a_small_terminal(snap_compare, demo: Path, size: tuple[int, int]) -> None:
    assert snap_compare(make_app([demo]), terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", [(60, 15), (40, 10)], ids=["60x15", "40x10"])
def test_preview_in_a_small_terminal(snap_compare, demo: Path, size: tuple[int, int]) -> None:
    assert snap_compare(make_app([demo]), press=["2"], terminal_size=size, run_before=ready)


# -- the whole list: after G the last block's row is drawn (a full list at each size) ---------


@pytest.mark.parametrize(
    "size", [(150, 45), (100, 30), (80, 24)], ids=["150x45", "100x30", "80x24"]
)
def test_last_row_after_g(snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:
    from tests.test_tui_screen import fleet

    app = make_app([fleet(tmp_path)])
    assert snap_compare(app, press=["G"], terminal_size=size, run_before=ready)


def test_leaving_an_edited_decision_asks(snap_compare, demo: Path) -> None:
    async def edit_then_leave(pilot) -> None:
        await ready(pilot)
        await pilot.press("j", "j", "2", "e", *" per legal", "escape")
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=edit_then_leave)
