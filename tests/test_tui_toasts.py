"""Issue 27 item 6: one answer is one toast that updates (answered, restarted, resumed), in
that order whatever order the restart's exit and the loop's commit arrive in; toasts stand
where they cover neither the detail's question nor its Choices; a log's path is whole.

Real repositories and a real restart program: the restart commits (the loop resumes) and
exits only once the test has seen the resume, the order that toasted "restarted" after
"resumed" before.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support import until
from tests.support.repos import git_loops

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

#: The loop's restart: it commits in the repository (the loop acting on the answer), then
#: waits for the test's go (a file), at most 20 s, before it exits.
LOOP = """
import pathlib, subprocess, sys, time
repo, go = sys.argv[1], pathlib.Path(sys.argv[2])
pathlib.Path(repo, "work.txt").write_text("done\\n")
ident = ["-c", "user.name=loop", "-c", "user.email=loop@example.invalid"]
subprocess.run(["git", *ident, "add", "-A"], cwd=repo, check=True)
subprocess.run(["git", *ident, "commit", "-qm", "the loop's work"], cwd=repo, check=True)
end = time.monotonic() + 20
while not go.exists() and time.monotonic() < end:
    time.sleep(0.05)
"""


@pytest.fixture(autouse=True)
def _quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    from hitl_tui.tui.inbox_screen import InboxScreen

    monkeypatch.setattr(InboxScreen, "LOOK_EVERY", 0.2)


def _app(root: Path, restart: tuple[str, ...]):
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp

    loop = Loop((str(root / "*"),), restart=restart)
    inbox = Inbox(Workspace.discover([root]))
    return HitlApp(inbox, config=Config(operator="Ada", bell=False, loops=(loop,)), watch=False)


def _toasts(app) -> list:
    """The toasts on the screen, as widgets (what the operator sees), top to bottom."""
    from textual.widgets._toast import Toast

    return sorted(app.screen.query(Toast), key=lambda t: t.region.y)


def _lines(toast) -> list[str]:
    return str(toast._notification.message).splitlines()


def _overlaps(a, b) -> bool:
    return a.overlaps(b) if a.area and b.area else False


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_one_answer_is_one_toast_answered_restarted_resumed_in_order(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    from tests.support.pilot import preview_of

    loops = git_loops(tmp_path / "loops")
    go = tmp_path / "go"
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    app = _app(loops, (sys.executable, str(script), "{repo}", str(go)))
    async with app.run_test(size=size, notifications=True) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await until(pilot, lambda: app.screen.diff_lines_in_view() > 0)  # laid out
        await pilot.press("y")

        def seen() -> list[list[str]]:
            return [_lines(t) for t in _toasts(app)]

        # The loop's commit is seen while its restart still runs: resumed comes first.
        await until(
            pilot,
            lambda: any("resumed" in x for t in seen() for x in t),
            saw=lambda: (seen(), [str(n.message) for n in app._notifications], app.screen),
        )
        go.write_text("")
        await until(pilot, lambda: any("shop: restarted" in t for t in seen()), saw=seen)
        await pilot.pause()
        toasts = _toasts(app)
        assert len(toasts) == 1, seen()
        lines = _lines(toasts[0])
        assert toasts[0]._notification.title == "Answered"
        assert lines[0].startswith("shop: ") and "BLOCKED.md" in "\n".join(lines)
        assert lines[-2:] == ["shop: restarted", lines[-1]], lines
        assert lines[-1].startswith("shop: the loop resumed (new commit "), lines
        # Where it stands: over neither the detail's question nor its Choices (the next
        # decision, "api", is highlighted there now).
        screen = app.inbox_screen
        assert screen.current is not None and screen.current.id == "api"
        for pane in ("#story", "#actions"):
            region = screen.query_one(pane).region
            assert not _overlaps(toasts[0].region, region), (pane, toasts[0].region, region)


async def test_a_failed_restart_shows_its_log_path_whole_on_one_line(tmp_path: Path) -> None:
    """A restart that fails names its log: the path is on one line of the toast, whole
    (copyable from the terminal), where Textual's 60-column toast cut it across lines."""
    from tests.support.pilot import preview_of

    loops = git_loops(tmp_path / "loops")
    app = _app(loops, (sys.executable, "-c", "import sys; sys.exit(3)"))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await until(pilot, lambda: app.screen.diff_lines_in_view() > 0)  # laid out
        await pilot.press("y")
        await until(
            pilot,
            lambda: any("restart failed" in "".join(_lines(t)) for t in _toasts(app)),
            saw=lambda: [_lines(t) for t in _toasts(app)],
        )
        await pilot.pause()
        toasts = _toasts(app)
        assert len(toasts) == 1, [_lines(t) for t in toasts]
        log = next(w for w in str(toasts[0]._notification.message).split() if w.endswith(".log"))
        assert len(log) > 56  # longer than Textual's toast holds on one line
        # What the terminal shows: the path whole on one of the toast's rows.
        shown = [toasts[0].render_line(y).text for y in range(toasts[0].region.height)]
        assert any(log in row for row in shown), shown
