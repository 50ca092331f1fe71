"""From an operator's Answer to a Plan, whichever source the block came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, Block, HitlError, Plan, StaleError, UsageError
from hitl_tui.sources.base import Source
from hitl_tui.textio import placeholder_in


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


#: How often `apply_answer(replan=True)` plans again when a file beside the block changed.
REPLANS = 3


def apply_answer(inbox: Inbox, plan: Plan, replan: bool = False) -> list[str]:
    """Carry out a plan; returns one line per thing done. Raises HitlError subclasses.

    With `replan`, a file other than the block file that changed meanwhile (the loop appended
    to PROMPT.md while the answer was written) makes a new plan on its new bytes, up to REPLANS
    times; the block file itself must be unchanged. Without it (the app, where the operator
    confirmed a diff), that is a StaleError to review again.

    A remote backend's plan is sent over the network (blocking; call it from a worker thread).
    """
    source = source_for(inbox, plan.block)
    if source.remote:
        sent = source.send(plan)
        note_answer(inbox.resumes, inbox.loops, plan, sent)
        return sent
    from hitl_tui.answers.apply import OtherFileChanged, apply_plan

    moved: list[str] = []
    for attempt in range(REPLANS + 1):
        try:
            done = apply_plan(plan)
        except OtherFileChanged as exc:
            if not replan or attempt == REPLANS:
                raise
            moved.append(exc.rel)
            plan = plan_answer(inbox, plan.block, plan.answer)
            continue
        if moved:
            names = ", ".join(dict.fromkeys(moved))
            done.insert(0, f"planned again on the new bytes of {names}, changed meanwhile")
        note_answer(inbox.resumes, inbox.loops, plan, done)
        return done
    raise AssertionError("unreachable")  # pragma: no cover


def note_answer(book, loops, plan: Plan, done: list[str]):
    """Once an answer is written (or sent): watch for its loop to resume (`resume`), for the
    `resume_within` of the `[[loop]]` covering its repository (else 10 minutes). The one place
    the CLI and the app do it. Returns the `resume.Waiting`, or None (no book, or it could not
    be noted: the answer stands either way)."""
    if book is None:
        return None
    from hitl_tui.loops.commands import RESUME_WITHIN, loop_for

    loop = loop_for(tuple(loops or ()), plan.block)
    within = loop.resume_within if loop is not None else RESUME_WITHIN
    try:
        return book.note(plan.block, plan, getattr(done, "entry", None), within)
    except Exception:  # the operator's view only: never a reason for an answer to fail
        return None


# -- undo: `hitl undo`, `u` in the app and in its history ---------------------------------------


def undo_target(
    entry_id: str | None = None, block: tuple[str, str] | None = None, remotes: Sequence = ()
):
    """The answer an undo would take (`undo.target`: the named one, or the newest of `block`,
    a `statefile.block_key`, else the last), and what the loop did since (`resume.loop_acted`),
    found before anything is written. Raises as the undo would (UsageError, StaleError)."""
    from hitl_tui.journal.undo import target
    from hitl_tui.loops.resume import loop_acted

    return target(entry_id, block, acted=lambda e, where: loop_acted(e, where, remotes))


def undo_answer(entry_id: str | None, operator: str, remotes: Sequence = (), force: bool = False):
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
