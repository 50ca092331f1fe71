"""The widths of the list's columns: block, age, state, question.

Ids are whole wherever the list can hold them (`al-subscriptions-billing/T-007` at 80
columns): the block column widens to the longest id as long as the question keeps a third of
the list, and the state column makes the room first, narrowed, then left out. Under `NARROW`
columns (a tmux pane) the state column is left out and the block column is only as wide as
the longest id, so the highlighted block's id and question both stay in view.
"""

from __future__ import annotations

#: Narrower than this, the state column is left out (see the module).
NARROW = 56
#: The question keeps at least this (and a third of the list) when ids are long; the state
#: column, narrowed to make room for them, is left out below STATE_MIN.
QUESTION_MIN = 16
STATE_MIN = 6


def column_widths(width: int, block: int, age: int, state: int, longest_id: int) -> list[int]:
    """Each column's width for a list `width` cells wide, from the block and age columns'
    widths, the longest state and the longest id; 0 leaves a column out."""
    fixed = [block, age, state]
    if width < NARROW:
        fixed = [min(block, max(longest_id, 5), max(6, width // 2)), age, 0]
    elif longest_id > max(block, width // 4):
        question = max(QUESTION_MIN, width // 3)
        room = width - question - 2
        fixed[0] = max(block, min(longest_id, room - age - 4))
        left = room - fixed[0] - age - 6
        fixed[2] = min(state, left) if left >= STATE_MIN else 0
    else:  # ids shorter than a quarter of the list: as they always were
        fixed[0] = max(block, longest_id)
    used = sum(fixed) + 2 * sum(1 for w in fixed if w)
    return [*fixed, max(10, width - used - 2)]
