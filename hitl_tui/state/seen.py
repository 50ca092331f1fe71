"""What the operator has looked at, and how they like the list: the state folder's `seen.json`.

A block is *new* (marked in the list, reached with `n` / `N`) until the operator has
highlighted it; a block that changed since (the agent rewrote it) is new again. The first time
hitl runs there is no file, and every block it finds then counts as seen: an operator's first
look at 300 blocks should not show 300 marks. The order and grouping the operator chose are
kept in the same file, so the app opens the way it was left, and so is the list's share of the
screen (`+` / `-`, in percent) and whether it is zoomed (`L`).

`{"format": 1, "seen": [[source, path, fingerprint], ...], "order": "oldest", "group": null,
"list": {"share": 50, "zoom": false}}`,
read and written by `statefile`. Marks are saved by the app when it closes and every so often
(`dirty`), never per keystroke; rows of blocks no longer open are dropped at a save.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hitl_tui.model import Block
from hitl_tui.state import files as statefile

FORMAT = 1
NAME = "seen.json"
#: Room for issue 30's fleet and more: 200,000 marks of about 200 bytes (50,000 blocks made
#: 10 MB, past the 8 MiB this was, and every block showed new at every start).
MAX_BYTES = 48 << 20
MAX_ENTRIES = 200_000
#: The list's share of the screen kept: at least, at most (percent).
LIST_SHARES = (30, 80)

Key = statefile.Key


key_for = statefile.block_key


class SeenBook:
    """Seen fingerprints by block key, and the view chosen; `path` None: in memory only."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._marks: dict[Key, str] = {}
        #: The file's marks as read, made into `_seen` on first use (`load_marks`): at 50,000
        #: blocks that is a tenth of a second the app's first frame does not wait for.
        self._rows: object = None
        self._loading = threading.Lock()
        #: The order and grouping last chosen, by name (None: none); the list checks the names
        #: it knows (`inbox.view`: the state folder sits below it).
        self.order: str | None = None
        self.group: str | None = None
        #: The list's share of the screen in percent (None: the default) and its zoom.
        self.list_share: int | None = None
        self.list_zoom = False
        #: No file yet: the blocks of the first load are all seen (`adopt`).
        self.fresh = True
        self._changed: dict[Key, str] = {}
        self._view_changed = False
        self._load()

    @classmethod
    def for_state(cls) -> SeenBook:
        return cls(statefile.in_state(NAME))

    @property
    def dirty(self) -> bool:
        return bool(self._changed) or self._view_changed

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            data = statefile.read(self.path, FORMAT, MAX_BYTES)
        except statefile.Unusable as exc:
            self._report(exc)
            self.fresh = False  # an unreadable file is not a first run: show what is new
            return
        if not data:
            return
        self.fresh = False
        self._rows = data.get("seen", [])
        order, group = data.get("order"), data.get("group")
        self.order = _name(order)
        self.group = _name(group)
        size = data.get("list")
        if isinstance(size, dict):
            share = size.get("share")
            if type(share) is int and LIST_SHARES[0] <= share <= LIST_SHARES[1]:
                self.list_share = share
            self.list_zoom = size.get("zoom") is True

    @property
    def _seen(self) -> dict[Key, str]:
        if self._rows is not None:
            self.load_marks()
        return self._marks

    def load_marks(self) -> None:
        """Make the marks read from the file usable now (else on first use): the app's first
        scan does it in its thread, before its first rows."""
        with self._loading:
            if self._rows is None:
                return
            try:
                self._marks = _seen_of(self._rows)
            except statefile.Unusable as exc:
                self._report(exc)
            self._rows = None  # (after the marks: another thread never sees them empty)

    def _report(self, why: Exception) -> None:
        with contextlib.suppress(Exception):
            print(f"hitl: ignored {self.path} (blocks seen): {why}", file=sys.stderr)

    # -- marks ---------------------------------------------------------------------------------

    def adopt(self, blocks: Iterable[Block], more: bool = False) -> None:
        """The first load of a first run: every block there counts as seen. `more`: a part
        of that load, more to come (a scan that lists blocks as it finds them); every part
        is adopted, up to the last one, given without `more`."""
        if self.fresh:
            self.fresh = more
            for block in blocks:
                self.saw(block)

    def is_new(self, block: Block) -> bool:
        return self._seen.get(key_for(block)) != block.fingerprint

    def saw(self, block: Block) -> bool:
        """The operator highlighted `block`; whether it was new."""
        key = key_for(block)
        if self._seen.get(key) == block.fingerprint:
            return False
        self._seen[key] = self._changed[key] = block.fingerprint
        return True

    def unsee(self, block: Block) -> None:
        """`block` is new again (a snooze ran out: it is back as if it had just come)."""
        key = key_for(block)
        if key in self._seen:
            # An empty fingerprint is no block's: saved as such, it stays new after a restart.
            self._seen[key] = self._changed[key] = ""

    def choose_view(self, order: str, group: str | None) -> None:
        if (order, group) != (self.order, self.group):
            self.order, self.group = order, group
            self._view_changed = True

    def choose_list(self, share: int | None, zoom: bool) -> None:
        if (share, zoom) != (self.list_share, self.list_zoom):
            self.list_share, self.list_zoom = share, zoom
            self._view_changed = True

    def _view(self) -> tuple[str | None, str | None, int | None, bool]:
        return (self.order, self.group, self.list_share, self.list_zoom)

    # -- saving --------------------------------------------------------------------------------

    def save(self, open_blocks: Iterable[Block] | None = None) -> None:
        """Write the marks learnt and the view chosen, merged with the file; rows of blocks
        not in `open_blocks` (when given) are dropped. Never raises."""
        if self.path is None or not self.dirty:
            return
        changed, view, view_changed = dict(self._changed), self._view(), self._view_changed
        keep = None if open_blocks is None else {key_for(b) for b in open_blocks}

        def edit(data: dict[str, Any]) -> bool:
            try:
                rows = _seen_of(data.get("seen", []))
            except statefile.Unusable:
                rows = {}
            rows.update(changed)
            if keep is not None:
                rows = {k: v for k, v in rows.items() if k in keep}
            if len(rows) > MAX_ENTRIES:
                rows = dict(list(rows.items())[-MAX_ENTRIES:])
            data["seen"] = [[s, p, f] for (s, p), f in rows.items()]
            if view_changed:
                data["order"], data["group"] = view[0], view[1]
                data["list"] = {"share": view[2], "zoom": view[3]}
            return True

        try:
            statefile.update(self.path, FORMAT, MAX_BYTES, edit)
        except Exception:
            return  # kept in memory; tried again at the next save
        for key, fp in changed.items():
            if self._changed.get(key) == fp:
                del self._changed[key]
        if view_changed and self._view() == view:
            self._view_changed = False


def _seen_of(rows: object) -> dict[Key, str]:
    if not isinstance(rows, list):
        raise statefile.Unusable("no list of blocks seen")
    seen: dict[Key, str] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and all(type(x) is str for x in row)):
            raise statefile.Unusable("a row is not [source, path, fingerprint]")
        seen[(row[0], row[1])] = row[2]
    return seen


def _name(value: object) -> str | None:
    """An order's or a grouping's name as the file keeps it: a short word, else None."""
    if isinstance(value, str) and 0 < len(value) <= 40 and value.isidentifier():
        return value
    return None
