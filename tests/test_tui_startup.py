"""Issue 30: `hitl` draws its first frame before it searches the workspace or loads the parse
cache (at 10,000 repositories those took a second or more before anything was on screen).

The app is opened by `cmd_app` itself, as `hitl` opens it, with its search and its cache load
held until the test has seen the first frame: the header says it is reading, no row is
listed; once they are let through, every block is listed, and the notices of recovery are
shown. Before this change `cmd_app` searched and loaded on its own thread before the app
existed: the held search timed out there, and no frame was ever drawn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from hitl_tui.cli import commands
from hitl_tui.inbox import parsecache
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.tui.app import HitlApp
from tests.support import until

BLOCKED = """\
# Blocked

## Question:
Should repo {n} keep its legacy endpoint?

## Choices:
- A) Keep it
- B) Remove it
"""

REPOS = 6
HOLD = 5.0  # seconds a held step waits for the test before it gives up (and fails it)


def fleet(root: Path) -> None:
    for n in range(REPOS):
        repo = root / f"repo-{n:02d}"
        (repo / ".git").mkdir(parents=True)
        (repo / "BLOCKED.md").write_text(BLOCKED.format(n=n))


class Held:
    """A step of start-up held until the test lets it through; records the thread it ran on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = threading.Event()
        self.gate = threading.Event()
        self.threads: list[str] = []

    def wrap(self, real):
        held = self

        def step(*args, **kwargs):
            held.threads.append(threading.current_thread().name)
            held.started.set()
            if not held.gate.wait(HOLD):
                raise AssertionError(f"{held.name} ran before the app drew its first frame")
            return real(*args, **kwargs)

        return step


def open_as_hitl(root: Path, monkeypatch, drive) -> int:
    """`cmd_app` on `root`, its app driven by `drive(app, pilot)` under Pilot."""
    seen: list[BaseException] = []

    def run(app: HitlApp, *args, **kwargs) -> None:
        async def go() -> None:
            async with app.run_test(size=(120, 30)) as pilot:
                await drive(app, pilot)

        try:
            asyncio.run(go())
        except BaseException as exc:  # re-raised below, outside cmd_app's own handling
            seen.append(exc)

    monkeypatch.setattr(HitlApp, "run", run)
    args = commands.build_parsers()[""].parse_intermixed_args([str(root)])
    args.recovered = ["an answer to repo-00 was interrupted, and finished"]
    code = commands.cmd_app(args)
    if seen:
        raise seen[0]
    return code


def test_the_first_frame_comes_before_the_workspace_search(tmp_path, monkeypatch):
    root = tmp_path / "fleet"
    fleet(root)
    search = Held("the workspace search")
    monkeypatch.setattr(Workspace, "rescan", search.wrap(Workspace.rescan))

    async def drive(app: HitlApp, pilot) -> None:
        await until(pilot, search.started.is_set, what="the search to start")
        await pilot.pause()
        header = str(app.inbox_screen.query_one("#topbar").render())
        assert "reading repositories" in header, header
        assert not app.inbox_screen.blocklist.rows.blocks
        assert not app.loaded
        search.gate.set()
        await until(pilot, lambda: app.loaded, what="the scan to end")
        rows = app.inbox_screen.blocklist.rows.blocks
        await until(pilot, lambda: len(rows) == REPOS, saw=lambda: sorted(rows))
        ids = sorted(b.id for b in rows.values())
        assert ids == [f"repo-{n:02d}" for n in range(REPOS)]
        assert any(n.title == "Recovered" for n in app._notifications)
        header = str(app.inbox_screen.query_one("#topbar").render())
        assert header.startswith(f"hitl · {REPOS} blocks in {REPOS} repos"), header

    assert open_as_hitl(root, monkeypatch, drive) == 0
    assert search.threads and "MainThread" not in search.threads, search.threads


