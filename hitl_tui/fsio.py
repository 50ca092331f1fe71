"""Reading untrusted files safely and writing files atomically.

Reads are bounded (a 50 MB BLOCKED.md is hashed in full but only its head is kept). Writes go to
a temp file in the same folder, are fsynced, get the old file's mode (or the one asked for: the
state folder's own files are 0600), and are renamed over the target; the folder is fsynced
after. The journal, its store and the `since` memory write through `atomic_write` too; the
repository's writes go through `repofs` (folder handles) and the parse cache keeps its own
unsynced temp-and-rename (a lost cache is rebuilt). Nothing is ever written through a symlink
that leaves the repository.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hitl_tui.model import MAX_PARSE_BYTES, HitlError, UnsafePathError

TEMP_PREFIX = ".hitl-tmp-"


@dataclass(frozen=True, slots=True)
class FileRead:
    """The head of a file, plus the fingerprint and size of all of it."""

    head: bytes
    fingerprint: str
    size: int
    mtime: datetime

    @property
    def truncated(self) -> bool:
        return self.size > len(self.head)


#: pathlib's own way to a child of a folder without parsing the name again (what its glob and
#: walk use); absent from some Python versions, where `/` does the same, more slowly.
_CHILD = getattr(Path, "_make_child_relpath", None)


def child(folder: Path, name: str) -> Path:
    """`folder / name` for one plain entry name (no separator, not `.` or `..`), as listed by
    scandir: a scan makes thousands of these."""
    if _CHILD is not None:
        made: Path = _CHILD(folder, name)
        return made
    return folder / name


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _open_nonblocking(path: str | Path, flags: int) -> int:
    # A FIFO planted by an agent must not hang the open (it waits for a writer otherwise), and
    # a device must not become our controlling terminal. Regular files read as usual.
    return os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)


def read_file(path: Path, limit: int = MAX_PARSE_BYTES) -> FileRead:
    """Read at most `limit` bytes to keep, hashing every byte. Raises OSError as open() does.

    Unbuffered, in reads sized to the file, on a bare descriptor: a scan reads thousands of
    small files, and a buffered file object's own checks (an fstat, an ioctl) and a read past
    the end cost more than the read itself.
    """
    digest = hashlib.sha256()
    chunks: list[bytes] = []
    kept = 0
    size = 0
    fd = _open_nonblocking(path, os.O_RDONLY | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):  # as open() says it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
        # The file may grow while it is read: read on until the end, whatever the size said.
        step = min(max(st.st_size + 1, 1 << 16), 1 << 20)
        while True:
            chunk = os.read(fd, step)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            if kept < limit:
                part = chunk[: limit - kept]
                chunks.append(part)
                kept += len(part)
            if len(chunk) < step and size >= st.st_size:
                # A short read of all the file was at its end: a read on would find nothing
                # (or what was appended after this one, as it could after any last read).
                break
    finally:
        os.close(fd)
    mtime = datetime.fromtimestamp(st.st_mtime, UTC)
    return FileRead(b"".join(chunks), "sha256:" + digest.hexdigest(), size, mtime)


def why_not_a_file(path: Path | str) -> str | None:
    """Why the entry at `path`, which read_file could not open as a regular file, is not one
    (a folder, a FIFO, a device, a socket, a symlink to nothing), or None when there is no
    entry there at all. lstat and stat only: nothing is opened, so nothing can hang."""
    try:
        lst = os.lstat(path)
    except OSError:
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if stat.S_ISLNK(lst.st_mode) and exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "it is a symlink to nothing there"
        return exc.strerror or str(exc)
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return f"it is {kind}, not a file"
    return None if stat.S_ISREG(mode) else "it is not a regular file"


def read_small(path: Path, limit: int) -> bytes | None:
    """At most `limit` + 1 bytes of a regular file (more than `limit`: too large for the
    caller), or None when it is missing, unreadable or not a regular file (a FIFO planted by an
    agent never hangs the read)."""
    try:
        with open(path, "rb", buffering=0, opener=_open_nonblocking) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read(limit + 1)
    except OSError:
        return None


def current_fingerprint(path: Path) -> str | None:
    """The fingerprint of the file's bytes now, or None when it does not exist."""
    try:
        return read_file(path, limit=0).fingerprint
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "directory"


def read_bytes(path: Path) -> bytes | None:
    """All bytes of a file we are about to edit, or None when it does not exist.

    Anything else that is not a readable regular file (a folder, a FIFO) is a HitlError.
    """
    try:
        return read_file(path, limit=sys.maxsize).head
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HitlError(f"cannot read {path.name}: {exc.strerror or exc}") from None


def is_inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def resolve_for_write(repo: Path, path: Path) -> Path:
    """The real file a write to `path` lands on, refusing anything that leaves `repo`.

    A symlink inside the repo that points elsewhere inside it is followed (the link stays a
    link); one that points outside, or a folder on the way that does, is refused.
    """
    root = Path(os.path.realpath(repo))
    target = Path(os.path.realpath(path))
    if not is_inside(target, root):
        shown = path.relative_to(repo) if is_inside(path, repo) else path
        raise UnsafePathError(
            f"refusing to write {shown}: it is a symlink (or inside one) that leads outside "
            f"the repository, to {target}"
        )
    return target


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file (temp
    file in the same folder, fsync, rename, fsync the folder).

    `mode` None keeps the old file's permission bits (new files get the umask's default).
    """
    folder = path.parent
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


def remove_file(path: Path) -> None:
    os.unlink(path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
