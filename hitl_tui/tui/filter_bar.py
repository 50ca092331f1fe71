"""The filter above the list (`/`): an Input whose every keystroke re-filters the list.

Esc clears the filter and goes back to the list, Enter goes back keeping it; the inbox screen
does both (`Cleared`, `Done`). Problems of the query as typed so far (`age:>`) are shown by the
screen on one dim line under it, never as an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.message import Message
from textual.widgets import Input

from hitl_tui.tui.bindings import bindings


class FilterInput(Input):
    """The filter's text box. `typed` is called with the text as soon as it changes, before the
    frame that echoes the keystroke (Input.Changed comes after that frame, so the list would
    change one frame later: 30 ms a keystroke where Textual holds frames apart)."""

    BINDINGS: ClassVar = bindings("filter")
    typed: Callable[[str], None] | None = None

    def _watch_value(self, value: str) -> None:
        super()._watch_value(value)
        if self.typed is not None:
            self.typed(value)

    class Cleared(Message):
        """Esc: the filter is cleared; back to the list."""

    class Done(Message):
        """Enter: back to the list with the filter kept."""

    def action_clear(self) -> None:
        self.post_message(self.Cleared())

    def action_done(self) -> None:
        self.post_message(self.Done())
