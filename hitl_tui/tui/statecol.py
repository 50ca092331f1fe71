"""The list's state column: what it says of a block (its category, `needs ctx`, a problem) and
of an answer's row waiting for its loop.

Layer: tui (the list's rows, `widgets.BlockList`).
"""

from __future__ import annotations

from hitl_tui.model import Block
from hitl_tui.textio import printable

#: The state column of an answer waiting for its loop (`tui.waiting`).
WAITING_WORDS = {"waiting": "waiting", "not-resumed": "not resumed"}


def state_words(block: Block) -> str:
    """What the state column says: a problem, `needs ctx`, or a blocked task's category; an
    answer's row, its state (`restart failed (exit 127)`)."""
    if block.state in WAITING_WORDS:
        return WAITING_WORDS[block.state]
    if block.state == "restart-failed":
        record = block.meta.get("waiting")
        return printable(getattr(record, "state_words", "restart failed"))
    if block.problems:
        return "raw" if not block.choices else "check"
    if block.notes:  # replied to and kept blocked (`w`): the loop waits on the operator
        return "waiting on you"
    if block.state == "needs_context":
        return "needs ctx"
    if block.state == "blocked" and block.category:
        return printable(block.category)
    return ""
