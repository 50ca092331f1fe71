"""The real watcher: watchfiles over every repo folder, one inotify instance, never recursive.

Each test starts `watch_inbox` on a real folder, changes files, and waits (at most a couple of
seconds) for the Delta. The last test watches 300 repos, each with a `.git` of 50 folders and a
`node_modules` of 100, and counts the inotify instances and watches the process holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hitl_tui.inbox import watch
from hitl_tui.inbox.diagnostics import InotifyUsage, inotify_usage
from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.inbox.watch import watch_inbox
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.state.since import SinceBook

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or inotify_usage() is None,
    reason="counts inotify through /proc (Linux)",
)

#: How long a change may take to arrive (the watcher debounces 150 ms; CI is slow).
ARRIVAL = 2.0
BLOCK = "## Question\n{q}\n## Choices\n- A) yes\n- B) no\n"


def usage() -> InotifyUsage:
    found = inotify_usage()
    assert found is not None
    return found


def make_repo(path: Path, question: str | None = None) -> Path:
    (path / ".git").mkdir(parents=True)
    if question is not None:
        (path / "BLOCKED.md").write_text(BLOCK.format(q=question))
    return path


class Watcher:
    """`watch_inbox` running in a task, with its deltas in a queue."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.queue: asyncio.Queue[Delta] = asyncio.Queue()
        self.stop = asyncio.Event()
        self.dirs: list[Path] = []
        self.starts = 0
        #: Called with each delta before it is queued, from inside the watcher's loop.
        self.on_delta: Callable[[Delta], None] | None = None
        self.baseline = usage()

    async def __aenter__(self) -> Watcher:
        self.task = asyncio.create_task(
            watch_inbox(self.inbox, self._delta, self.stop, on_ready=self._ready)
        )
        await self.watching()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 5)

    def _ready(self, dirs: list[Path]) -> None:
        self.dirs = list(dirs)
        self.starts += 1

    def _delta(self, delta: Delta) -> None:
        if self.on_delta is not None:
            self.on_delta(delta)
        self.queue.put_nowait(delta)

    def held(self) -> InotifyUsage:
        now = usage()
        return InotifyUsage(
            now.instances - self.baseline.instances, now.watches - self.baseline.watches
        )

    async def watching(self, timeout: float = 10.0) -> None:
        """Until the kernel holds a watch on every folder named, and no other: in one instance,
        or two once folders were added while watching (the small watch that holds them).

        (`on_ready` is called before the watches exist, so a change made right after it could
        come before them.)
        """
        deadline = time.monotonic() + timeout
        while not (
            self.starts
            and self.held().watches == len(self.dirs)
            and self.held().instances in (1, 2)
        ):
            if self.task.done():
                self.task.result()
            assert time.monotonic() < deadline, f"not watching: {self.held()} for {self.dirs}"
            await asyncio.sleep(0.01)

    async def expect(self, wanted: Callable[[Delta], bool], timeout: float = ARRIVAL) -> Delta:
        """The first delta that `wanted` accepts, within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        seen: list[Delta] = []
        while True:
            left = deadline - time.monotonic()
            try:
                delta = await asyncio.wait_for(self.queue.get(), max(left, 0.001))
            except TimeoutError:
                pytest.fail(f"nothing wanted within {timeout}s; saw {seen}")
            if wanted(delta):
                return delta
            seen.append(delta)


def added(block_id: str) -> Callable[[Delta], bool]:
    return lambda d: block_id in [b.id for b in d.added]


def changed(block_id: str) -> Callable[[Delta], bool]:
    return lambda d: block_id in [b.id for b in d.changed]


def removed(path: Path) -> Callable[[Delta], bool]:
    return lambda d: ("loopkit", path) in d.removed


# -- one repo -----------------------------------------------------------------------------------


async def test_a_block_arrives_changes_and_leaves(tmp_path: Path):
    repo = make_repo(tmp_path / "shop")
    path = repo / "BLOCKED.md"
    inbox = Inbox.open([repo])
    async with Watcher(inbox) as w:
        assert w.dirs == [repo]
        path.write_text(BLOCK.format(q="Ship it?"))
        delta = await w.expect(added("shop"))
        assert (delta.added[0].question, delta.changed, delta.removed) == ("Ship it?", [], [])

        path.write_text(BLOCK.format(q="Ship it today?"))
        delta = await w.expect(changed("shop"))
        assert delta.changed[0].question == "Ship it today?"
        assert inbox.blocks[("loopkit", path)].question == "Ship it today?"

        path.unlink()
        delta = await w.expect(removed(path))
        assert (delta.added, delta.changed) == ([], [])
        assert inbox.blocks == {}


async def test_an_atomic_replace_arrives(tmp_path: Path):
    """Agents (and hitl itself) write a temp file and rename it over BLOCKED.md."""
    repo = make_repo(tmp_path / "shop", "First?")
    inbox = Inbox.open([repo])
    async with Watcher(inbox) as w:
        tmp = repo / ".BLOCKED.md.tmp"
        tmp.write_text(BLOCK.format(q="Second?"))
        os.replace(tmp, repo / "BLOCKED.md")
        delta = await w.expect(changed("shop"))
        assert delta.changed[0].question == "Second?"
        # And again: a watch on the file itself would have lost track after the first rename.
        tmp.write_text(BLOCK.format(q="Third?"))
        os.replace(tmp, repo / "BLOCKED.md")
        delta = await w.expect(changed("shop"))
        assert delta.changed[0].question == "Third?"


async def test_arrival_time(tmp_path: Path):
    repo = make_repo(tmp_path / "shop")
    inbox = Inbox.open([repo])
    async with Watcher(inbox) as w:
        start = time.monotonic()
        (repo / "BLOCKED.md").write_text(BLOCK.format(q="Fast?"))
        await w.expect(added("shop"))
        assert time.monotonic() - start < 1.0  # debounce 150 ms; a fraction of a second


# -- repos that come and go -------------------------------------------------------------------


async def test_a_new_repo_in_a_root_is_picked_up(tmp_path: Path):
    root = tmp_path / "loops"
    make_repo(root / "old", "Old?")
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        assert set(w.dirs) == {root, root / "old"}
        new = make_repo(root / "new")
        await w.expect(lambda d: d.rewatch and root / "new" in inbox.workspace.repos)
        await w.watching()
        assert set(w.dirs) == {root, root / "old", new}
        (new / "BLOCKED.md").write_text(BLOCK.format(q="New?"))
        delta = await w.expect(added("new"))
        assert delta.added[0].question == "New?"


async def test_a_block_written_right_after_its_repo_appears(tmp_path: Path):
    """The worst moment: after the inbox saw the new repo, before its folder is watched."""
    root = tmp_path / "loops"
    root.mkdir()
    inbox = Inbox.open([root])
    new = root / "new"

    def write_block_now(delta: Delta) -> None:
        if new in inbox.workspace.repos and not (new / "BLOCKED.md").exists():
            (new / "BLOCKED.md").write_text(BLOCK.format(q="Right after?"))

    async with Watcher(inbox) as w:
        w.on_delta = write_block_now
        # Moved in whole, so that it is a repo from its very first event.
        os.rename(make_repo(tmp_path / "staging"), new)
        delta = await w.expect(added("new"), timeout=ARRIVAL + 1.5)
        assert delta.added[0].question == "Right after?"


async def test_a_new_repo_at_depth_two(tmp_path: Path):
    root = tmp_path / "loops"
    root.mkdir()
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        (root / "team").mkdir()
        await w.expect(lambda d: d.rewatch)
        await w.watching()
        make_repo(root / "team" / "api", "Depth two?")
        await w.expect(added("team/api"))  # its path under the root (issue 12)


async def test_a_repo_deleted_and_recreated_in_place(tmp_path: Path):
    root = tmp_path / "loops"
    repo = make_repo(root / "shop", "Before?")
    make_repo(root / "other")
    path = repo / "BLOCKED.md"
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        shutil.rmtree(repo)
        await w.expect(removed(path))
        assert inbox.blocks == {}
        await w.watching()
        assert repo not in w.dirs

        make_repo(repo, "After?")
        delta = await w.expect(added("shop"))
        assert delta.added[0].question == "After?"
        await w.watching()
        assert repo in w.dirs

        # The new folder is watched: a change inside it arrives through its own event.
        path.write_text(BLOCK.format(q="After, reworded?"))
        delta = await w.expect(changed("shop"))
        assert delta.changed[0].question == "After, reworded?"
        assert list(inbox.blocks) == [("loopkit", path)]


async def test_a_path_repo_deleted_and_recreated(tmp_path: Path):
    """A repo given as PATH (no root folder above it to watch) that vanishes and comes back."""
    repo = make_repo(tmp_path / "solo", "Before?")
    path = repo / "BLOCKED.md"
    inbox = Inbox.open([repo])
    async with Watcher(inbox) as w:
        shutil.rmtree(repo)
        await w.expect(removed(path))
        make_repo(repo, "Back?")
        await w.expect(added("solo"), timeout=ARRIVAL + 1.5)
        await w.watching()
        path.write_text(BLOCK.format(q="Back, reworded?"))
        await w.expect(changed("solo"))


async def test_restarts_do_not_leak_inotify_instances(tmp_path: Path):
    root = tmp_path / "loops"
    root.mkdir()
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        for i in range(5):
            make_repo(root / f"r{i}")
            await w.expect(lambda d, i=i: root / f"r{i}" in inbox.workspace.repos)
            await w.watching()  # one watch per folder each time
        assert w.starts == 6
        # The root in the first watch, the five new repos in the small one beside it (not a
        # new watch over every folder each time): two instances, never more once settled.
        assert w.held() == InotifyUsage(2, 6)
    # watchfiles closes its inotify instance in its own thread, a moment after the task ends
    # (on a loaded machine, more than a moment).
    deadline = time.monotonic() + 5
    while w.held() != InotifyUsage(0, 0) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert w.held() == InotifyUsage(0, 0)


def _placements(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many folders each watch placed (each `awatch`) was given, in order."""
    sizes: list[int] = []
    real = watch.watchfiles.awatch

    def counting(*paths, **kwargs):
        sizes.append(len(paths))
        return real(*paths, **kwargs)

    monkeypatch.setattr(watch.watchfiles, "awatch", counting)
    return sizes


