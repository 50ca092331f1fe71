"""A snapshot of the fleet stats screen (`S`), its figures made by hand (`stats.sample`: no
journal, no clock on screen), a host never reached among them, and the table sorted by the
next column (`s`). SVGs in tests/__snapshots__/test_snapshots_stats/."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from hitl_tui.stats.sample import sample
from hitl_tui.tui.stats_screen import StatsScreen
from tests.support import until
from tests.support.pilot import ready
from tests.tui_support import NOW, SIZE, demo_workspace, make_app


@pytest.fixture
def utc(monkeypatch):
    """Times on screen are local: UTC here, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_stats_screen(snap_compare, tmp_path: Path, utc) -> None:
    sla = (timedelta(minutes=15), timedelta(hours=1))

    async def stats(pilot) -> None:
        await ready(pilot)
        screen = StatsScreen(lambda window: sample(NOW, days=window.days), {}, sla)
        await pilot.app.push_screen(screen)
        await until(pilot, lambda: screen.stats is not None, 5, what="the figures")
        await pilot.press("j", "j", "s")
        await pilot.pause()

    app = make_app([demo_workspace(tmp_path)])
    assert snap_compare(app, terminal_size=SIZE, run_before=stats)
