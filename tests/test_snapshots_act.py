"""A snapshot of the question `R` asks before it restarts a loop (issue 27, item 4): the
command as it will run and the repository, Cancel focused (SVG in
tests/__snapshots__/test_snapshots_act/). The demo's repositories, a fixed clock, no watcher."""

from __future__ import annotations

from pathlib import Path

from hitl_tui.config import Config
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.loops.commands import Loop
from hitl_tui.tui.app import HitlApp
from tests.support import until
from tests.support.pilot import ready, select
from tests.tui_support import NOW, SIZE, demo_workspace


def test_R_asks_first_naming_the_restart(snap_compare, tmp_path: Path) -> None:
    root = demo_workspace(tmp_path)
    loop = Loop(
        (str(root / "*"),), restart=("tmux", "send-keys", "-t", "{name}", "./run.sh", "Enter")
    )
    config = Config(operator="Ada", bell=False, loops=(loop,))
    app = HitlApp(Inbox(Workspace.discover([root])), config=config, watch=False, clock=lambda: NOW)

    async def ask(pilot) -> None:
        await ready(pilot)
        await select(pilot, pilot.app, "shop")
        await pilot.press("R")
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "ConfirmAct")
        await pilot.pause()

    assert snap_compare(app, run_before=ask, terminal_size=SIZE)