async def test_a_new_repo_is_watched_without_rebuilding_the_whole_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """At 10,000 repositories a watch over every folder takes a quarter of a second to build,
    with the interpreter held (the app frozen): a repository made while watching gets a watch
    of its own beside it, and its block shows; the big one is not built again."""
    sizes = _placements(monkeypatch)
    root = tmp_path / "loops"
    for i in range(20):
        make_repo(root / f"old-{i:02d}")
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        assert sizes == [21]
        for name in ("new-a", "new-b"):
            make_repo(root / name, f"{name}?")
            await w.expect(added(name))
            await w.watching()
        assert max(sizes[1:]) <= 2, sizes  # the new folders alone, never the 21 again
        assert w.held() == InotifyUsage(2, 23)
        (root / "new-a" / "BLOCKED.md").write_text(BLOCK.format(q="new-a, reworded?"))
        (root / "old-07" / "BLOCKED.md").write_text(BLOCK.format(q="old-07?"))
        seen: set[str] = set()
        while seen != {"new-a", "old-07"}:  # (from two watches: in either order)
            delta = await w.expect(lambda d: bool(d.added or d.changed))
            seen.update(b.id for b in delta.added + delta.changed)


async def test_no_change_is_lost_while_the_small_watch_is_replaced(tmp_path: Path):
    """The small watch over the added folders is replaced by a bigger one at each new folder:
    a change made in an added folder at that moment still arrives (the new watch is in place
    before the old one closes)."""
    root = tmp_path / "loops"
    root.mkdir()
    inbox = Inbox.open([root])
    first = root / "first"
    async with Watcher(inbox) as w:
        make_repo(first)
        await w.expect(lambda d: first in inbox.workspace.repos)
        await w.watching()

        def write_when_second_seen(delta: Delta) -> None:
            if root / "second" in inbox.workspace.repos and not (first / "BLOCKED.md").exists():
                (first / "BLOCKED.md").write_text(BLOCK.format(q="During the swap?"))

        w.on_delta = write_when_second_seen
        make_repo(root / "second")
        await w.expect(added("first"))
        await w.watching()
        (first / "BLOCKED.md").write_text(BLOCK.format(q="After the swap?"))
        delta = await w.expect(changed("first"))
        assert delta.changed[0].question == "After the swap?"


