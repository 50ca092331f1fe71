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
  regular files, not symlinks, not a layout file that other files depend on.
- Entries carry a stamp of hitl's own code: another version, or an edited checkout, starts empty.

And why a stale entry still could not corrupt a repository: every answer reads the files again
and compares their fingerprints with the Block's before it writes anything.

On disk: one folder per workspace under the state folder, holding SHARDS pickle files, one per
group of repositories, so that an answer rewrites a sixteenth of the cache. The files are loaded
by an unpickler that admits only builtins, paths and date types: a corrupt or planted file
reads as an empty cache (or a miss), never as code. Writes are a temp file and a rename; a
cache lost in a crash is rebuilt by the next scan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import pickle
import stat
import sys
import threading
import time
import zlib
from pathlib import Path

from hitl_tui import __version__
from hitl_tui.model import Block, Choice, Section

FORMAT = 1
SHARDS = 16
#: A file changed this recently before its parse may change again without a new signature.
RACY_NS = 2_000_000_000
#: Workspace folders nobody has used for this long are removed when another is saved.
STALE_SECONDS = 30 * 24 * 3600

Sig = tuple[int, int, int, int, int]
#: (source name, file path) -> (signature, label, the block's fields or None)
EntryKey = tuple[str, str]
Entry = tuple[Sig, str, tuple | None]

_FIELDS = tuple(f.name for f in dataclasses.fields(Block))
_REPO, _PATH = _FIELDS.index("repo"), _FIELDS.index("path")
_CHOICES, _EXTRA = _FIELDS.index("choices"), _FIELDS.index("extra")


def freeze(block: Block) -> tuple:
    """A Block's fields as plain data (no classes of ours, no paths): quick to (un)pickle."""
    state = [getattr(block, name) for name in _FIELDS]
    state[_REPO] = state[_PATH] = None
    state[_CHOICES] = tuple((c.key, c.option, c.consequence, c.needs_text) for c in block.choices)
    state[_EXTRA] = tuple((s.title, s.body) for s in block.extra)
    return tuple(state)


def thaw(state: tuple, repo: Path, path: Path) -> Block:
    """The Block `freeze` took apart, for the file `path` in `repo`."""
    block = object.__new__(Block)
    put = object.__setattr__
    for name, value in zip(_FIELDS, state, strict=True):
        put(block, name, value)
    put(block, "repo", repo)
    put(block, "path", path)
    put(block, "choices", tuple(Choice(*c) for c in state[_CHOICES]))
    put(block, "extra", tuple(Section(*s) for s in state[_EXTRA]))
    return block


#: What a cache file may name besides builtins: the types a task's YAML header can hold.
_ALLOWED = {
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} has no place in a parse cache")
        return super().find_class(module, name)


