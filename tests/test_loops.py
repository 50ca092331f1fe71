"""Issue 15, first part: `[[loop]]` restart from the operator's config, through real `hitl`
processes. The restart command here is a small Python program that records the arguments it
got and where it ran, so the tests see exactly what a loop runner would receive."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.hostile_cases import SHOP, run_hitl
from tests.support import until

#: Records its arguments and its working folder in the file named by its first argument.
RECORDER = (
    "import json, os, sys; "
    "open(sys.argv[1], 'a').write(json.dumps([os.getcwd(), *sys.argv[2:]]) + '\\n')"
)


def _repo(root: Path, name: str) -> Path:
    repo = root / name
    shutil.copytree(SHOP, repo)
    (repo / ".git").mkdir()
    return repo


def _config(tmp_path: Path, restart: list[str], **more) -> Path:
    lines = [
        f"repos = [{json.dumps(str(tmp_path / 'loops'))}]",
        "[[loop]]",
        f"match = [{json.dumps(str(tmp_path / 'loops' / '*'))}]",
        f"restart = {json.dumps(restart)}",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in more.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def _recorded(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_an_answer_restarts_the_loop_with_each_value_as_one_argument(
    tmp_path: Path, calls: Path, _isolated_state: Path
) -> None:
    hostile = "shop; rm -rf ~ $(touch pwned) 'x' \"y\""
    repo = _repo(tmp_path / "loops", hostile)
    restart = [sys.executable, "-c", RECORDER, str(calls), "{name}", "{repo}", "{id}", "-t={name}"]
    config = _config(tmp_path, restart)
    done = run_hitl("answer", hostile, "--choice", "A", "--config", config, tmp_path / "loops")
    assert done.returncode == 0, done.stderr
    assert not (repo / "BLOCKED.md").exists()  # the answer was written
    [call] = _recorded(calls)
    assert call == [str(repo), hostile, str(repo), hostile, f"-t={hostile}"]
    assert b"restarted: " in done.stdout and b"The loop can resume" not in done.stdout
    assert not list(tmp_path.rglob("pwned")) and not (Path.cwd() / "pwned").exists()
    logs = list((_isolated_state / "loops").glob("*-restart-*.log"))
    assert len(logs) == 1 and logs[0].read_text().startswith("$ ")


def test_no_restart_and_dry_run(tmp_path: Path, calls: Path) -> None:
    _repo(tmp_path / "loops", "shop")
    config = _config(tmp_path, [sys.executable, "-c", RECORDER, str(calls), "{name}"])
    dry = run_hitl("answer", "shop", "--choice", "A", "--dry-run", "--config", config)
    assert dry.returncode == 0 and b"hitl: then runs: " in dry.stderr and _recorded(calls) == []
    done = run_hitl("answer", "shop", "--choice", "A", "--no-restart", "--config", config)
    assert done.returncode == 0, done.stderr
    assert _recorded(calls) == [] and b"The loop can resume" in done.stdout


@pytest.mark.parametrize(
    ("restart", "problem"),
    [
        (["sh", "-c", "echo broken >&2; exit 3"], "restart failed (exit 3)"),
        (["sh", "-c", "sleep 30"], "restart failed (timed out after 1 s)"),
        (["no-such-program-hitl"], "restart failed (not found: no-such-program-hitl)"),
    ],
)
def test_a_failing_restart_is_reported_and_the_answer_stands(
    tmp_path: Path, restart: list[str], problem: str
) -> None:
    repo = _repo(tmp_path / "loops", "shop")
    config = _config(tmp_path, restart, timeout_seconds=1)
    done = run_hitl("answer", "shop", "--choice", "A", "--config", config, timeout=20)
    assert done.returncode == 0, done.stderr
    assert not (repo / "BLOCKED.md").exists()
    err = done.stderr.decode()
    assert err.count("\n") == 1 and problem in err, err
    assert done.seconds < 10


def test_hitl_restart_runs_it_again(tmp_path: Path, calls: Path) -> None:
    _repo(tmp_path / "loops", "shop")
    config = _config(tmp_path, [sys.executable, "-c", RECORDER, str(calls), "{id}"])
    done = run_hitl("restart", "shop", "--config", config)
    assert done.returncode == 0, done.stderr
    assert [c[1:] for c in _recorded(calls)] == [["shop"]]
    failing = _config(tmp_path, ["false"])
    assert run_hitl("restart", "shop", "--config", failing).returncode == 1
    elsewhere = _repo(tmp_path / "other", "cafe")
    done = run_hitl("restart", "cafe", elsewhere, "--config", config)
    assert done.returncode == 2 and b"no [[loop]] with a restart covers" in done.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[[loop]]\nmatch = ["x"]\nrestart = "run.sh"', "restart must be a list of strings"),
        ('[[loop]]\nmatch = ["x"]\nrestart = ["tmux", "{nam}"]', "'{nam}' is not a placeholder"),
        ('[[loop]]\nmatch = ["x"]\nrestart = ["tmux", "{"]', "'{' is not a placeholder"),
        ('[[loop]]\nmatch = []\nrestart = ["x"]', "match must be a list"),
        ('[[loop]]\nmatch = ["x"]', "give restart, open, or both"),
        ('[[loop]]\nmatch = ["x"]\nopen = ["x"]\nrestrat = ["x"]', "unknown key 'restrat'"),
        ('[[loop]]\nmatch = ["x"]\nopen = ["x"]\nresume_within = "soon"', "resume_within"),
        ('[[loop]]\nmatch = ["x"]\nopen = ["x"]\ntimeout_seconds = 0', "timeout_seconds"),
        ("loop = 5", "'loop' must be a [[loop]] table"),
    ],
)
def test_a_bad_loop_table_is_one_line(tmp_path: Path, toml: str, message: str) -> None:
    _repo(tmp_path / "loops", "shop")
    config = tmp_path / "config.toml"
    config.write_text(toml + "\n")
    done = run_hitl("list", "--config", config, tmp_path / "loops")
    assert done.returncode == 2 and done.stdout == b""
    err = done.stderr.decode()
    assert err.count("\n") == 1 and message in err and str(config) in err, err


def test_literal_braces_and_globs() -> None:
    from hitl_tui.loops.commands import fill, glob_match

    assert fill(("{{name}}", "{name}}}"), {"name": "a b"}) == ["{name}", "a b}"]
    assert glob_match("/l/*", Path("/l/shop")) and not glob_match("/l/*", Path("/l/a/shop"))
    assert glob_match("/l/**", Path("/l/a/shop")) and glob_match("/l/**/shop", Path("/l/shop"))
    assert not glob_match("/l/s?op", Path("/l/shoop"))


# -- in the app ---------------------------------------------------------------------------------


async def test_the_app_says_what_it_will_run_and_restarts_after_the_answer(
    tmp_path: Path, calls: Path
) -> None:
    """The preview names the restart; applying writes the answer, then runs it once, and a
    toast says it restarted."""
    import asyncio

    from textual.widgets import Static

    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.loops.commands import Loop
    from hitl_tui.tui.app import HitlApp
    from tests.support.pilot import preview_of
    from tests.tui_support import NOW, SIZE

    repo = _repo(tmp_path / "loops", "shop")
    loop = Loop(
        (str(tmp_path / "loops" / "*"),),
        restart=(sys.executable, "-c", RECORDER, str(calls), "{name}"),
    )
    inbox = Inbox(Workspace.discover([tmp_path / "loops"]))
    config = Config(operator="Ada", bell=False, loops=(loop,))
    app = HitlApp(inbox, config=config, watch=False, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert "then runs: " in title and "shop" in title
        await pilot.press("y")
        for _ in range(100):
            await pilot.pause()
            if _recorded(calls):
                break
            await asyncio.sleep(0.05)
        assert not (repo / "BLOCKED.md").exists()
        assert [c[1:] for c in _recorded(calls)] == [["shop"]]
        for _ in range(50):
            await pilot.pause()
            if any("restarted" in str(n.message) for n in app._notifications):
                break
            await asyncio.sleep(0.05)
        assert any("shop: restarted" in str(n.message) for n in app._notifications)


def _app(tmp_path: Path, loop):
    from hitl_tui.config import Config
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace
    from hitl_tui.tui.app import HitlApp
    from tests.tui_support import NOW

    inbox = Inbox(Workspace.discover([tmp_path / "loops"]))
    config = Config(operator="Ada", bell=False, loops=(loop,))
    return HitlApp(inbox, config=config, watch=False, clock=lambda: NOW)


async def test_r_in_the_preview_skips_the_restart_and_R_runs_it_later(
    tmp_path: Path, calls: Path
) -> None:
    """`r` in the preview turns the restart off (the title says so); the answer is written and
    nothing runs; `R` on a block runs its loop's restart."""
    from textual.widgets import Static

    from hitl_tui.loops.commands import Loop
    from tests.support.pilot import preview_of
    from tests.tui_support import SIZE

    repo = _repo(tmp_path / "loops", "shop")
    other = _repo(tmp_path / "loops", "api")
    loop = Loop(
        (str(tmp_path / "loops" / "*"),),
        restart=(sys.executable, "-c", RECORDER, str(calls), "{name}"),
    )
    app = _app(tmp_path, loop)
    async with app.run_test(size=SIZE) as pilot:
        await preview_of(pilot, app, "shop", "1")
        await pilot.press("r")
        title = str(app.screen.query_one("#preview-title", Static).render())
        assert "restart skipped" in title and "then runs" not in title
        await pilot.press("r")
        assert "then runs: " in str(app.screen.query_one("#preview-title", Static).render())
        await pilot.press("r", "y")
        await until(pilot, lambda: not (repo / "BLOCKED.md").exists())
        await until(
            pilot, lambda: any("restart skipped" in str(n.message) for n in app._notifications)
        )
        assert _recorded(calls) == []
        # R on the block still open (api) runs its restart, in its folder.
        await pilot.press("R")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmAct")
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [])
        assert _recorded(calls) == [[str(other), "api"]]


