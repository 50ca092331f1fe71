"""Applying a Plan: lock the repo, check that nothing moved since the preview, write atomically.

The lock is an `flock` on a file in the operator's state folder (never in the repo), so two hitl
processes answering the same block serialise and the second one finds the block gone; the
kernel drops the lock when a process dies, so a crash never leaves the repo locked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hitl_tui import fsio
from hitl_tui.model import FileChange, HitlError, Plan, StaleError
from hitl_tui.paths import state_dir

#: Called between the steps of an answer with the step's name; tests inject faults here.
StepHook = Callable[[str], None]

LOCK_TIMEOUT = 10.0


@contextlib.contextmanager
def repo_lock(repo: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive lock for `repo` for the duration of the block."""
    folder = state_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(os.fsencode(os.path.realpath(repo))).hexdigest()[:24]
    fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise HitlError(
                        f"another hitl process is answering in {repo.name}; try again"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def check_expectations(plan: Plan, only: Path | None = None) -> None:
    """Raise StaleError unless every file (or just `only`) still has the bytes the plan read."""
    for path, expected in plan.expect.items():
        if only is not None and path != only:
            continue
        now = fsio.current_fingerprint(path)
        if now == expected:
            continue
        name = _rel(plan, path)
        if path == plan.block.path:
            if now is None:
                raise StaleError(f"{plan.block.id}: the block is gone ({name} was removed)")
            raise StaleError(f"{plan.block.id}: the block changed since you read it ({name})")
        raise StaleError(f"{plan.block.id}: {name} changed since the preview; review it again")


def apply_plan(plan: Plan, hook: StepHook | None = None) -> list[str]:
    """Write every change of `plan` in order; returns one line per file saying what was done.

    Nothing is written unless every expected fingerprint still matches. Raises StaleError,
    UnsafePathError or HitlError (with the OS reason) otherwise.
    """
    repo = plan.block.repo
    targets = [(change, fsio.resolve_for_write(repo, change.path)) for change in plan.changes]
    done: list[str] = []
    with repo_lock(repo):
        check_expectations(plan)
        _step(hook, "checked")
        for change, target in targets:
            if change.new is None:
                # The block is removed last, and only if it is still the one that was read
                # (the files written just before it no longer have their old bytes).
                check_expectations(plan, only=change.path)
            try:
                _write(change, target)
            except OSError as exc:
                raise HitlError(_os_message(plan, change, exc, done)) from None
            done.append(f"{change.action}d {_rel(plan, change.path)}")
            _step(hook, f"{change.action}:{_rel(plan, change.path)}")
    return done


def _write(change: FileChange, target: Path) -> None:
    if change.new is None:
        fsio.remove_file(change.path)
    else:
        fsio.atomic_write(target, change.new)


def _step(hook: StepHook | None, name: str) -> None:
    if hook is not None:
        hook(name)


def _rel(plan: Plan, path: Path) -> str:
    try:
        return str(path.relative_to(plan.block.repo))
    except ValueError:
        return str(path)


def _os_message(plan: Plan, change: FileChange, exc: OSError, done: list[str]) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "the disk is full"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        reason = "permission denied"
    elif exc.errno == errno.EROFS:
        reason = "the file system is read-only"
    already = f" (already {', '.join(done)})" if done else " (nothing was written)"
    return f"could not write {_rel(plan, change.path)}: {reason}{already}"
