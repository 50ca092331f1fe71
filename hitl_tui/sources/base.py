"""The interface every block source implements, and helpers they share.

A source knows where its blocks live in a repository (so the watcher can watch those folders,
non-recursively), how to parse one file into a Block, and how to plan the writes of an answer.
Adding a new format is adding one module that implements `Source`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from hitl_tui.model import Answer, Block, Plan


class Source(Protocol):
    name: str

    def watch_dirs(self, repo: Path) -> list[Path]:
        """Folders whose direct entries can hold or locate this source's blocks."""
        ...

    def block_files(self, repo: Path) -> list[Path]:
        """Every file in `repo` that may hold a block now (parsed on a full scan)."""
        ...

    def claims(self, repo: Path, path: Path) -> bool:
        """Whether a change to `path` may add, change or remove one of this source's blocks."""
        ...

    def layout_changed(self, repo: Path, path: Path) -> bool:
        """Whether a change to `path` moves where this source's blocks live (rescan the repo)."""
        ...

    def parse(self, repo: Path, path: Path, label: str) -> Block | None:
        """The block in `path`, or None when the file is gone or holds no open block."""
        ...

    # Optional: `cacheable(repo, path) -> bool`, true when `parse` depends on nothing but the
    # file's bytes, its stat and the label (and finds no block where there is no file), so
    # that `parsecache` may reuse an earlier result while the file's stat is unchanged. A
    # source without it is parsed afresh every time.

    def plan(self, block: Block, answer: Answer) -> Plan:
        """The exact file changes that answer `block`; raises HitlError when it cannot."""
        ...
