"""Small JSON files of the operator's own in the state folder (snoozes, what was seen, the
view), read and written the same way.

- read at most `max_bytes`; a file that is missing is empty, one that cannot be read or parsed
  is reported once (one line on stderr, through `warn`) and treated as empty: such a file only
  ever holds the operator's view, so losing it hides nothing and writes nothing to a repo;
- changed under an exclusive lock on `NAME.lock` beside it: read again, changed, written whole
  (temp file, fsync, rename, mode 0600), so two hitl processes never lose each other's rows.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hitl_tui import fsio
from hitl_tui.model import Block

#: A block in these files: (source, block file as text; a remote block's URL).
Key = tuple[str, str]


def block_key(block: Block) -> Key:
    """The key of a `model.Block` in these files."""
    path = block.path
    return (block.source, os.fsdecode(path) if isinstance(path, Path) else str(path))


def in_state(name: str) -> Path | None:
    """`name` in the operator's state folder; None when there is none (the memory is then
    kept in memory only: never a reason for a command to fail)."""
    try:
        from hitl_tui.paths import state_dir

        return state_dir() / name
    except Exception:
        return None


class Unusable(ValueError):
    """The file is there but is not one of ours (the message says why)."""


def stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when another process rewrites the file (None: there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read(path: Path, fmt: int, max_bytes: int) -> dict[str, Any]:
    """The JSON object in `path` with `"format": fmt` ({} when there is no file); Unusable
    when the file cannot be read or is not such an object."""
    try:
        # Non-blocking, and only a regular file: a FIFO put there never hangs the read (nor,
        # under the file's lock, every other hitl waiting for it).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise Unusable(exc.strerror or str(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unusable("it is not a regular file")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise Unusable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise Unusable("it is too large")
    try:
        loaded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Unusable(f"it does not parse ({type(exc).__name__})") from None
    if not isinstance(loaded, dict) or loaded.get("format") != fmt:
        raise Unusable("it is not a file of this version")
    return loaded


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of `path` (its folder made, private, if missing)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / (path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write(path: Path, obj: dict[str, Any]) -> None:
    """`obj` as the whole file, atomically (call it holding `locked(path)`)."""
    data = json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8", "surrogateescape")
    fsio.atomic_write(path, data + b"\n", 0o600)


def update(
    path: Path, fmt: int, max_bytes: int, change: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Under the lock: read the file (an unusable one as {}), let `change` edit it in place,
    and write it when `change` says it changed something. Returns what is in the file now."""
    with locked(path):
        try:
            current = read(path, fmt, max_bytes)
        except Unusable:
            current = {}
        current["format"] = fmt
        if change(current):
            write(path, current)
        return current
