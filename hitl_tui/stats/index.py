"""The little of the journal the figures need, read only as far back as the window, with a
small summary of each closed segment cached in the state folder.

Reading: the active file always, then the closed segments from the newest down to the first
one closed at or after the window's start (a segment closed before it holds only older
records: it is never opened). A closed segment never changes, so what the figures need of it
is kept in `stats/segments/<segment name>.json` in the state folder, next to nothing per
record (its id, time, kind, the entry it undoes, repo, source, when its block began; an end
record's id and type). A summary is used only when it names its segment and that segment's
size; missing, stale, damaged or of another version, it is made again from the segment (and
written back, not fsynced: a cache, when the state folder takes it: never a reason to fail).
Summaries of segments pruned since are deleted when one is written.

What was pruned: `journal/pruned.json` (written by retention, `journal.store`: the newest
close time of the segments it deleted), else, for a journal pruned by an older hitl, the
oldest kept segment's first record when its number is above 1 (numbers start at 1; a journal
whose every segment an older hitl pruned numbers them from 1 again, and cannot be told).

Domain code: no Textual.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.journal import store as journalstore
from hitl_tui.paths import state_dir
from hitl_tui.timefmt import aware_time

VERSION = 1


@dataclass(frozen=True, slots=True)
class Summary:
    """What one file of the journal holds for the figures, in file order: its begin records as
    columns (one item each), its end records, and its oldest record's time."""

    #: Each begin record's entry id, time (seconds since the epoch), whether it is an undo
    #: entry (else an answer), the entry an undo undoes.
    ids: list[str]
    times: list[float]
    undo: list[bool]
    undoes: list[str | None]
    #: Its repository and source, as indexes into `repos` and `sources`.
    repo_of: list[int]
    source_of: list[int]
    #: When its block began (`block.since`), seconds since the epoch; None when the record has
    #: none (an undo's, or an answer an older hitl journaled).
    since: list[float | None]
    repos: list[str]
    sources: list[str]
    #: Each end record's entry id, and whether it is a commit (else a rollback).
    end_ids: list[str]
    end_ok: list[bool]
    #: The oldest record's time (seconds since the epoch); None: no record.
    first: float | None

    def to_json(self, name: str, size: int) -> dict[str, Any]:
        return {"v": VERSION, "name": name, "size": size, **{k: getattr(self, k) for k in _COLUMNS}}


_COLUMNS = (
    "ids",
    "times",
    "undo",
    "undoes",
    "repo_of",
    "source_of",
    "since",
    "repos",
    "sources",
    "end_ids",
    "end_ok",
    "first",
)


def cache_folder() -> Path:
    return state_dir() / "stats" / "segments"


def pruned_file() -> Path:
    return journalstore.folder() / journalstore.PRUNED


def _epoch(value: object) -> float | None:
    when = aware_time(value)
    return None if when is None else when.timestamp()


def _records(data: bytes) -> Iterator[dict[str, Any]]:
    """The well-formed records of a file's bytes, in file order (as the journal reads them:
    a malformed one is skipped)."""
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if journalstore.problem(record) is None:
            yield record


def summarise(data: bytes) -> Summary:
    summary = Summary([], [], [], [], [], [], [], [], [], [], [], None)
    repos: dict[str, int] = {}
    sources: dict[str, int] = {}
    first: float | None = None
    for record in _records(data):
        at = _epoch(record["time"])
        if at is None:
            continue
        first = at if first is None else min(first, at)
        if record["type"] != "begin":
            summary.end_ids.append(record["id"])
            summary.end_ok.append(record["type"] == "commit")
            continue
        block = record.get("block") or {}
        summary.ids.append(record["id"])
        summary.times.append(at)
        summary.undo.append(record.get("kind") == "undo")
        summary.undoes.append(record.get("undoes"))
        summary.repo_of.append(repos.setdefault(record["repo"], len(repos)))
        summary.source_of.append(sources.setdefault(str(block.get("source") or ""), len(sources)))
        summary.since.append(_epoch(block.get("since")))
    summary.repos.extend(repos)
    summary.sources.extend(sources)
    return Summary(**{**{k: getattr(summary, k) for k in _COLUMNS}, "first": first})


def _all(values: object, *kinds: type) -> bool:
    return isinstance(values, list) and set(map(type, values)) <= set(kinds)