@functools.cache
def code_stamp() -> str:
    """hitl's version, the interpreter's, and the size and mtime of each of hitl's modules."""
    digest = hashlib.sha256(f"{FORMAT} {__version__} {sys.version}".encode())
    package = Path(__file__).resolve().parent
    for folder in (package, package / "sources"):
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    digest.update(f"{entry.path} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def signature(st: os.stat_result) -> Sig:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _valid(entries: object) -> bool:
    if not isinstance(entries, dict):
        return False
    for key, entry in entries.items():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(entry, tuple)):
            return False
        if len(entry) != 3 or not isinstance(entry[1], str):
            return False
        sig, _, state = entry
        if not (isinstance(sig, tuple) and len(sig) == 5 and all(type(n) is int for n in sig)):
            return False
        if state is not None and not (isinstance(state, tuple) and len(state) == len(_FIELDS)):
            return False
    return True


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
        self.hits = 0
        self.misses = 0
        if folder is not None:
            self._load()
            with contextlib.suppress(OSError):
                os.utime(folder)  # in use: not stale (see _remove_stale_siblings)

    @classmethod
    def for_workspace(cls, paths: tuple[Path, ...] | list[Path]) -> ParseCache:
        """The operator's cache for the workspace made of `paths`, in the state folder."""
        from hitl_tui.paths import state_dir

        key = "\0".join(sorted(os.fsdecode(p) for p in paths))
        name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return cls(state_dir() / "parse-cache" / name)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._entries)

    @property
    def cold(self) -> bool:
        """Nothing cached: a first run, or the first after an upgrade."""
        return len(self) == 0

    # -- use ---------------------------------------------------------------------------------

    def parse(self, source, repo: Path, path: Path, label: str) -> Block | None:
        """`source.parse(repo, path, label)`, or its earlier result if the file is unchanged."""
        cacheable = getattr(source, "cacheable", None)
        if cacheable is None or not cacheable(repo, path):
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
        shard = self._shards.get(repo)
        if shard is None:
            shard = self._shards[repo] = zlib.crc32(os.fsencode(repo)) % SHARDS
        key = (source.name, name)
        with self._lock:
            entry = self._entries[shard].get(key)
            if entry is None and self._previous is not None:
                entry = self._previous[shard].get(key)
            if entry is not None and entry[0] == sig and entry[1] == label:
                try:
                    block = None if entry[2] is None else thaw(entry[2], repo, path)
                except (TypeError, ValueError):  # not what freeze wrote: parse instead
                    pass
                else:
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
        # A block of another file or repo (never so today) would be thawed wrongly: not stored.
        own = block is None or (block.path == path and block.repo == repo)
        with self._lock:
            self.misses += 1
            if after == sig and changed < started - RACY_NS and own:
                self._entries[shard][key] = (sig, label, None if block is None else freeze(block))
            else:
                self._entries[shard].pop(key, None)
            self._dirty.add(shard)
        return block

    def begin_scan(self) -> None:
        """A full scan starts: entries of files it does not meet again are dropped at its end."""
        with self._lock:
            self._previous = self._entries
            self._entries = [{} for _ in range(SHARDS)]

    def end_scan(self) -> None:
        with self._lock:
            previous, self._previous = self._previous, None
            if previous is None:
                return
            for shard, entries in enumerate(self._entries):
                if len(entries) != len(previous[shard]):
                    self._dirty.add(shard)

    def entries(self) -> list[tuple[int, EntryKey, Entry]]:
        """Every entry with its shard: what a scan worker hands back to the app."""
        with self._lock:
            return [(n, k, e) for n, shard in enumerate(self._entries) for k, e in shard.items()]

    def adopt(self, entries: list[tuple[int, EntryKey, Entry]]) -> None:
        """Take the entries a scan worker made (its scan stood for this one's)."""
        with self._lock:
            for shard, key, entry in entries:
                self._entries[shard][key] = entry
                self._dirty.add(shard)

    # -- disk --------------------------------------------------------------------------------

    def _shard_path(self, shard: int) -> Path:
        assert self.folder is not None
        return self.folder / f"shard-{shard:02d}.pickle"

    def _load(self) -> None:
        stamp = code_stamp()
        for shard in range(SHARDS):
            try:
                data = self._shard_path(shard).read_bytes()
            except OSError:
                continue
            try:
                loaded = _Unpickler(io.BytesIO(data)).load()
            except Exception:  # corrupt, truncated, planted: an empty shard
                continue
            if (
                isinstance(loaded, tuple)
                and len(loaded) == 3
                and loaded[0] == FORMAT
                and loaded[1] == stamp
                and _valid(loaded[2])
            ):
                self._entries[shard] = loaded[2]

    def save(self) -> None:
        """Write the shards that changed. Never raises: a cache that cannot be saved is rebuilt."""
        if self.folder is None:
            return
        with self._lock:
            if self._previous is not None:
                return  # mid-scan: the scan's end decides what changed
            dirty = {shard: dict(self._entries[shard]) for shard in self._dirty}
            self._dirty.clear()
        if not dirty:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            return
        stamp = code_stamp()
        for shard, entries in dirty.items():
            data = _dumps(stamp, entries)
            target = self._shard_path(shard)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        _remove_stale_siblings(self.folder)


def _dumps(stamp: str, entries: dict[EntryKey, Entry]) -> bytes:
    try:
        return pickle.dumps((FORMAT, stamp, entries), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # one block holds something unpicklable (an odd YAML value): skip it
        kept = {}
        for key, entry in entries.items():
            try:
                pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                continue
            kept[key] = entry
        return pickle.dumps((FORMAT, stamp, kept), protocol=pickle.HIGHEST_PROTOCOL)


def _remove_stale_siblings(folder: Path) -> None:
    """Drop caches of workspaces not opened for STALE_SECONDS (their shards were saved then)."""
    cutoff = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder.parent):
            if entry.path == os.fspath(folder) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                for shard in os.scandir(entry.path):
                    with contextlib.suppress(OSError):
                        os.unlink(shard.path)
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)
