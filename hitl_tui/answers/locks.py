"""Per-repository locks in the operator's state folder (never in the repository).

An `flock` on one file per repository folder: two hitl processes answering, undoing or
recovering in the same repository serialise, and the kernel drops the lock when a process dies,
so a crash never leaves a repository locked. Keyed by the folder itself (device and inode), so a
repository reached through a symlink, or renamed while it is being answered, is still one lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hitl_tui.model import HitlError
from hitl_tui.paths import state_dir

LOCK_TIMEOUT = 10.0


class LockBusy(HitlError):
    """Another live hitl process holds the repository's lock."""

    exit_code = 1


def lock_key(repo: Path, identity: tuple[Any, ...] | None = None) -> str:
    """One key per repository folder, however it is named: its device and inode (a repo
    renamed while one process answers, or reached through a symlink, is still one lock).
    `identity` (the journal's record of the folder) stands in for a folder that cannot be
    found any more; the real path is the last resort."""
    try:
        st = os.stat(repo)
        ident = f"{st.st_dev}:{st.st_ino}".encode()
    except OSError:
        if identity is not None:
            ident = f"{identity[0]}:{identity[1]}".encode()
        else:
            ident = os.fsencode(os.path.realpath(repo))
    return hashlib.sha256(ident).hexdigest()[:24]


@contextlib.contextmanager
def repo_lock(
    repo: Path, timeout: float = LOCK_TIMEOUT, identity: tuple[Any, ...] | None = None
) -> Iterator[None]:
    """Hold an exclusive lock for `repo` for the duration of the block (timeout 0: try once)."""
    folder = state_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    key = lock_key(repo, identity)
    fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"another hitl process is answering in {repo.name}; try again"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)
