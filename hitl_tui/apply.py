"""Applying a Plan: lock the repo, check that nothing moved since the preview, journal, write.

The lock is an `flock` on a file in the operator's state folder (never in the repo), so two hitl
processes answering the same block serialise and the second one finds the block gone; the
kernel drops the lock when a process dies, so a crash never leaves the repo locked.

Every answer is journaled (`journal.begin`) before its first write and marked done after its
last, so a crash in between is finished or rolled back by `journal.recover` on the next start.
A write that fails half-way (disk full, permission denied) or a block that changes under us
rolls back what was already written: an answer is applied entirely or not at all.
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
#: Steps: "checked" (before the journal entry), then "<action>:<file>" after each file.
StepHook = Callable[[str], None]

LOCK_TIMEOUT = 10.0


class LockBusy(HitlError):
    """Another live hitl process holds the repository's lock."""

    exit_code = 1


@contextlib.contextmanager
def repo_lock(repo: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive lock for `repo` for the duration of the block (timeout 0: try once)."""
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
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"another hitl process is answering in {repo.name}; try again"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def check_expectations(plan: Plan, only: Path | None = None) -> None:
    """Raise StaleError unless every file (or just `only`) still has the bytes the plan read.

    The block file is checked first, so a block answered by someone else says so.
    """
    paths = sorted(plan.expect, key=lambda p: p != plan.block.path)
    for path in paths:
        expected = plan.expect[path]
        if only is not None and path != only:
            continue
        try:
            now = fsio.current_fingerprint(path)
        except OSError:
            now = "unreadable"
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
    UnsafePathError or HitlError (with the OS reason) otherwise; in every such case the repo
    is left with the bytes it had before (or, if even that fails, the next start restores it).
    """
    from hitl_tui import journal

    repo = plan.block.repo
    targets = [(change, fsio.resolve_for_write(repo, change.path)) for change in plan.changes]
    done: list[str] = []
    with repo_lock(repo):
        # A crashed answer in this repo is finished or rolled back before anything else.
        done.extend(journal.recover(repo, locked=True))
        check_expectations(plan)
        for change, target in targets:
            _check_writable(plan, change, target)
        _step(hook, "checked")
        try:
            entry = journal.begin(plan)
        except OSError as exc:
            raise HitlError(
                f"cannot write the journal in {journal.journal_dir()}: {_reason(exc)} "
                "(nothing was written)"
            ) from None
        current: FileChange | None = None
        try:
            for change, target in targets:
                current = change
                if change.new is None:
                    # The block is removed last, and only if it is still the one that was read
                    # (the files written just before it no longer have their old bytes).
                    check_expectations(plan, only=change.path)
                _write(change, target)
                done.append(f"{change.action}d {_rel(plan, change.path)}")
                _step(hook, f"{change.action}:{_rel(plan, change.path)}")
        except Exception as exc:
            raise _failed(plan, entry, current, exc) from None
        try:
            journal.commit(entry)
        except OSError as exc:
            # Every file is written; the next start finds the last step done and finishes it.
            done.append(f"(the journal could not record the end: {_reason(exc)})")
    return done


def _failed(plan: Plan, entry: str, change: FileChange | None, exc: Exception) -> HitlError:
    """Roll back a half-applied answer; the error to raise says what happened."""
    from hitl_tui import journal

    if isinstance(exc, StaleError):
        problem = str(exc)
    elif isinstance(exc, OSError) and change is not None:
        problem = f"could not write {_rel(plan, change.path)}: {_reason(exc)}"
    else:
        problem = f"{plan.block.id}: {type(exc).__name__}: {exc}"
    try:
        restored = journal.roll_back(entry, problem)
    except (OSError, HitlError) as again:
        return HitlError(
            f"{problem}; rolling back failed too ({_reason(again)}): hitl will finish the "
            "rollback at its next start"
        )
    tail = f" ({', '.join(restored)} restored)" if restored else ""
    message = f"{problem}; nothing was changed{tail}"
    if isinstance(exc, StaleError):
        return StaleError(message)
    return HitlError(message)


def _check_writable(plan: Plan, change: FileChange, target: Path) -> None:
    """Refuse up front a file or folder we may not write (a read-only PROMPT.md, say)."""
    folder_ok = os.access(target.parent, os.W_OK | os.X_OK)
    file_ok = change.old is None or not os.path.lexists(target) or os.access(target, os.W_OK)
    if not (folder_ok and file_ok):
        raise HitlError(
            f"cannot write {_rel(plan, change.path)}: permission denied (nothing was written)"
        )


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


def _reason(exc: BaseException) -> str:
    if not isinstance(exc, OSError):
        return str(exc)
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    return exc.strerror or str(exc)
