"""An entry's files in its repository: what state each is in (its old bytes, its new bytes,
or neither), giving it one side's bytes, putting back what a failed answer wrote, and the temp
files a crash left. Shared by apply (`roll_back`), `recovery` and `undo`; every write goes
through `repofs`, which refuses to replace bytes it did not expect.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

from hitl_tui.answers.repofs import ConcurrentWrite, RepoDir
from hitl_tui.journal.entries import Entry, FileStep, end_rollback, entries, load_blob
from hitl_tui.model import HitlError


def sha_now(rd: RepoDir, step: FileStep) -> str | None:
    """sha256 hex of the file now, None when absent, "?" when it is something else."""
    try:
        data = rd.read(rd.spot(step.path))
    except (OSError, HitlError):
        return "?"
    if data is None:
        return None
    if not isinstance(data, bytes):
        return "?"
    return hashlib.sha256(data).hexdigest()


def state_of(rd: RepoDir, step: FileStep) -> str:
    """ "old", "new", "both" (the step changes nothing) or "other" (it moved on)."""
    now = sha_now(rd, step)
    is_old = now == step.old_sha256
    is_new = now == step.new_sha256
    if is_old and is_new:
        return "both"
    if is_new:
        return "new"
    if is_old:
        return "old"
    return "other"


def put(rd: RepoDir, step: FileStep, side: str) -> None:
    """Give the file of `step` its `side` ("old" or "new") bytes, if it still has the other.

    Like every write to a repository, the replace checks what it replaces (repofs): a file
    the loop changed meanwhile is left with the loop's bytes (ConcurrentWrite).
    """
    sha, mode = (
        (step.old_sha256, step.old_mode) if side == "old" else (step.new_sha256, step.new_mode)
    )
    other = step.new_sha256 if side == "old" else step.old_sha256
    data = None if sha is None else load_blob(sha)
    expected = None if other is None else load_blob(other)
    rd.replace(rd.spot(step.path), expected, data, mode)


def rel(repo: Path, path: Path) -> str:
    try:
        return str(path.relative_to(repo))
    except ValueError:
        return str(path)


def _temp_folders(rd: RepoDir, steps: tuple[FileStep, ...]) -> set[int]:
    folders = set()
    for step in steps:
        with contextlib.suppress(HitlError, OSError):
            folders.add(rd.spot(step.path).folder)
    return folders


def roll_back(entry_id: str, reason: str, rd: RepoDir, written: int) -> tuple[list[Any], list[Any]]:
    """Restore the `written` first files of a failed, still-locked entry.

    Returns (restored, moved), as `roll_back_files`. Raises OSError or HitlError when a file
    cannot be restored: the entry then stays open and the next start recovers it.
    """
    entry = entries()[entry_id]
    restored, moved = roll_back_files(entry, rd, written)
    moved += [f"{name} (left by an interrupted write)" for name in sweep(entry, rd)]
    end_rollback(entry_id, "apply", reason)
    return restored, moved


def roll_back_files(
    entry: Entry, rd: RepoDir, written: int | None = None
) -> tuple[list[str], list[str]]:
    """Give every file that has its new bytes its old ones back, last first.

    `written`: how many of the entry's steps were carried out (None: not known, after a
    crash). Returns (restored, moved): a file hitl wrote that the loop changed since is not
    restored (that would drop the loop's bytes, and its old bytes would drop hitl's change
    too): it keeps both, and is named in `moved`. So is, when `written` is not known, any file
    that holds neither its old nor its new bytes.
    """
    restored, moved = [], []
    steps = list(enumerate(entry.files))
    for index, step in reversed(steps):
        ours = written is None or index < written
        state = state_of(rd, step)
        if state == "other" and ours:
            moved.append(rel(entry.repo, step.path))
            continue
        if state != "new" or not ours:
            continue
        try:
            put(rd, step, "old")
        except ConcurrentWrite:
            moved.append(rel(entry.repo, step.path))
            continue
        restored.append(rel(entry.repo, step.path))
    return restored, moved


def sweep(entry: Entry, rd: RepoDir) -> list[str]:
    """Temp files a crash left: deleted when they hold bytes of this entry (or the start of
    them, a write cut short), else kept."""
    shas = {sha for step in entry.files for sha in (step.old_sha256, step.new_sha256) if sha}
    blobs: list[bytes] = []

    def ours(data: bytes) -> bool:
        if not blobs:
            for sha in shas:
                with contextlib.suppress(HitlError):
                    blobs.append(load_blob(sha))
        return not data or any(blob.startswith(data) for blob in blobs)

    # Under the repository's lock, after a crash: a temp of unknown bytes is kept at once.
    return rd.clean_temps(_temp_folders(rd, entry.files), ours, min_age=0)
