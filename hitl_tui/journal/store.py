"""Where the journal's records are kept and how they are read back: segments, the open index,
rotation, retention, and skipping malformed records. `journal_entries` folds the records into
entries; how long segments are kept is `retention`'s.

In the state folder's `journal/`:

    journal.jsonl                           the active segment: every record is appended here
    journal-000007-20250301T101500Z.jsonl   a closed segment: its number, then when it was
                                            closed (UTC); every record in it is older than that
    journal-000007-20250301T101500Z.refs    the blob sha256s its records name, one per line
    open/<entry id>                         one file per entry in progress: its begin record
    blobs/<sha256>                          the bytes of each file before and after an answer
    journal.lock                            flock held to append, rotate or prune
    pruned.json                             {"v": 1, "until": TIME}: retention deleted every
                                            segment closed up to TIME (none: nothing pruned)
    prune.lock                              shared while an entry's blobs are not yet named by
                                            any record; exclusive while blobs are pruned

Writing an entry: its blobs (each fsynced), then `open/<id>` (fsynced, and its folder), then
its begin record appended to `journal.jsonl` (fsynced): all before its first write to a repo.
Its end record (commit or rollback) is appended and fsynced, and only then is `open/<id>`
removed. So recovery lists `open/` and reads nothing else when it is empty: start-up costs
O(open entries), never O(history). An open file whose entry has an end record (a crash came
between the two) is stale, and removed when recovery finds it; an open file whose begin record
never reached the journal is an entry that wrote nothing, and is rolled back (which appends its
rollback record and removes the file).

Rotation. Past SEGMENT_BYTES, right after an end record, `journal.jsonl` is renamed to the next
numbered segment (one atomic rename, under journal.lock; a reader already holding it keeps
reading it). Then retention: segments closed more than `journal_keep` ago are deleted, except
any that may hold a record of an entry still open (its open file names the first segment that
can), and `pruned.json` notes the newest close time of those deleted (`hitl stats` says what
came before it is unknown); then every blob that no kept record and no open entry names is
deleted. Segments go before blobs, so a crash in between leaves only unnamed blobs, which the
next pass deletes.

Reading is newest first: the active file, then the segments from the highest number down, each
read backwards in chunks, so `history -n 20` and `undo` stop as soon as they have what they
need; an undo in a newer segment is always read before the answer it undid.

Migration. The single `journal.jsonl` of the layout before rotation is the active segment as it
stands, and the first segment once rotated. The first command that finds no `open/` folder
reads it once, writes an open file for each entry that has no end record into `open.new/`, and
renames that to `open/`.

Malformed records (not JSON, a torn line, not an object, a field of the wrong type, a time
without a time zone, an id seen twice) are skipped, never fatal; `skipped_report()` says which.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.journal import retention
from hitl_tui.paths import state_dir

#: The active file is closed into a segment once it is larger than this.
SEGMENT_BYTES = 4 * 1024 * 1024
ACTIVE = "journal.jsonl"
CHUNK = 64 * 1024
SEGMENT_RE = re.compile(r"journal-(\d{6,})-(\d{8}T\d{6}Z)\.jsonl\Z")
HEX64 = re.compile(r"[0-9a-f]{64}\Z")
#: An entry id is also a file name in open/.
ID_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,99}\Z")
STEP_ACTIONS = ("update", "create", "remove")

#: (file name, byte offset) -> line number of every malformed record read by this process.
_skipped: dict[tuple[str, int], int] = {}


# -- where ---------------------------------------------------------------------------------


def folder() -> Path:
    return state_dir() / "journal"


def active_file() -> Path:
    return folder() / ACTIVE


def open_folder() -> Path:
    return folder() / "open"


@dataclass(frozen=True, slots=True)
class Segment:
    seq: int
    closed: datetime
    path: Path

    @property
    def refs(self) -> Path:
        return self.path.with_suffix(".refs")


def segments() -> list[Segment]:
    """The closed segments, oldest (lowest number) first."""
    found = []
    try:
        names = os.listdir(folder())
    except OSError:
        return []
    for name in names:
        match = SEGMENT_RE.match(name)
        if match:
            closed = datetime.strptime(match.group(2), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            found.append(Segment(int(match.group(1)), closed, folder() / name))
    return sorted(found, key=lambda s: s.seq)


def _next_seq() -> int:
    """The number the active file will get when it is closed (a lower bound, if it races)."""
    found = segments()
    return found[-1].seq + 1 if found else 1


# -- locks -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _flock(name: str, mode: int, *, create: bool = True) -> Iterator[None]:
    """Hold `journal/NAME` locked; without `create`, a lock that cannot be opened is skipped."""
    if create:
        folder().mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(folder() / name, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
    except OSError:
        if create:
            raise
        yield  # a reader in a state folder it cannot write: read without the lock
        return
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


def journal_lock() -> contextlib.AbstractContextManager[None]:
    return _flock("journal.lock", fcntl.LOCK_EX)


def storing_blobs() -> contextlib.AbstractContextManager[None]:
    """Held while blobs are stored for an entry that no record names yet: none is pruned."""
    return _flock("prune.lock", fcntl.LOCK_SH)


# -- appending -------------------------------------------------------------------------------


def append(record: dict[str, Any]) -> None:
    """Append one record durably (see the module docstring for the order of the steps).

    A begin record gets its open file first; an end record removes it after. Rotation and
    retention run after an end record; their failures never fail the record.
    """
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
    begin = record.get("type") == "begin"
    if begin:
        _migrate()
        with storing_blobs():
            _check_blobs(record)
            opened = open_folder()
            opened.mkdir(parents=True, exist_ok=True)
            entry = {"v": 1, "segment": _next_seq(), "begin": record}
            data = json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode()
            fsio.atomic_write(opened / _id_name(record["id"]), data, 0o600)
    rotated = False
    with journal_lock():
        fd = os.open(active_file(), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # after a torn last line: start a line of our own
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if not size:
            fsio.fsync_dir(folder())  # the new journal file's name is durable too
        if not begin and size + len(line) > SEGMENT_BYTES:
            with contextlib.suppress(OSError):
                _rotate()
                rotated = True
    if not begin:
        with contextlib.suppress(OSError):
            os.unlink(open_folder() / _id_name(record["id"]))
    if rotated:
        with contextlib.suppress(OSError):
            apply_retention()


def _id_name(entry_id: object) -> str:
    if not isinstance(entry_id, str) or not ID_RE.match(entry_id):
        raise ValueError(f"not a journal entry id: {entry_id!r}")
    return entry_id


def _blob_names(begin: dict[str, Any]) -> set[str]:
    names = set()
    for step in begin.get("files") or ():
        for key in ("old_sha256", "new_sha256"):
            sha = step.get(key) if isinstance(step, dict) else None
            if isinstance(sha, str) and HEX64.match(sha):
                names.add(sha)
    return names


def _check_blobs(begin: dict[str, Any]) -> None:
    """Every blob the entry needs is there (and stays: the caller holds storing_blobs)."""
    for sha in sorted(_blob_names(begin)):
        if not (folder() / "blobs" / sha).is_file():
            raise OSError(errno.ENOENT, f"the journal lost the saved bytes {sha[:12]}")


def remove_stale_open(entry_id: str) -> None:
    """An open file whose end record is journaled (a crash came between the two)."""
    with contextlib.suppress(OSError, ValueError):
        os.unlink(open_folder() / _id_name(entry_id))


# -- rotation and retention ------------------------------------------------------------------


def _now() -> datetime:
    """When a segment is closed (its name says it: tests and the bench set the clock here)."""
    return datetime.now(UTC)


def _rotate() -> None:
    """Close the active file into the next segment (the caller holds journal.lock)."""
    now = _now()
    name = f"journal-{_next_seq():06d}-{now:%Y%m%dT%H%M%SZ}.jsonl"
    os.rename(active_file(), folder() / name)
    fsio.fsync_dir(folder())


def apply_retention(now: datetime | None = None) -> list[Path]:
    """Delete the segments older than the retention and the blobs no kept record names.

    Returns what was deleted. Safe to run at any time and to interrupt at any point. How long
    is `retention.current()`, asked now: the config's `journal_keep`, whoever started hitl.
    """
    keep = retention.current()
    now = now or datetime.now(UTC)
    removed: list[Path] = []
    segments_gone: list[Segment] = []
    with _flock("prune.lock", fcntl.LOCK_EX), journal_lock():
        opened = [seq for seq, _ in _open_entries()]
        first_open = min(opened, default=None)
        kept = []
        for segment in segments():
            old = keep is not None and segment.closed < now - keep
            if old and (first_open is None or segment.seq < first_open):
                segment.path.unlink(missing_ok=True)
                segment.refs.unlink(missing_ok=True)
                removed.append(segment.path)
                segments_gone.append(segment)
            else:
                kept.append(segment)
        if removed:
            _note_pruned(max(s.closed for s in segments_gone))
            fsio.fsync_dir(folder())
        for name in os.listdir(folder()):  # a .refs whose segment went (a crash in between)
            if name.endswith(".refs") and not (folder() / name).with_suffix(".jsonl").exists():
                (folder() / name).unlink(missing_ok=True)
        named: set[str] = set()
        for segment in kept:
            named |= _segment_refs(segment)
        named |= _refs_of(active_file())
        for _, begin in _open_entries():
            named |= _blob_names(begin)
        blobs = folder() / "blobs"
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(blobs):
                if HEX64.match(entry.name) and entry.name not in named:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed.append(Path(entry.path))
    return removed


#: Written by retention: `{"v": 1, "until": TIME}`, the newest close time of the segments it
#: deleted (every record older than that may be gone): `hitl stats` says so, never zero.
PRUNED = "pruned.json"


def _note_pruned(until: datetime) -> None:
    """Remember that records up to `until` are gone (never earlier than a time noted before).
    Never raises: retention stands without it."""
    path = folder() / PRUNED
    with contextlib.suppress(Exception):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            before = datetime.fromisoformat(json.loads(path.read_bytes())["until"])
            if before.tzinfo is not None and before >= until:
                return
        data = json.dumps({"v": 1, "until": until.isoformat()}).encode()
        fsio.atomic_write(path, data, 0o600)


def _segment_refs(segment: Segment) -> set[str]:
    """The blobs a closed segment names: its .refs file, written on first need."""
    try:
        text = segment.refs.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        pass
    else:
        if text.endswith("\n") or not text:
            return {line for line in text.split("\n") if HEX64.match(line)}
    names = _refs_of(segment.path)
    with contextlib.suppress(OSError):
        fsio.atomic_write(segment.refs, "".join(f"{n}\n" for n in sorted(names)).encode(), 0o600)
    return names


def _refs_of(path: Path) -> set[str]:
    names: set[str] = set()
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return names
    try:
        for _, line in _lines_backwards(fd):
            record = _parse(line)
            if isinstance(record, dict) and record.get("type") == "begin":
                names |= _blob_names(record)
    finally:
        os.close(fd)
    return names


# -- reading ---------------------------------------------------------------------------------


def _lines_backwards(fd: int) -> Iterator[tuple[int, bytes]]:
    """Every line of the file, last first, with the offset where it starts."""
    pos = os.fstat(fd).st_size
    tail = b""
    while pos > 0:
        size = min(CHUNK, pos)
        pos -= size
        chunk = os.pread(fd, size, pos) + tail
        parts = chunk.split(b"\n")
        end = pos + len(chunk)
        for part in reversed(parts[1:]):
            start = end - len(part)
            if part.strip():
                yield start, part
            end = start - 1
        tail = parts[0]
    if tail.strip():
        yield 0, tail


def _line_number(fd: int, offset: int) -> int:
    count, pos = 1, 0
    while pos < offset:
        chunk = os.pread(fd, min(1 << 20, offset - pos), pos)
        if not chunk:
            break
        count += chunk.count(b"\n")
        pos += len(chunk)
    return count


def _parse(line: bytes) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _aware_time(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 64:
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _optional(record: dict[str, Any], key: str, kinds: tuple[type, ...]) -> bool:
    value = record.get(key)
    return value is None or type(value) in kinds


def problem(record: object) -> str | None:
    """Why `record` cannot be used, or None. Every field is checked for its type."""
    if not isinstance(record, dict):
        return "not a JSON object"
    kind = record.get("type")
    if kind not in ("begin", "commit", "rollback"):
        return "unknown type"
    if not isinstance(record.get("id"), str) or not ID_RE.match(record["id"]):
        return "bad id"
    if "v" in record and not (type(record["v"]) is int and record["v"] == 1):
        return "unknown version"
    if not _aware_time(record.get("time")):
        return "bad time (an ISO time with its time zone)"
    if kind != "begin":
        ok = _optional(record, "by", (str,)) and _optional(record, "reason", (str,))
        return None if ok else "bad end record"
    if record.get("kind", "answer") not in ("answer", "undo"):
        return "bad kind"
    for key in ("undoes", "operator", "summary", "batch"):
        if not _optional(record, key, (str,)):
            return f"bad {key}"
    if not isinstance(record.get("repo"), str) or not record["repo"]:
        return "bad repo"
    block = record.get("block", {})
    if not isinstance(block, dict):
        return "bad block"
    for key in ("id", "source", "path", "fingerprint", "question", "not_undoable"):
        if not _optional(block, key, (str,)):
            return f"bad block {key}"
    if not _optional(block, "remote", (bool,)):
        return "bad block remote"
    answer = record.get("answer", {})
    if not isinstance(answer, dict) or not _optional(answer, "decision", (str,)):
        return "bad answer"
    files = record.get("files", [])
    if not isinstance(files, list):
        return "bad files"
    for step in files:
        if not isinstance(step, dict) or not isinstance(step.get("path"), str) or not step["path"]:
            return "bad file step"
        if step.get("action", "update") not in STEP_ACTIONS:
            return "bad file action"
        for key in ("old_sha256", "new_sha256"):
            sha = step.get(key)
            if sha is not None and not (isinstance(sha, str) and HEX64.match(sha)):
                return f"bad file {key}"
        for key in ("old_mode", "new_mode"):
            mode = step.get(key)
            if mode is not None and not (type(mode) is int and 0 <= mode <= 0o7777):
                return f"bad file {key}"
    return None


def _skip(name: str, fd: int | None, offset: int) -> None:
    if (name, offset) not in _skipped:
        _skipped[(name, offset)] = 0 if fd is None else _line_number(fd, offset)


def reset() -> None:
    """Forget the records skipped so far: each command reports its own."""
    _skipped.clear()


def skipped_report() -> str | None:
    """One line naming the malformed records read so far (then forgets them), or None."""
    if not _skipped:
        return None
    places = [
        f"{name} line {line}" if line else name for (name, _), line in sorted(_skipped.items())
    ]
    count = len(places)
    _skipped.clear()
    shown = ", ".join(places[:3]) + (f" and {count - 3} more" if count > 3 else "")
    noun = "record" if count == 1 else "records"
    return f"skipped {count} malformed journal {noun} ({shown})"


@dataclass(frozen=True, slots=True)
class Folded:
    """An entry's begin record, its end record (None: none yet) and the undo that undid it."""

    begin: dict[str, Any]
    end: dict[str, Any] | None
    undo: dict[str, Any] | None
    #: The number of the segment its begin is in (the active file: the one it will get).
    seq: int


