"""Parsed blocks kept between runs, so that a start does not parse every unchanged file again.

At 1,000 repositories a scan reads and parses some 6,500 files: about a second of Python, where
a stat of each costs milliseconds. The cache maps each block file to the stat signature it had
when it was parsed (device, inode, size, mtime and ctime in nanoseconds), the label its block
was given, and the Block parsed from it (or None: the file holds no open block). A file whose
signature and label are unchanged is not read again.

Why a cached Block is the Block a parse would give:

- Any write to a file sets its ctime to the kernel's clock, and nothing can set a ctime back. A
  file rewritten within one clock tick of being parsed could keep its signature, so a result is
  stored only when the file was last changed more than RACY_NS before its parse began (git's
  rule for racily clean index entries), and only when its signature did not move during the parse.
- Only files that their source parses from their own bytes alone are cached (`Source.cacheable`):
  regular files, not symlinks, not a layout file that other files depend on. And only what a
  successful read gave: a file that could not be read (EIO, EACCES) may be readable next time
  with the same signature, so such a block is never stored.
- Entries carry a stamp of hitl's own code and of PyYAML: another version starts empty.

And why even a wrong entry could not change what is written: every answer parses the block file
again and plans from the bytes it replaces (`answering.as_on_disk`), then compares fingerprints
once more under the lock before it writes anything.

On disk: one folder per workspace under the state folder, holding SHARDS JSON files, one per
group of repositories, so that an answer rewrites a sixteenth of the cache. JSON, not pickle: a
corrupt or planted file can hold nothing but data, its nesting is bounded by the decoder, and
every field is type-checked before it becomes a Block (anything else is a miss, parsed afresh):
that codec is `blockcodec`; this module is the cache around it (shards, stamps, signatures,
housekeeping).
Only a regular file of ours, not writable by others, under MAX_SHARD_BYTES, is read at all.
Writes are a temp file and a rename; a cache lost in a crash is rebuilt by the next scan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import operator
import os
import re
import stat
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from hitl_tui import __version__
from hitl_tui.inbox.codec import (
    Uncacheable,
    dumps,
    dumps_rows,
    freeze,
    loads,
    thaw,
    to_json,
    unshared,
    untag,
)
from hitl_tui.model import Block
from hitl_tui.sources.base import Source

FORMAT = 4
SHARDS = 16
#: A file changed this recently before its parse may change again without a new signature.
RACY_NS = 2_000_000_000
#: Workspace folders nobody has used for this long are removed when another is saved.
STALE_SECONDS = 30 * 24 * 3600
#: A shard larger than this is not read (5,000 blocks make about 7 MB in all, 16 shards).
MAX_SHARD_BYTES = 32 << 20
#: Entries encoded between two calls of `save`'s `between` (a few ms of Python).
SAVE_SLICE = 256
#: A block whose text is longer than this is parsed afresh each time, not cached (keeps the
#: shards small; block files are a few KiB).
MAX_CACHED_RAW = 16 << 10

_STATE_LENGTH = len(dataclasses.fields(Block))
_META = [f.name for f in dataclasses.fields(Block)].index("meta")

Sig = tuple[int, int, int, int, int]
#: (source name, file path) -> (signature, label, the block or None). The block is the
#: Block itself when this process parsed it (taken apart by `freeze` only when a shard is
#: written: a second copy of 50,000 blocks' fields would stay in memory for nothing), or its
#: fields as read from a shard (`thaw` makes the Block).
EntryKey = tuple[str, str]
Entry = tuple[Sig, str, Block | list[Any] | None]
#: What a scan worker sends for an entry's block that it sent already (`adopt`).
SENT = "sent"


class _GcPause:
    """No cyclic garbage collection while a scan or a cache load runs (`gc_paused`).

    Both make tens of thousands of objects that all live on (Blocks, their fields, the
    entries): each few hundred allocations started a collection that walked every one of them
    again, a quarter of a warm start at 5,000 blocks. Little of what they make is cyclic
    garbage, and that is collected once the collector runs again.
    Nested and threaded uses count: the collector runs again when the last one ends, if it
    was on when the first began, with what was made meanwhile counted as old."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    if gc.get_freeze_count() == 0:
                        # What was made meanwhile is all in the youngest generation: the first
                        # collection would walk every block at once (0.2 s at 5,000). Freezing
                        # and unfreezing moves it to the oldest without walking it. (Not when
                        # something is frozen already: the app's start-up freeze stays.)
                        gc.freeze()
                        gc.unfreeze()
                    gc.enable()


