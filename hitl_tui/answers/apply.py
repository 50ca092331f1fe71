"""Applying a Plan: lock the repo, check that nothing moved since the preview, journal, write.

The lock (`locks.repo_lock`) serialises two hitl processes answering the same block, so the
second one finds the block gone.

Every answer is journaled (`journal.begin`) before its first write and marked done after its
last, so a crash in between is finished or rolled back by `journal.recover` on the next start.
A write that fails half-way (disk full, permission denied) or a block that changes under us
rolls back what was already written: an answer is applied entirely or not at all. Every file is
written through `repofs`, which replaces it only if it still holds the bytes the plan read, at
the moment of the write: a loop still writing keeps its bytes.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import cast

from hitl_tui import journal
from hitl_tui.answers.locks import repo_lock
from hitl_tui.answers.repofs import ConcurrentWrite, NotAFile, RepoDir
from hitl_tui.model import Done, FileChange, HitlError, Plan, StaleError, fingerprint

#: Called between the steps of an answer with the step's name; tests inject faults here.
#: Steps: "checked" (before the journal entry), then "<action>:<file>" after each file.
StepHook = Callable[[str], None]


class OtherFileChanged(StaleError):
    """A file the answer edits (not the block file) changed meanwhile, and every file is as it
    was before (plus the loop's bytes): planning again on the new bytes is safe."""

    def __init__(self, message: str, rel: str) -> None:
        super().__init__(message)
        self.rel = rel


def _repo(plan: Plan) -> Path:
    """The plan's repository folder: only a local block's plan is applied here (a remote
    backend sends its answers itself), so `Block.repo` is a Path (not checked: typing only)."""
    return cast(Path, plan.block.repo)


def check_expectations(plan: Plan, rd: RepoDir | None = None) -> None:
    """Raise StaleError unless every file still has the bytes the plan read.

    The block file is checked first, so a block answered by someone else says so.
    """
    own = rd is None
    if rd is None:
        rd = RepoDir(_repo(plan))
    try:
        paths = sorted(plan.expect, key=lambda p: p != plan.block.path)
        for path in paths:
            expected = plan.expect[path]
            try:
                data = rd.read(rd.spot(path))
            except OSError as exc:
                raise HitlError(
                    f"cannot read {rd.rel(path)}: {_reason(exc)} (nothing was written)"
                ) from None
            now = data if data is None or isinstance(data, NotAFile) else fingerprint(data)
            if now == expected:
                continue
            name = rd.rel(path)
            if path == plan.block.path:
                if now is None:
                    raise StaleError(f"{plan.block.id}: the block is gone ({name} was removed)")
                raise StaleError(f"{plan.block.id}: the block changed since you read it ({name})")
            raise OtherFileChanged(
                f"{plan.block.id}: {name} changed since the preview; review it again", name
            )
    finally:
        if own:
            rd.close()


def apply_plan(plan: Plan, hook: StepHook | None = None) -> Done:
    """Write every change of `plan` in order; returns one line per file saying what was done.

    Nothing is written unless every expected fingerprint still matches, and each file is
    replaced only if it still holds the bytes the plan read (see `repofs`). Raises StaleError,
    UnsafePathError or HitlError (with the OS reason) otherwise; in every such case the repo
    is left with the bytes it had before, plus whatever the loop wrote meanwhile (or, if even
    that fails, the next start restores it).
    """
    repo = _repo(plan)
    done: list[str] = []
    entry: str | None = None
    with repo_lock(repo):
        # A crashed answer in this repo is finished or rolled back before anything else.
        done.extend(journal.recover(repo, locked=True))
        with RepoDir(repo) as rd:
            spots = [rd.spot(change.path) for change in plan.changes]
            check_expectations(plan, rd)
            for spot in spots:
                if not rd.writable(spot):
                    raise HitlError(
                        f"cannot write {spot.rel}: permission denied (nothing was written)"
                    )
            _step(hook, "checked")
            try:
                entry = journal.begin(plan, identity=rd.identity)
            except OSError as exc:
                raise HitlError(
                    f"cannot write the journal in {journal.journal_dir()}: {_reason(exc)} "
                    "(nothing was written)"
                ) from None
            current: FileChange | None = None
            written = 0
            try:
                for change, spot in zip(plan.changes, spots, strict=True):
                    current = change
                    # Each file is replaced only if it still holds the bytes the plan read; the
                    # block is removed last, and only if it is still the one that was read.
                    rd.replace(spot, change.old, change.new)
                    written += 1
                    done.append(f"{change.action}d {spot.rel}")
                    _step(hook, f"{change.action}:{spot.rel}")
            except Exception as exc:
                raise _failed(plan, entry, current, exc, rd, written) from None
            try:
                journal.commit(entry)
            except OSError as exc:
                # Every file is written; the next start finds the last step done and finishes it.
                done.append(f"(the journal could not record the end: {_reason(exc)})")
    return Done(tuple(done), entry)


def _failed(
    plan: Plan,
    entry: str,
    change: FileChange | None,
    exc: Exception,
    rd: RepoDir,
    written: int,
) -> HitlError:
    """Roll back a half-applied answer (its `written` first files); the error says what
    happened, truthfully: "nothing was changed" only when every file is as it was."""
    if isinstance(exc, ConcurrentWrite):
        if change is not None and change.path == plan.block.path:
            problem = f"{plan.block.id}: the block changed while it was being answered ({exc})"
        else:
            problem = f"{plan.block.id}: {exc} (is the loop still running?)"
    elif isinstance(exc, StaleError):
        problem = str(exc)
    elif isinstance(exc, OSError) and change is not None:
        problem = f"could not write {rd.rel(change.path)}: {_reason(exc)}"
    else:
        problem = f"{plan.block.id}: {type(exc).__name__}: {exc}"
    if rd.deleted():
        journal.abandon(entry, "the repository was deleted while it was being answered")
        return StaleError(
            f"{problem}: the repository {plan.block.repo} was deleted while it was being "
            "answered; there is nothing left to roll back"
        )
    try:
        restored, moved = journal.roll_back(entry, problem, rd, written)
    except (OSError, HitlError) as again:
        return HitlError(
            f"{problem}; rolling back failed too ({_reason(again)}): hitl will finish the "
            "rollback at its next start"
        )
    if moved:
        # The loop changed a file after hitl wrote it: restoring it would drop the loop's bytes.
        return HitlError(
            f"{problem}; rolled back, except {', '.join(moved)}: changed by the loop after "
            "hitl wrote it, so it holds both the answer and the loop's change (review it)"
        )
    tail = f" ({', '.join(restored)} restored)" if restored else ""
    message = f"{problem}; nothing was changed{tail}"
    beside = change is not None and change.path != plan.block.path
    if isinstance(exc, ConcurrentWrite) and beside:
        return OtherFileChanged(message, exc.rel)
    if isinstance(exc, StaleError):
        return StaleError(message)
    return HitlError(message)


def _step(hook: StepHook | None, name: str) -> None:
    if hook is not None:
        hook(name)


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
