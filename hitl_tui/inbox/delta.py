"""What one batch of file events (or one look at the files) changed in the inbox: the Delta
the UI applies without rebuilding its list, and the watcher reads to know whether the folders
to watch changed (`rewatch`) and, when it knows, which (`folders`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hitl_tui.inbox.view import Key, key_of
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
        """This delta followed by `other` (what a later look at the files changed), as one
        that says what the two did in turn (a client applies removals, then changes, then
        arrivals): a block added here and removed there was never there; added here and
        changed there is added as it is now; changed here and removed there is removed;
        changed in both is changed as it is now."""
        gone = set(other.removed)
        now = {key_of(block): block for block in other.changed}
        if gone or now:
            replaced = set(self.removed)  # removed, then made again, here
            added = []
            for block in self.added:
                key = key_of(block)
                if key in gone:
                    if key not in replaced:
                        gone.discard(key)  # made and removed: neither is said
                    continue
                added.append(now.pop(key, block))
            self.added = added
            self.changed = [now.pop(key_of(b), b) for b in self.changed if key_of(b) not in gone]
            for key in other.removed:  # in their order, each once
                if key in gone and key not in replaced:
                    self.removed.append(key)
                    replaced.add(key)
        self.added += other.added
        self.changed += now.values()
        mine = self.folders if self.rewatch else set()
        theirs = other.folders if other.rewatch else set()
        self.folders = None if mine is None or theirs is None else mine | theirs
        self.rewatch = self.rewatch or other.rewatch
        self.waiting += other.waiting
        return self
