"""Blocks the operator set aside without answering, remembered in the state folder.

A snooze is the operator's view only: the loop stays blocked, `guard` still stops it, and
nothing is written to its repository. A block is snoozed until a time (`--for 1h`, `--until
09:00`) or until it changes (`--until-change`); either way it comes back as soon as its
fingerprint differs from the one the operator set aside (the agent rewrote it), or its time
is up. The app and `hitl list` both ask `snoozed(block, now)`.

`snoozed.json` in the state folder: `{"format": 1, "snoozes": [{"source", "path", "id",
"fingerprint", "until"}]}` (`until` an ISO time, or null: until the block changes), read and
written by `statefile` (whole, under a lock), re-read whenever another process changed it. A
file that cannot be read is ignored with one line on stderr: no block is hidden by mistake.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hitl_tui.model import Block
from hitl_tui.state import files as statefile

FORMAT = 1
NAME = "snoozed.json"
MAX_BYTES = 4 << 20
MAX_ENTRIES = 10_000

Key = statefile.Key


key_for = statefile.block_key


@dataclass(frozen=True)
class Snooze:
    source: str
    path: str
    id: str
    fingerprint: str
    #: None: until the block changes.
    until: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "path": self.path,
            "id": self.id,
            "fingerprint": self.fingerprint,
            "until": self.until.isoformat() if self.until else None,
        }


def _rows_of(data: dict[str, Any]) -> dict[Key, Snooze]:
    """The snoozes of a file's object ({} for an empty one); Unusable when it is not that."""
    rows = data.get("snoozes", [])
    if not isinstance(rows, list):
        raise statefile.Unusable("no list of snoozes")
    found = {}
    for row in rows:
        snooze = _snooze_of(row)
        found[(snooze.source, snooze.path)] = snooze
    return found


def _snooze_of(row: object) -> Snooze:
    if not isinstance(row, dict):
        raise statefile.Unusable("a row is not an object")
    texts = [row.get(k) for k in ("source", "path", "id", "fingerprint")]
    until = row.get("until")
    if not all(type(t) is str for t in texts) or not (until is None or type(until) is str):
        raise statefile.Unusable("a row is not a snooze")
    if until is not None:
        try:
            until = datetime.fromisoformat(until)
        except ValueError:
            raise statefile.Unusable("a row's time does not parse") from None
        if until.tzinfo is None:
            raise statefile.Unusable("a row's time has no zone")
    source, path, ident, fingerprint = (str(t) for t in texts)  # each checked: str
    return Snooze(source, path, ident, fingerprint, until)