def _records_backwards(
    since: int = 0, locked: bool = False
) -> Iterator[tuple[int, dict[str, Any], tuple[str, int, int]]]:
    """Every well-formed record, newest first, from segment `since` on (0: all of them).

    `locked`: this process holds journal.lock already (a shared flock of its own would wait).
    """
    handles: list[tuple[int, str, int | Path]] = []
    lock = (
        contextlib.nullcontext() if locked else _flock("journal.lock", fcntl.LOCK_SH, create=False)
    )
    with lock:
        if not folder().is_dir():
            return
        found = segments()
        top = found[-1].seq + 1 if found else 1
        try:
            handles.append((top, ACTIVE, os.open(active_file(), os.O_RDONLY)))
        except FileNotFoundError:
            pass
        handles += [(s.seq, s.path.name, s.path) for s in reversed(found) if s.seq >= since]
    try:
        for index, (seq, name, handle) in enumerate(handles):
            if isinstance(handle, Path):
                try:
                    fd = os.open(handle, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # pruned meanwhile: it was past the retention
                handles[index] = (seq, name, fd)
            else:
                fd = handle
            for offset, line in _lines_backwards(fd):
                record = _parse(line)
                if problem(record) is not None:
                    _skip(name, fd, offset)
                    continue
                yield seq, record, (name, fd, offset)  # type: ignore[misc]
    finally:
        for _, _, handle in handles:
            if isinstance(handle, int):
                os.close(handle)


def newest_first(since: int = 0, *, locked: bool = False) -> Iterator[Folded]:
    """Each entry once, newest first, with its end and the committed undo that undid it.

    Every record newer than an entry's begin has been read when it is yielded, so its status
    and its undo are final. A begin whose id was already seen (newer) is skipped as malformed.
    """
    ends: dict[str, dict[str, Any]] = {}
    undos: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for seq, record, where in _records_backwards(since, locked):
        entry_id = record["id"]
        if record["type"] != "begin":
            ends[entry_id] = record  # several: the oldest one (the first written) counts
            continue
        if entry_id in seen:  # an id seen twice: the older record is the one skipped
            _skip(*where)
            continue
        seen.add(entry_id)
        end = ends.pop(entry_id, None)
        target = record.get("undoes")
        if record.get("kind") == "undo" and target and end and end["type"] == "commit":
            undos.setdefault(target, record)
        yield Folded(record, end, undos.pop(entry_id, None), seq)


def find(entry_id: str, since: int = 0) -> Folded | None:
    """The entry `entry_id`, reading newest first only until its begin record."""
    for folded in newest_first(since):
        if folded.begin["id"] == entry_id:
            return folded
    return None


# -- the open index --------------------------------------------------------------------------


def _read_open(path: Path) -> tuple[int, dict[str, Any]] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    entry = _parse(data)
    if (
        isinstance(entry, dict)
        and type(entry.get("segment")) is int
        and problem(entry.get("begin")) is None
        and entry["begin"]["type"] == "begin"
        and entry["begin"]["id"] == path.name
    ):
        return entry["segment"], entry["begin"]
    _skip(f"open/{path.name}", None, 0)
    return None


#: A temp file in open/ older than this is a leftover of a crash, not a write in flight.
STALE_TEMP_SECONDS = 60.0


def _open_entries() -> list[tuple[int, dict[str, Any]]]:
    """(first segment, begin record) of every entry in progress, oldest first."""
    try:
        names = os.listdir(open_folder())
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith(fsio.TEMP_PREFIX):
            # A write interrupted before its rename; a young one may be another process's write
            # in flight (two operators answering at once), which must not be pulled from under it.
            with contextlib.suppress(OSError):
                path = open_folder() / name
                if time.time() - path.stat().st_mtime > STALE_TEMP_SECONDS:
                    os.unlink(path)
            continue
        entry = _read_open(open_folder() / name)
        if entry is not None:
            found.append(entry)
    return sorted(found, key=lambda e: (e[1]["time"], e[1]["id"]))


def open_entries() -> list[tuple[int, dict[str, Any]]]:
    """Every entry in progress, from `open/` alone (migrating the old layout first)."""
    _migrate()
    return _open_entries()


def open_entry(entry_id: str) -> tuple[int, dict[str, Any]] | None:
    try:
        name = _id_name(entry_id)
    except ValueError:
        return None
    path = open_folder() / name
    if not path.exists():
        return None
    return _read_open(path)


def _migrate() -> None:
    """Build `open/` from a journal of the layout before it (read once, whole)."""
    if open_folder().is_dir() or not folder().is_dir():
        return
    if not active_file().exists() and not segments():
        return
    with journal_lock():
        if open_folder().is_dir():
            return
        building = folder() / "open.new"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        pending = [f for f in newest_first(locked=True) if f.end is None]
        for folded in pending:
            entry = {"v": 1, "segment": folded.seq, "begin": folded.begin}
            data = json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode()
            fsio.atomic_write(building / folded.begin["id"], data, 0o600)
        fsio.fsync_dir(building)
        os.rename(building, open_folder())
        fsio.fsync_dir(folder())
