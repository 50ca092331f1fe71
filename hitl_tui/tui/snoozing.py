"""Snoozing from the inbox screen: `z` sets the highlighted block aside (a dialog asks how
long; in the snoozed view it brings the block back at once), `Z` lists only the snoozed blocks
(or the others again), and the blocks whose snooze ended by itself are new again. The snoozes
are the domain's (`state.snoozes.SnoozeBook`), written in a thread; `Snoozing` is mixed into
the inbox screen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from textual import work

from hitl_tui.inbox.view import RowOrder
from hitl_tui.model import Block
from hitl_tui.state.seen import SeenBook
from hitl_tui.state.snoozes import SnoozeBook
from hitl_tui.textio import printable
from hitl_tui.tui.snooze_screen import CHOICES, DURATIONS, SnoozeScreen, until_of
from hitl_tui.tui.widgets import BlockList, Clock, row_key

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


class Snoozing(_Screen):
    """`z`, `Z` and the snoozes' end, for the inbox screen (mixed into it)."""

    clock: Clock
    rows: RowOrder
    seen: SeenBook
    snoozes: SnoozeBook
    _asleep: set[str]

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def blocklist(self) -> BlockList: ...

        def _current(self) -> Block | None: ...

        def _is_waiting_row(self, block: Block) -> bool: ...

        def show_current(self) -> None: ...

        def _render_header(self) -> None: ...

    def _snoozed_rows(self) -> set[str]:
        """The row keys of the known blocks snoozed now (a pass over the snoozes only)."""
        now = self.clock()
        blocks = self.rows.blocks
        asleep = set()
        for snooze in self.snoozes:
            rk = row_key((snooze.source, snooze.path))
            block = blocks.get(rk)
            if block is not None and self.snoozes.snoozed(block, now):
                asleep.add(rk)
        return asleep

    def _wake(self) -> None:
        """The blocks whose snooze ended by itself (time up, or the block changed) are new."""
        asleep = self._snoozed_rows()
        for rk in self._asleep - asleep:
            block = self.rows.blocks.get(rk)
            if block is not None:
                self.seen.unsee(block)
                self.blocklist.refresh_row(rk)
        self._asleep = asleep

    def action_snooze(self) -> None:
        """`z`: snooze the highlighted block (a dialog asks how long); in the snoozed view,
        bring it back at once."""
        block = self._current()
        if block is None or self._is_waiting_row(block):
            return
        if self.rows.spec.snoozed:
            self._write_snooze(block, "wake")
            return

        def chosen(choice: str | None) -> None:
            if choice is not None:
                self._write_snooze(block, choice)

        self.app.push_screen(SnoozeScreen(block), chosen)

    @work(thread=True, group="snooze", exit_on_error=False, description="_write_snooze")
    def _write_snooze(self, block: Block, choice: str) -> None:
        """Write the snooze (or its end, `wake`) in a thread, then list the rows again."""
        if choice == "wake":
            self.snoozes.unsnooze(block)
        else:
            self.snoozes.snooze(block, until_of(choice, self.clock()))
        self.app.call_from_thread(self._snoozes_written, block, choice)

    def _snoozes_written(self, block: Block, choice: str) -> None:
        if choice == "wake":
            text = f"{block.id} is back in the inbox."
        else:
            label = CHOICES[choice][1]
            when = f"for {label}" if choice in DURATIONS else label
            text = f"{block.id} snoozed {when} (Z shows the snoozed blocks)."
        if self.blocklist.refilter():
            self.show_current()
        # Not `_wake`: a block the operator brought back is not new.
        self._asleep = self._snoozed_rows()
        self._render_header()
        self.notify(printable(text), title="Snooze", markup=False, timeout=4)

    def action_snoozed_view(self) -> None:
        """`Z`: only the snoozed blocks, or back to the others."""
        spec = self.rows.spec
        self.blocklist.set_spec(replace(spec, snoozed=not spec.snoozed))
        self.show_current()
        self._render_header()