class SnoozeBook:
    """The snoozes, by block key; `path` None keeps them in memory only (tests, no state)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._rows: dict[Key, Snooze] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._warned = False
        self._reload()

    @classmethod
    def for_state(cls) -> SnoozeBook:
        return cls(statefile.in_state(NAME))

    # -- asking --------------------------------------------------------------------------------

    def get(self, block: Block) -> Snooze | None:
        self._reload()
        return self._rows.get(key_for(block))

    def snoozed(self, block: Block, now: datetime) -> bool:
        """Whether `block` is set aside at `now`: snoozed, unchanged since, and not yet due."""
        if not self._rows:  # the common case, asked for every block at every filter pass
            return False
        snooze = self._rows.get(key_for(block))
        return (
            snooze is not None
            and snooze.fingerprint == block.fingerprint
            and (snooze.until is None or now < snooze.until)
        )

    def asleep(self, blocks: Mapping[str, Block], now: datetime) -> set[str]:
        """The rows of `blocks` (by `view.row_of`) set aside at `now`, as `snoozed` says of
        each: a pass over the snoozes, not over the blocks (a filter keystroke asks)."""
        found = set()
        for source, name in list(self._rows):
            row = f"{source}:{name}"
            block = blocks.get(row)
            if block is not None and self.snoozed(block, now):
                found.add(row)
        return found

    def __iter__(self) -> Iterator[Snooze]:
        self._reload()
        return iter(list(self._rows.values()))

    def refresh(self) -> bool:
        """Re-read the file if another process changed it; whether it did."""
        return self._reload()

    # -- changing ------------------------------------------------------------------------------

    def snooze(self, block: Block, until: datetime | None) -> Snooze:
        """Set `block` aside until `until` (None: until it changes); saved before it returns."""
        snooze = Snooze(*key_for(block), block.id, block.fingerprint, until)
        self._change({key_for(block): snooze})
        return snooze

    def unsnooze(self, block: Block) -> bool:
        """Bring `block` back; whether it was snoozed."""
        return self._change({key_for(block): None}) > 0

    def prune(self, open_blocks: Iterable[Block], now: datetime) -> int:
        """Forget snoozes that are over: of blocks that changed, whose time is up, or (for the
        keys in `open_blocks`' sources) that are no longer open. Saves when any went."""
        by_key = {key_for(b): b for b in open_blocks}
        sources = {k[0] for k in by_key}
        gone: dict[Key, Snooze | None] = {}
        for key, snooze in self._rows.items():
            block = by_key.get(key)
            if block is None:
                if key[0] in sources:
                    gone[key] = None
            elif block.fingerprint != snooze.fingerprint or (
                snooze.until is not None and now >= snooze.until
            ):
                gone[key] = None
        return self._change(gone) if gone else 0

    # -- the file ------------------------------------------------------------------------------

    def _reload(self) -> bool:
        if self.path is None:
            return False
        now = statefile.stamp(self.path)
        if now == self._stamp and (now is not None or not self._rows):
            return False
        self._stamp = now
        try:
            self._rows = _rows_of(statefile.read(self.path, FORMAT, MAX_BYTES))
        except statefile.Unusable as exc:
            self._warn(str(exc))
            self._rows = {}
        return True

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            with contextlib.suppress(Exception):
                print(f"hitl: ignored {self.path} (snoozed blocks): {why}", file=sys.stderr)

    def _change(self, changes: dict[Key, Snooze | None]) -> int:
        """Apply `changes` (None: remove) to the file as it is now, under its lock; how many
        rows changed. In memory only when there is no state folder."""
        if self.path is None:
            return self._merge(self._rows, changes)
        counted = 0

        def edit(data: dict[str, Any]) -> bool:
            nonlocal counted
            try:
                rows = _rows_of(data)
            except statefile.Unusable:
                rows = {}
            counted = self._merge(rows, changes)
            if len(rows) > MAX_ENTRIES:
                rows = dict(list(rows.items())[-MAX_ENTRIES:])
            data["snoozes"] = [s.to_json() for s in rows.values()]
            self._rows = rows
            return counted > 0

        statefile.update(self.path, FORMAT, MAX_BYTES, edit)
        self._stamp = statefile.stamp(self.path)
        return counted

    @staticmethod
    def _merge(rows: dict[Key, Snooze], changes: dict[Key, Snooze | None]) -> int:
        count = 0
        for key, snooze in changes.items():
            if snooze is None:
                count += rows.pop(key, None) is not None
            elif rows.get(key) != snooze:
                rows.pop(key, None)  # a renewed snooze goes to the end (the newest)
                rows[key] = snooze
                count += 1
        return count


def until_for(
    now: datetime,
    *,
    duration: timedelta | None = None,
    clock: str | None = None,
) -> datetime:
    """When a snooze ends: `duration` from now, or the next `clock` time (`09:00`, local time;
    `tomorrow` is tomorrow 09:00). ValueError with a message fit to show."""
    if duration is not None:
        return now + duration
    assert clock is not None
    local = now.astimezone()
    text = clock.strip().lower()
    if text == "tomorrow":
        day = (local + timedelta(days=1)).date()
        return datetime(day.year, day.month, day.day, 9, 0, tzinfo=local.tzinfo)
    try:
        hour, minute = (int(x) for x in text.split(":"))
        wanted = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError:
        raise ValueError(f"{clock!r} is not a time of day (like 09:00) or 'tomorrow'") from None
    return wanted if wanted > local else wanted + timedelta(days=1)
