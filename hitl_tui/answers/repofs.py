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
import fcntl
import os
import secrets
import signal
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _libc(name: str, *argtypes: object) -> Any:
    """A C library function with errno kept, or None where the library has none.

    Looked up first among the symbols the process has loaded (libc's, in every CPython), then
    in the library `find_library` names: that runs `ldconfig -p`, a process, tens of
    milliseconds at every start of every command that imports this module."""
    for library in (None, "find"):
        try:
            if library == "find":
                library = ctypes.util.find_library("c")
            fn = getattr(ctypes.CDLL(library, use_errno=True), name)
        except (OSError, AttributeError):
            continue
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
        return fn
    return None


_INT, _PATH, _UINT = ctypes.c_int, ctypes.c_char_p, ctypes.c_uint
_RENAMEAT2 = _libc("renameat2", _INT, _PATH, _INT, _PATH, _UINT)


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
    #: When the path itself is a symlink (to a file inside the repository): the folder and name
    #: of the link. Writes go to the file it leads to (the link stays a link); a removal
    #: removes the link, as `rm` would.
    link: tuple[int, str] | None = None


#: (device, inode, birth time in ns or None) of a folder.
Identity = tuple[int, int, int | None]


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
    def identity(self) -> Identity:
        """The repository folder's (device, inode, birth time in ns or None): the birth time
        tells a renamed repository from a new folder that reused a deleted one's inode."""
        return folder_identity(self._fds[""])

    def deleted(self) -> bool:
        """Whether the repository folder was deleted while we held it."""
        try:
            return os.fstat(self._fds[""]).st_nlink == 0
        except OSError:
            return True

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
        fd = self._folder(folders, rel)
        link = None
        lexical = os.path.join(self.real, rel)
        if os.path.islink(lexical):
            parent = os.path.relpath(os.path.realpath(os.path.dirname(lexical)), self.real)
            parts = [] if parent == os.curdir else parent.split(os.sep)
            if parts and parts[0] == os.pardir:
                raise UnsafePathError(f"refusing to write {rel}: its folder leads outside")
            link = (self._folder(parts, rel), os.path.basename(lexical))
        found = Spot(fd, name, rel, link)
        self._spots[path] = found
        return found

    def _folder(self, parts: list[str], rel: str) -> int:
        """The folder `parts` (below the repository, no symlinks), opened once and kept."""
        key = ""
        fd = self._fds[""]
        for part in parts:
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
        return fd

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

    def clean_temps(
        self, folders: set[int], ours: Callable[[bytes], bool], min_age: float = 60.0
    ) -> list[str]:
        """Sweep temp files an interrupted write left in `folders`; returns the names kept.

        A temp whose bytes `ours` recognises (bytes an answer wrote or replaced, or the start
        of them: a crash mid-write) is deleted. Any other temp may hold the loop's bytes (a
        crash right after a swap whose comparison never ran): one older than `min_age`
        seconds gets a visible name beside the files and is named in the result; a younger
        one may be another program's write in flight (a sandboxed `hitl escalate`) and is
        left alone.
        """
        kept = []
        for folder in folders:
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if not (name.startswith(TEMP_PREFIX) and name.endswith(".tmp")):
                    continue
                try:
                    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    data = _read_at(folder, name)
                except OSError:
                    continue
                if isinstance(data, bytes) and ours(data):
                    _unlink(folder, name)
                elif time.time() - st.st_mtime >= min_age:
                    where = self._folder_rel(folder)
                    rel = os.path.join(where, "hitl-recovered") if where else "hitl-recovered"
                    kept.append(self._keep_aside(Spot(folder, "hitl-recovered", rel), name))
        return kept

    def _folder_rel(self, fd: int) -> str:
        return next((key for key, value in self._fds.items() if value == fd), "")

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
            _keep_owner(fd, spot)
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
        # `tmp` now names the file that was replaced: is it the one the plan read, and is no
        # other program still about to write to it?
        with _Settled(spot.folder, tmp) as settled:
            self.windows.append(time.perf_counter_ns() - start)
            if settled.data == expected and settled.final:
                _unlink(spot.folder, tmp)
                _fsync(spot.folder)
                return
        why = "changed while hitl was writing it"
        if settled.busy:
            why = "is open for writing by another program"
        self._swap_back(spot, tmp, new, settled.data, why)

    def _swap_back(
        self,
        spot: Spot,
        tmp: str,
        new: bytes,
        replaced: object,
        why: str = "changed while hitl was writing it",
    ) -> None:
        """The loop wrote between our check and the swap (or still may): give it its file back."""
        try:
            renameat2(spot.folder, tmp, spot.folder, spot.name, RENAME_EXCHANGE)
        except OSError as exc:
            # The loop's file is at `tmp` and cannot be swapped back: never lose it.
            aside = self._keep_aside(spot, tmp)
            raise ConcurrentWrite(
                spot.rel,
                f"changed while hitl was writing it, and could not be put back "
                f"({exc.strerror}): it holds hitl's new bytes",
                aside,
            ) from None
        ours = _read_at(spot.folder, tmp)
        kept: str | None = None
        if ours == new:
            _unlink(spot.folder, tmp)
        else:
            # Both names hold bytes of the loop's (it wrote twice within microseconds): keep both.
            kept = self._keep_aside(spot, tmp)
        _fsync(spot.folder)
        raise ConcurrentWrite(spot.rel, why, kept)

    def _remove(self, spot: Spot, expected: bytes) -> None:
        # The name itself goes: a symlinked block file loses its link (the file it led to
        # stays, as with `rm`), and what the link leads to is what is compared.
        folder, name = spot.link or (spot.folder, spot.name)
        aside = f"{TEMP_PREFIX}{secrets.token_hex(6)}.tmp"
        start = time.perf_counter_ns()
        try:
            os.rename(name, aside, src_dir_fd=folder, dst_dir_fd=folder)
        except FileNotFoundError:
            raise ConcurrentWrite(spot.rel, "was removed meanwhile") from None
        if spot.link is None:
            with _Settled(folder, aside) as settled:
                self.windows.append(time.perf_counter_ns() - start)
                if settled.data == expected and settled.final:
                    _unlink(folder, aside)
                    _fsync(folder)
                    return
        else:
            if os.path.islink(os.path.join(_fd_path(folder), aside)):
                taken = _read_at(spot.folder, spot.name)  # the file the link leads to
            else:
                taken = NOT_A_FILE  # the link was replaced by something else meanwhile
            self.windows.append(time.perf_counter_ns() - start)
            if taken == expected:
                _unlink(folder, aside)
                _fsync(folder)
                return
        kept = None
        try:
            _put_back(folder, aside, name)
        except FileExistsError:
            kept = self._keep_aside(Spot(folder, name, spot.rel), aside)
        _fsync(folder)
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

