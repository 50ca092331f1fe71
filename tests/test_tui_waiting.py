"""Issue 15 in the app: an answer waits for its loop, in the list, until the loop acts.

Real repositories (`git init`, real commits), the real app under Pilot, the state folder in
tmp. The app looks at waiting answers on a timer (`InboxScreen.LOOK_EVERY`, shortened here);
without the watcher that timer is what sees the commit.
"""

from __future__ import annotations

import shutil
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from hitl_tui.tui.loop_actions import ConfirmAct
from tests.support import until
from tests.support.repos import git, git_loops

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    return git_loops(tmp_path / "loops")


def _app(root: Path, calls: Path, within: timedelta = timedelta(minutes=10)):
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp
    from tests.test_loops import RECORDER

    loop = Loop(
        (str(root / "*"),),
        restart=(sys.executable, "-c", RECORDER, str(calls), "{name}"),
        resume_within=within,
    )
    inbox = Inbox(Workspace.discover([root]))
    return HitlApp(inbox, config=Config(operator="Ada", bell=True, loops=(loop,)), watch=False)


def _rows(app) -> list:
    from hitl_tui.tui.widgets import BlockList

    table = app.inbox_screen.query_one(BlockList)
    return [table.rows.blocks[rk] for rk in table.rows.order]


def _text(app, selector: str) -> str:
    from tests.support.pilot import static_text

    return static_text(app.inbox_screen, selector)


def _toasts(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


@pytest.fixture(autouse=True)
def _quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    from hitl_tui.tui.inbox_screen import InboxScreen

    monkeypatch.setattr(InboxScreen, "LOOK_EVERY", 0.2)


async def test_an_answer_waits_for_its_loop_until_a_commit_then_leaves(
    loops: Path, tmp_path: Path
) -> None:
    from tests.support.pilot import preview_of
    from tests.tui_support import SIZE

    app = _app(loops, tmp_path / "calls.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("y")
        await until(
            pilot,
            lambda: [b.state for b in _rows(app)] == ["blocked", "waiting"],
            saw=lambda: ([(b.id, b.state) for b in _rows(app)], _toasts(app)),
        )
        assert not (loops / "shop" / "BLOCKED.md").exists()
        # The cursor went to the block still open, not to the answer's row.
        assert app.inbox_screen.current.id == "api"
        assert "1 waiting for their loop" in _text(app, "#topbar")
        assert "1 block in 1 repo" in _text(app, "#topbar")
        # The waiting row: what was answered, and what can be done.
        await pilot.press("j")
        assert app.inbox_screen.current.state == "waiting"
        assert "Answered " in _text(app, "#context") and "A)" in _text(app, "#context")
        assert "restart the loop" in _text(app, "#choices")
        await pilot.press("1")  # not a block: nothing to answer, and it says what to do
        await until(pilot, lambda: "waits for its loop" in _toasts(app))
        # The loop commits: the row leaves, and a toast says how hitl knew.
        (loops / "shop" / "src.txt").write_text("done\n")
        git(loops / "shop", "add", "-A")
        git(loops / "shop", "commit", "-q", "-m", "the loop's work")
        await until(pilot, lambda: [b.state for b in _rows(app)] == ["blocked"])
        assert "shop: the loop resumed (new commit" in _toasts(app)
        assert "waiting for their loop" not in _text(app, "#topbar")
        # The history says when the loop resumed.
        await pilot.press("h")
        await until(pilot, lambda: type(app.screen).__name__ == "HistoryScreen")
        table = app.screen.query_one("#history-table")
        states = [str(table.get_row_at(i)[5]) for i in range(table.row_count)]
        assert len(states) == 1 and states[0].startswith("resumed ")


async def test_no_sign_in_time_rings_and_R_restarts_and_x_drops_it(
    loops: Path, tmp_path: Path
) -> None:
    from tests.support.pilot import preview_of
    from tests.test_loops import _recorded
    from tests.tui_support import SIZE

    calls = tmp_path / "calls.jsonl"
    app = _app(loops, calls, within=timedelta(seconds=1))
    rang: list[int] = []
    app.bell = lambda: rang.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("r", "y")  # no restart now: the loop never acts
        # Listed as waiting; on a loaded machine the 1 s may be up by the time the row is
        # drawn, and it is listed not resumed straight away: either way no restart ran.
        await until(
            pilot,
            lambda: any(b.state in ("waiting", "not-resumed") for b in _rows(app)),
            saw=lambda: ([b.state for b in _rows(app)], _toasts(app), type(app.screen).__name__),
        )
        assert _recorded(calls) == []
        await until(pilot, lambda: any(b.state == "not-resumed" for b in _rows(app)))
        assert rang, "the bell rings for a loop that did not resume"
        assert "no sign of the loop since the answer" in _toasts(app)
        assert "(1 not resumed)" in _text(app, "#topbar")
        # Not resumed sorts among the blocks (it needs the operator): select it, restart it.
        late = next(b for b in _rows(app) if b.state == "not-resumed")
        app.inbox_screen.blocklist.select(f"{late.source}:{late.path}")
        await pilot.pause()
        await pilot.press("R")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: isinstance(app.screen, ConfirmAct))
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [])
        assert [c[1:] for c in _recorded(calls)] == [["shop"]]
        await until(pilot, lambda: any(b.state == "waiting" for b in _rows(app)))
        book = app.inbox.resumes
        assert book.open()[0].restarts == 1
        # x drops it: gone from the list and from the state file.
        row = next(b for b in _rows(app) if b.state in ("waiting", "not-resumed"))
        app.inbox_screen.blocklist.select(f"{row.source}:{row.path}")
        await pilot.pause()
        await pilot.press("x")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: isinstance(app.screen, ConfirmAct))
        await pilot.press("y")
        await until(pilot, lambda: [b.state for b in _rows(app)] == ["blocked"])
        assert book.open() == []


