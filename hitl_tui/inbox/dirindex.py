"""Which repository each watched folder belongs to: the index the watcher's events are
routed by (an event's folder -> its repository).

Built once over the workspace, then kept up to date one repository at a time: a repository's
first `.hitl/asks/`, a new task folder, a `.agenticloop/` made or removed changes that
repository's folders alone. At 10,000 repositories building it again over every repository
(each source asked for its folders, a stat or two each) held the interpreter for half a second
on the path from an agent's first ask to its row.

Exactly the index a full build makes: a folder belongs to the first repository, in the
workspace's order, whose sources watch it. An update that touches a folder another repository
also watches (nested repositories) builds the whole index again, so that rule is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from hitl_tui.sources.base import Source


def _folders(repo: Path, sources: Sequence[Source]) -> tuple[Path, ...]:
    """The folders `sources` watch for `repo`, each once, in the sources' order."""
    return tuple(dict.fromkeys(f for source in sources for f in source.watch_dirs(repo)))


class DirIndex:
    """Folder -> repository, for the folders every source watches in every repository."""

    def __init__(self, repos: Iterable[Path], sources: Sequence[Source]) -> None:
        #: Each watched folder's repository. Replaced, never changed in place: readers that
        #: hold it without the inbox's lock see one whole index or the other.
        self.owner: dict[Path, Path] = {}
        #: Each repository's folders, as its sources last gave them.
        self._of: dict[Path, tuple[Path, ...]] = {}
        #: How many repositories watch each folder (more than one: nested repositories).
        self._claims: Counter[Path] = Counter()
        self._build(list(repos), sources)

    def _build(self, repos: list[Path], sources: Sequence[Source]) -> None:
        owner: dict[Path, Path] = {}
        of: dict[Path, tuple[Path, ...]] = {}
        claims: Counter[Path] = Counter()
        for repo in repos:
            folders = of[repo] = _folders(repo, sources)
            for folder in folders:
                owner.setdefault(folder, repo)
            claims.update(folders)
        self.owner, self._of, self._claims = owner, of, claims

    def update(
        self, changed: Iterable[Path], repos: Sequence[Path], sources: Sequence[Source]
    ) -> set[Path] | None:
        """The folders of the `changed` repositories asked for again; `repos` is every
        repository of the workspace now, in its order (a changed one no longer in it has no
        folders now). Returns their folders before and after (what the watcher looks at to
        find the folders to watch or no longer watch), None when the index was built whole."""
        current = set(repos)
        fresh = {repo: _folders(repo, sources) if repo in current else () for repo in changed}
        taken: set[Path] = set()
        for repo, folders in fresh.items():
            old = self._of.get(repo, ())
            for folder in (*old, *folders):
                # Watched by another repository too (or by two of those changed): who owns it
                # depends on the workspace's order.
                if self._claims[folder] - (folder in old) > 0 or folder in taken:
                    self._build(list(repos), sources)
                    return None
            taken.update(folders)
        touched = set(taken)
        owner = dict(self.owner)
        for repo, folders in fresh.items():
            old = self._of.pop(repo, ())
            touched.update(old)
            for folder in old:
                owner.pop(folder, None)
                self._claims[folder] -= 1
                if not self._claims[folder]:
                    del self._claims[folder]
            if repo in current:
                self._of[repo] = folders
                for folder in folders:
                    owner[folder] = repo
                self._claims.update(folders)
        self.owner = owner
        return touched

    def folders_of(self, repo: Path) -> tuple[Path, ...]:
        """`repo`'s watched folders, as last asked (empty for a repository not indexed)."""
        return self._of.get(repo, ())

    def owned(self, repos: Iterable[Path] | None = None) -> dict[Path, list[Path]]:
        """The folders each repository owns (the first, in the workspace's order, to watch
        them), for the repositories that own one; `repos`: those alone (a look at a few
        repositories: not a list made for each of 10,000)."""
        out: dict[Path, list[Path]] = {}
        if repos is None:
            for folder, repo in self.owner.items():
                out.setdefault(repo, []).append(folder)
            return out
        for repo in repos:
            mine = [f for f in self._of.get(repo, ()) if self.owner.get(f) == repo]
            if mine:
                out[repo] = mine
        return out
