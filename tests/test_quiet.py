"""Background work that gives way to the operator's keys (tui/quiet.py): it stops while keys
come, goes on after a pause, ends as the app quits, and computes exactly what it computed
in one go (the parse cache's shards, the fleet's figures)."""

from __future__ import annotations

import shutil
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui.inbox import parsecache
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.parsecache import ParseCache
from hitl_tui.stats import compute
from hitl_tui.tui.quiet import Quiet
from tests.support import until_sync

FIXTURES = Path("/work/shared/fixtures")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_with_no_key_every_item_comes_in_order_without_waiting() -> None:
    clock = Clock()
    quiet = Quiet(2.0, clock)
    clock.now += 2.0
    assert list(quiet.sliced(range(1000), 7)) == list(range(1000))
    assert quiet.yields == 0


def test_work_stops_at_a_key_until_the_pause_and_ends_as_the_app_quits() -> None:
    """A key came less than `quiet` s ago: the work waits at its next slice (GIL released);
    stop() (the app quitting) ends the wait and the work."""
    clock = Clock()
    quiet = Quiet(2.0, clock)
    clock.now += 5.0
    done: list[int] = []
    key = threading.Event()

    def work() -> None:
        for n in quiet.sliced(range(100), 10):
            if n == 3:
                quiet.touch()  # a key, in the middle of the first slice
                key.set()
            done.append(n)

    thread = threading.Thread(target=work)
    thread.start()
    until_sync(lambda: quiet.yields, 10, saw=lambda: done, what="the work to give way")
    assert done == list(range(10)), done  # the first slice ended; the second did not begin
    quiet.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert done == list(range(10))


def test_work_goes_on_after_the_pause() -> None:
    quiet = Quiet(0.05)  # the real clock: 50 ms after the key, the work goes on
    quiet.touch()
    assert list(quiet.sliced(range(30), 4)) == list(range(30))
    assert quiet.yields == 1


def _fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    shutil.copytree(FIXTURES / "loopkit-shop", root / "shop")
    shutil.copytree(FIXTURES / "agenticloop-billing", root / "billing")
    for name in ("shop", "billing"):
        (root / name / ".git").mkdir()
    for i in range(40):
        repo = root / f"loop-{i}"
        (repo / ".git").mkdir(parents=True)
        body = f"# Blocked\n\nWhich token for repo {i}? \x1b[31m[b]x[/b]\x00\n\n1. A\n2. B\n"
        (repo / "BLOCKED.md").write_text(body)
    (root / "huge" / ".git").mkdir(parents=True)
    (root / "huge" / "BLOCKED.md").write_text("# Blocked\n\n" + "why? " * 200_000)
    (root / "binary" / ".git").mkdir(parents=True)
    (root / "binary" / "BLOCKED.md").write_bytes(bytes(range(256)) * 64)
    return root


def test_a_cache_saved_in_slices_is_the_same_bytes(tmp_path: Path, monkeypatch) -> None:
    """The app saves a cold scan's cache giving way to keys (`between` every SAVE_SLICE
    entries): the shards are byte for byte those of a save in one go."""
    monkeypatch.setattr(parsecache, "RACY_NS", 0)
    root = _fleet(tmp_path)

    def shards() -> dict[str, bytes]:
        cache = ParseCache.for_workspace((root,))
        assert cache.folder is not None
        return {p.name: p.read_bytes() for p in sorted(cache.folder.glob("shard-*.json"))}

    whole = Inbox.open([root], cached=True)
    at_once = shards()
    assert at_once and whole.cache is not None
    folder = whole.cache.folder
    assert folder is not None
    shutil.rmtree(folder)

    calls: list[int] = []
    real = ParseCache.save
    monkeypatch.setattr(parsecache, "SAVE_SLICE", 1)
    monkeypatch.setattr(
        ParseCache, "save", lambda self: real(self, between=lambda: calls.append(1))
    )
    sliced = Inbox.open([root], cached=True)
    assert shards() == at_once
    assert len(calls) == len(whole.cache) > 40
    monkeypatch.setattr(ParseCache, "save", real)
    warm = Inbox.open([root], cached=True)
    assert warm.cache is not None and warm.cache.hits == len(whole.cache)
    assert [b.to_json() for b in warm.sorted_blocks()] == [
        b.to_json() for b in sliced.sorted_blocks()
    ]


def test_the_figures_read_ahead_in_slices_are_the_same(tmp_path: Path) -> None:
    """`S`'s figures computed ahead with the open blocks given way to keys
    (`Quiet.sliced`) are those computed from the list at once."""
    root = _fleet(tmp_path)
    inbox = Inbox.open([root])
    blocks = inbox.sorted_blocks()
    now = datetime(2026, 12, 3, tzinfo=UTC)
    repos = [str(r) for r in inbox.workspace.repos]

    def figures(open_blocks):
        return compute(
            since=now - timedelta(days=30),
            now=now,
            repos=repos,
            open_blocks=open_blocks,
            resumes=(),
        )

    clock = Clock()
    quiet = Quiet(1.0, clock)
    clock.now += 1.0
    assert figures(quiet.sliced(blocks, 3)) == figures(blocks)
    assert figures(blocks).overall.open_now == len(blocks) > 40


def test_an_arrival_holds_the_work_less_and_never_shortens_a_keys_hold() -> None:
    clock = Clock()
    quiet = Quiet(2.0, clock)
    clock.now += 10.0
    quiet.touch(0.5)  # a block arrived
    assert quiet.wait() == 0.5
    quiet.touch()  # a key
    quiet.touch(0.5)  # then a block: the key's 2 s still hold
    assert quiet.wait() == 2.0
    clock.now += 2.0
    assert quiet.wait() <= 0
