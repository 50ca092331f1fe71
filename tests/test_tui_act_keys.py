"""Issue 27, item 4: keys that act say so first. `t` (a shell), `R` (a restart) and `x` (a row
dropped) ask, naming the command, the shell and where, or the row; only `y` does it, `n`, `Esc`
and `Enter` (the focus is on Cancel) do nothing. A burst of letters typed on after `/` closes
acts on nothing: no command runs, nothing is written, the saved order stays.

Real git repositories, a `[[loop]]` whose restart and $SHELL record each run in a file, the
real app under Pilot, the state folder in tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import until
from tests.support.repos import git_loops

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the restart and the shell record their runs ($SHELL is a recorder too)."""
    from tests.test_loops import RECORDER

    calls = tmp_path / "calls.jsonl"
    shell = tmp_path / "fake-shell"
    shell.write_text(f'#!/bin/sh\n{sys.executable} -c "{RECORDER}" {calls} shell\n')
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    return calls


def _app(root: Path, calls: Path):
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp
    from tests.test_loops import RECORDER

    loop = Loop((str(root / "*"),), restart=(sys.executable, "-c", RECORDER, str(calls), "{name}"))
    inbox = Inbox(Workspace.discover([root]))
    return HitlApp(inbox, config=Config(operator="Ada", bell=False, loops=(loop,)), watch=False)


def _recorded(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def _question(app) -> str:
    from tests.support.pilot import static_text

    return static_text(app.screen, "#act-question")


def _screen(app) -> str:
    return type(app.screen).__name__


def _toasts(app) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


def _rows(app) -> list[tuple[str, str]]:
    rows = app.inbox_screen.rows
    return [(rows.blocks[rk].id, rows.blocks[rk].state) for rk in rows.order]


async def _asked(pilot, app, key: str) -> str:
    """Press `key`: the question is shown; its text."""
    await pilot.press(key)
    await until(
        pilot,
        lambda: _screen(app) == "ConfirmAct",
        what=f"{key}'s question",
        saw=lambda: (_screen(app), _toasts(app)),
    )
    return _question(app)


async def _declined(pilot, app, key: str, calls: Path) -> None:
    """`key`'s question, answered n, then Esc, then Enter: each time nothing ran."""
    for no in ("n", "escape", "enter"):
        await _asked(pilot, app, key)
        await pilot.press(no)
        await until(pilot, lambda: _screen(app) == "InboxScreen", what=f"{no} to close it")
        await app.workers.wait_for_complete()
        assert _recorded(calls) == [], no


async def test_t_R_and_x_say_what_they_will_do_and_only_y_does_it(
    tmp_path: Path, calls: Path
) -> None:
    from tests.support.pilot import preview_of, select, settle
    from tests.tui_support import SIZE

    loops = git_loops(tmp_path / "loops")
    app = _app(loops, calls)
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("r", "y")  # the answer's restart off: only R runs one below
        await until(pilot, lambda: ("shop", "waiting") in _rows(app), saw=lambda: _rows(app))
        await settle(pilot, app)
        assert app.inbox_screen.current.id == "api" and _recorded(calls) == []

        # R: the restart's command, whole, and where.
        text = await _asked(pilot, app, "R")
        assert "Run the [[loop]] restart for api?" in text and f"{calls} api" in text, text
        assert "in api" in text
        await pilot.press("escape")
        await _declined(pilot, app, "R", calls)
        await _asked(pilot, app, "R")
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [], what="the restart")
        assert _recorded(calls) == [[str(loops / "api"), "api"]]
        calls.unlink()

        # t: which shell, and in which folder.
        text = await _asked(pilot, app, "t")
        assert f"Open a shell in {loops / 'api'} for api?" in text, text
        assert os.environ["SHELL"] in text
        await pilot.press("escape")
        await _declined(pilot, app, "t", calls)
        await _asked(pilot, app, "t")
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [], what="the shell")
        assert _recorded(calls) == [[str(loops / "api"), "shell"]]
        calls.unlink()

        # x on the answer's row: which row, what was answered; y drops it.
        await select(pilot, app, "shop")
        assert app.inbox_screen.current.state == "waiting"
        text = await _asked(pilot, app, "x")
        assert "Drop the row of the answer to shop from the list?" in text, text
        assert "answered: A)" in text
        await pilot.press("escape")
        await _declined(pilot, app, "x", calls)
        assert ("shop", "waiting") in _rows(app) and len(app.inbox.resumes.open()) == 1
        await _asked(pilot, app, "x")
        await pilot.press("y")
        await until(pilot, lambda: _rows(app) == [("api", "blocked")], saw=lambda: _rows(app))
        assert app.inbox.resumes.open() == []
        assert _recorded(calls) == []  # dropping a row runs nothing


