"""Undo: revert a journaled answer byte for byte, the block file included, as an entry of its
own (kind "undo") that crash recovery finishes or rolls back like an answer. Which answer
`hitl undo [ID]` means, whether it can still be undone, and what to say when it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hitl_tui.journal_entries import (
    Entries,
    Entry,
    FileStep,
    begin_undo,
    commit,
    end_rollback,
)
from hitl_tui.journal_entries import entries as journal_entries
from hitl_tui.journal_files import put, rel, roll_back_files, sha_now, state_of, sweep
from hitl_tui.locks import LOCK_TIMEOUT, repo_lock
from hitl_tui.model import HitlError, StaleError, UsageError
from hitl_tui.recovery import locate, recover
from hitl_tui.repofs import ConcurrentWrite, RepoDir

#: Called after each step of an undo: "journaled", "<action>:<file>", "committed".
StepHook = Callable[[str], None]
#: An ambiguous `hitl undo ID` names at most this many of the answers it matches.
SHOW_MATCHES = 10


def _pick(entries: Entries, entry_id: str | None) -> Entry:
    """The last answer not undone yet, or the one `entry_id` names: its journal id, any unique
    part of it as `hitl history` prints it (the timestamp, the random tail `3f9a1c`), or a
    block's id or a suffix of it in whole components (`svc-one`: that block's last answer not
    undone). Without an id it stops at the first answer it finds; with one, an exact journal
    id stops where it is found and anything else reads to the end, to be sure it is unique."""
    if entry_id is None:
        for e in entries.newest_first():
            if e.kind == "answer" and e.status == "done" and not e.undone and e.undoable:
                return e
        raise UsageError("nothing to undo: no answer in the journal (see 'hitl history')")
    from hitl_tui.textio import printable

    wanted = entry_id.strip()
    tail = "/" + wanted.strip("/")
    found: dict[str, Entry] = {}
    blocks: set[str] = set()
    for e in entries.newest_first() if wanted else ():
        if e.id == wanted:
            return e
        if e.kind != "answer":
            continue
        if wanted in e.id:
            found.setdefault(e.id, e)
        shown = printable(e.block_id)
        if e.block_id and any(
            i == wanted.strip("/") or i.endswith(tail) for i in (e.block_id, shown)
        ):
            # A block's id: its newest answer that can still be undone.
            if e.block_id not in blocks and e.status == "done" and not e.undone and e.undoable:
                found.setdefault(e.id, e)
            blocks.add(e.block_id)
    if not wanted or not found:
        if blocks:
            raise UsageError(f"no answer of {entry_id!r} is left to undo (see 'hitl history')")
        raise UsageError(f"no answer {entry_id!r} in the journal (see 'hitl history')")
    if len(found) > 1:
        named = [f"{e.id} ({printable(e.block_id)})" for e in found.values()]
        more = len(named) - SHOW_MATCHES
        shown = ", ".join(named[:SHOW_MATCHES]) + (f" and {more} more" if more > 0 else "")
        raise UsageError(f"{entry_id!r} matches {len(found)} answers: {shown}; give more of the id")
    return next(iter(found.values()))


class Undid(str):
    """`undo`'s one-line message, and the id of the entry it undid (`entry`)."""

    entry: str

    def __new__(cls, message: str, entry: str) -> Undid:
        text = super().__new__(cls, message)
        text.entry = entry
        return text