async def test_no_change_is_lost_when_the_added_folders_fold_into_one_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Past EXTRA_MAX added folders the watch starts again over every folder, in one instance:
    a block written in an old and in a new repository while it does arrives, and after it."""
    monkeypatch.setattr(watch, "EXTRA_MAX", 2)
    sizes = _placements(monkeypatch)
    root = tmp_path / "loops"
    make_repo(root / "old")
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        for i in range(2):
            make_repo(root / f"r{i}")
            await w.expect(lambda d, i=i: root / f"r{i}" in inbox.workspace.repos)
            await w.watching()
        assert w.held().instances == 2

        def write_during_fold(delta: Delta) -> None:
            if root / "r2" in inbox.workspace.repos and not (root / "old" / "BLOCKED.md").exists():
                (root / "old" / "BLOCKED.md").write_text(BLOCK.format(q="Old, during?"))
                (root / "r0" / "BLOCKED.md").write_text(BLOCK.format(q="r0, during?"))

        w.on_delta = write_during_fold
        make_repo(root / "r2", "r2?")
        arrived: set[str] = set()
        while arrived != {"old", "r0", "r2"}:
            delta = await w.expect(lambda d: bool(d.added))
            arrived.update(b.id for b in delta.added)
        await w.watching()
        assert sizes[-1] == 5  # every folder in one watch again: root, old, r0, r1, r2
        assert w.held() == InotifyUsage(1, 5)
        (root / "r1" / "BLOCKED.md").write_text(BLOCK.format(q="r1, after?"))
        await w.expect(added("r1"))


async def test_a_block_arrives_while_a_look_at_the_files_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The look at every file while watching (every CATCH_UP_EVERY s) takes seconds at 10,000
    repositories on a busy machine: a block written meanwhile shows at once, not after it."""
    import threading

    monkeypatch.setattr(watch, "CATCH_UP_EVERY", 0.0)
    repo = make_repo(tmp_path / "shop")
    inbox = Inbox.open([tmp_path])
    release = threading.Event()
    looking = threading.Event()
    real = inbox.catch_up

    looks: list[float] = []

    def slow_look(since, only=None):
        if only is not None:
            return real(since, only)
        looks.append(since)
        if len(looks) > 1:  # a look while watching (the first, as the watch begins, is awaited)
            looking.set()
            assert release.wait(10)
        return real(since, only)

    inbox.catch_up = slow_look  # type: ignore[method-assign]
    async with Watcher(inbox) as w:
        try:
            deadline = time.monotonic() + 5
            while not looking.is_set():
                assert time.monotonic() < deadline, "no look began"
                await asyncio.sleep(0.01)
            (repo / "BLOCKED.md").write_text(BLOCK.format(q="Now?"))
            await w.expect(added("shop"))
            assert not release.is_set()
        finally:
            release.set()


