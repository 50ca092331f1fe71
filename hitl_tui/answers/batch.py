"""Many blocks answered at once: one decision (`How`), a plan per block (`plan_batch`), each
written as a single answer is (`apply_batch`), one group in the journal (the batch's id).

The CLI (`hitl answer ID ID ... --option TEXT`, `--filter`, `--similar`) and the app (marks,
`M`, a choice key with marks) call these; neither plans or writes a block itself.

The rule for a choice (`fold_option`, `match_option`): a block's choice is the one whose option
text reads as the operator's once folded (case folded, whitespace runs as one space, trailing
punctuation dropped): `B` is "Node 22" in one repository and "Resume" in another, so a batch
never goes by key. A block with no such option (or with two) is "choose": the operator picks
one there (`Batch.choose`) or it is skipped. Own words (`How.texts`) apply to every block;
the placeholder rules (`service.check_own_words`) and each source's own checks (a choice that
needs words, an agenticloop task asking two questions) apply per block, as for one answer: a
block they refuse is "refused", with the reason, and the others are still planned.

Apply: each ready block as `service.write_answer` writes one (its own lock, fingerprint check,
journal entry, all or nothing), its journal entry tagged with the batch's id (`Answer.batch`).
A block that changed meanwhile is refused and named; the others are still written. The
`[[loop]]` restarts then start together, RESTARTS_AT_ONCE at most at a time (one per distinct
command: three blocks of one repository restart its loop once), never one after the other.

Layer: beside `answers.service`, which it uses.
"""

from __future__ import annotations

import os
import re
import secrets
import unicodedata
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hitl_tui.answers import service
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.model import Answer, Block, Choice, HitlError, Plan, UsageError

if TYPE_CHECKING:
    from hitl_tui.loops.commands import Loop, Ran
    from hitl_tui.loops.resume import ResumeBook

#: Restarts run at the same time, at most, after a batch.
RESTARTS_AT_ONCE = 4
#: Blocks one batch answers, at most (a filter that lists more is refused: narrow it).
MAX_BLOCKS = 1000

#: Item statuses: planned ...
READY, CHOOSE, REFUSED = "ready", "choose", "refused"
#: ... and applied (REFUSED too).
WRITTEN, SKIPPED = "written", "skipped"

#: Trailing punctuation an option's text may end with (not `+`, `)`: "C++" is not "C").
_TRAILING = re.compile(r"[\s.,;:!?\u2026\u3002]+$")


