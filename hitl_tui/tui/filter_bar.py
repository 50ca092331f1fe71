"""The filter above the list (`/`): an Input whose every keystroke re-filters the list.

Esc clears the filter and goes back to the list, Enter goes back keeping it; the inbox screen
does both (`Cleared`, `Done`). Problems of the query as typed so far (`age:>`) are shown by the
screen on one dim line under it, never as an error.
"""

from __future__ import annotations

from typing import ClassVar

from textual.message import Message
from textual.widgets import Input

from hitl_tui.tui.bindings import bindings


class FilterInput(Input):
    """The filter's text box."""

    BINDINGS: ClassVar = bindings("filter")

    class Cleared(Message):
        """Esc: the filter is cleared; back to the list."""

    class Done(Message):
        """Enter: back to the list with the filter kept."""

    def action_clear(self) -> None:
        self.post_message(self.Cleared())

    def action_done(self) -> None:
        self.post_message(self.Done())