async def test_waiting_answers_come_back_after_a_restart_of_the_app(
    loops: Path, tmp_path: Path
) -> None:
    from tests.support.pilot import preview_of
    from tests.tui_support import SIZE

    app = _app(loops, tmp_path / "calls.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("r", "y")
        await until(pilot, lambda: any(b.state == "waiting" for b in _rows(app)))
    again = _app(loops, tmp_path / "calls.jsonl")
    async with again.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: [b.state for b in _rows(again)] == ["blocked", "waiting"])
        await pilot.press("/")
        await pilot.press(*"state:waiting")
        await until(pilot, lambda: [b.state for b in _rows(again)] == ["waiting"])


async def test_a_restart_that_exits_127_is_restart_failed_until_R_restarts_it(
    loops: Path, tmp_path: Path
) -> None:
    """The [[loop]] restart after the answer really runs and exits 127 (its `./run.sh` is
    missing): the answer's row says `restart failed (exit 127)` at once, not a healthy
    "waiting", among the blocks; the detail names the log; the header counts it; the state
    file keeps it (and counts the restart). With run.sh there, R restarts it: waiting again."""
    import os

    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.loops.resume import ResumeBook
    from hitl_tui.tui.app import HitlApp
    from hitl_tui.tui.widgets import BlockList
    from tests.support.pilot import preview_of
    from tests.tui_support import SIZE

    loop = Loop((str(loops / "*"),), restart=("sh", "-c", "./run.sh"))
    inbox = Inbox(Workspace.discover([loops]))
    app = HitlApp(inbox, config=Config(operator="Ada", bell=False, loops=(loop,)), watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(b.state == "restart-failed" for b in _rows(app)),
            saw=lambda: ([(b.id, b.state) for b in _rows(app)], _toasts(app)),
        )
        assert "restart failed (exit 127)" in _toasts(app)
        # Among the blocks (it needs the operator), its state column whole.
        table = app.inbox_screen.query_one(BlockList)
        row = next(i for i, b in enumerate(_rows(app)) if b.state == "restart-failed")
        assert "restart failed (exit 127)" in table.render_line(row).text
        assert [b.state for b in _rows(app)] == ["blocked", "restart-failed"]
        assert "1 waiting for their loop (1 restart failed)" in _text(app, "#topbar")
        app.inbox_screen.blocklist.select(f"{_rows(app)[1].source}:{_rows(app)[1].path}")
        await pilot.pause()
        context = _text(app, "#context")
        assert "Restart failed (exit 127)" in context and "R runs the restart again" in context
        [record] = ResumeBook.for_state().open()
        assert (record.state, record.restart_problem, record.restarts) == (
            "restart-failed",
            "exit 127",
            1,
        )
        assert record.restart_log is not None and f"Its output: {record.restart_log}" in context
        assert "./run.sh: not found" in Path(record.restart_log).read_text()
        # The loop's script is back: R restarts it, and the answer waits again.
        script = loops / "shop" / "run.sh"
        script.write_text("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o755)
        await pilot.press("R")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: isinstance(app.screen, ConfirmAct))
        await pilot.press("y")
        await until(pilot, lambda: [b.state for b in _rows(app)] == ["blocked", "waiting"])
        [record] = ResumeBook.for_state().open()
        assert (record.state, record.restart_problem, record.restarts) == ("waiting", None, 2)
        assert "restart failed" not in _text(app, "#topbar")


async def test_a_restart_program_not_on_path_warns_and_its_answer_is_restart_failed(
    loops: Path, tmp_path: Path
) -> None:
    """A [[loop]] restart naming a program that is not on PATH: the app warns as it starts
    (a toast, the header's count), and the answer's row says `restart failed (not found)`."""
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp
    from tests.support.pilot import preview_of
    from tests.tui_support import SIZE

    loop = Loop((str(loops / "*"),), restart=("tmuxx-not-here", "send-keys", "{name}"))
    config = Config(operator="Ada", bell=False, loops=(loop,), path=tmp_path / "config.toml")
    app = HitlApp(Inbox(Workspace.discover([loops])), config=config, watch=False)
    warning = f"{tmp_path / 'config.toml'}: [[loop]] #1: restart: program 'tmuxx-not-here' "
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: warning + "not found on PATH" in _toasts(app))
        assert "1 warning" in _text(app, "#topbar")
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("y")
        await until(
            pilot,
            lambda: [b.state for b in _rows(app)] == ["blocked", "restart-failed"],
            saw=lambda: _toasts(app),
        )
        assert _rows(app)[1].summary == "answered: " + _rows(app)[1].meta["waiting"].answered
        assert _rows(app)[1].meta["waiting"].state_words == "restart failed (not found)"
        assert "(1 restart failed) · 1 warning" in _text(app, "#topbar")
