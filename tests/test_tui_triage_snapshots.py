"""Snapshots of triage (SVGs in tests/__snapshots__/): the filtered list, the grouped list, the
snoozed view and the snooze dialog. Made as tests/test_snapshots.py makes its own: a fixed
clock, a fixed size, no watcher; regenerate with `--snapshot-update -k` these tests only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pilot import ready
from tests.tui_support import SIZE, demo_workspace, make_app


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return demo_workspace(tmp_path)


def test_filtered_list(snap_compare, demo: Path) -> None:
    async def filtered(pilot) -> None:
        await ready(pilot)
        await pilot.press("slash", *"age:>1h -cat:contract", "enter")
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=filtered)


def test_filter_with_a_problem_while_typing(snap_compare, demo: Path) -> None:
    async def typing(pilot) -> None:
        await ready(pilot)
        await pilot.press("slash", *"shop age:>")
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=typing)


def test_grouped_list(snap_compare, demo: Path) -> None:
    async def grouped(pilot) -> None:
        await ready(pilot)
        await pilot.press("v", "j", "j", "enter")  # fold shop's group, on its header row
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=grouped)


def test_snooze_dialog(snap_compare, demo: Path) -> None:
    async def asking(pilot) -> None:
        await ready(pilot)
        await pilot.press("j", "j", "z")
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=asking)


def test_snoozed_view(snap_compare, demo: Path) -> None:
    async def snoozed(pilot) -> None:
        await ready(pilot)
        await pilot.press("j", "j", "z", "2")
        await pilot.app.workers.wait_for_complete()
        await pilot.press("j", "z", "5")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        pilot.app.clear_notifications()
        await pilot.press("Z")
        await pilot.pause()

    assert snap_compare(make_app([demo]), terminal_size=SIZE, run_before=snoozed)
