"""The one answer service: from an operator's Answer to a Plan, whichever source the block came
from; the plan carried out (written, or sent), journaled, noted to watch for its loop's resume;
the loop's restart; and the undo. The CLI (`hitl answer`, `hitl restart`, `hitl undo`) and the
app call it and render what it returns (`Answered`, a `Ran`): neither does a step itself.

`answer` does it all. Its steps are there for clients that show each as it ends: `hitl answer`
prints what was written before the restart runs (`write_answer`, then `restart_after`); the
app writes in one worker and restarts in another (`run_restart`, as `R` does), so that its toast
says what was written while the loop restarts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, Block, Done, HitlError, Plan, StaleError, UsageError
from hitl_tui.sources.base import Source
from hitl_tui.textio import placeholder_in

if TYPE_CHECKING:
    from hitl_tui.journal.undo import Target, Undid
    from hitl_tui.loops.commands import Loop, Ran
    from hitl_tui.loops.records import Waiting
    from hitl_tui.loops.resume import ResumeBook


def source_for(inbox: Inbox, block: Block) -> Source:
    """The source (a file format or a remote backend) that planned and answers `block`."""
    source = inbox.source_named(block.source)
    if source is None:
        raise HitlError(f"{block.id}: no writer for blocks from {block.source}")
    return source


def plan_answer(inbox: Inbox, block: Block, answer: Answer) -> Plan:
    """The exact changes for `answer`; raises UsageError for an empty or invalid answer."""
    source = source_for(inbox, block)
    if cache_was_wrong(inbox, block):
        # What was shown came from a wrong cache entry (now dropped): the next read of the
        # block is the file's (`Inbox.handle`); the operator reviews that.
        raise StaleError(
            f"{block.id}: the block reads differently in its file than what was shown (a "
            "stale parse cache, now dropped); review it again"
        )
    fresh = as_on_disk(source, block)
    answer = with_choice_from(fresh, answer)
    plan = source.plan(fresh, answer)
    worded = None
    if answer.decision_override is not None:  # the decision as hitl words it, the agent's words
        try:
            worded = source.decision_text(fresh, replace(answer, decision_override=None))
        except HitlError:
            worded = None
    # After the source's own checks: theirs say more (agenticloop).
    check_own_words(answer, worded or "")
    return plan


def plan_note(
    inbox: Inbox, block: Block, note: str, operator: str, when: datetime | None = None
) -> Plan:
    """The exact changes that add the operator's `note` to `block` while it stays open ("Reply
    and keep blocked": `w` in the app, `hitl note`), planned by its source (`Source.plan_note`)
    on the block as its file holds it. Raises UsageError for an empty note or a placeholder
    in it, StaleError when the block changed, HitlError when its source takes no note."""
    if not note.strip():
        raise UsageError("the note is empty: type what the loop should know")
    source = source_for(inbox, block)
    if cache_was_wrong(inbox, block):
        raise StaleError(
            f"{block.id}: the block reads differently in its file than what was shown (a "
            "stale parse cache, now dropped); review it again"
        )
    check_own_words(Answer(note=note))
    return source.plan_note(as_on_disk(source, block), note, operator, when or now_utc())


def write_note(inbox: Inbox, plan: Plan) -> Answered:
    """Carry out a note's plan (`plan_note`): written and journaled like an answer (so `hitl
    undo` takes it back byte for byte), or sent for a remote backend. Nothing waits for the
    loop to resume and no `[[loop]]` restart runs: the block stays open. Raises HitlError."""
    source = source_for(inbox, plan.block)
    if source.remote:
        sent = source.send(plan)
        return Answered(plan, tuple(sent.lines), sent.entry)
    from hitl_tui.answers.apply import apply_plan

    written = apply_plan(plan)
    return Answered(plan, tuple(written.lines), written.entry)


def now_utc() -> datetime:
    return datetime.now(UTC)


def check_own_words(answer: Answer, worded: str = "") -> None:
    """Refuse an answer whose own words (typed texts, note, edited decision) hold a placeholder
    (`TBD`, `etc.`, ...: `textio.PLACEHOLDERS`), whatever the format: the loop would act on
    it. Words quoted from the block (a choice, the question) are the agent's, never refused:
    an edited decision is refused only for a placeholder it holds more often than `worded`
    (the decision as hitl words it, unedited) does."""
    for text in (*answer.texts, answer.note or ""):
        found = placeholder_in(text)
        if found:
            raise UsageError(f"the answer contains {found}: say it concretely; nothing written")
    if answer.decision_override is not None:
        found = placeholder_in(answer.decision_override, worded)
        if found:
            raise UsageError(f"the answer contains {found}: say it concretely; nothing written")


def cache_was_wrong(inbox: Inbox, block: Block) -> bool:
    """Whether the parse cache's entry for `block`'s file disagreed with the file (a parse
    of it now); if so the entry is dropped, on disk too, so that no retry meets it again."""
    cache = inbox.cache
    source = inbox.source_named(block.source)
    if cache is None or source is None or source.remote:
        return False
    repo = Path(block.repo)
    label = inbox.labels.get(repo) or inbox.workspace.id_of(repo)
    try:
        wrong = cache.drop_if_wrong(source, repo, Path(block.path), label)
    except HitlError:
        return False
    if wrong:
        inbox.save_cache()
    return wrong


def from_the_file(inbox: Inbox, block: Block) -> Block:
    """`block` as its file holds it, when the parse cache held something else for it (the
    entry is dropped): `hitl answer` answers the file, whose bytes `--expect` names. Else
    `block`, whose fingerprint the planner checks against the file as before."""
    if not cache_was_wrong(inbox, block):
        return block
    repo = Path(block.repo)
    label = inbox.labels.get(repo) or inbox.workspace.id_of(repo)
    try:
        fresh = source_for(inbox, block).parse(repo, Path(block.path), label)
    except HitlError:
        return block
    return block if fresh is None else fresh


def with_choice_from(block: Block, answer: Answer) -> Answer:
    """`answer` with its choice looked up again, by key, in `block` as parsed from disk.

    The Choice the operator picked came from a Block that may be out of the parse cache or a
    long-open app; its text is what goes into PROMPT.md, so it must be the file's. A choice that
    reads differently on disk than what was shown is refused: the operator chose something else.
    """
    if answer.choice is None:
        return answer
    for choice in block.choices:
        if choice.key == answer.choice.key:
            if choice != answer.choice:
                raise StaleError(
                    f"{block.id}: choice {choice.key} reads differently in the file than what "
                    "was shown; review it again"
                )
            return replace(answer, choice=choice)
    raise StaleError(f"{block.id}: the block has no choice {answer.choice.key} any more")


def as_on_disk(source: Source, block: Block) -> Block:
    """`block` parsed again from its file, when the file still holds the same bytes.

    What an answer writes must follow from the bytes it replaces, never from a Block that came
    out of the parse cache (or out of a long-open app). If the file changed, `block` is returned
    as it is, and the planner's own fingerprint check refuses it (StaleError). Each source
    says how (`Source.as_planned_from`: a remote one re-reads when it sends).
    """
    return source.as_planned_from(block)


#: How often `write_answer(replan=True)` plans again when a file beside the block changed.
REPLANS = 3


@dataclass(frozen=True)
class Restart:
    """The `[[loop]]` restart that follows an answer to a block: its loop, and the command as
    the operator reads it (`shown`), or the one line refusing it (a value holds a control
    character: nothing would run)."""

    loop: Loop
    command: str | None
    refused: str | None


@dataclass(frozen=True)
class Answered:
    """An answer carried out, what every client shows of it (the CLI prints it, the app toasts
    it, `--json` writes it): the plan as written, one line per thing done, the journal entry
    (None: nothing journaled), the answer waiting for its loop (`resume.Waiting`, None when none
    is kept or open), and the `[[loop]]` restart that followed it, if one ran (`ran`; a refused
    one is `ran.refused`: nothing ran)."""

    plan: Plan
    done: tuple[str, ...]
    entry: str | None = None
    waiting: Waiting | None = None
    ran: Ran | None = None

    @property
    def restarted(self) -> bool:
        """A restart ran after the answer (it may have failed; a refused one did not run)."""
        return self.ran is not None and not self.ran.refused

    @property
    def hint(self) -> str | None:
        """The source's hint to print ("Restart the loop ..."), unless a restart ran."""
        return None if self.restarted else self.plan.hint


def restart_for(loops: Sequence[Loop], block: Block) -> Restart | None:
    """The restart an answer to `block` runs (None: no `[[loop]]` restart covers it)."""
    from hitl_tui.loops.commands import ControlInValue, fill, loop_for, shown, values_for

    loop = loop_for(tuple(loops), block)
    if loop is None or loop.restart is None:
        return None
    try:
        return Restart(loop, shown(fill(loop.restart, values_for(block))), None)
    except ControlInValue as exc:
        return Restart(loop, None, exc.line("restart"))


def answer(
    inbox: Inbox, plan: Plan, loops: Sequence[Loop] = (), replan: bool = False, restart: bool = True
) -> Answered:
    """Write (or send) the answer, journal it, note it for its loop's resume, then run the
    `[[loop]]` restart unless not `restart`: `write_answer`, then `restart_after`. Raises as
    `write_answer` does; the restart never makes it raise."""
    written = write_answer(inbox, plan, replan)
    return restart_after(written, loops, inbox.resumes) if restart else written


def write_answer(inbox: Inbox, plan: Plan, replan: bool = False) -> Answered:
    """Carry out a plan: written and journaled (a remote backend's plan is sent, `send`), the
    answer noted to watch for its loop to resume. Raises HitlError subclasses.

    With `replan`, a file other than the block file that changed meanwhile (the loop appended
    to PROMPT.md while the answer was written) makes a new plan on its new bytes, up to REPLANS
    times; the block file itself must be unchanged. Without it (the app, where the operator
    confirmed a diff), that is a StaleError to review again.

    A remote backend's plan is sent over the network (blocking; call it from a worker thread).
    """
    source = source_for(inbox, plan.block)
    if source.remote:
        return send_answer(source, plan, inbox.resumes, inbox.loops)
    from hitl_tui.answers.apply import OtherFileChanged, apply_plan

    moved: list[str] = []
    for attempt in range(REPLANS + 1):
        try:
            written = apply_plan(plan)
        except OtherFileChanged as exc:
            if not replan or attempt == REPLANS:
                raise
            moved.append(exc.rel)
            plan = plan_answer(inbox, plan.block, plan.answer)
            continue
        done = list(written.lines)
        if moved:
            names = ", ".join(dict.fromkeys(moved))
            done.insert(0, f"planned again on the new bytes of {names}, changed meanwhile")
        return _noted(inbox.resumes, inbox.loops, plan, done, written.entry)
    raise AssertionError("unreachable")  # pragma: no cover


def send_answer(
    source: Source, plan: Plan, book: ResumeBook | None, loops: Sequence[Loop] | None = ()
) -> Answered:
    """Send the plan of a remote backend's block (`source.send`: another machine's hitl, an
    issue tracker), noted to watch for its loop to resume. Blocking; raises HitlError."""
    sent = source.send(plan)
    # A backend that journals what it sent (ssh) says which entry records it.
    return _noted(book, loops, plan, sent.lines, sent.entry)


def _noted(
    book: ResumeBook | None,
    loops: Sequence[Loop] | None,
    plan: Plan,
    done: Sequence[str],
    entry: str | None,
) -> Answered:
    note_answer(book, loops, plan, entry)
    return Answered(plan, tuple(done), entry, waiting_after(book, plan.block, entry))


def waiting_after(book: ResumeBook | None, block: Block, entry: str | None) -> Waiting | None:
    """The answer to `block` (its journal `entry`) waiting for its loop, when `book` keeps it
    open (else None). Never raises: the operator's view only."""
    if book is None:
        return None
    from hitl_tui.loops.records import key_of

    try:
        record = book.get(entry or key_of(block))
    except Exception:
        return None
    if record is None or not record.is_open or record.key != key_of(block):
        return None
    return record


def apply_answer(inbox: Inbox, plan: Plan, replan: bool = False) -> Done:
    """`write_answer`, as what it did (one line per thing done) and its journal entry."""
    written = write_answer(inbox, plan, replan)
    return Done(written.done, written.entry)


def note_answer(
    book: ResumeBook | None, loops: Sequence[Loop] | None, plan: Plan, entry: str | None
) -> Waiting | None:
    """Once an answer is written (or sent; its journal `entry`): watch for its loop to resume
    (`resume`), for the `resume_within` of the `[[loop]]` covering its repository (else 10
    minutes). Returns the `resume.Waiting`, or None (no book, or it could not be noted: the
    answer stands either way)."""
    if book is None:
        return None
    from hitl_tui.loops.commands import RESUME_WITHIN, loop_for

    loop = loop_for(tuple(loops or ()), plan.block)
    within = loop.resume_within if loop is not None else RESUME_WITHIN
    try:
        return book.note(plan.block, plan, entry, within)
    except Exception:  # the operator's view only: never a reason for an answer to fail
        return None


# -- the loop's restart: after an answer, `R` in the app, `hitl restart` ------------------------


def restart_after(
    answered: Answered, loops: Sequence[Loop], book: ResumeBook | None, skip: bool = False
) -> Answered:
    """Once an answer is written: the `[[loop]]` restart of its block's repository, unless
    `skip` or none covers it; `answered` with the restart's `Ran`. A restart that fails (or is
    refused) is kept with the answer waiting for its loop (*restart failed*). Blocking."""
    from hitl_tui.loops.commands import loop_for

    block = answered.plan.block
    loop = loop_for(tuple(loops), block)
    if skip or loop is None or loop.restart is None:
        return answered
    record = answered.waiting
    ran, again = run_restart(block, loop, book, record.id if record is not None else None)
    return replace(answered, ran=ran, waiting=again or record)


def run_restart(
    block: Block,
    loop: Loop,
    book: ResumeBook | None,
    record_id: str | None = None,
    waits_again: bool = False,
) -> tuple[Ran, Waiting | None]:
    """Run the loop's restart for `block`; the answer waiting for the loop (`record_id`) is
    then *restart failed* (with why and the log) if it did not succeed, or, when
    `waits_again` (a restart of an answer's row), waits anew, with a new deadline. Returns the
    `Ran`, and the record as it is now (None: unchanged, or none). Never raises for the
    command's or the record's sake. Blocking."""
    from hitl_tui.loops.commands import logs_dir, run_command

    assert loop.restart is not None
    ran = run_command("restart", loop.restart, block, loop.timeout, logs_dir())
    again = None
    if record_id is not None and book is not None:
        try:
            if not ran.ok:
                log = os.fsdecode(ran.log) if ran.log else None
                again = book.restart_failed(record_id, ran.problem or "failed", log)
            elif waits_again:
                again = book.restarted(record_id)
        except Exception:  # the operator's view only: the restart's report still says it
            again = None
    return ran, again


# -- undo: `hitl undo`, `u` in the app and in its history ---------------------------------------


def undo_target(
    entry_id: str | None = None,
    block: tuple[str, str] | None = None,
    remotes: Sequence[Source] = (),
) -> Target:
    """The answer an undo would take (`undo.target`: the named one, or the newest of `block`,
    a `statefile.block_key`, else the last), and what the loop did since (`resume.loop_acted`),
    found before anything is written. Raises as the undo would (UsageError, StaleError)."""
    from hitl_tui.journal.undo import target
    from hitl_tui.loops.resume import loop_acted

    return target(entry_id, block, acted=lambda e, where: loop_acted(e, where, remotes))


def undo_answer(
    entry_id: str | None, operator: str, remotes: Sequence[Source] = (), force: bool = False
) -> Undid:
    """Undo an answer (`journal.undo`), refused when the loop has acted on it since unless
    `force` (`undo.LoopActed`); then nothing waits for its loop any more. The one place the
    CLI and the app do it. Returns `undo.Undid`."""
    from hitl_tui import journal
    from hitl_tui.loops.resume import forget_undone, loop_acted

    message = journal.undo(
        entry_id,
        operator=operator,
        sources=remotes,
        force=force,
        acted=lambda e, where: loop_acted(e, where, remotes),
    )
    forget_undone(message)
    return message
