"""When hitl first saw each open block, remembered in the state folder (`since.json`).

A block's age is how long its loop has waited, so it must not restart when an agent touches or
rewrites its file. The file's mtime says when it was last written; this memory says when hitl
first saw a block at that path, and keeps saying it across restarts and rewrites for as long as
the block stays open. The first time hitl ever sees a block, its file's mtime stands in (the
loop may have blocked long before hitl ran), unless it is in the future (a clock ahead): then
now. No time remembered is later than when it was first asked for.

The memory is small and never a reason for a command to fail:

- one JSON file, `{"format": 1, "blocks": [[source, path, repo, first seen], ...]}`, at most
  MAX_ENTRIES rows (the oldest go first beyond that);
- written whole, to a temp file then renamed, under a lock, merged with what another hitl
  process wrote meanwhile (only the rows this one added or dropped change);
- a file that cannot be read or parsed is ignored with one line on stderr, and written again;
- rows of blocks that are gone are pruned: those a full scan of their repository no longer
  finds, and, at a save, rows this process never knew (another hitl wrote them) whose file no
  longer exists; rows from file events are saved at most every few seconds, and when the watch
  stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import operator
import os
import sys
import threading
from datetime import UTC, datetime, timedelta
from itertools import chain
from pathlib import Path

from hitl_tui import fsio
from hitl_tui.state import files as statefile

FORMAT = 1
NAME = "since.json"
#: Issue 30's fleet holds 50,000 open blocks (and ten remote machines more): each keeps its row.
MAX_ENTRIES = 100_000
#: A memory file larger than this is not read (100,000 rows of long paths are about 25 MB).
MAX_BYTES = 48 << 20

#: (source, block file)
Key = tuple[str, str]
EPOCH = datetime.fromtimestamp(0, UTC)
_US = timedelta(microseconds=1)
#: Memory files already reported unreadable by this process: one line a command.
_WARNED: set[str] = set()


def _micros(when: datetime) -> int:
    """Microseconds since the epoch, exactly (a float would drift by one now and then); a time
    before the epoch (a file's or an agent's) counts from the epoch, as the file can hold it."""
    return max((when - EPOCH) // _US, 0)


def _when(micros: int) -> datetime:
    return EPOCH + micros * _US


def _newest(rows: dict[Key, tuple[str, int]], count: int) -> dict[Key, tuple[str, int]]:
    """The `count` rows first seen last."""
    return dict(sorted(rows.items(), key=lambda item: item[1][1])[len(rows) - max(count, 0) :])


def _encoded(rows: dict[Key, tuple[str, int]]) -> bytes:
    return json.dumps(
        {"format": FORMAT, "blocks": [[s, p, r, t] for (s, p), (r, t) in rows.items()]}
    ).encode()


def key_for(source: str, path: object) -> Key:
    return (source, os.fsdecode(path) if isinstance(path, Path) else str(path))


class SinceBook:
    """First-seen times by (source, block file); `path` None keeps them in memory only."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        #: key -> (repo, first seen in microseconds since the epoch)
        self._rows: dict[Key, tuple[str, int]] = {}
        self._added: dict[Key, tuple[str, int]] = {}
        self._dropped: set[Key] = set()
        self._stamp: tuple[int, int, int] | None = None
        #: Guards the rows and the pending changes: a save runs in another thread.
        self._mutex = threading.RLock()
        self._load()

    @classmethod
    def for_state(cls) -> SinceBook:
        """The operator's memory, in the state folder (in memory only if there is none)."""
        return cls(statefile.in_state(NAME))

    @property
    def dirty(self) -> bool:
        return bool(self._added or self._dropped)

    # -- use ---------------------------------------------------------------------------------

    def first_seen(self, key: Key, repo: object, fallback: datetime) -> datetime:
        """When this block was first seen; `fallback` (the file's mtime) the first time.

        Never later than now: a time in the future (a file dated ahead, a row an older hitl
        wrote from such a file) is replaced by now, and remembered, so the block ages from
        this first sight like any other.
        """
        now = datetime.now(UTC)
        with self._mutex:
            seen = self._first_seen(key, repo, min(fallback, now))
            if seen > now:
                self.remember(key, repo, now)
                return _when(_micros(now))
            return seen

    def _first_seen(self, key: Key, repo: object, fallback: datetime) -> datetime:
        row = self._rows.get(key)
        if row is None and self._changed_on_disk():
            # Another hitl (an undo, say) may have written it since this one read the file:
            # that row wins over this one's own unsaved forgetting of it.
            disk = self._load(keep_own=True)
            row = disk.get(key)
            if row is not None:
                self._rows[key] = row
                self._dropped.discard(key)
        if row is None:
            row = (_repo_name(repo), _micros(fallback))
            self._rows[key] = self._added[key] = row
            self._dropped.discard(key)
        return _when(row[1])

    def remember(self, key: Key, repo: object, when: datetime) -> None:
        """Set when a block began (an undo puts back the `since` its answer recorded); never
        later than now."""
        row = (_repo_name(repo), _micros(min(when, datetime.now(UTC))))
        with self._mutex:
            self._rows[key] = self._added[key] = row
            self._dropped.discard(key)

    def forget(self, key: Key) -> None:
        """The block is gone: a new one at this path starts a new age."""
        with self._mutex:
            if self._rows.pop(key, None) is not None or key in self._added:
                self._added.pop(key, None)
                self._dropped.add(key)

    def prune(self, repos: set[str], seen: set[Key]) -> None:
        """After a full scan of `repos`: forget their blocks it did not find."""
        with self._mutex:
            for key, (repo, _when) in list(self._rows.items()):
                if repo in repos and key not in seen:
                    self.forget(key)

    # -- disk --------------------------------------------------------------------------------

    def _file_stamp(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _changed_on_disk(self) -> bool:
        return self.path is not None and self._file_stamp() != self._stamp

    def _read(self) -> dict[Key, tuple[str, int]] | None:
        """The rows on disk ({} when there is no file); None when the file is unusable."""
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._warn(exc.strerror or str(exc))
            return None
        if len(data) > MAX_BYTES:
            self._warn("it is too large")
            return None
        try:
            return _rows_of(json.loads(data))
        except (ValueError, TypeError, RecursionError) as exc:
            self._warn(f"it does not parse ({type(exc).__name__})")
            return None

    def _load(self, keep_own: bool = False) -> dict[Key, tuple[str, int]]:
        """Read the file (with this one's unsaved changes over it); returns the rows on disk."""
        self._stamp = self._file_stamp()
        disk = self._read() or {}
        rows = dict(disk)
        if keep_own:
            rows.update(self._added)
            for key in self._dropped:
                rows.pop(key, None)
        self._rows = rows
        return disk

    def _warn(self, why: str) -> None:
        if os.fspath(self.path or "") not in _WARNED:
            _WARNED.add(os.fspath(self.path or ""))
            with contextlib.suppress(Exception):
                print(
                    f"hitl: ignored {self.path} (when each block began): {why}; "
                    "ages start again from the files' times",
                    file=sys.stderr,
                )

    def save(self) -> None:
        """Write what changed, merged with the file as it is now. Never raises."""
        if self.path is None or not self.dirty:
            return
        try:
            self._save()
        except Exception:
            pass  # kept in memory; tried again at the next save

    def _save(self) -> None:
        """The file work runs without this book's lock, so a save in the background never holds
        up the watcher: what changed is copied under it first, and struck off under it after."""
        assert self.path is not None
        with self._mutex:
            added, dropped = dict(self._added), set(self._dropped)
            known = set(self._rows)
            # Unchanged on disk since this book last read or wrote it: its own rows are what
            # the file holds plus what changed, so the file need not be read and checked again
            # (at 5,000 rows that was most of a save's hold on the interpreter).
            mine = dict(self._rows) if self._stamp is not None else None
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / (NAME + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if mine is not None and self._file_stamp() == self._stamp:
                rows = mine
            else:
                rows = self._read() or {}
            rows.update(added)
            for key in dropped:
                rows.pop(key, None)
            for key in [k for k in rows if k not in known]:
                # Not known to this run: keep it only while its file is there. (Rows this run
                # knows leave by `forget`; a stat of each at 5,000 blocks was most of a save.)
                if not os.path.lexists(key[1]):
                    del rows[key]
            if len(rows) > MAX_ENTRIES:
                rows = _newest(rows, MAX_ENTRIES)
            data = _encoded(rows)
            while len(data) > MAX_BYTES:
                # Paths long or not ASCII (6 bytes a character in JSON): the oldest rows go, so
                # that the file is one its reader takes, not one refused whole at the next start.
                rows = _newest(
                    rows, min(len(rows) - 1, len(rows) * MAX_BYTES * 9 // 10 // len(data))
                )
                data = _encoded(rows)
            fsio.atomic_write(self.path, data, 0o600)
            stamp = self._file_stamp()
        finally:
            os.close(fd)
        with self._mutex:
            for key, row in added.items():
                if self._added.get(key) == row:
                    del self._added[key]
            self._dropped -= {key for key in dropped if key not in self._added}
            for key, row in rows.items():  # what other processes wrote meanwhile
                if key not in self._dropped:
                    self._rows.setdefault(key, row)
            self._stamp = stamp


def _repo_name(repo: object) -> str:
    return os.fsdecode(repo) if isinstance(repo, Path) else str(repo)


def _rows_of(loaded: object) -> dict[Key, tuple[str, int]]:
    """The rows of a decoded memory file; ValueError when it is not one.

    Checked and keyed by passes in C, not a Python loop over the rows: at 50,000 rows the loop
    was half of the file's load, which a start's first rows wait for."""
    if not isinstance(loaded, dict) or loaded.get("format") != FORMAT:
        raise ValueError("not a memory file of this version")
    blocks = loaded.get("blocks")
    if not isinstance(blocks, list):
        raise ValueError("no blocks")
    if not set(map(type, blocks)) <= {list} or not set(map(len, blocks)) <= {4}:
        raise ValueError("a row")
    keys = list(map(_KEY, blocks))  # (source, path)
    values = list(map(_VALUE, blocks))  # (repo, first seen)
    if not set(map(type, chain.from_iterable(keys))) <= {str}:
        raise ValueError("a row")
    if not set(map(type, map(_REPO, values))) <= {str}:
        raise ValueError("a row")
    times = list(map(_TIME, values))
    if not set(map(type, times)) <= {int} or (
        times and not 0 <= min(times) <= max(times) < 1 << 62
    ):
        raise ValueError("a time")
    return dict(zip(keys, values, strict=True))


_KEY = operator.itemgetter(0, 1)
_VALUE = operator.itemgetter(2, 3)
_REPO = operator.itemgetter(0)
_TIME = operator.itemgetter(1)
