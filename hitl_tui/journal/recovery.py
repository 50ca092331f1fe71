"""Crash recovery: every answer (or undo) a crash interrupted is finished or rolled back, at
the start of every hitl command and of the app, and by apply and undo under a repository's lock.

Recovery rule. The steps of a plan are applied in order and the last one (for loopkit, removing
BLOCKED.md: the loop's unblock signal) is the commit point. An interrupted entry whose last step
reached its new bytes is rolled forward (any earlier step still old is written); otherwise it is
rolled back (every step that reached its new bytes gets its old bytes back, last first). Each
write is an atomic rename, so each file is entirely old or entirely new, and the rule makes the
set consistent. Recovery runs under the repository's lock, so it never touches an answer that a
live process is still writing; it is idempotent, so a crash during recovery is recovered again.

The entries still in progress come from the journal's open index alone (`journalstore`), so
start-up never reads the history. `locate` (where an entry's repository is now) serves undo too.
"""

from __future__ import annotations

import os
from pathlib import Path

from hitl_tui.answers import repofs
from hitl_tui.answers.locks import LockBusy, repo_lock
from hitl_tui.answers.repofs import ConcurrentWrite, RepoDir
from hitl_tui.journal.entries import Entry, blob_path, commit, end_rollback, entries, open_entries
from hitl_tui.journal.files import put, rel, roll_back_files, state_of, sweep
from hitl_tui.model import HitlError


def _same_repo(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def locate(entry: Entry) -> Path | None:
    """Where the entry's repository is now: its recorded path, or where it was moved to (found
    by the folder's device and inode); None when it cannot be found."""
    if entry.repo_id is None:  # journaled before hitl recorded the folder's identity
        return entry.repo if os.path.isdir(entry.repo) else None
    if repofs.same_folder(entry.repo, entry.repo_id):
        return entry.repo
    return repofs.find_moved(entry.repo, entry.repo_id)


def recover(repo: Path | None = None, *, locked: bool = False) -> list[str]:
    """Finish or roll back every interrupted answer; one message per answer recovered.

    Called at the start of every hitl command and of the app (`repo` None), and by apply under
    a repository's lock (`repo` given, `locked` True). An answer whose repository lock is held
    by a live process is still being written and is left alone.
    """
    pending = open_entries()  # from journal/open/ alone: start-up never reads the history
    messages = []
    for entry in pending:
        if not entry.files:  # no files (GitHub): nothing to lock or restore
            if repo is None or str(entry.repo) == str(repo):
                messages.append(_recover_one(entry.id, None))
            continue
        where = locate(entry)
        if repo is not None and not _same_repo(where or entry.repo, repo):
            continue
        if locked:
            messages.append(_recover_one(entry.id, where))
            continue
        try:
            # The lock is the folder's (device and inode): the same one a live process holds
            # on a repository that was renamed under it.
            with repo_lock(where or entry.repo, timeout=0, identity=entry.repo_id):
                messages.append(_recover_one(entry.id, where))
        except LockBusy:
            continue  # a live process is writing it right now
        except HitlError as exc:
            messages.append(f"could not recover {entry.id}: {exc}")
    return [m for m in messages if m]


def _recover_one(entry_id: str, where: Path | None) -> str:
    """What was done, in one line; empty when another process recovered it meanwhile."""
    entry = entries().get(entry_id)
    if entry is None or entry.status != "in progress":
        return ""
    what = "an interrupted undo of" if entry.kind == "undo" else "an interrupted answer to"
    name = f"{what} {entry.block_id} ({entry.id})"
    if not entry.files:
        # Nothing written to files (a GitHub answer, journaled after it was sent): close it.
        commit(entry.id, by="recovery")
        return f"recorded {name}: {entry.summary}"
    if where is None:
        end_rollback(entry.id, "recovery", "the repository is gone")
        return f"{name}: {_gone(entry)}"
    try:
        with RepoDir(entry.repo, located=where) as rd:
            message = _recover_in(entry, name, rd)
    except (OSError, HitlError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"could not recover {name}: {reason}; hitl will try again at the next start"
    if where != entry.repo:
        message += f" (the repository had moved to {where})"
    return message


def _gone(entry: Entry) -> str:
    """Exactly what is left where, for an answer whose repository cannot be found."""
    kept = ", ".join(
        f"{rel(entry.repo, step.path)} (old bytes: {blob_path(step.old_sha256)})"
        if step.old_sha256
        else f"{rel(entry.repo, step.path)} (did not exist before)"
        for step in entry.files
    )
    return (
        f"the repository {entry.repo} is gone (deleted, or moved where hitl cannot find it); "
        f"if it still exists, these files may hold the answer half-written: {kept}"
    )


def _recover_in(entry: Entry, name: str, rd: RepoDir) -> str:
    steps = entry.files
    pairs = [(step, state_of(rd, step)) for step in steps]
    deciding = [state for step, state in pairs if step.old_sha256 != step.new_sha256]
    # Forward when the last step was done. A last file that holds neither side (the loop wrote
    # a new BLOCKED.md after hitl removed the old one) counts as done unless an earlier step
    # is still old: then the crash came first, and the loop's file is simply left as it is.
    forward = (
        not deciding or deciding[-1] == "new" or (deciding[-1] == "other" and "old" not in deciding)
    )
    moved = [rel(entry.repo, step.path) for step, state in pairs if state == "other"]
    if forward:
        for step, state in pairs:
            if state != "old":
                continue
            try:
                put(rd, step, "new")
            except ConcurrentWrite:
                moved.append(rel(entry.repo, step.path))
        kept = sweep(entry, rd)
        commit(entry.id, by="recovery")
    else:
        _restored, changed = roll_back_files(entry, rd)
        kept = sweep(entry, rd)
        moved.extend(name for name in changed if name not in moved)
        end_rollback(entry.id, "recovery", "interrupted before its last step")
    tail = f" ({', '.join(moved)} changed since and was left as it is)" if moved else ""
    if kept:
        tail += f" (bytes of unknown origin left by the crash kept as {', '.join(kept)})"
    if forward:
        return f"finished {name}: {entry.summary}{tail}"
    if entry.kind == "undo":
        return f"rolled back {name}: the answer stays in place{tail}"
    return f"rolled back {name}: nothing of it was kept, the block is still open{tail}"