#: How long to wait for another program to close a file it has open for writing.
LEASE_WAIT = 0.2


class _Settled:
    """The bytes of a file no other program can write any more, where the system can tell.

    Used on the file hitl has just swapped out or renamed aside: it has no name anyone else
    knows, but a program that opened it before may still write to it. A read lease (Linux
    `F_SETLEASE`) is granted only while nobody has the file open for writing, so: wait (up to
    LEASE_WAIT) until it is granted, then read. While the lease is held, an open for writing
    blocks, and shows as a lease being broken; `final` is then False. Where leases are not
    available (another file system, a file we do not own), the read is all there is (`final`
    True, as before leases).
    """

    def __init__(self, folder: int, name: str) -> None:
        self.folder, self.name = folder, name
        self.fd = -1
        self.leased = False
        self.busy = False
        self.data: bytes | NotAFile | None = None

    def __enter__(self) -> _Settled:
        try:
            self.fd = os.open(self.name, _READ_FLAGS, dir_fd=self.folder)
        except FileNotFoundError:
            return self
        except OSError:
            self.data = NOT_A_FILE
            return self
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode):
            self.data = NOT_A_FILE
            return self
        self.leased, self.busy = _read_lease(self.fd)
        self.data = _read_fd(self.fd, st.st_size)
        return self

    @property
    def final(self) -> bool:
        if self.busy:
            return False
        if not self.leased:
            return True
        try:
            return fcntl.fcntl(self.fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK
        except OSError:
            return False

    def __exit__(self, *exc: object) -> None:
        if self.fd < 0:
            return
        if self.leased:
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        os.close(self.fd)
        self.fd = -1


def _read_lease(fd: int) -> tuple[bool, bool]:
    """(leased, busy): take a read lease on `fd`, waiting while someone has it open for writing.

    A broken lease signals its holder: SIGURG, whose default is to be ignored (SIGIO's would
    end the process).
    """
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
    except (OSError, AttributeError):
        return False, False
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        try:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
            return True, False
        except BlockingIOError:  # EAGAIN: open for writing by someone
            if time.monotonic() >= deadline:
                return False, True
            time.sleep(0.0005)
        except OSError:  # no leases here (EINVAL, EACCES: not our file, ENOLCK)
            return False, False


def _read_fd(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    step = max(size + 1, 1 << 16)
    while True:
        chunk = os.pread(fd, step, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _keep_owner(fd: int, spot: Spot) -> None:
    """Run as root, give the new file the old one's owner (a root hitl must not leave a
    user's PROMPT.md owned by root). Anyone else cannot, and creates files as themselves."""
    if os.geteuid() != 0:
        return
    try:
        st = os.stat(spot.name, dir_fd=spot.folder, follow_symlinks=False)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fchown(fd, st.st_uid, st.st_gid)


class _StatxTimestamp(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32), ("_r", ctypes.c_int32))


class _Statx(ctypes.Structure):
    _fields_ = (
        ("stx_mask", ctypes.c_uint32),
        ("stx_blksize", ctypes.c_uint32),
        ("stx_attributes", ctypes.c_uint64),
        ("stx_nlink", ctypes.c_uint32),
        ("stx_uid", ctypes.c_uint32),
        ("stx_gid", ctypes.c_uint32),
        ("stx_mode", ctypes.c_uint16),
        ("_spare0", ctypes.c_uint16),
        ("stx_ino", ctypes.c_uint64),
        ("stx_size", ctypes.c_uint64),
        ("stx_blocks", ctypes.c_uint64),
        ("stx_attributes_mask", ctypes.c_uint64),
        ("stx_atime", _StatxTimestamp),
        ("stx_btime", _StatxTimestamp),
        ("stx_ctime", _StatxTimestamp),
        ("stx_mtime", _StatxTimestamp),
        ("_rest", ctypes.c_uint8 * 144),
    )


_STATX_BTIME = 0x800
_AT_EMPTY_PATH = 0x1000


_STATX = _libc("statx", _INT, _PATH, _INT, _UINT, ctypes.POINTER(_Statx))


def birth_time(fd: int) -> int | None:
    """A file's birth time in ns (Linux statx), or None where the system cannot tell."""
    if _STATX is None:
        return None
    buf = _Statx()
    if _STATX(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, ctypes.byref(buf)) != 0:
        return None
    if not buf.stx_mask & _STATX_BTIME:
        return None
    ns: int = buf.stx_btime.tv_sec * 1_000_000_000 + buf.stx_btime.tv_nsec
    return ns


def folder_identity(fd: int) -> Identity:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino, birth_time(fd)


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
        chunks: list[bytes] = []
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


def same_folder(path: Path, identity: tuple[Any, ...]) -> bool:
    """Whether `path` is the folder `identity` (from `folder_identity`) was taken of. Two
    entries (device, inode) are matched as they are; a third, the birth time, when both sides
    know it (ext4 gives a new folder the inode of one just deleted)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        dev, ino, born = folder_identity(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    if (dev, ino) != tuple(identity[:2]):
        return False
    recorded = identity[2] if len(identity) > 2 else None
    return recorded is None or born is None or recorded == born


def find_moved(recorded: Path, identity: tuple[Any, ...], limit: int = 20_000) -> Path | None:
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
