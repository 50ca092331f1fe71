"""A repository held open for the length of an answer, and writes that check what they replace.

The loop may still be writing while hitl answers (a session finishing, an editor, a second
loop). A plain "check the bytes, then rename over the file" loses whatever the loop writes
between the check and the rename. So every write here is a verified replace:

- **update**: the new bytes go to a temp file in the same folder (fsynced, with the old file's
  mode); the current bytes are compared with the ones the plan read; then the temp file and the
  target are swapped in one step (`renameat2(RENAME_EXCHANGE)` on Linux), and the file that was
  swapped out, which is exactly the one that was replaced, is read and compared again. If it is
  not the file the plan read, the swap is undone and nothing of that file was changed.
- **remove** (the block file, last): the file is renamed aside in one step, compared, and only
  then deleted; anything else is put back (`RENAME_NOREPLACE`, so a newer file written at the
  same name meanwhile is never replaced).
- **create**: `RENAME_NOREPLACE` (or `link()`): a file that appeared meanwhile is never replaced.

Where a swap cannot be done (not Linux, or a file system without RENAME_EXCHANGE), the update
checks the bytes immediately before a plain rename; `windows` records how long the unguarded
moment lasted either way (the benchmark reports it).

Files are reached through directory file descriptors opened once, before anything is written,
with every folder on the way opened without following symlinks: a repository renamed or moved
while an answer is written is still the one written to, and a symlink swapped in meanwhile is
never followed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from hitl_tui.model import HitlError, StaleError, UnsafePathError

TEMP_PREFIX = ".hitl-tmp-"
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
#: errno values that mean "this kernel or file system cannot do that rename flag".
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotAFile:
    """What a read finds when the name holds a folder, a symlink, a FIFO...: never `expected`."""

    def __repr__(self) -> str:
        return "<not a regular file>"


NOT_A_FILE = NotAFile()


class ConcurrentWrite(StaleError):
    """A file changed while hitl was writing it. That file keeps the bytes the loop wrote."""

    def __init__(self, rel: str, detail: str, kept: str | None = None) -> None:
        self.rel = rel
        self.kept = kept
        message = f"{rel} {detail}"
        if kept:
            message += f" (its other version is kept as {kept})"
        super().__init__(message)


# -- renameat2 -------------------------------------------------------------------------------


def _load_renameat2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _load_renameat2()


def renameat2(src_dir: int, src: str, dst_dir: int, dst: str, flags: int) -> None:
    """`renameat2(2)`; OSError(ENOSYS) where the C library has no such call."""
    if _RENAMEAT2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", src)
    if _RENAMEAT2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), src)


# -- the repository --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spot:
    """Where one file lives: its folder (held open) and its name in that folder."""

    folder: int
    name: str
    #: The path relative to the repository, for messages.
    rel: str


class RepoDir:
    """A repository opened once; every file of an answer is reached relative to it.

    `recorded` is the repository path the plan (or the journal) names files under; `located`
    is where it is now (the same folder, or where it moved to, for recovery).
    """

    def __init__(self, recorded: Path, located: Path | None = None) -> None:
        self.recorded = Path(recorded)
        self.located = Path(located) if located is not None else self.recorded
        self.real = os.path.realpath(self.located)
        try:
            fd = os.open(self.real, _DIR_FLAGS)
        except FileNotFoundError:
            raise StaleError(
                f"the block is gone: the repository {self.located} was moved or removed "
                "(nothing was written)"
            ) from None
        except OSError as exc:
            raise HitlError(
                f"cannot open the repository {self.located}: {exc.strerror} (nothing was written)"
            ) from None
        self._fds: dict[str, int] = {"": fd}
        self._spots: dict[Path, Spot] = {}
        #: Nanoseconds each write spent unguarded (see the module docstring), newest last.
        self.windows: list[int] = []

    # -- context -------------------------------------------------------------------------------

    def __enter__(self) -> RepoDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    @property
    def identity(self) -> tuple[int, int]:
        st = os.fstat(self._fds[""])
        return st.st_dev, st.st_ino

    # -- where a file is -------------------------------------------------------------------------

    def rel(self, path: Path) -> str:
        try:
            return str(Path(path).relative_to(self.recorded))
        except ValueError:
            return str(path)

    def spot(self, path: Path) -> Spot:
        """The folder and name a write to `path` lands on; refuses anything leaving the repo.

        A symlink inside the repository that points elsewhere inside it is followed (the link
        stays a link); one that points outside, or a folder on the way that does, is refused.
        Folders are opened once and kept, so what is found here is what is written later.
        """
        path = Path(path)
        found = self._spots.get(path)
        if found is not None:
            return found
        rel = self.rel(path)
        if os.path.isabs(rel) or rel.split(os.sep)[0] == "..":
            raise UnsafePathError(f"refusing to write {path}: it is not inside {self.recorded}")
        target = os.path.realpath(os.path.join(self.real, rel))
        inside = os.path.relpath(target, self.real)
        if inside == os.curdir or inside.split(os.sep)[0] == os.pardir:
            raise UnsafePathError(
                f"refusing to write {rel}: it is a symlink (or inside one) that leads outside "
                f"the repository, to {target}"
            )
        *folders, name = inside.split(os.sep)
        key = ""
        fd = self._fds[""]
        for part in folders:
            key = os.path.join(key, part) if key else part
            if key not in self._fds:
                try:
                    self._fds[key] = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise HitlError(
                        f"cannot write {rel}: its folder {key} cannot be opened "
                        f"({exc.strerror}; nothing was written)"
                    ) from None
            fd = self._fds[key]
        found = Spot(fd, name, rel)
        self._spots[path] = found
        return found

    # -- reading ---------------------------------------------------------------------------------

    def read(self, spot: Spot) -> bytes | NotAFile | None:
        """Every byte of the file now; None when there is none; NOT_A_FILE for anything else."""
        return _read_at(spot.folder, spot.name)

    def mode(self, spot: Spot) -> int | None:
        try:
            st = os.stat(spot.name, dir_fd=spot.folder, follow_symlinks=False)
        except OSError:
            return None
        return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None

    def writable(self, spot: Spot) -> bool:
        """Whether we may write the folder (and the file, if there is one): a read-only
        PROMPT.md is refused up front instead of being replaced by a rename."""
        try:
            if not os.access(".", os.W_OK | os.X_OK, dir_fd=spot.folder):
                return False
            os.stat(spot.name, dir_fd=spot.folder, follow_symlinks=False)
        except FileNotFoundError:
            return True
        except (OSError, NotImplementedError):
            return True  # the write itself will say what is wrong
        try:
            return os.access(spot.name, os.W_OK, dir_fd=spot.folder)
        except (OSError, NotImplementedError):
            return True

    # -- writing ---------------------------------------------------------------------------------

    def replace(
        self, spot: Spot, expected: bytes | None, new: bytes | None, mode: int | None = None
    ) -> None:
        """Give the file `new` bytes (None: remove it) only if it holds `expected` (None: absent).

        Raises ConcurrentWrite when it does not, or when it changes during the write; the file
        then keeps the loop's bytes and nothing of `new` stays. Other OSErrors propagate with
        the file as it was.
        """
        if new is None:
            if expected is None:
                return
            self._remove(spot, expected)
        elif expected is None:
            self._create(spot, new, mode)
        else:
            self._swap(spot, expected, new, mode)

    def _temp(self, spot: Spot, data: bytes, mode: int | None) -> str:
        if mode is None:
            mode = self.mode(spot)
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        for _ in range(100):
            name = f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=spot.folder,
                )
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 100 collisions of 48 random bits
            raise OSError(errno.EEXIST, "no free temp name", spot.rel)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            _unlink(spot.folder, name)
            raise
        os.close(fd)
        return name

    def _swap(self, spot: Spot, expected: bytes, new: bytes, mode: int | None) -> None:
        tmp = self._temp(spot, new, mode)
        try:
            now = _read_at(spot.folder, spot.name)
            if now != expected:
                raise ConcurrentWrite(spot.rel, _what_changed(now))
            start = time.perf_counter_ns()
            try:
                renameat2(spot.folder, tmp, spot.folder, spot.name, RENAME_EXCHANGE)
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                # No atomic swap here: the check just above is the last look before the rename.
                now = _read_at(spot.folder, spot.name)
                if now != expected:
                    raise ConcurrentWrite(spot.rel, _what_changed(now)) from None
                start = time.perf_counter_ns()
                os.rename(tmp, spot.name, src_dir_fd=spot.folder, dst_dir_fd=spot.folder)
                self.windows.append(time.perf_counter_ns() - start)
                tmp = ""
                _fsync(spot.folder)
                return
        except BaseException:
            if tmp:
                _unlink(spot.folder, tmp)
            raise
        # `tmp` now names the file that was replaced: is it the one the plan read?
        replaced = _read_at(spot.folder, tmp)
        self.windows.append(time.perf_counter_ns() - start)
        if replaced == expected:
            _unlink(spot.folder, tmp)
            _fsync(spot.folder)
            return
        self._swap_back(spot, tmp, new, replaced)

    def _swap_back(self, spot: Spot, tmp: str, new: bytes, replaced: object) -> None:
        """The loop wrote between our check and the swap: give it its file back."""
        renameat2(spot.folder, tmp, spot.folder, spot.name, RENAME_EXCHANGE)
        ours = _read_at(spot.folder, tmp)
        kept = None
        if ours == new:
            _unlink(spot.folder, tmp)
        else:
            # Both names hold bytes of the loop's (it wrote twice within microseconds): keep both.
            kept = self._keep_aside(spot, tmp)
        _fsync(spot.folder)
        raise ConcurrentWrite(spot.rel, "changed while hitl was writing it", kept)

    def _remove(self, spot: Spot, expected: bytes) -> None:
        aside = f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp"
        start = time.perf_counter_ns()
        try:
            os.rename(spot.name, aside, src_dir_fd=spot.folder, dst_dir_fd=spot.folder)
        except FileNotFoundError:
            raise ConcurrentWrite(spot.rel, "was removed meanwhile") from None
        taken = _read_at(spot.folder, aside)
        self.windows.append(time.perf_counter_ns() - start)
        if taken == expected:
            _unlink(spot.folder, aside)
            _fsync(spot.folder)
            return
        kept = None
        try:
            _put_back(spot.folder, aside, spot.name)
        except FileExistsError:
            kept = self._keep_aside(spot, aside)
        _fsync(spot.folder)
        raise ConcurrentWrite(spot.rel, "changed while hitl was removing it", kept)

    def _create(self, spot: Spot, new: bytes, mode: int | None) -> None:
        tmp = self._temp(spot, new, mode)
        try:
            _put_back(spot.folder, tmp, spot.name)
        except FileExistsError:
            _unlink(spot.folder, tmp)
            raise ConcurrentWrite(spot.rel, "appeared meanwhile (the loop wrote one)") from None
        except BaseException:
            _unlink(spot.folder, tmp)
            raise
        _fsync(spot.folder)

    def _keep_aside(self, spot: Spot, tmp: str) -> str:
        """Give a temp name holding the loop's bytes a visible name beside the file."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(100):
            name = f"{spot.name}.hitl-conflict-{stamp}" + (f"-{n}" if n else "")
            try:
                _put_back(spot.folder, tmp, name)
            except FileExistsError:
                continue
            folder = os.path.dirname(spot.rel)
            return os.path.join(folder, name) if folder else name
        return tmp  # pragma: no cover