def _of_json(data: bytes, name: str, size: int) -> Summary | None:
    """The summary in a cache file's bytes, or None when it is not that segment's (or not a
    summary: every column is checked for its type and length)."""
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(loaded, dict) or (loaded.get("v"), loaded.get("name")) != (VERSION, name):
        return None
    if loaded.get("size") != size or set(loaded) != {"v", "name", "size", *_COLUMNS}:
        return None
    n = len(loaded["ids"]) if isinstance(loaded["ids"], list) else -1
    columns = ("ids", "times", "undo", "undoes", "repo_of", "source_of", "since")
    if any(not isinstance(loaded[k], list) or len(loaded[k]) != n for k in columns):
        return None
    first = loaded["first"]
    ok = (
        _all(loaded["ids"], str)
        and _all(loaded["times"], float, int)
        and _all(loaded["undo"], bool)
        and _all(loaded["undoes"], str, type(None))
        and _all(loaded["since"], float, int, type(None))
        and _all(loaded["repos"], str)
        and _all(loaded["sources"], str)
        and _all(loaded["repo_of"], int)
        and _all(loaded["source_of"], int)
        and _all(loaded["end_ids"], str)
        and _all(loaded["end_ok"], bool)
        and len(loaded["end_ids"]) == len(loaded["end_ok"])
        and (first is None or type(first) in (float, int))
        and all(0 <= i < len(loaded["repos"]) for i in set(loaded["repo_of"]))
        and all(0 <= i < len(loaded["sources"]) for i in set(loaded["source_of"]))
    )
    return Summary(**{k: loaded[k] for k in _COLUMNS}) if ok else None


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def segment_summary(segment: journalstore.Segment) -> Summary | None:
    """A closed segment's summary: the cached one if it is this segment's, else made (and
    cached). None when the segment is gone (pruned meanwhile)."""
    try:
        size = segment.path.stat().st_size
    except OSError:
        return None
    name = segment.path.name
    cached = _read(cache_folder() / f"{name}.json")
    if cached is not None:
        summary = _of_json(cached, name, size)
        if summary is not None:
            return summary
    data = _read(segment.path)
    if data is None:
        return None
    summary = summarise(data[:size])
    with contextlib.suppress(OSError):
        folder = cache_folder()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps(summary.to_json(name, size), separators=(",", ":")).encode()
        _write_cache(folder / f"{name}.json", data)
        _drop_stale(folder)
    return summary


def _write_cache(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (a temp file renamed into place), never fsynced: a summary
    is a cache, and one a crash left torn or empty is checked, found wanting and made again
    (an fsync each made a first run over 15 segments 3 s slower on a busy disk)."""
    fd, tmp = tempfile.mkstemp(prefix=fsio.TEMP_PREFIX, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: A temp file in the cache older than this is a leftover of a crash, not a write in flight.
STALE_TEMP_SECONDS = 60.0


def _drop_stale(folder: Path) -> None:
    """Delete the summaries of segments that are no longer there, and a crash's temp files."""
    kept = {s.path.name for s in journalstore.segments()}
    for entry in os.scandir(folder):
        gone = entry.name.endswith(".jsonl.json") and entry.name[: -len(".json")] not in kept
        with contextlib.suppress(OSError):
            if entry.name.startswith(fsio.TEMP_PREFIX):
                gone = time.time() - entry.stat().st_mtime > STALE_TEMP_SECONDS
            if gone:
                os.unlink(entry.path)


@dataclass(frozen=True, slots=True)
class Window:
    """The journal's files a window needs, summarised: oldest file first."""

    files: tuple[Summary, ...]
    #: Records before this time may have been pruned (None: nothing was).
    pruned_until: datetime | None
    #: How many closed segments were read (for the bench and the tests: never those closed
    #: before the window).
    segments_read: int


def read_window(since: datetime) -> Window:
    """The summaries of every journal file that may hold a record at or after `since`."""
    found = journalstore.segments()
    needed = [s for s in found if s.closed >= since]
    files: list[Summary] = []
    for segment in needed:
        summary = segment_summary(segment)
        if summary is not None:
            files.append(summary)
    active = _read(journalstore.active_file())
    if active is not None:
        files.append(summarise(active))
    return Window(
        tuple(files), _pruned_until(found, files if needed[:1] == found[:1] else None), len(needed)
    )


def _pruned_until(
    found: list[journalstore.Segment], oldest: Iterable[Summary] | None
) -> datetime | None:
    """Records before this may be gone (see the module docstring)."""
    data = _read(pruned_file())
    if data is not None:
        with contextlib.suppress(ValueError, TypeError, AttributeError, RecursionError):
            until = _epoch(json.loads(data).get("until"))
            if until is not None:
                return datetime.fromtimestamp(until, UTC)
    if not found or found[0].seq <= 1:
        return None
    summary = next(iter(oldest), None) if oldest is not None else segment_summary(found[0])
    first = summary.first if summary is not None else None
    return datetime.fromtimestamp(first, UTC) if first is not None else found[0].closed
