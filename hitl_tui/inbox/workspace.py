"""Which folders are repositories: the PATHs given, or their sub-folders to depth 2.

A repository is a folder with `.git`, a `BLOCKED.md` or an `.agenticloop` folder. A PATH that is
not itself a repository is a *root*: its sub-folders (and theirs) are searched, and the root is
watched so that repositories created or deleted later are noticed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from hitl_tui.fsio import child
from hitl_tui.model import UsageError

MARKERS = (".git", "BLOCKED.md", ".agenticloop")
SKIP = {"node_modules", "__pycache__", ".venv", "venv"}
DEPTH = 2


def is_repo(path: Path) -> bool:
    top = os.fspath(path)
    return any(os.path.lexists(os.path.join(top, marker)) for marker in MARKERS)


def _subdirs(path: Path) -> list[Path]:
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    names = []
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIP:
            continue
        try:
            if entry.is_dir(follow_symlinks=True):
                names.append(entry.name)
        except OSError:
            continue
    # Entries of one folder sort as their paths do: sorting the names skips pathlib's parts.
    return [child(path, name) for name in sorted(names)]


@dataclass
class Workspace:
    """The repositories under the given PATHs, with the folders to watch for new ones."""

    paths: tuple[Path, ...]
    repos: list[Path] = field(default_factory=list)
    #: Folders (not repositories) whose direct entries may become repositories.
    roots: list[Path] = field(default_factory=list)
    #: Each repository's id part (see `repo_id`), fixed when the repository is first found.
    ids: dict[Path, str] = field(default_factory=dict)
    #: Folders at the deepest level searched that are not repositories: not watched, but one
    #: may become a repository (`moved` looks at their times).
    edges: list[Path] = field(default_factory=list)
    #: When the last search began (`time.time()`).
    searched_at: float = 0.0

    @classmethod
    def discover(cls, paths: list[Path] | tuple[Path, ...]) -> Workspace:
        ws = cls.unsearched(paths)
        ws.rescan()
        return ws

    @classmethod
    def unsearched(cls, paths: list[Path] | tuple[Path, ...]) -> Workspace:
        """The workspace of `paths`, each checked to be a folder (UsageError), not searched yet:
        `rescan` finds its repositories (the app's, behind its first frame)."""
        clean: list[Path] = []
        for raw in paths:
            path = Path(os.path.abspath(Path(raw).expanduser()))
            if not path.exists():
                raise UsageError(f"no such folder: {raw}")
            if not path.is_dir():
                raise UsageError(f"not a folder: {raw}")
            clean.append(path)
        return cls(tuple(clean))

    def rescan(self) -> None:
        """Find the repositories again; each folder counts once, however many ways it is reached.

        A symlink beside a repository (`shop-link -> shop`), or a PATH given both ways, reaches
        the same folder (device and inode) twice: it is one repository, under the first
        spelling met, and a spelling already known keeps its place (a link created later never
        renames a repository's blocks).
        """
        self.searched_at = time.time()
        known = {_identity(repo): repo for repo in self.repos}
        repos: dict[object, Path] = {}
        roots: dict[object, Path] = {}
        under: dict[Path, Path] = {}
        edges: list[Path] = []
        for path in self.paths:
            if is_repo(path):
                kept = _add(repos, path, known)
                if kept is not None:
                    under.setdefault(kept, path)
                continue
            if _add(roots, path, {}) is not None:
                self._walk(path, 1, repos, roots, known, under, path, edges)
        self.repos = list(repos.values())
        self.roots = list(roots.values())
        self.edges = edges
        prefixes = path_prefixes(self.paths)
        ids = {}
        for repo in self.repos:
            found = self.ids.get(repo)
            if found is None:
                top = under.get(repo, repo)
                found = repo_id(prefixes.get(top, ""), top, repo)
            ids[repo] = found
        self.ids = ids

    def moved(self, slack: float = 0.0) -> bool:
        """Whether a search now would find other repositories or roots; this one is left as
        it is (the watcher's catch-up asks, without holding the inbox, before it rescans).

        Cheap when nothing moved: a folder's mtime changes whenever an entry is made, removed
        or renamed in it, so the search runs again (in a copy) only if a PATH, a root or an
        edge changed since the last search began (less `slack` seconds) or is gone.
        """
        began = time.time()
        since = self.searched_at - slack
        if not any(_changed(p, since) for p in (*self.paths, *self.roots, *self.edges)):
            return False
        probe = Workspace(self.paths, list(self.repos), list(self.roots), dict(self.ids))
        probe.rescan()
        if set(probe.repos) != set(self.repos) or set(probe.roots) != set(self.roots):
            return True
        self.edges, self.searched_at = probe.edges, began  # (what this one knows, still)
        return False

    def _walk(
        self,
        folder: Path,
        depth: int,
        repos: dict[object, Path],
        roots: dict[object, Path],
        known: dict[object, Path],
        under: dict[Path, Path],
        top: Path,
        edges: list[Path],
    ) -> None:
        for sub in _subdirs(folder):
            if is_repo(sub):
                kept = _add(repos, sub, known)
                if kept is not None:
                    under.setdefault(kept, top)
            elif depth < DEPTH:
                if _add(roots, sub, {}) is not None:
                    self._walk(sub, depth + 1, repos, roots, known, under, top, edges)
            else:
                edges.append(sub)

    def id_of(self, repo: Path) -> str:
        """The id part of `repo`'s blocks (see `repo_id`)."""
        found = self.ids.get(repo)
        return found if found is not None else repo.name


def _changed(folder: Path, since: float) -> bool:
    """Whether `folder` had an entry made, removed or renamed at or after `since`, or is gone."""
    try:
        st = os.stat(folder)
    except OSError:
        return True
    return st.st_mtime >= since or st.st_ctime >= since


def _identity(path: Path) -> object:
    """(device, inode) of the folder a path leads to; the path itself if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    return (st.st_dev, st.st_ino)


def _add(found: dict[object, Path], path: Path, known: dict[object, Path]) -> Path | None:
    """Record `path` unless its folder is already in `found`; the spelling kept if it was new."""
    key = _identity(path)
    if key in found:
        return None
    kept = found[key] = known.get(key, path)
    return kept


def repo_id(prefix: str, top: Path, repo: Path) -> str:
    """A repository's id: its path below the PATH it was found under (`team-a/svc-one`), after
    that PATH's prefix. It depends on nothing else that is listed, so it never changes while
    the repository exists: a `team-b/svc-one` appearing later does not rename `team-a/svc-one`.
    A PATH that is itself the repository gives its folder name (or its prefix)."""
    try:
        rel = repo.relative_to(top).parts
    except ValueError:
        rel = ()
    parts = ([prefix] if prefix else []) + list(rel)
    return "/".join(parts) or repo.name or "/"


def path_prefixes(paths: tuple[Path, ...] | list[Path]) -> dict[Path, str]:
    """What each PATH's ids start with: nothing when there is one PATH; with several, the
    PATH's short unique name (`loops`, `work/api`), which depends only on the PATHs given.
    No prefix is a leading part of another, so ids from two PATHs never coincide."""
    unique = list(dict.fromkeys(paths))
    if len(unique) < 2:
        return {}
    depth = {p: 1 for p in unique}
    while True:
        names = {p: "/".join(p.parts[-depth[p] :]).lstrip("/") for p in unique}
        grow = {
            p
            for p in unique
            for q in unique
            if p != q
            and depth[p] < len(p.parts)
            and (names[p] == names[q] or names[q].startswith(names[p] + "/"))
        }
        if not grow:
            return names
        for p in grow:
            depth[p] += 1


def labels_for(repos: list[Path]) -> dict[Path, str]:
    """Short, unique names: the folder name, with parents added only where names collide."""
    labels: dict[Path, str] = {}
    depth = {repo: 1 for repo in repos}
    while True:
        names: dict[str, list[Path]] = {}
        for repo in repos:
            parts = repo.parts[-depth[repo] :]
            # Never the filesystem root's own slash ("//shop") when a clash climbs that far.
            names.setdefault("/".join(parts).lstrip("/"), []).append(repo)
        clash = False
        for name, members in names.items():
            if len(members) > 1 and any(depth[m] < len(m.parts) for m in members):
                clash = True
                for m in members:
                    depth[m] += 1
            else:
                for m in members:
                    labels[m] = name
        if not clash:
            return labels
