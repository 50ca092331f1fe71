"""Answering each question once, from the inbox screen: marks (`Space`, `M`, `Esc`), and a
choice key or `o` with marks, which answers every marked block in one batch (a preview with a
section per block, applied in a worker, a result with written / refused / skipped, and an undo
of the whole batch). The marks are the domain's `view.RowOrder.marked` (a set of row keys: a
key costs what it marks, never a pass over every block); the batch is `answers.batch`'s.
`Batches` is mixed into the inbox screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from hitl_tui.inbox.view import RowOrder, row_of
from hitl_tui.model import Block
from hitl_tui.tui.header import plural
from hitl_tui.tui.waiting import waiting_of
from hitl_tui.tui.widgets import BlockList

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


class Batches(_Screen):
    """`Space`, `M`, `Esc`, and the batch answer, for the inbox screen (mixed into it)."""

    rows: RowOrder

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def blocklist(self) -> BlockList: ...

        def _current(self) -> Block | None: ...

        def _is_waiting_row(self, block: Block) -> bool: ...

        def _render_header(self) -> None: ...

    # -- marks -------------------------------------------------------------------------------

    def read_questions(self) -> None:
        """Once the first scan is over, read every block's question for the same-question
        rule in a thread (`similarity` keeps them by text): the first `M`, or grouping by
        question, then costs a look-up per block, not a read."""
        self._read_questions(list(self.rows.blocks.values()))

    @work(thread=True, group="questions", exit_on_error=False, description="_read_questions")
    def _read_questions(self, blocks: list[Block]) -> None:
        from hitl_tui.loops.similarity import question_groups

        question_groups(blocks)

    def _markable(self, rk: str) -> bool:
        """A block can be marked; an answer waiting for its loop cannot."""
        block = self.rows.blocks.get(rk)
        return block is not None and waiting_of(block) is None

    def action_mark(self) -> None:
        """`Space`: mark or unmark the highlighted block; on a group's header row, every block
        of the group (unmarked when all of them were marked)."""
        table = self.blocklist
        group = table.current_group
        if group is not None:
            rks = {rk for rk in self.rows.members(group.name) if self._markable(rk)}
            if not rks:
                return
            table.set_marks(rks, not rks <= self.rows.marked)
        else:
            block = table.current
            if block is None or self._is_waiting_row(block):
                return
            rk = row_of(block)
            table.set_marks({rk}, rk not in self.rows.marked)
        self._render_header()

    def action_mark_same(self) -> None:
        """`M`: mark the highlighted block and every open block asking the same question
        (`similarity.same_question`, the one rule), across repositories and sources, listed
        or not (the header counts those the filter hides)."""
        from hitl_tui.loops.similarity import same_question

        block = self._current()
        if block is None or self._is_waiting_row(block):
            return
        rows = self.rows
        same = {
            rk
            for rk, other in rows.blocks.items()
            if other is block or (waiting_of(other) is None and same_question(block, other))
        }
        new = len(same - rows.marked)
        self.blocklist.set_marks(same, True)
        self._render_header()
        hidden = rows.marked_hidden()
        text = f"{plural(len(same), 'block')} asking this question: {new} newly marked"
        if hidden:
            text += f"; {hidden} marked not listed (the filter)"
        self.notify(text + ".", title="Marked", markup=False, timeout=4)

    def action_clear_marks(self) -> None:
        """`Esc`: no block marked any more."""
        if self.rows.marked:
            self.blocklist.clear_marks()
            self._render_header()