def test_the_first_frame_comes_before_the_parse_cache_is_loaded(tmp_path, monkeypatch):
    root = tmp_path / "fleet"
    fleet(root)
    monkeypatch.setattr(parsecache, "RACY_NS", 0)  # files written just now may be cached
    Inbox.open([root], cached=True)  # a warm start: the cache saved by an earlier run
    load = Held("the parse cache's load")
    monkeypatch.setattr(ParseCache, "_load", load.wrap(ParseCache._load))

    async def drive(app: HitlApp, pilot) -> None:
        await until(pilot, load.started.is_set, what="the cache load to start")
        await pilot.pause()
        header = str(app.inbox_screen.query_one("#topbar").render())
        assert "reading repositories" in header, header
        assert not app.inbox_screen.blocklist.rows.blocks
        load.gate.set()
        await until(pilot, lambda: app.loaded, what="the scan to end")
        rows = app.inbox_screen.blocklist.rows.blocks
        await until(pilot, lambda: len(rows) == REPOS, saw=lambda: sorted(rows))
        cache = app.inbox.cache
        assert cache is not None and cache.hits == REPOS and cache.misses == 0

    assert open_as_hitl(root, monkeypatch, drive) == 0
    assert load.threads and "MainThread" not in load.threads, load.threads


def test_a_path_that_is_not_a_folder_is_refused_before_the_app(tmp_path, monkeypatch):
    """The PATHs are still checked at once: one line, no app drawn."""
    monkeypatch.setattr(HitlApp, "run", lambda *_: (_ for _ in ()).throw(AssertionError("ran")))
    assert commands.main([str(tmp_path / "nowhere")]) == 2


async def test_reading_ahead_waits_for_the_operator_to_stop_pressing_keys(tmp_path, monkeypatch):
    """The questions (for `M`) and the fleet's figures (for `S`) are read ahead once the
    operator has pressed no key for PREFETCH_QUIET s: not in the middle of the first keys
    after start-up, where at 50,000 blocks they slowed the first preview threefold."""
    from hitl_tui.config import Config
    from hitl_tui.tui import app as app_module
    from hitl_tui.tui.batch_flow import Batches

    # (1 s: a key every 0.2 s stays well inside it even when a loaded machine takes 0.5 s to
    # handle one; with 0.6 s it once read ahead between two keys there.)
    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 1.0, raising=False)
    root = tmp_path / "fleet"
    fleet(root)
    read: list[float] = []
    real = Batches.read_questions

    def reading(self, *args) -> None:
        read.append(time.monotonic())
        real(self, *args)

    monkeypatch.setattr(Batches, "read_questions", reading)
    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        # Keys for 1.5 s, one every 0.2 s: nothing is read ahead meanwhile.
        end = time.monotonic() + 1.5
        down = True
        while time.monotonic() < end:
            await pilot.press("down" if down else "up")
            last, down = time.monotonic(), not down
            await asyncio.sleep(0.2)
            assert not read, "read ahead while the operator was pressing keys"
        await until(pilot, lambda: read, 10, what="the questions to be read ahead")
        assert read[0] >= last + 0.9, read[0] - last


def _held_reads(monkeypatch) -> tuple[list[str], threading.Event, threading.Event]:
    """The questions read ahead, recorded (each block's path); the first read is held (`held`
    set) until the test lets it through (`go`)."""
    from hitl_tui.loops import similarity

    read: list[str] = []
    held, go = threading.Event(), threading.Event()
    real = similarity.read_question

    def reading(block) -> None:
        read.append(str(block.path))
        if len(read) == 1:  # the read's first slice, held until the test lets it go
            held.set()
            assert go.wait(10), "never let through"
        real(block)

    monkeypatch.setattr(similarity, "read_question", reading)
    return read, held, go