async def test_t_runs_the_loops_open_command_or_a_shell_in_the_repo(
    tmp_path: Path, calls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hitl_tui.loops.commands import Loop
    from tests.tui_support import SIZE

    repo = _repo(tmp_path / "loops", "shop")
    opener = Loop(
        (str(tmp_path / "loops" / "*"),),
        open=(sys.executable, "-c", RECORDER, str(calls), "open", "{name}"),
    )
    app = _app(tmp_path, opener)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.inbox_screen.current is not None)
        await pilot.press("t")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmAct")
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [])
        assert _recorded(calls) == [[str(repo), "open", "shop"]]
        assert (repo / "BLOCKED.md").exists()  # going to a loop writes nothing

    # No open command: $SHELL runs in the repository.
    shell = tmp_path / "fake-shell"
    shell.write_text(f'#!/bin/sh\n{sys.executable} -c "{RECORDER}" {calls} shell\n')
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    calls.unlink()
    app = _app(tmp_path, Loop((str(tmp_path / "loops" / "*"),)))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.inbox_screen.current is not None)
        await pilot.press("t")  # asks first (ConfirmAct): y does it
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmAct")
        await pilot.press("y")
        await until(pilot, lambda: _recorded(calls) != [])
        assert _recorded(calls) == [[str(repo), "shell"]]
