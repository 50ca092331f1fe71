"""Undo: revert a journaled answer byte for byte, the block file included, as an entry of its
own (kind "undo") that crash recovery finishes or rolls back like an answer. Which answer
`hitl undo [ID]` means, whether it can still be undone, and what to say when it cannot.

Two refusals. A file the answer wrote changed since: always (undoing would throw the loop's
bytes away). The loop has acted on the answer (the caller's check, `resume.loop_acted`: a
commit after it, the signs its backend reads for `resume`): unless forced, since the old
block and files would go back under the loop's work and leave the repository changed
(`LoopActed`, `--force`).

`target` says, before anything is written, which answer an undo would take (a block's own, or
the journal's last) and whether it would be refused: the app asks the operator with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hitl_tui.answers.locks import LOCK_TIMEOUT, repo_lock
from hitl_tui.answers.repofs import ConcurrentWrite, RepoDir
from hitl_tui.journal.entries import Entries, Entry, FileStep, begin_undo, commit, end_rollback
from hitl_tui.journal.entries import entries as journal_entries
from hitl_tui.journal.files import put, rel, roll_back_files, sha_now, state_of, sweep
from hitl_tui.journal.recovery import locate, recover
from hitl_tui.model import HitlError, StaleError, UsageError
from hitl_tui.textio import printable

#: Called after each step of an undo: "journaled", "<action>:<file>", "committed".
StepHook = Callable[[str], None]
#: An ambiguous `hitl undo ID` names at most this many of the answers it matches.
SHOW_MATCHES = 10
#: A block's own answer (`target`) is looked for among this many of the newest answers.
OWN_WITHIN = 1000
#: What shows the loop has acted on an answer since (`resume.loop_acted`): a few words, or
#: None. Given the answer and where its repository is now (None: not found, or remote).
ActedCheck = Callable[[Entry, Path | None], str | None]


class LoopActed(StaleError):
    """`undo` refused: the loop has acted on the answer since (`what`: `commit abc1234 "msg"
    after it`); `force` undoes it anyway. Exit 3, as for a file changed since."""

    def __init__(self, entry: Entry, what: str) -> None:
        #: The journal id of the answer, and what the loop did.
        self.entry = entry.id
        self.what = what
        super().__init__(
            f"refused to undo {entry.id} ({entry.block_id}): the loop has acted on this answer "
            f"({what}); nothing was changed; hitl undo {entry.id} --force to undo anyway"
        )


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


def _own(entries: Entries, block: tuple[str, str]) -> Entry | None:
    """The newest answer to `block` (`(source, path)`) that can still be undone, among the
    OWN_WITHIN newest answers; None: none."""
    import os

    answers = 0
    for e in entries.newest_first():
        if e.kind != "answer":
            continue
        answers += 1
        if answers > OWN_WITHIN:
            return None
        path = os.fsdecode(e.block_path) if isinstance(e.block_path, Path) else str(e.block_path)
        if (e.block_source, path) != block:
            continue
        if e.status == "done" and not e.undone and e.undoable:
            return e
    return None


@dataclass(frozen=True)
class Target:
    """The answer an undo would take, found before anything is written: the app asks first."""

    entry: Entry
    #: The answer named, or the asked block's own (False: the journal's last answer, which
    #: may be another repository's).
    own: bool
    #: What the loop did since (the check's words): the undo is refused unless forced.
    acted: str | None = None

    def said(self, now: datetime | None = None) -> str:
        """`the answer to shop (BLOCKED.md): "B) Keep invoices", 4m ago`, printable."""
        from hitl_tui.timefmt import age

        e = self.entry
        where = printable(e.block_id)
        if not e.remote and isinstance(e.block_path, Path):
            where += f" ({printable(rel(e.repo, e.block_path))})"
        answered = " ".join(printable(e.answered).split())
        if len(answered) > 80:
            answered = answered[:79] + "…"
        return f'the answer to {where}: "{answered}", {age(e.time, now or datetime.now(UTC))} ago'

    @property
    def repo(self) -> str:
        """Where it was given (a remote one: its name), printable."""
        return printable(str(self.entry.repo))


def target(
    entry_id: str | None = None,
    block: tuple[str, str] | None = None,
    acted: ActedCheck | None = None,
) -> Target:
    """The answer `undo(entry_id)` would take; with `block` (a block's `(source, path)`, as
    `statefile.block_key`) and no id, that block's newest answer not undone yet when there is
    one (among the OWN_WITHIN newest), else the last as `undo()`. Refused as `undo` would
    refuse it (UsageError; StaleError naming the file that changed since); `acted` gives what
    the loop did since. Nothing is written or locked: `undo` checks it all again."""
    entries = journal_entries()
    entry = _own(entries, block) if block is not None and entry_id is None else None
    own = entry is not None or entry_id is not None
    if entry is None:
        entry = _pick(entries, entry_id)
    _check_undoable(entry)
    where = None
    if not entry.remote:
        where = locate(entry)
        if where is None:
            raise StaleError(f"cannot undo {entry.id}: the repository {entry.repo} is gone")
        with RepoDir(entry.repo, located=where) as rd:
            _check_files(entry, rd)
    return Target(entry, own, acted(entry, where) if acted is not None else None)


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
    sources: Sequence[Any] = (),
    force: bool = False,
    acted: ActedCheck | None = None,
) -> Undid:
    """Revert the last answer (or `entry_id`) byte for byte, the block file included.

    Refuses with StaleError (exit 3) when any file it wrote changed since, naming the file,
    and with LoopActed (a StaleError) when `acted` (checked under the repository's lock, after
    the files) says the loop has acted on the answer since, unless `force`; UsageError when
    there is nothing to undo. Returns a one-line message.

    An answer sent to a remote backend that can undo it (another machine's hitl) is undone
    there by that backend, one of `sources` (`Source.undo_sent`), and journaled here as undone.
    """
    entry = _pick(journal_entries(), entry_id)
    _check_undoable(entry)
    if operator is None:  # every command passes the config's operator (`Config.operator_name`)
        operator = "operator"
    if entry.remote:
        return _undo_sent(entry, operator, sources, force, acted)
    where = locate(entry)
    if where is None:
        raise StaleError(f"cannot undo {entry.id}: the repository {entry.repo} is gone")
    with repo_lock(where, timeout=LOCK_TIMEOUT), RepoDir(entry.repo, located=where) as rd:
        recovered = recover(where, locked=True)
        entry = journal_entries()[entry.id]
        _check_undoable(entry)
        _check_files(entry, rd)
        if not force and acted is not None:
            what = acted(entry, where)
            if what is not None:
                raise LoopActed(entry, what)
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


def _undo_sent(
    entry: Entry, operator: str, sources: Sequence[Any], force: bool, acted: ActedCheck | None
) -> Undid:
    """Undo a remote answer where it was sent, then journal the undo here (no file steps).

    Whether the loop acted on it is for that machine's `hitl undo` to say (it refuses as this
    one does, and is passed `--force` only when forced); a sign already seen here (its record
    resumed) refuses without asking."""
    source = next((s for s in sources if s.name == entry.block_source), None)
    if source is None:
        raise UsageError(
            f"cannot undo {entry.id}: it was sent to {entry.block_source}, which the config "
            "no longer names"
        )
    if not force and acted is not None:
        what = acted(entry, None)
        if what is not None:
            raise LoopActed(entry, what)
    _hush(entry)
    try:
        # `force` only when forced: a backend of its own (a test's) may not take it.
        if force:
            said = source.undo_sent(entry, operator, force=True)
        else:
            said = source.undo_sent(entry, operator)
    except StaleError as exc:
        what = _far_acted(str(exc))
        if what is None:
            raise
        host = (entry.sent or {}).get("host")
        raise LoopActed(entry, f"{what}, on {host}" if isinstance(host, str) else what) from None
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
    from hitl_tui.state.since import SinceBook, key_for

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
        from hitl_tui.loops import notices

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


def _check_files(entry: Entry, rd: RepoDir) -> None:
    """StaleError naming the first file the answer wrote that changed since."""
    for step in entry.files:
        rd.spot(step.path)  # refuses a path that now leads out of the repository
        state = state_of(rd, step)
        if state not in ("new", "both"):
            raise StaleError(_moved_on(entry, step, rd))


#: How a refusal of `LoopActed` says what the loop did (read back from another machine's).
_ACTED = "the loop has acted on this answer ("


def _far_acted(said: str) -> str | None:
    """What the loop did, from another machine's `LoopActed` refusal; None: not one."""
    start = said.find(_ACTED)
    if start < 0:
        return None
    what = said[start + len(_ACTED) :]
    end = what.rfind("); nothing was changed")
    return (what[:end] if end >= 0 else what.rstrip(")")).strip() or "it acted"


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
