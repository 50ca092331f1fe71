"""The order of the rows: which blocks are listed, and in what order.

One home for it, used by the inbox (`Inbox.sorted_blocks`, so `hitl list` and the app's first
load), and by the app's list, which keeps a `RowOrder` up to date one Delta at a time. A filter,
grouping or snooze belongs here, so that the CLI and the app never disagree on what is listed.

Domain code: no Textual. Updates cost what changed (a binary search per out-of-order arrival,
a pass over the order per removal), never a re-sort, and nothing here runs per keystroke.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from hitl_tui.model import Block

#: (source name, block file) identifies a block across re-reads; a remote block's "file" is its
#: URL string (a GitHub issue).
Key = tuple[str, Path | str]


def key_of(block: Block) -> Key:
    return (block.source, block.path)


def sort_key(block: Block) -> tuple[datetime, str]:
    """Oldest first, ties by id: the longest-waiting loop is answered first."""
    return (block.since, block.id)


def ordered(blocks: Iterable[Block]) -> list[Block]:
    """`blocks` in row order (a fresh list)."""
    return sorted(blocks, key=sort_key)


def row_key(key: Key) -> str:
    """A block's row, as a string: its (repo, path-or-id) key joined."""
    return f"{key[0]}:{key[1]}"


def row_of(block: Block) -> str:
    return row_key(key_of(block))


class RowOrder:
    """The listed blocks by row key, and the row keys in order.

    `apply` changes the order as little as a Delta needs: a known block keeps its row, a new
    one is appended (or inserted where the sort key puts it), so rows never move under the
    cursor except for the rows that came or went.
    """

    def __init__(self, blocks: Iterable[Block] = ()) -> None:
        self.blocks: dict[str, Block] = {}
        self.order: list[str] = []
        self.load(blocks)

    def __len__(self) -> int:
        return len(self.order)

    def load(self, blocks: Iterable[Block]) -> None:
        """Replace every row; `blocks` are put in row order."""
        self.blocks = {row_of(b): b for b in ordered(blocks)}
        self.order = list(self.blocks)

    def apply(self, delta, keep: str | None) -> tuple[bool, str | None]:
        """Apply a Delta (`added`, `changed`, `removed`). `keep` is the highlighted row; returns
        whether the rows changed, and the row to highlight now: `keep`, or when it left, the
        row that took its place (None when no later row is left)."""
        removed = {row_key(k) for k in delta.removed} & self.blocks.keys()
        if keep in removed:
            at = self.order.index(keep)
            later = [rk for rk in self.order[at + 1 :] if rk not in removed]
            keep = later[0] if later else None
        for rk in removed:
            del self.blocks[rk]
        if removed:
            self.order = [rk for rk in self.order if rk not in removed]
        for block in delta.changed:
            rk = row_of(block)
            if rk in self.blocks:
                self.blocks[rk] = block
        appended = False
        for block in delta.added:
            rk = row_of(block)
            known = rk in self.blocks
            self.blocks[rk] = block
            if known:
                continue
            last = self.blocks[self.order[-1]] if self.order else None
            if last is None or sort_key(block) >= sort_key(last):
                self.order.append(rk)
            else:
                self.order.insert(self._insertion_point(block), rk)
            appended = True
        return bool(removed or appended or delta.changed), keep

    def _insertion_point(self, block: Block) -> int:
        wanted = sort_key(block)
        lo, hi = 0, len(self.order)
        while lo < hi:
            mid = (lo + hi) // 2
            if sort_key(self.blocks[self.order[mid]]) <= wanted:
                lo = mid + 1
            else:
                hi = mid
        return lo