def undo(
    entry_id: str | None = None,
    operator: str | None = None,
    hook: StepHook | None = None,
    sources: Sequence = (),
) -> Undid:
    """Revert the last answer (or `entry_id`) byte for byte, the block file included.

    Refuses with StaleError (exit 3) when any file it wrote changed since, naming the file;
    UsageError when there is nothing to undo. Returns a one-line message.

    An answer sent to a remote backend that can undo it (another machine's hitl) is undone
    there by that backend, one of `sources` (`Source.undo_sent`), and journaled here as undone.
    """
    entry = _pick(journal_entries(), entry_id)
    _check_undoable(entry)
    if operator is None:  # every command passes the config's operator (`Config.operator_name`)
        operator = "operator"
    if entry.remote:
        return _undo_sent(entry, operator, sources)
    where = locate(entry)
    if where is None:
        raise StaleError(f"cannot undo {entry.id}: the repository {entry.repo} is gone")
    with repo_lock(where, timeout=LOCK_TIMEOUT), RepoDir(entry.repo, located=where) as rd:
        recovered = recover(where, locked=True)
        entry = journal_entries()[entry.id]
        _check_undoable(entry)
        for step in entry.files:
            rd.spot(step.path)  # refuses a path that now leads out of the repository
            state = state_of(rd, step)
            if state not in ("new", "both"):
                raise StaleError(_moved_on(entry, step, rd))
        steps = [
            FileStep(
                s.path,
                {"remove": "create", "create": "remove"}.get(s.action, s.action),
                s.new_sha256,
                s.old_sha256,
                s.new_mode,
                s.old_mode,
            )
            for s in reversed(entry.files)
        ]
        try:
            undo_id = begin_undo(entry, steps, operator, rd.identity)
        except OSError as exc:
            raise HitlError(f"cannot write the journal: {exc.strerror}; nothing undone") from None
        # Before the block file is back (an app watching it reads this when it reappears).
        _remember_since(entry)
        _hush(entry)
        if hook:
            hook("journaled")
        restored = []
        try:
            for step in steps:
                # Each file gets its old bytes only if it still holds what the answer wrote: a
                # BLOCKED.md the loop wrote meanwhile (its next question) is never replaced.
                put(rd, step, "new")
                restored.append(rel(entry.repo, step.path))
                if hook:
                    hook(f"{step.action}:{rel(entry.repo, step.path)}")
        except (OSError, HitlError) as exc:
            if isinstance(exc, ConcurrentWrite):
                reason = f"{exc} (the loop moved on)"
            else:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            undo_entry = journal_entries()[undo_id]
            try:
                _restored, moved = roll_back_files(undo_entry, rd, len(restored))
                moved += sweep(undo_entry, rd)
                end_rollback(undo_id, "apply", reason)
            except (OSError, HitlError):
                raise HitlError(
                    f"could not undo {entry.id}: {reason}; hitl will finish or roll it back "
                    "at the next start"
                ) from None
            if moved:
                raise HitlError(
                    f"cannot undo {entry.id}: {reason}; rolled back, except "
                    f"{', '.join(moved)}: changed by the loop since, so it keeps both the "
                    "undo and the loop's change (review it)"
                ) from None
            message = f"cannot undo {entry.id}: {reason}; nothing was changed"
            if isinstance(exc, StaleError):
                raise StaleError(message) from None
            raise HitlError(message) from None
        commit(undo_id)
        if hook:
            hook("committed")
    done = f"undid {entry.id} ({entry.block_id}): restored {', '.join(restored)}"
    return Undid("; ".join([*recovered, done]), entry.id)


def _undo_sent(entry: Entry, operator: str, sources: Sequence) -> Undid:
    """Undo a remote answer where it was sent, then journal the undo here (no file steps)."""
    source = next((s for s in sources if s.name == entry.block_source), None)
    if source is None:
        raise UsageError(
            f"cannot undo {entry.id}: it was sent to {entry.block_source}, which the config "
            "no longer names"
        )
    _hush(entry)
    said = source.undo_sent(entry, operator)
    try:
        undo_id = begin_undo(entry, [], operator, ())
        commit(undo_id)
    except OSError as exc:  # undone there all the same: say so, and what this journal missed
        said += f" (the journal here could not record the undo: {exc.strerror or exc})"
    return Undid(f"undid {entry.id} ({entry.block_id}): {said}", entry.id)


def _remember_since(entry: Entry) -> None:
    """The block an undo brings back began when it began: not now (see `sincebook`)."""
    if entry.block_since is None or not entry.block_source:
        return
    from hitl_tui.sincebook import SinceBook, key_for

    book = SinceBook.for_state()
    book.remember(key_for(entry.block_source, entry.block_path), entry.repo, entry.block_since)
    book.save()


def _hush(entry: Entry) -> None:
    """The block an undo brings back is the operator's own doing, not a new block: no hitl
    sends a notice for it (`notices.hush`: claimed for every channel, before it is back).
    Never raises: the undo stands either way."""
    if entry.block_since is None or not entry.block_source or not entry.block_fingerprint:
        return
    try:
        from hitl_tui import notices

        key = notices.new_key(
            entry.block_source, entry.block_path, entry.block_fingerprint, entry.block_since
        )
        notices.hush([key])
    except Exception:
        pass


def _check_undoable(entry: Entry) -> None:
    if entry.kind != "answer":
        raise UsageError(f"{entry.id} is an undo, not an answer")
    if not entry.undoable:
        raise UsageError(f"{entry.id} {entry.not_undoable}")
    if entry.undone:
        raise UsageError(f"{entry.id} was already undone (by {entry.undone_by})")
    if entry.status == "rolled back":
        raise UsageError(f"{entry.id} was rolled back: there is nothing to undo")
    if entry.status != "done":
        raise UsageError(f"{entry.id} is still in progress")


def _moved_on(entry: Entry, step: FileStep, rd: RepoDir) -> str:
    name = rel(entry.repo, step.path)
    now = sha_now(rd, step)
    if step.new_sha256 is None and now is not None:
        why = f"{name} exists again (the loop wrote a new one)"
    elif now is None:
        why = f"{name} was removed since"
    else:
        why = f"{name} changed since the answer"
    return f"cannot undo {entry.id}: {why}; nothing was changed"
