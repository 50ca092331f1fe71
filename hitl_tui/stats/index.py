"""The little of the journal the figures need, read only as far back as the window, with a
small summary of each closed segment cached in the state folder.

Reading: the active file always, then the closed segments from the newest down to the first
one closed at or after the window's start (a segment closed before it holds only older
records: it is never opened). A closed segment never changes, so what the figures need of it
is kept in `stats/segments/<segment name>.json` in the state folder, next to nothing per
record (its id, time, kind, the entry it undoes, repo, source, when its block began; an end
record's id and type). A summary is used only when it names its segment and that segment's
size; missing, stale, damaged or of another version, it is made again from the segment (and
written back when the state folder takes it: never a reason to fail). Summaries of segments
pruned since are deleted when one is written.

What was pruned: `journal/pruned.json` (written by retention, `journal.store`: the newest
close time of the segments it deleted), else, for a journal pruned by an older hitl, the
oldest kept segment's first record when its number is above 1 (numbers start at 1).

Domain code: no Textual.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.journal import store as journalstore
from hitl_tui.paths import state_dir

VERSION = 1


@dataclass(frozen=True, slots=True)
class Begin:
    """A begin record, as the figures need it."""

    id: str
    #: Seconds since the epoch.
    time: float
    #: "answer" or "undo".
    kind: str
    undoes: str | None
    repo: str
    source: str
    #: When the answered block began (`block.since`), seconds since the epoch; None when the
    #: record has none (an undo's, or an answer an older hitl journaled).
    since: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    """What one file of the journal holds for the figures, in file order."""

    begins: tuple[Begin, ...]
    #: (entry id, committed): every end record.
    ends: tuple[tuple[str, bool], ...]
    #: The oldest record's time (seconds since the epoch); None: no record.
    first: float | None


def cache_folder() -> Path:
    return state_dir() / "stats" / "segments"


def pruned_file() -> Path:
    return journalstore.folder() / journalstore.PRUNED


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


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
    begins: list[Begin] = []
    ends: list[tuple[str, bool]] = []
    first: float | None = None
    for record in _records(data):
        at = _epoch(record["time"])
        if at is None:
            continue
        first = at if first is None else min(first, at)
        if record["type"] != "begin":
            ends.append((record["id"], record["type"] == "commit"))
            continue
        block = record.get("block") or {}
        begins.append(
            Begin(
                id=record["id"],
                time=at,
                kind=str(record.get("kind", "answer")),
                undoes=record.get("undoes"),
                repo=record["repo"],
                source=str(block.get("source") or ""),
                since=_epoch(block.get("since")),
            )
        )
    return Summary(tuple(begins), tuple(ends), first)


def _to_json(name: str, size: int, summary: Summary) -> bytes:
    repos: dict[str, int] = {}
    sources: dict[str, int] = {}
    rows = [
        [
            b.id,
            b.time,
            b.kind,
            b.undoes,
            repos.setdefault(b.repo, len(repos)),
            sources.setdefault(b.source, len(sources)),
            b.since,
        ]
        for b in summary.begins
    ]
    data = {
        "v": VERSION,
        "name": name,
        "size": size,
        "first": summary.first,
        "repos": list(repos),
        "sources": list(sources),
        "begins": rows,
        "ends": [[i, c] for i, c in summary.ends],
    }
    return json.dumps(data, separators=(",", ":")).encode()


def _of_json(data: bytes, name: str, size: int) -> Summary | None:
    """The summary in a cache file's bytes, or None when it is not that segment's."""
    try:
        loaded = json.loads(data)
        if loaded.get("v") != VERSION or loaded.get("name") != name or loaded.get("size") != size:
            return None
        repos, sources = loaded["repos"], loaded["sources"]
        begins = tuple(
            Begin(
                str(i),
                float(t),
                str(k),
                u if isinstance(u, str) else None,
                str(repos[r]),
                str(sources[s]),
                None if b is None else float(b),
            )
            for i, t, k, u, r, s, b in loaded["begins"]
        )
        ends = tuple((str(i), c is True) for i, c in loaded["ends"])
        first = loaded["first"]
        return Summary(begins, ends, None if first is None else float(first))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        return None


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
        fsio.atomic_write(folder / f"{name}.json", _to_json(name, size, summary), 0o600)
        _drop_stale(folder)
    return summary


def _drop_stale(folder: Path) -> None:
    """Delete the summaries of segments that are no longer there."""
    kept = {s.path.name for s in journalstore.segments()}
    for entry in os.scandir(folder):
        if entry.name.endswith(".jsonl.json") and entry.name[: -len(".json")] not in kept:
            with contextlib.suppress(OSError):
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