async def test_reading_ahead_gives_way_at_a_key_and_goes_on_after_the_next_pause(
    tmp_path, monkeypatch
):
    """Once begun, the questions read ahead stop at the operator's next key: the key is
    handled while the read is in the middle of a slice, the read stops at that slice's end
    (not at the end of every block), and goes on after the next pause until every question
    is read (`M` gets them all)."""
    from hitl_tui.config import Config
    from hitl_tui.loops import similarity
    from hitl_tui.tui import app as app_module
    from hitl_tui.tui import quiet as quiet_module

    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 1.0, raising=False)
    monkeypatch.setattr(quiet_module, "SLICE", 2)
    root = tmp_path / "fleet"
    fleet(root)
    read, held, go = _held_reads(monkeypatch)
    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        await until(pilot, held.is_set, 10, what="the questions to be read ahead")
        before = app.inbox_screen.blocklist.cursor_row
        await pilot.press("down")  # handled while the read is in its first slice
        assert app.inbox_screen.blocklist.cursor_row == before + 1
        go.set()
        await until(pilot, lambda: app.quiet.yields, 5, saw=lambda: read, what="a stop")
        # It stopped at its first slice's end (2 questions), not after all 6.
        assert len(read) == 2, read
        await until(pilot, lambda: len(read) == REPOS, 10, saw=lambda: read, what="the rest")
    blocks = list(app.inbox.blocks.values())
    assert sorted(read) == sorted(str(b.path) for b in blocks)
    assert all(b.one_line_question(300) in similarity._ASKED for b in blocks)


async def test_reading_ahead_gives_way_while_blocks_arrive(tmp_path, monkeypatch):
    """A change the watcher sees (a block arriving, changing, going) holds the work read
    ahead too, for ARRIVAL_HOLD s: at 10,000 repos a detection that shared the interpreter
    with it took 80-300 ms, against 40."""
    from hitl_tui.config import Config
    from hitl_tui.tui import app as app_module
    from hitl_tui.tui import quiet as quiet_module

    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 0.5, raising=False)
    monkeypatch.setattr(app_module, "ARRIVAL_HOLD", 2.0, raising=False)
    monkeypatch.setattr(quiet_module, "SLICE", 2)
    root = tmp_path / "fleet"
    fleet(root)
    read, held, go = _held_reads(monkeypatch)
    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        await until(pilot, held.is_set, 10, what="the questions to be read ahead")
        target = root / "repo-00" / "BLOCKED.md"
        tries = [0]

        def arrived() -> bool:
            if tries[0] % 20 == 0:  # written again until the watcher (just started) sees it
                target.write_text(BLOCKED.format(n=f"changed {tries[0]}"))
            tries[0] += 1
            return any("changed" in b.question for b in app.inbox_screen.rows.blocks.values())

        await until(pilot, arrived, 10, what="the change to be seen")
        go.set()
        await until(pilot, lambda: app.quiet.yields, 5, saw=lambda: read, what="a stop")
        assert len(read) == 2, read
        await until(pilot, lambda: len(read) == REPOS, 10, saw=lambda: read, what="the rest")


async def test_the_seen_marks_are_saved_when_the_keys_pause(tmp_path, monkeypatch):
    """The seen marks' timer (every SAVE_EVERY s) lets no save go while the operator is at
    the keys (at 50,000 blocks a save is a second of Python beside them); the marks are
    saved once the keys pause."""
    from hitl_tui.config import Config
    from hitl_tui.tui import app as app_module
    from hitl_tui.tui.inbox_screen import InboxScreen

    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 0.6, raising=False)
    monkeypatch.setattr(InboxScreen, "SAVE_EVERY", 0.05)
    root = tmp_path / "fleet"
    fleet(root)
    saves: list[float] = []  # how long the keys still held background work at each save
    real = InboxScreen.save_seen_soon

    def saving(self) -> None:
        if self.seen.dirty:
            saves.append(self.app.quiet.wait())
        real(self)

    monkeypatch.setattr(InboxScreen, "save_seen_soon", saving)
    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        screen = app.inbox_screen
        await until(pilot, lambda: not screen.seen.dirty, 10, what="the first marks saved")
        saves.clear()
        for n in range(REPOS):  # keys for ~1 s, each making a mark to save
            screen.seen.unsee(screen.blocklist.blocks[screen.blocklist.order[n]])
            await pilot.press("down" if n % 2 else "up")
            await pilot.pause(0.1)  # (the timer's turns, every 0.05 s, come meanwhile)
        await until(pilot, lambda: not screen.seen.dirty, 10, saw=lambda: saves, what="a save")
        assert saves and all(held <= 0 for held in saves), saves


