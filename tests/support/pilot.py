"""Helpers that drive the app through Textual's Pilot, shared by the TUI tests."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.content import Content
from textual.widgets import Static

from hitl_tui.inbox.inbox import Delta
from hitl_tui.sources.loopkit.source import LoopkitSource
from hitl_tui.tui.screens import PreviewScreen
from hitl_tui.tui.widgets import BlockList
from tests.support import until

# Workers that live as long as the app (they never complete): settling does not wait for them.
LIFELONG = frozenset({"watch", "remote"})


def busy_workers(app) -> list[str]:
    """The app's workers still running, but for the lifelong ones."""
    return [
        f"{w.group}:{w.description}"
        for w in list(app.workers._workers)
        if w.group not in LIFELONG and not w.is_finished
    ]


async def settle(pilot, app, seconds: float = 10) -> None:
    """Wait until the app has loaded and no worker of its own is running; fail saying what
    was still going on otherwise."""
    await until(
        pilot,
        lambda: app.loaded and not busy_workers(app),
        seconds,
        what="the app to settle",
        saw=lambda: f"loaded={app.loaded}, workers={busy_workers(app)}",
    )


def static_text(app, selector: str) -> str:
    """What a Static shows, as plain text (Rich renderables are rendered to text)."""
    content = app.query_one(selector, Static).content
    if isinstance(content, str | Content):
        return str(content)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


async def select(pilot, app, block_id: str) -> None:
    """From the first row, move the cursor down with j until `block_id` is highlighted."""
    table = app.query_one(BlockList)
    if table.current is None or table.current.id != block_id:
        await pilot.press("home")
    for _ in range(len(table.order)):
        if table.current is not None and table.current.id == block_id:
            return
        await pilot.press("j")
    raise AssertionError(f"{block_id} is not in the list")


async def preview_of(pilot, app, block_id: str, key: str) -> None:
    """Settle, highlight `block_id`, press the choice `key`: its preview is open."""
    await settle(pilot, app)
    await select(pilot, app, block_id)
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, PreviewScreen), type(app.screen).__name__


def arrive(app, root: Path, names: list[str]) -> None:
    """Blocks arriving live, one delta each (as the watcher reports them)."""
    for name in names:
        repo = root / name
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(f"## Question\nWhat about {name}?\n")
        block = LoopkitSource().parse(repo, repo / "BLOCKED.md", name)
        app.apply_delta(Delta(added=[block]), announce=True)


async def palette(pilot, app, query: str, closes: bool = True) -> None:
    """Ctrl+P, type `query`, wait for the hits, and run the first one (the palette closes;
    with `closes=False`, one that may find nothing is left open)."""
    from textual.command import CommandList, CommandPalette

    def screen() -> str:
        return type(app.screen).__name__

    await pilot.press("ctrl+p")
    await until(
        pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette", saw=screen
    )
    await pilot.press(*query)
    # (An OptionList's options are not widgets: ask the list how many it shows.)
    await until(
        pilot,
        lambda: app.screen.query_one(CommandList).option_count > 0,
        what=f"hits for {query!r}",
    )
    await pilot.press("down", "enter")
    if not closes:
        await pilot.pause()
        return
    await until(
        pilot, lambda: not isinstance(app.screen, CommandPalette), what="the palette to close"
    )


async def ready(pilot) -> None:
    """Before a snapshot: loaded, every worker done, and the first frame settled."""
    app = pilot.app
    await until(pilot, lambda: app.loaded, what="the app to load")
    await app.workers.wait_for_complete()
    # Let class changes (the empty-inbox layout) and the first highlight settle into a frame.
    await pilot.wait_for_scheduled_animations()
    for _ in range(3):
        await pilot.pause(0.05)