gc_paused = _GcPause()


def _row(key: EntryKey, entry: Entry) -> list[Any]:
    """An entry as written to disk: the block's facts for the planner encoded for JSON."""
    (source, name), (sig, label, state) = key, entry
    if isinstance(state, Block):  # parsed by this process: taken apart only now (`Entry`)
        state = freeze(state)
    # (the texts the entry keeps `unshared`: see there)
    row = None if state is None else to_json(state)
    return [source, unshared(name), list(sig), unshared(label), row]


def _rows(
    entries: list[tuple[EntryKey, Entry]], between: Callable[[], object] | None
) -> Iterator[list[Any]]:
    """The rows of a shard's `entries` as written (`_row`), `between` called every
    SAVE_SLICE entries; an entry that cannot be written is left out."""
    for n, (key, entry) in enumerate(entries):
        if between is not None and n % SAVE_SLICE == 0:
            between()
        try:
            row = _row(key, entry)
        except (Uncacheable, RecursionError):
            continue  # freeze() checked what it kept; an entry that fails is left out
        yield row


@functools.cache
def code_stamp() -> str:
    """What decides a parse besides the file: hitl's modules (size and mtime), its version,
    the interpreter's and PyYAML's (with or without libyaml)."""
    libyaml = getattr(yaml, "__with_libyaml__", False)
    seed = f"{FORMAT} {__version__} {sys.version} yaml {yaml.__version__} {libyaml}"
    digest = hashlib.sha256(seed.encode())
    package = Path(__file__).resolve().parent.parent  # hitl_tui/, not only inbox/
    # Every module of every sub-package: a parser split into new modules still counts.
    for folder, subfolders, files in sorted(os.walk(package)):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    where = os.path.join(folder, name)
                    digest.update(f"{where} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def signature(st: os.stat_result) -> Sig:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _entries_of(loaded: object, stamp: str) -> dict[EntryKey, Entry] | None:
    """The entries of a decoded shard, or None when it is not a shard of this build."""
    if not isinstance(loaded, dict) or loaded.get("format") != FORMAT:
        return None
    if loaded.get("stamp") != stamp or not isinstance(loaded.get("entries"), list):
        return None
    entries: dict[EntryKey, Entry] = {}
    for row in loaded["entries"]:
        if not (isinstance(row, list) and len(row) == 5):
            return None
        source, name, sig, label, state = row
        if not (type(source) is str and type(name) is str and type(label) is str):
            return None
        if not (isinstance(sig, list) and len(sig) == 5 and all(type(n) is int for n in sig)):
            return None
        if state is not None:
            if not (isinstance(state, list) and len(state) == _STATE_LENGTH):
                return None
            # The meta as written stays beside it: saved again as it is, not encoded again.
            state.append(state[_META])
            state[_META] = untag(state[_META])
        entries[(source, name)] = (tuple(sig), label, state)
    return entries


def _block_of(state: Block | list[Any] | None, repo: Path, path: Path) -> Block | None:
    """The block of an entry's state (see `Entry`); ValueError if it is not that file's."""
    if state is None:
        return None
    if type(state) is Block:
        if state.path != path or state.repo != repo:
            raise ValueError("another file's block")
        return state
    return thaw(state, repo, path)


_BLOCK_FIELDS = tuple(f.name for f in dataclasses.fields(Block))
#: Every field of a Block at once (in C), and each field's slot setter (a frozen dataclass's
#: own `__setattr__` refuses; these are what `object.__setattr__` would find, without the look).
_block_values = operator.attrgetter(*_BLOCK_FIELDS)
_BLOCK_SETTERS = tuple(getattr(Block, name).__set__ for name in _BLOCK_FIELDS)
_set_since = _BLOCK_SETTERS[_BLOCK_FIELDS.index("since")]


def with_since(block: Block, since: datetime) -> Block:
    """`dataclasses.replace(block, since=since)`, a few times quicker (once per block at every
    start): every other field the very same object, none checked again."""
    new = object.__new__(Block)
    for put, value in zip(_BLOCK_SETTERS, _block_values(block), strict=True):
        put(new, value)
    _set_since(new, since)
    return new


def _read_shard(path: Path) -> bytes | None:
    """A shard's bytes, if it is a regular file of ours that nobody else may write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SHARD_BYTES:
            return None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            return None
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_SHARD_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


class ParseCache:
    """Parsed blocks by file, checked against each file's stat before use.

    `folder` None keeps the cache in memory only (a scan worker's, a test's).
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._entries: list[dict[EntryKey, Entry]] = [{} for _ in range(SHARDS)]
        #: During a full scan: the entries before it, re-used as files are met again.
        self._previous: list[dict[EntryKey, Entry]] | None = None
        self._dirty: set[int] = set()
        self._shards: dict[Path, int] = {}
        #: Shards on disk not read yet: each is read when first needed (`_ready`), so that a
        #: scan's first rows wait for one shard, not sixteen (at 50,000 blocks, 0.7 s).
        self._pending: set[int] = set()
        #: A shard read had entries of this build (`cold` is False without reading the rest).
        self._found = False
        self.hits = 0
        self.misses = 0
        if folder is not None:
            self._load()
            with contextlib.suppress(OSError):
                os.utime(folder)  # in use: not stale (see _sweep)

    @classmethod
    def for_workspace(cls, paths: tuple[Path, ...] | list[Path]) -> ParseCache:
        """The operator's cache for the workspace made of `paths`, in the state folder."""
        from hitl_tui.paths import state_dir

        key = "\0".join(sorted(os.fsdecode(p) for p in paths))
        name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return cls(state_dir() / "parse-cache" / name)

    def __len__(self) -> int:
        with self._lock:
            self._ready_all()
            return sum(len(shard) for shard in self._entries)

    @property
    def cold(self) -> bool:
        """Nothing cached: a first run, or the first after an upgrade."""
        with self._lock:
            if self._found:
                return False
        return len(self) == 0

    def _ready(self, shard: int) -> None:
        """Shard `shard` read from disk, if it was not yet (with the lock held): its entries
        go where the ones read at the start would be (`_previous` during a full scan)."""
        if shard not in self._pending:
            return
        self._pending.discard(shard)
        entries = self._read(shard)
        if entries:
            base = self._previous if self._previous is not None else self._entries
            entries.update(base[shard])
            base[shard] = entries

    def _ready_all(self) -> None:
        for shard in sorted(self._pending):
            self._ready(shard)

    # -- use ---------------------------------------------------------------------------------

    def shard_of(self, repo: Path) -> int:
        """The shard that holds the entries of `repo`'s files. A full scan reads one shard's
        repositories after another's, so that each shard's fields (read all at once, 50,000
        blocks' took 200 MB) are let go as its Blocks are made, before the next is read."""
        shard = self._shards.get(repo)
        if shard is None:
            shard = self._shards[repo] = zlib.crc32(os.fsencode(repo)) % SHARDS
        return shard

    def parse(self, source: Source, repo: Path, path: Path, label: str) -> Block | None:
        """`source.parse(repo, path, label)`, or its earlier result if the file is unchanged."""
        if not source.cacheable(repo, path):
            return source.parse(repo, path, label)
        name = os.fspath(path)
        try:
            before = os.lstat(name)
        except (FileNotFoundError, NotADirectoryError):
            return None  # nothing there: no block (part of what `cacheable` promises)
        except OSError:
            return source.parse(repo, path, label)
        if not stat.S_ISREG(before.st_mode):
            return source.parse(repo, path, label)
        sig = signature(before)
        shard = self.shard_of(repo)
        key = (source.name, name)
        with self._lock:
            self._ready(shard)
            entry = self._entries[shard].get(key)
            before_scan = entry is None and self._previous is not None
            if before_scan:
                assert self._previous is not None
                entry = self._previous[shard].get(key)
            if entry is not None and entry[0] == sig and entry[1] == label:
                try:
                    block = _block_of(entry[2], repo, path)
                except (TypeError, ValueError):  # not what freeze wrote: parse instead
                    pass
                else:
                    if block is not entry[2]:
                        # Thawed: the entry keeps the Block, as for one parsed here, not the
                        # fields read from the shard (at 50,000 blocks those lists, the
                        # choices' texts and the encoded metas held a second copy: 100 MB),
                        # and a second look at the file needs no thaw.
                        entry = (sig, label, block)
                        if before_scan:  # (the fields are let go now, not at the scan's end)
                            assert self._previous is not None
                            self._previous[shard][key] = entry
                    self._entries[shard][key] = entry
                    self.hits += 1
                    return block
        started = time.time_ns()
        block = source.parse(repo, path, label)
        try:
            after = signature(os.lstat(name))
        except OSError:
            after = None
        changed = max(before.st_mtime_ns, before.st_ctime_ns)
        state = None
        keep = after == sig and changed < started - RACY_NS
        if keep and block is not None:
            # Only what the bytes say: a failed read ("unreadable") may succeed next time
            # without the file changing; a block of another file would be thawed wrongly.
            keep = (
                block.fingerprint.startswith("sha256:")
                and len(block.raw) <= MAX_CACHED_RAW
                and (block.path is path or block.path == path)
                and (block.repo is repo or block.repo == repo)
            )
            state = block if keep else None
        with self._lock:
            self._ready(shard)
            self.misses += 1
            if keep:
                self._entries[shard][key] = (sig, label, state)
            else:
                self._entries[shard].pop(key, None)
            self._dirty.add(shard)
        return block

    def drop_if_wrong(self, source: Source, repo: Path, path: Path, label: str) -> bool:
        """Whether the entry a scan of `path` would use now (its signature and label match)
        holds another block than a parse of the file gives; such an entry is dropped.

        A cache hit is never read against the file (that is its point), so an entry that is
        wrong (planted, or a bug) would stand for good: every answer from it refused, and the
        operator never shown the file's text. An answer checks its block here first.
        """
        if not source.cacheable(repo, path):
            return False
        name = os.fspath(path)
        try:
            st = os.lstat(name)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        sig = signature(st)
        shard = zlib.crc32(os.fsencode(repo)) % SHARDS
        key = (source.name, name)
        with self._lock:
            self._ready(shard)
            entry = self._entries[shard].get(key)
            if entry is None and self._previous is not None:
                entry = self._previous[shard].get(key)
        if entry is None or entry[0] != sig or entry[1] != label:
            return False  # not what a scan would use: the file is parsed anyway
        try:
            cached = _block_of(entry[2], repo, path)
        except (TypeError, ValueError):
            return False  # a scan parses instead of using it
        if cached == source.parse(repo, path, label):
            return False
        with self._lock:
            self._entries[shard].pop(key, None)
            if self._previous is not None:
                self._previous[shard].pop(key, None)
            self._dirty.add(shard)
        return True

    def begin_scan(self) -> None:
        """A full scan starts: entries of files it does not meet again are dropped at its end."""
        with self._lock:
            self._previous = self._entries
            self._entries = [{} for _ in range(SHARDS)]

    def end_scan(self) -> None:
        with self._lock:
            self._ready_all()  # (a shard no repository met: its entries are gone now)
            previous, self._previous = self._previous, None
            if previous is None:
                return
            for shard, entries in enumerate(self._entries):
                if len(entries) != len(previous[shard]):
                    self._dirty.add(shard)

    def entries(self) -> list[tuple[int, EntryKey, Entry]]:
        """Every entry with its shard: what a scan worker hands back to the app."""
        with self._lock:
            self._ready_all()
            return [(n, k, e) for n, shard in enumerate(self._entries) for k, e in shard.items()]

    def adopt(
        self,
        entries: list[tuple[int, EntryKey, Any]],
        blocks: Mapping[tuple[str, Path | str], Block] | None = None,
    ) -> None:
        """Take the entries a scan worker made (its scan stood for this one's).

        A worker sends an entry's block as (SENT, its since) when it sent the block itself
        already (`workers.sent`): the entry is then that block, as it is in `blocks` (the
        inbox's, dated), with its own `since`, sharing every other field, so that 50,000
        blocks are not held twice. One that is not there is left out (parsed when met)."""
        named: dict[EntryKey, Block] | None = None
        with self._lock:
            for shard, key, entry in entries:
                self._ready(shard)
                state = entry[2]
                if type(state) is tuple:
                    if named is None:
                        named = {(s, os.fspath(p)): b for (s, p), b in (blocks or {}).items()}
                    found = named.get(key)
                    if found is None or len(state) != 2 or state[0] != SENT:
                        continue
                    entry = (entry[0], entry[1], with_since(found, state[1]))
                self._entries[shard][key] = entry
                self._dirty.add(shard)

    # -- disk --------------------------------------------------------------------------------

    def _shard_path(self, shard: int) -> Path:
        assert self.folder is not None
        return self.folder / f"shard-{shard:02d}.json"

    def _load(self) -> None:
        """The shards are read as they are needed; here, only until one has entries of this
        build (`cold`: at a warm start, the first shard; else every one, as before)."""
        with self._lock:
            self._pending = set(range(SHARDS))
            for shard in range(SHARDS):
                self._ready(shard)
                if self._entries[shard]:
                    self._found = True
                    return

    def _read(self, shard: int) -> dict[EntryKey, Entry] | None:
        """The entries of shard `shard` on disk; None if it is not there or not usable."""
        data = _read_shard(self._shard_path(shard))
        if data is None:
            return None
        with gc_paused():
            try:
                return _entries_of(loads(data), code_stamp())
            except Exception:  # corrupt, truncated, nested too deep, planted: an empty shard
                return None

    def save(self, between: Callable[[], object] | None = None) -> None:
        """Write the shards that changed. Never raises: a cache that cannot be saved is rebuilt.
        `between` is called every SAVE_SLICE entries (the app's: wait while the operator is
        pressing keys, the GIL released)."""
        if self.folder is None:
            return
        with self._lock:
            if self._previous is not None:
                return  # mid-scan: the scan's end decides what changed
            dirty = {shard: list(self._entries[shard].items()) for shard in self._dirty}
            self._dirty.clear()
        if not dirty:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            return self._redo(dirty)
        stamp = code_stamp()
        head = {"format": FORMAT, "stamp": stamp}
        for shard, entries in dirty.items():
            # Each row encoded as it is made, and dropped (`dumps_rows`); a row orjson cannot
            # write: the shard made whole, as `dumps` writes it.
            data = dumps_rows(head, "entries", _rows(entries, between))
            if data is None:
                try:
                    data = dumps({**head, "entries": list(_rows(entries, between))})
                except (TypeError, ValueError, RecursionError):
                    continue  # _row() encoded every value; this is belt and braces
            try:
                fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self.folder)  # mode 0600
            except OSError:
                return self._redo(dirty)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, self._shard_path(shard))
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                self._redo({shard: entries})
        _sweep(self.folder)

    def _redo(self, shards: dict[int, list[tuple[EntryKey, Entry]]]) -> None:
        """Shards that could not be written: try again at the next save."""
        with self._lock:
            self._dirty.update(shards)


TEMP_PREFIX = ".shard-"
_SHARD_NAME = re.compile(r"shard-\d\d\.json|\.shard-.+")
_WORKSPACE_NAME = re.compile(r"[0-9a-f]{16}")


def _sweep(folder: Path) -> None:
    """Temp files a killed save left here (an hour old), and the caches of workspaces nobody
    has opened for STALE_SECONDS. Only names this module writes are ever removed."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if (
                entry.name.startswith(TEMP_PREFIX)
                and entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime < now - 3600
            ):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder.parent):
            if entry.path == os.fspath(folder) or not _WORKSPACE_NAME.fullmatch(entry.name):
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime >= now - STALE_SECONDS:
                continue
            for shard in os.scandir(entry.path):
                if _SHARD_NAME.fullmatch(shard.name):
                    with contextlib.suppress(OSError):
                        os.unlink(shard.path)
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)  # only if nothing else was in it
