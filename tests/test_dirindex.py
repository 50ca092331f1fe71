"""The watched-folder index kept up to date one repository at a time (`inbox/dirindex.py`)
is the index a full build makes, whatever the repositories' folders do: nested repositories,
folders two repositories watch, repositories that come and go. And the inbox's live handling
of a repository's first ask indexes that repository alone, with the same result."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hitl_tui.inbox.dirindex import DirIndex


class _Layouts:
    """A source whose folders per repository are whatever the test says."""

    def __init__(self) -> None:
        self.dirs: dict[Path, list[Path]] = {}

    def watch_dirs(self, repo: Path) -> list[Path]:
        return list(self.dirs.get(repo, ()))


def _same(index: DirIndex, repos: list[Path], sources: list) -> None:
    full = DirIndex(repos, sources)
    assert index.owner == full.owner
    for repo in repos:
        assert index.folders_of(repo) == full.folders_of(repo)


@pytest.mark.parametrize("seed", range(40))
def test_updates_give_the_index_a_full_build_gives(seed: int) -> None:
    rng = random.Random(seed)
    root = Path("/w")
    pool = [root / f"r{i}" for i in range(12)]
    # Some repositories nested in others: their folders may be the outer one's too.
    pool += [pool[0] / "inner", pool[1] / "tasks" / "deep"]
    a, b = _Layouts(), _Layouts()
    sources = [a, b]

    def some_folders(repo: Path) -> list[Path]:
        names = [repo, repo / ".hitl", repo / ".hitl" / "asks", repo / "tasks", repo / "t2"]
        picked = rng.sample(names, rng.randint(0, 3))
        if rng.random() < 0.2:  # a folder another repository watches
            other = rng.choice(pool)
            picked.append(rng.choice([other, other / "tasks"]))
        return picked

    repos = rng.sample(pool, 8)
    for repo in pool:
        a.dirs[repo] = some_folders(repo)
        b.dirs[repo] = some_folders(repo)
    index = DirIndex(repos, sources)
    _same(index, repos, sources)
    for _step in range(60):
        changed = set(rng.sample(pool, rng.randint(1, 3)))
        for repo in changed:
            rng.choice([a, b]).dirs[repo] = some_folders(repo)
        if rng.random() < 0.2:  # a repository gone, or one new (in the workspace's order)
            if rng.random() < 0.5 and len(repos) > 1:
                gone = rng.choice(repos)
                repos = [r for r in repos if r != gone]
                changed.add(gone)
            else:
                new = rng.choice([r for r in pool if r not in repos] or pool[:1])
                if new not in repos:
                    repos.insert(rng.randint(0, len(repos)), new)
                changed.add(new)
        index.update(changed, repos, sources)
        _same(index, repos, sources)
        # A few repositories' own folders (the watcher's look at them) as every one's says.
        every = index.owned()
        some = rng.sample(pool, rng.randint(0, 4))
        assert {r: set(f) for r, f in index.owned(some).items()} == {
            r: set(every[r]) for r in some if r in every
        }


def test_a_first_ask_indexes_its_repository_alone_and_the_index_is_a_full_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hitl_tui.inbox import dirindex
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace

    root = tmp_path / "loops"
    for name in ("a", "b", "c"):
        (root / name / ".git").mkdir(parents=True)
        (root / name / "BLOCKED.md").write_text(f"## Question\n{name}?\n")
    inbox = Inbox(Workspace.discover([root]))
    inbox.scan()
    before = set(inbox.watch_dirs())
    asked: list[Path] = []
    real = dirindex._folders
    monkeypatch.setattr(
        dirindex, "_folders", lambda repo, sources: asked.append(repo) or real(repo, sources)
    )
    asks = root / "b" / ".hitl" / "asks"
    asks.mkdir(parents=True)
    delta = inbox.handle([root / "b" / ".hitl"])
    assert delta.rewatch
    assert asked == [root / "b"]  # not every repository's folders asked again
    assert set(inbox.watch_dirs()) == before | {asks}
    assert inbox._owners() == DirIndex(inbox.workspace.repos, inbox.sources).owner
    assert inbox.owners([asks]) == {root / "b"}


def test_a_new_repository_and_one_gone_are_indexed_alone_and_a_new_root_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from hitl_tui.inbox import dirindex
    from hitl_tui.inbox.inbox import Inbox
    from hitl_tui.inbox.workspace import Workspace

    root = tmp_path / "loops"
    for name in ("a", "c"):
        (root / name / ".git").mkdir(parents=True)
        (root / name / "BLOCKED.md").write_text(f"## Question\n{name}?\n")
    inbox = Inbox(Workspace.discover([root]))
    inbox.scan()
    inbox.watch_dirs()
    asked: list[Path] = []
    real = dirindex._folders
    monkeypatch.setattr(
        dirindex, "_folders", lambda repo, sources: asked.append(repo) or real(repo, sources)
    )

    def full() -> dict[Path, Path]:
        return DirIndex(inbox.workspace.repos, inbox.sources).owner

    (root / "b" / ".git").mkdir(parents=True)  # a repository made while watching
    delta = inbox.handle([root / "b"])
    assert delta.rewatch and asked == [root / "b"]
    assert inbox._owners() == full() and inbox.owners([root / "b"]) == {root / "b"}
    asked.clear()
    shutil.rmtree(root / "a")  # one gone
    delta = inbox.handle([root / "a"])
    assert delta.rewatch and asked == [] and inbox._owners() == full()
    assert root / "a" not in inbox.watch_dirs()
    # The root itself deleted and made again: every repository is indexed anew.
    shutil.rmtree(root)
    for name in ("x", "y"):
        (root / name / ".git").mkdir(parents=True)
    asked.clear()
    inbox.handle([root])
    assert set(asked) >= {root / "x", root / "y"} and inbox._owners() == full()
