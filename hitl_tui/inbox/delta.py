"""What one batch of file events (or one look at the files) changed in the inbox: the Delta
the UI applies without rebuilding its list, and the watcher reads to know whether the folders
to watch changed (`rewatch`) and, when it knows, which (`folders`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hitl_tui.inbox.view import Key
from hitl_tui.model import Block


@dataclass
class Delta:
    """What one batch of file events changed in the inbox."""

    added: list[Block] = field(default_factory=list)
    changed: list[Block] = field(default_factory=list)
    removed: list[Key] = field(default_factory=list)
    #: The set of folders to watch changed (new repo, new task folder, ...).
    rewatch: bool = False
    #: Answers waiting for their loop whose state changed (`resume.Waiting`: resumed, ...).
    waiting: list[Any] = field(default_factory=list)
    #: With `rewatch`: every folder whose watch may have changed (the folders, before and
    #: after, of the repositories whose folders were indexed again), so that the watcher
    #: looks at those alone; None: not known, every folder is looked at.
    folders: set[Path] | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.rewatch or self.waiting)

    def merge(self, other: Delta) -> Delta:
        """This delta followed by `other` (what a later look at the files changed)."""
        self.added += other.added
        self.changed += other.changed
        self.removed += other.removed
        mine = self.folders if self.rewatch else set()
        theirs = other.folders if other.rewatch else set()
        self.folders = None if mine is None or theirs is None else mine | theirs
        self.rewatch = self.rewatch or other.rewatch
        self.waiting += other.waiting
        return self