# -- helpers ---------------------------------------------------------------------------------


def _read_at(folder: int, name: str) -> bytes | NotAFile | None:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            return NOT_A_FILE
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return NOT_A_FILE
        chunks = []
        step = max(st.st_size + 1, 1 << 16)
        while True:
            chunk = os.read(fd, step)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _put_back(folder: int, src: str, dst: str) -> None:
    """Rename `src` to `dst` unless `dst` exists (FileExistsError then)."""
    try:
        renameat2(folder, src, folder, dst, RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "file exists", dst) from None
        if exc.errno not in _UNSUPPORTED:
            raise
    # link() never replaces an existing name either.
    os.link(src, dst, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    _unlink(folder, src)


def _unlink(folder: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


def _fsync(folder: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(folder)


def _what_changed(now: object) -> str:
    if now is None:
        return "was removed meanwhile"
    if now is NOT_A_FILE:
        return "is no longer a regular file"
    return "changed since it was read"


def same_folder(path: Path, identity: tuple[int, int]) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == tuple(identity) and stat.S_ISDIR(st.st_mode)


def find_moved(recorded: Path, identity: tuple[int, int], limit: int = 20_000) -> Path | None:
    """Where a repository that was renamed or moved now is: the folder with its device and
    inode among the siblings of its old place, the folders one level up, and their
    sub-folders (at most `limit` entries looked at). None when it is not there (deleted, or
    moved further away).
    """
    parent = recorded.parent
    grand = parent.parent
    seen = 0
    for folders in ([parent], [grand], _children(grand)):
        for folder in folders:
            for entry in _children(folder):
                seen += 1
                if seen > limit:
                    return None
                if same_folder(entry, identity):
                    return entry
    return None


def _children(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as it:
            return [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
