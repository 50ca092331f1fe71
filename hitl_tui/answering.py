"""From an operator's Answer to a Plan, whichever source the block came from."""

from __future__ import annotations

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
    return source_for(inbox, block).plan(block, answer)


def apply_answer(inbox: Inbox, plan: Plan) -> list[str]:
    """Carry out a plan; returns one line per thing done. Raises HitlError subclasses.

    A GitHub plan is sent over the network (blocking; call it from a worker thread).
    """
    if plan.remote:
        from hitl_tui.github_sync import apply_sync

        return apply_sync(plan)
    from hitl_tui.apply import apply_plan

    return apply_plan(plan)