def fold_option(text: str) -> str:
    """An option's text as compared: NFKC, case folded, whitespace runs as one space, trailing
    punctuation (`. , ; : ! ? …`) dropped: `"  Node 22. "` and `"node  22"` are one option;
    `"-1"` keeps its sign, `"C++"` is not `"C"`, `"v2"` is not `"v2.1"`."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return _TRAILING.sub("", folded)


def match_option(block: Block, option: str) -> Choice | None:
    """The choice of `block` whose option text folds equal to `option` (`fold_option`); None
    when none does, or when several do (ambiguous: the operator chooses)."""
    wanted = fold_option(option)
    if not wanted:
        return None
    found = [c for c in block.choices if fold_option(c.option) == wanted]
    return found[0] if len(found) == 1 else None


def new_batch_id(now: datetime | None = None) -> str:
    """A new batch's journal group id: `batch-20261203-114501-3f9a1c` (UTC, then random;
    `journal.batches.is_batch_id` knows one)."""
    now = now or datetime.now(UTC)
    return f"batch-{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class How:
    """What the operator decided for every block of a batch: an option's text (`option`,
    matched per block by `match_option`) or own words (`texts`: one, or one per question),
    exactly one of the two; a `note` added to each; who answers (`operator`). Raises
    UsageError when both or neither are given, or a text is empty."""

    option: str | None = None
    texts: tuple[str, ...] = ()
    note: str | None = None
    operator: str = "operator"

    def __post_init__(self) -> None:
        if (self.option is None) == (not self.texts):
            raise UsageError("answer with an option's text or with your own words (not both)")
        if self.option is not None and not fold_option(self.option):
            raise UsageError("the option's text is empty")
        if self.texts and not any(t.strip() for t in self.texts):
            raise UsageError("the text is empty")

    def answer(self, choice: Choice | None, batch: str, when: datetime) -> Answer:
        """The Answer for one block: `choice` (this block's, for an option), else the texts."""
        return Answer(
            choice=choice,
            texts=() if choice is not None else self.texts,
            note=self.note,
            operator=self.operator,
            when=when,
            batch=batch,
        )

    def said(self) -> str:
        """What was decided, one line: the option's text, or the words."""
        return self.option if self.option is not None else " | ".join(self.texts)


@dataclass(frozen=True)
class Item:
    """One block of a batch and where it stands. Planned: "ready" (`plan` is its exact
    changes), "choose" (no option of the block reads as the one decided: `Batch.choose`, or
    it is skipped), "refused" (it cannot be planned: `reason`). Applied: "written" (`entry`:
    its journal entry), "refused" (it changed meanwhile, or could not be written: `reason`
    names the block and the file), "skipped" (a "choose" left unchosen). `done`: one line per
    thing written; `ran`: the `[[loop]]` restart that followed (None: none ran)."""

    block: Block
    status: str
    reason: str | None = None
    plan: Plan | None = None
    entry: str | None = None
    done: tuple[str, ...] = ()
    ran: Ran | None = None

    def to_json(self, with_plan: bool = False) -> dict[str, Any]:
        """`{"id", "status", "reason", "entry"}` (`hitl answer --json`); `with_plan` adds
        "plan": the summary, diff and hint (`--dry-run --json`), None when there is none."""
        data: dict[str, Any] = {
            "id": self.block.id,
            "status": self.status,
            "reason": self.reason,
            "entry": self.entry,
        }
        if with_plan:
            plan = self.plan
            data["plan"] = (
                None
                if plan is None
                else {"summary": plan.summary, "diff": plan.diff(), "hint": plan.hint}
            )
        return data


@dataclass(frozen=True)
class Batch:
    """A batch: its journal group id (`id`), what was decided (`how`), one Item per block in
    the order given. `choose` plans a "choose" item again for the choice the operator picks."""

    id: str
    how: How
    items: tuple[Item, ...]
    when: datetime
    inbox: Inbox = field(repr=False, compare=False)

    def count(self, status: str) -> int:
        return sum(1 for item in self.items if item.status == status)

    @property
    def counts(self) -> dict[str, int]:
        """How many items have each status (only those some item has)."""
        found: dict[str, int] = {}
        for item in self.items:
            found[item.status] = found.get(item.status, 0) + 1
        return found

    def choose(self, index: int, choice: Choice) -> Batch:
        """The batch with item `index` planned for `choice` (one of its block's choices), the
        other decisions as they are (the note, the operator): "ready", or "refused" with why.
        UsageError when `choice` is not one of the block's."""
        item = self.items[index]
        if choice not in item.block.choices:
            raise UsageError(f"{item.block.id}: {choice.key} is not one of its choices")
        planned = _plan_one(self.inbox, item.block, self.how, self.id, self.when, choice)
        items = list(self.items)
        items[index] = planned
        return replace(self, items=tuple(items))

    def skip(self, index: int) -> Batch:
        """The batch with item `index` left out ("skipped", nothing written for it)."""
        items = list(self.items)
        items[index] = replace(items[index], status=SKIPPED, reason="skipped by the operator")
        return replace(self, items=tuple(items))


def plan_batch(inbox: Inbox, blocks: Iterable[Block], how: How) -> Batch:
    """Plan `how` for every block (each once, in the order given) as a new batch: an Item per
    block, "ready" with its plan, "choose" or "refused" with the reason. Nothing is written.

    UsageError (nothing planned) when there is no block, more than MAX_BLOCKS, or when the
    decision's own words hold a placeholder (`TBD`: every block would refuse it)."""
    unique: dict[str, Block] = {}
    for block in blocks:
        unique.setdefault(block.id, block)
    if not unique:
        raise UsageError("no block to answer")
    if len(unique) > MAX_BLOCKS:
        raise UsageError(f"{len(unique)} blocks: a batch answers {MAX_BLOCKS} at most; narrow it")
    service.check_own_words(Answer(texts=how.texts, note=how.note))
    when = datetime.now(UTC)
    batch = new_batch_id(when)
    items = tuple(_plan_one(inbox, block, how, batch, when) for block in unique.values())
    return Batch(batch, how, items, when, inbox)


def _plan_one(
    inbox: Inbox,
    block: Block,
    how: How,
    batch: str,
    when: datetime,
    choice: Choice | None = None,
) -> Item:
    if choice is None and how.option is not None:
        choice = match_option(block, how.option)
        if choice is None:
            return Item(block, CHOOSE, _no_option(block, how.option))
    try:
        plan = service.plan_answer(inbox, block, how.answer(choice, batch, when))
    except HitlError as exc:
        return Item(block, REFUSED, str(exc))
    return Item(block, READY, None, plan)


def _no_option(block: Block, option: str) -> str:
    wanted = fold_option(option)
    same = [c.key for c in block.choices if fold_option(c.option) == wanted]
    if len(same) > 1:
        return f"{block.id}: options {', '.join(same)} all read {option!r}: choose one"
    listed = "; ".join(f"{c.key}) {_cut(c.option)}" for c in block.choices[:8]) or "none"
    more = f"; and {len(block.choices) - 8} more" if len(block.choices) > 8 else ""
    return f"{block.id}: no option reads {_cut(option)!r} (its options: {listed}{more})"


def _cut(text: str, width: int = 80) -> str:
    """Agent text in a reason: one line, `width` characters at most."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def apply_batch(inbox: Inbox, batch: Batch, restart: bool = True, replan: bool = False) -> Batch:
    """Write every "ready" item as one answer is written (`service.write_answer`: its lock, its
    fingerprint check, its journal entry tagged with the batch id, all or nothing), in order;
    a block that changed meanwhile (or cannot be written) is "refused" with the reason naming
    it and its file, and the others are still written. "choose" items are "skipped". Then,
    unless not `restart`, the `[[loop]]` restarts of the written blocks, together
    (`restart_all`). `replan`: as `write_answer`'s (the CLI's, where no diff was confirmed).
    Returns the batch as applied. Blocking: call it from a worker thread in the app."""
    items: list[Item] = []
    answered: list[tuple[int, service.Answered]] = []
    for item in batch.items:
        if item.status == CHOOSE:
            items.append(replace(item, status=SKIPPED))
            continue
        if item.status != READY or item.plan is None:
            items.append(item)
            continue
        try:
            written = service.write_answer(inbox, item.plan, replan)
        except HitlError as exc:
            items.append(replace(item, status=REFUSED, reason=str(exc)))
            continue
        answered.append((len(items), written))
        items.append(
            replace(item, status=WRITTEN, plan=written.plan, entry=written.entry, done=written.done)
        )
    if restart and answered:
        ran = restart_all([a for _, a in answered], inbox.loops, inbox.resumes)
        for (at, _), result in zip(answered, ran, strict=True):
            if result.ran is not None:
                items[at] = replace(items[at], ran=result.ran)
    return replace(batch, items=tuple(items))


def restart_all(
    answered: Sequence[service.Answered],
    loops: Sequence[Loop],
    book: ResumeBook | None,
    at_once: int = RESTARTS_AT_ONCE,
) -> list[service.Answered]:
    """The `[[loop]]` restarts after many answers: one per distinct restart command (three
    blocks of one loop restart it once), `at_once` at most running at a time, all started
    together rather than one after the other. Each answer is returned with the `Ran` of its
    loop's restart (None: no restart covers it); a failed one marks every answer it followed
    *restart failed*, as `service.run_restart` does. Never raises for a command's sake.
    Blocking: the commands run in a thread pool; the resume book is written on the caller's
    thread."""
    from hitl_tui.loops.commands import logs_dir, loop_for, run_command

    wanted: dict[tuple[str, str], list[int]] = {}
    first: dict[tuple[str, str], tuple[Block, Loop]] = {}
    for at, done in enumerate(answered):
        block = done.plan.block
        loop = loop_for(tuple(loops), block)
        if loop is None or loop.restart is None:
            continue
        planned = service.restart_for(loops, block)
        command = planned.command if planned is not None else None
        # One run per loop, repository and command as filled in (a restart runs in its
        # block's repository: `./run.sh` in three repos is three runs); a refused one (no
        # command) per block.
        refused = f"refused {block.id}"
        key = (str(id(loop)), f"{block.repo}\0{command if command is not None else refused}")
        wanted.setdefault(key, []).append(at)
        first.setdefault(key, (block, loop))
    results = list(answered)
    if not wanted:
        return results

    logs = logs_dir()

    def run(key: tuple[str, str]) -> tuple[tuple[str, str], Ran]:
        block, loop = first[key]
        assert loop.restart is not None
        return key, run_command("restart", loop.restart, block, loop.timeout, logs)

    # Only the commands run in the pool; the book is written here, on the caller's thread.
    with ThreadPoolExecutor(max_workers=max(1, at_once), thread_name_prefix="hitl-restart") as pool:
        outcomes = list(pool.map(run, list(wanted)))
    for key, ran in outcomes:
        for at in wanted[key]:
            done = results[at]
            waiting = done.waiting
            if waiting is not None and book is not None and not ran.ok:
                log = os.fsdecode(ran.log) if ran.log else None
                try:
                    waiting = book.restart_failed(waiting.id, ran.problem or "failed", log)
                except Exception:  # the operator's view only: the result still says it
                    pass
            results[at] = replace(done, ran=ran, waiting=waiting or done.waiting)
    return results


def undo_batch(
    batch_id: str, operator: str, remotes: Sequence[Any] = (), force: bool = False
) -> list[Any]:
    """Undo every answer of a batch (`journal.undo_batch`, each as `service.undo_answer`
    undoes one: refused where its loop has acted on it since, unless `force`, or where a file
    it wrote changed since), newest first; the per-entry results (`journal.BatchUndone`)."""
    from hitl_tui import journal

    return journal.undo_batch(batch_id, operator, force=force, sources=remotes)