def _state(name: str) -> dict:
    path = Path(os.environ["HITL_STATE_DIR"]) / name
    return json.loads(path.read_text()) if path.exists() else {}


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the repositories but git's own: what an act would have changed."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


async def test_a_burst_typed_after_the_filter_closes_acts_on_nothing(
    tmp_path: Path, calls: Path
) -> None:
    from textual import events

    from hitl_tui import journal
    from tests.support.pilot import settle
    from tests.tui_support import SIZE

    loops = git_loops(tmp_path / "loops")
    before = _files(loops)
    app = _app(loops, calls)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = app.inbox_screen
        now = [1000.0]  # the burst's clock, held still: however slow the machine, it is a burst
        screen.keys_clock = lambda: now[0]
        screen.save_seen_now()
        saved = _state("seen.json")
        await pilot.press("slash", *"api", "enter")
        assert screen.blocklist.has_focus and screen.rows.spec.query.text == "api"
        # The words typed on: a shell, a restart, a drop, an order, a grouping, a snooze, a
        # choice and its apply, marks, the history, quit.
        burst = "tRxsvz1y MhRq"
        await pilot.press(*[("space" if c == " " else c) for c in burst])
        assert _screen(app) == "InboxScreen" and app.is_running
        await app.workers.wait_for_complete()
        assert _recorded(calls) == [] and _files(loops) == before
        assert (screen.rows.spec.order, screen.rows.spec.group) == ("oldest", None)
        assert screen.rows.marked == set() and screen.rows.spec.query.text == "api"
        screen.save_seen_now()
        assert _state("seen.json") == saved
        assert _state("snoozed.json").get("snoozes", []) == []
        assert list(journal.newest_first()) == []  # nothing answered
        # Said once the burst is over, whole.
        await until(
            pilot,
            lambda: f'Ignored "{burst}"' in _toasts(app),
            what="the toast naming what was ignored",
            saw=lambda: _toasts(app),
        )
        # The burst over (a pause longer than BURST_GAP), keys act again.
        now[0] += screen.BURST_GAP + 0.1
        await pilot.press("s")
        assert screen.rows.spec.order == "newest"

        # In one read, as a terminal hands over a fast typist's Enter and the letters behind
        # it: the letters reach the box before Enter's binding runs, and are swallowed too.
        await pilot.press("slash", "backspace", "backspace", "backspace", *"sho")
        for key in ("enter", "t", "R", "x", "q"):
            event = events.Key(key, "\r" if key == "enter" else key)
            event.set_sender(app)
            app._driver.send_message(event)
        await until(
            pilot,
            lambda: 'Ignored "tRxq"' in _toasts(app),
            what="the toast naming what was ignored",
            saw=lambda: (_toasts(app), screen.rows.spec.query.text),
        )
        assert screen.rows.spec.query.text == "sho" and screen.blocklist.has_focus
        await app.workers.wait_for_complete()
        assert _screen(app) == "InboxScreen" and app.is_running
        assert _recorded(calls) == [] and _files(loops) == before


async def test_the_question_shows_a_hostile_name_as_text(tmp_path: Path, calls: Path) -> None:
    """A repository named like markup: the question shows it as typed, Esc runs nothing."""
    from tests.support.pilot import settle
    from tests.support.repos import git_shop
    from tests.tui_support import SIZE

    name = "[b]x[@click=app.quit]q[/]"
    git_shop(tmp_path / "loops" / name)
    app = _app(tmp_path / "loops", calls)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        text = await _asked(pilot, app, "t")
        assert f"Open a shell in {tmp_path / 'loops' / name} for {name}?" in text, text
        await pilot.press("escape")
        await until(pilot, lambda: _screen(app) == "InboxScreen")
        assert app.is_running and _recorded(calls) == []