async def test_a_folder_vanishing_as_the_watch_starts(tmp_path: Path):
    """A repo deleted between listing the folders and watching them must not kill the watcher."""
    root = tmp_path / "loops"
    victim = make_repo(root / "victim", "Doomed?")
    other = make_repo(root / "other")
    inbox = Inbox.open([root])
    listed = inbox.watch_dirs

    def racy(checked: bool = True) -> list[Path]:
        dirs = listed(checked)
        if victim.exists():
            shutil.rmtree(victim)  # gone before awatch gets to it
        return dirs

    inbox.watch_dirs = racy  # type: ignore[method-assign]
    w = Watcher(inbox)
    w.task = asyncio.create_task(watch_inbox(inbox, w._delta, w.stop, on_ready=w._ready))
    try:
        await w.expect(removed(victim / "BLOCKED.md"))
        await w.watching()
        assert set(w.dirs) == {root, other}
        (other / "BLOCKED.md").write_text(BLOCK.format(q="Still watching?"))
        await w.expect(added("other"))
    finally:
        await w.__aexit__()


async def test_the_whole_root_deleted_and_recreated(tmp_path: Path):
    root = tmp_path / "loops"
    make_repo(root / "shop", "Before?")
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        shutil.rmtree(root)
        await w.expect(removed(root / "shop" / "BLOCKED.md"))
        make_repo(root / "shop", "After?")
        await w.expect(added("shop"), timeout=ARRIVAL + 1.5)
        await w.watching()
        assert set(w.dirs) == {root, root / "shop"}


# -- 300 repos ------------------------------------------------------------------------------------

REPOS = 300


