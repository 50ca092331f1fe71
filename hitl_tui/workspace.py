"""Which folders are repositories: the PATHs given, or their sub-folders to depth 2.

A repository is a folder with `.git`, a `BLOCKED.md` or an `.agenticloop` folder. A PATH that is
not itself a repository is a *root*: its sub-folders (and theirs) are searched, and the root is
watched so that repositories created or deleted later are noticed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hitl_tui.model import UsageError

MARKERS = (".git", "BLOCKED.md", ".agenticloop")
SKIP = {"node_modules", "__pycache__", ".venv", "venv"}
DEPTH = 2


def is_repo(path: Path) -> bool:
    return any(os.path.lexists(path / marker) for marker in MARKERS)


def _subdirs(path: Path) -> list[Path]:
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    out = []
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIP:
            continue
        try:
            if entry.is_dir(follow_symlinks=True):
                out.append(Path(entry.path))
        except OSError:
            continue
    return sorted(out)


@dataclass
class Workspace:
    """The repositories under the given PATHs, with the folders to watch for new ones."""

    paths: tuple[Path, ...]
    repos: list[Path] = field(default_factory=list)
    #: Folders (not repositories) whose direct entries may become repositories.
    roots: list[Path] = field(default_factory=list)

    @classmethod
    def discover(cls, paths: list[Path] | tuple[Path, ...]) -> Workspace:
        clean: list[Path] = []
        for raw in paths:
            path = Path(os.path.abspath(Path(raw).expanduser()))
            if not path.exists():
                raise UsageError(f"no such folder: {raw}")
            if not path.is_dir():
                raise UsageError(f"not a folder: {raw}")
            clean.append(path)
        ws = cls(tuple(clean))
        ws.rescan()
        return ws

    def rescan(self) -> None:
        """Find the repositories again; each folder counts once, however many ways it is reached.

        A symlink beside a repository (`shop-link -> shop`), or a PATH given both ways, reaches
        the same folder (device and inode) twice: it is one repository, under the first
        spelling met, and a spelling already known keeps its place (a link created later never
        renames a repository's blocks).
        """
        known = {_identity(repo): repo for repo in self.repos}
        repos: dict[object, Path] = {}
        roots: dict[object, Path] = {}
        for path in self.paths:
            if is_repo(path):
                _add(repos, path, known)
                continue
            if _add(roots, path, {}):
                self._walk(path, 1, repos, roots, known)
        self.repos = list(repos.values())
        self.roots = list(roots.values())

    def _walk(self, folder: Path, depth: int, repos: dict, roots: dict, known: dict) -> None:
        for sub in _subdirs(folder):
            if is_repo(sub):
                _add(repos, sub, known)
            elif depth < DEPTH and _add(roots, sub, {}):
                self._walk(sub, depth + 1, repos, roots, known)


def _identity(path: Path) -> object:
    """(device, inode) of the folder a path leads to; the path itself if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    return (st.st_dev, st.st_ino)


def _add(found: dict, path: Path, known: dict) -> bool:
    """Record `path` unless its folder is already in `found`; True if it was new."""
    key = _identity(path)
    if key in found:
        return False
    found[key] = known.get(key, path)
    return True


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
