"""After a change, the watcher finds the folders to add or give up by statting the folders the
change touched alone (`inbox/watchset.py`, `Delta.folders`), not the 20,000 of a 10,000-repo
fleet: over random histories of real folders (first asks, `.hitl/` and `.agenticloop/` made,
removed or made again in place, repositories made, removed, made again), with each batch's
paths handed to the inbox as the watch reports them, the result is the one a compare of every
folder gives. And a live watch over real folders statts a repository's folders alone for its
first ask, the ask's row shows, and the new folder's next ask arrives through its new watch."""

from __future__ import annotations

import asyncio
import random
import shutil
from pathlib import Path

import pytest

from hitl_tui.inbox import watchset
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.watchset import compare, identities
from hitl_tui.inbox.workspace import Workspace
from tests.test_watch import BLOCK, Watcher, added, make_repo


def _ask(repo: Path, n: int) -> list[Path]:
    """An ask written as `hitl mcp` does (its folders made first): the paths a watch reports."""
    hitl = repo / ".hitl"
    events = [hitl / "asks"] if hitl.is_dir() else [hitl]
    (hitl / "asks").mkdir(parents=True, exist_ok=True)
    ask = hitl / "asks" / f"ask-{n}.json"
    ask.write_text('{"question": "q?"}')
    return [*events, ask]


def _step(rng: random.Random, root: Path, n: int) -> list[Path]:
    """One change somewhere in the workspace; the paths its events name."""
    repos = sorted(p for p in root.iterdir() if (p / ".git").is_dir())
    repo = rng.choice(repos)
    kind = rng.randrange(9)
    if kind == 0:
        return _ask(repo, n)
    if kind == 1:  # the asks' folder (or `.hitl/`) removed
        gone = rng.choice([repo / ".hitl", repo / ".hitl" / "asks"])
        shutil.rmtree(gone, ignore_errors=True)
        return [gone]
    if kind == 2:  # the asks' folder made again in place: another folder, the same path
        asks = repo / ".hitl" / "asks"
        shutil.rmtree(asks, ignore_errors=True)
        asks.mkdir(parents=True)
        return [asks]
    if kind == 3:  # `.agenticloop/` made or removed
        folder = repo / ".agenticloop"
        if folder.is_dir():
            shutil.rmtree(folder)
        else:
            folder.mkdir()
        return [folder]
    if kind == 4:  # a repository made
        new = root / f"new-{n}-{rng.randrange(10**6)}"
        make_repo(new, rng.choice([None, f"new {n}?"]))
        return [new]
    if kind == 5 and len(repos) > 2:  # one removed
        shutil.rmtree(repo)
        return [repo]
    if kind == 6:  # one made again in place (its folders are other folders now)
        shutil.rmtree(repo)
        make_repo(repo, "again?")
        if rng.random() < 0.5:
            (repo / ".hitl" / "asks").mkdir(parents=True)
        return [repo]
    (repo / "BLOCKED.md").write_text(BLOCK.format(q=f"step {n}?"))  # no folder changes
    return [repo / "BLOCKED.md"]


@pytest.mark.parametrize("seed", range(12))
def test_the_touched_folders_alone_give_what_every_folder_gives(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    root = tmp_path / "loops"
    for i in range(8):
        repo = make_repo(root / f"r{i}", f"r{i}?" if i % 2 else None)
        if i % 3 == 0:
            (repo / ".hitl" / "asks").mkdir(parents=True)
        if i % 4 == 1:
            (repo / ".agenticloop").mkdir()
    inbox = Inbox(Workspace.discover([root]))
    inbox.scan()
    watched = identities(inbox.watch_dirs())
    partial = 0
    for n in range(40):
        paths = []
        for _ in range(rng.randint(1, 3)):  # (a batch of events may name several changes)
            paths += _step(rng, root, n)
        delta = inbox.handle(paths)
        if not delta.rewatch:
            continue
        full = compare(inbox, watched)
        if delta.folders is not None:
            partial += 1
            some = compare(inbox, watched, delta.folders)
            assert some[0] == full[0], f"following, step {n}: {paths}"
            assert some[1] == full[1], f"missing, step {n}: {paths}"
            assert sorted(some[2]) == sorted(full[2]), f"gone, step {n}: {paths}"
            assert some[3] == full[3], f"stale, step {n}: {paths}"
        following, missing, gone, stale = full
        if stale:  # the watch starts again over the folders to follow
            watched = identities(following)
        else:
            for folder in gone:
                del watched[folder]
            watched.update(missing)
    assert partial >= 5  # (the histories took the path under test, not the fallback alone)


async def test_a_first_ask_stats_its_repositorys_folders_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A live watch over 30 repositories: an agent's first ask (`.hitl/asks/` made) has its
    row, and the watcher stats that repository's folders, not the 30 repositories' again; the
    next ask there arrives through the new folder's watch."""
    root = tmp_path / "loops"
    for i in range(30):
        make_repo(root / f"r{i:02d}", f"r{i}?" if i % 2 else None)
    statted: list[int] = []
    real = watchset.identities

    def counting(dirs):
        dirs = list(dirs)
        statted.append(len(dirs))
        return real(dirs)

    monkeypatch.setattr(watchset, "identities", counting)
    inbox = Inbox.open([root])
    async with Watcher(inbox) as w:
        (root / "r04" / "BLOCKED.md").write_text(BLOCK.format(q="r04 now?"))
        await w.expect(added("r04"))  # (after the look at the files as the watch began,
        (root / "r08" / "BLOCKED.md").write_text(BLOCK.format(q="r08 now?"))
        await w.expect(added("r08"))  # and the compare of every folder that follows it)
        statted.clear()
        repo = root / "r07"
        _ask(repo, 1)
        await w.expect(lambda d: any(b.source == "ask" for b in d.added))
        await w.watching()
        assert statted and max(statted) <= 3, statted  # (30 repositories: 31 folders and more)
        assert repo / ".hitl" / "asks" in w.dirs
        _ask(repo, 2)
        delta = await w.expect(lambda d: any(b.source == "ask" for b in d.added))
        assert [b.path.name for b in delta.added] == ["ask-2.json"]
        (root / "r06" / "BLOCKED.md").write_text(BLOCK.format(q="r06 now?"))
        await w.expect(added("r06"))
    await asyncio.sleep(0)
