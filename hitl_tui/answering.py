"""From an operator's Answer to a Plan, whichever source the block came from."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hitl_tui.inbox import Inbox
from hitl_tui.model import Answer, Block, HitlError, Plan
from hitl_tui.sources.base import Source


def source_for(inbox: Inbox, block: Block) -> Source:
    for source in inbox.sources:
        if source.name == block.source:
            return source
    raise HitlError(f"{block.id}: no writer for blocks from {block.source}")


def plan_answer(inbox: Inbox, block: Block, answer: Answer) -> Plan:
    """The exact file changes for `answer`; raises UsageError for an empty or invalid answer."""
    if block.source == "github":
        from hitl_tui.sources import github

        return github.plan(block, answer)
    source = source_for(inbox, block)
    return source.plan(as_on_disk(source, block), answer)


def as_on_disk(source: Source, block: Block) -> Block:
    """`block` parsed again from its file, when the file still holds the same bytes.

    What an answer writes must follow from the bytes it replaces, never from a Block that came
    out of the parse cache (or out of a long-open app). If the file changed, `block` is returned
    as it is, and the planner's own fingerprint check refuses it (StaleError).
    """
    if not isinstance(block.path, Path) or not isinstance(block.repo, Path):
        return block
    try:
        fresh = source.parse(block.repo, block.path, block.id)
    except HitlError:
        return block
    if fresh is None or fresh.fingerprint != block.fingerprint:
        return block
    return replace(fresh, id=block.id)


def apply_answer(inbox: Inbox, plan: Plan) -> list[str]:
    """Carry out a plan; returns one line per thing done. Raises HitlError subclasses.

    A GitHub plan is sent over the network (blocking; call it from a worker thread).
    """
    if plan.remote:
        from hitl_tui.github_sync import apply_sync

        return apply_sync(plan)
    from hitl_tui.apply import apply_plan

    return apply_plan(plan)