def test_the_parse_cache_is_saved_when_the_operator_pauses_or_as_the_app_quits(
    tmp_path, monkeypatch
):
    """A cold scan's cache is not written in the middle of the first keys (at 50,000 blocks
    a second of Python); it is written once the operator pauses, and as the app quits."""
    from hitl_tui.paths import state_dir
    from hitl_tui.tui import app as app_module

    monkeypatch.setattr(parsecache, "RACY_NS", 0)
    root = tmp_path / "fleet"
    fleet(root)

    def shards() -> list[Path]:
        return sorted((state_dir() / "parse-cache").glob("*/shard-*.json"))

    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 30.0, raising=False)

    async def busy(app: HitlApp, pilot) -> None:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        await pilot.press("down")
        await asyncio.sleep(0.3)
        assert not shards(), "the cache was written while the operator was at the keys"

    assert open_as_hitl(root, monkeypatch, busy) == 0
    assert shards(), "the cache was not written as the app quit"
    for shard in shards():
        shard.unlink()

    monkeypatch.setattr(app_module, "PREFETCH_QUIET", 0.3, raising=False)

    async def pausing(app: HitlApp, pilot) -> None:
        await until(pilot, lambda: app.loaded, what="the scan to end")
        await until(pilot, shards, 10, what="the cache to be written once quiet")

    assert open_as_hitl(root, monkeypatch, pausing) == 0


async def test_objects_alive_for_a_moment_start_no_full_collection(tmp_path, monkeypatch):
    """Once loaded, the watcher's looks at the files make lists of tens of thousands of paths
    that live for a moment: they must not grow old and start the cyclic GC's full collections
    (at 50,000 blocks a walk of every object made since start-up, 100-500 ms in any thread,
    the event loop stalled with it). CPython's thresholds are given back as the app quits."""
    import gc

    from hitl_tui.config import Config

    root = tmp_path / "fleet"
    fleet(root)
    before = gc.get_threshold()
    full: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=False)
    gc.callbacks.append(callback)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.loaded, what="the scan to end")
            full.clear()
            for look in range(30):  # thirty looks, each a burst of paths alive for a moment
                burst = [[look, i] for i in range(60_000)]
                del burst
            assert full == [], f"{len(full)} full collections"
    finally:
        gc.callbacks.remove(callback)
    assert gc.get_threshold() == before


async def test_the_gc_thresholds_come_back_however_the_app_stops(tmp_path) -> None:
    """A failure on the way out (the bot's stop, say) still gives the embedding process
    CPython's thresholds back, and unfreezes what start-up froze."""
    import gc

    from hitl_tui.config import Config

    root = tmp_path / "fleet"
    fleet(root)
    before = gc.get_threshold()
    app = commands.open_app([root], Config(operator="Ada", bell=False), watch=False)

    def fails() -> None:
        raise RuntimeError("the bot would not stop")

    try:
        with pytest.raises(RuntimeError, match="would not stop"):
            async with app.run_test(size=(120, 30)) as pilot:
                await until(pilot, lambda: app.loaded, what="the scan to end")
                assert gc.get_threshold() != before and gc.get_freeze_count() > 0
                app.stop_telegram = fails  # type: ignore[method-assign]
        after, frozen = gc.get_threshold(), gc.get_freeze_count()
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
    assert (after, frozen) == (before, 0)