@pytest.fixture
def three_hundred(tmp_path: Path):
    """300 repos; each has a .git of 50 folders and a node_modules of 100 folders.

    45,000 folders take seconds to create and far longer to delete on a busy ext4 disk, so they
    go to the RAM disk when there is one (inotify behaves the same there).
    """
    shm = Path("/dev/shm")
    base = (
        Path(tempfile.mkdtemp(prefix="hitl-watch-", dir=shm))
        if os.access(shm, os.W_OK)
        else tmp_path
    )
    root = base / "many"
    root.mkdir()
    try:
        for i in range(REPOS):
            repo = f"{root}/repo-{i:03d}"
            for folder in (repo, f"{repo}/.git", f"{repo}/node_modules"):
                os.mkdir(folder)
            for j in range(50):
                os.mkdir(f"{repo}/.git/objects{j:02d}")
            for j in range(100):
                os.mkdir(f"{repo}/node_modules/pkg{j:03d}")
        yield root
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


async def test_three_hundred_repos_one_instance_few_watches(three_hundred: Path):
    root = three_hundred
    inbox = Inbox.open([root])
    assert len(inbox.workspace.repos) == REPOS
    async with Watcher(inbox) as w:
        assert len(w.dirs) == REPOS + 1  # each repo's root, and the folder holding them
        held = w.held()
        assert held.instances == 1
        assert held.watches <= 2 * REPOS + 1
        assert held.watches == REPOS + 1  # .git and node_modules cost nothing

        target = root / "repo-150"
        start = time.monotonic()
        (target / "BLOCKED.md").write_text(BLOCK.format(q="One of many?"))
        await w.expect(added("repo-150"))
        assert time.monotonic() - start < ARRIVAL

        # Activity inside .git or node_modules is not even seen.
        (target / ".git" / "objects07" / "pack").write_bytes(b"x")
        (target / "node_modules" / "pkg001" / "index.js").write_text("x")
        (target / "BLOCKED.md").unlink()
        delta = await w.expect(removed(target / "BLOCKED.md"))
        assert (delta.added, delta.changed) == ([], [])
        assert w.held() == InotifyUsage(1, REPOS + 1)


def test_inotify_usage_counts_instances_and_watches(tmp_path: Path):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    before = usage()
    fd = libc.inotify_init()
    assert fd >= 0
    try:
        for name in ("a", "b", "c"):
            (tmp_path / name).mkdir()
            assert libc.inotify_add_watch(fd, os.fsencode(tmp_path / name), 0x100) >= 0
        now = usage()
        assert (now.instances - before.instances, now.watches - before.watches) == (1, 3)
    finally:
        os.close(fd)
    assert usage() == before
    assert inotify_usage(pid=999_999_999) is None


# -- first-seen times ---------------------------------------------------------------------------


def _remembered(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {row[1] for row in json.loads(path.read_bytes())["blocks"]}


async def test_first_seen_times_are_saved_later_and_when_the_watch_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A block seen by a file event is in since.json within SINCE_SAVE_EVERY, not after each
    batch, and a block that arrives just before the watch stops is saved as it stops."""
    monkeypatch.setattr(watch, "SINCE_SAVE_EVERY", 0.5)
    memory = tmp_path / "state" / "since.json"
    repo = make_repo(tmp_path / "shop")
    other = make_repo(tmp_path / "cafe")
    inbox = Inbox(Workspace.discover([repo, other]), since=SinceBook(memory))
    inbox.scan()
    async with Watcher(inbox) as w:
        (repo / "BLOCKED.md").write_text(BLOCK.format(q="Ship it?"))
        await w.expect(added("shop"))
        assert str(repo / "BLOCKED.md") not in _remembered(memory)  # not on the event's path
        deadline = time.monotonic() + 5
        while str(repo / "BLOCKED.md") not in _remembered(memory):
            assert time.monotonic() < deadline, "never saved while watching"
            await asyncio.sleep(0.05)

        monkeypatch.setattr(watch, "SINCE_SAVE_EVERY", 3600.0)
        (other / "BLOCKED.md").write_text(BLOCK.format(q="Close early?"))
        await w.expect(added("cafe"))
        await asyncio.sleep(0.5)
        assert str(other / "BLOCKED.md") not in _remembered(memory)  # one save per period
    assert str(other / "BLOCKED.md") in _remembered(memory)
