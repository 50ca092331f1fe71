"""The filter above the list (`/`): an Input whose every keystroke re-filters the list.

Esc clears the filter and goes back to the list, Enter goes back keeping it; the inbox screen
does both (`Cleared`, `Done`). Words typed on right after either are not commands: the inbox
screen swallows that burst (`AfterFilter`). Problems of the query as typed so far (`age:>`)
are shown by the screen on one dim line under it, never as an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input

from hitl_tui.keys import keys_for
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


#: The filter's actions that leave it (Enter, Esc).
LEAVE = frozenset({"done", "clear"})


class FilterInput(Input):
    """The filter's text box. `typed` is called with the text as soon as it changes, before the
    frame that echoes the keystroke (Input.Changed comes after that frame, so the list would
    change one frame later: 30 ms a keystroke where Textual holds frames apart)."""

    BINDINGS: ClassVar = bindings("filter")
    typed: Callable[[str], None] | None = None
    #: Called as Enter or Esc closes the box, before the next key is read (the screen starts
    #: swallowing the rest of a word typed on: `AfterFilter`).
    closed: Callable[[], None] | None = None
    #: Asked about each key that still reaches the box as it closes (typed in the same burst,
    #: before the list has the focus): True swallows it (`AfterFilter.swallow`).
    swallow: Callable[[events.Key], bool] | None = None
    _leaving = False

    def _on_key(self, event: events.Key) -> None:  # type: ignore[override]
        # Runs before Input's own `_on_key` (Textual calls each class's, subclass first);
        # prevent_default stops Input's from typing the key in. Enter's and Esc's bindings run
        # only once the key has bubbled up to the app, after the keys typed on behind them are
        # typed into this box: the box is left here already, as the key comes.
        if not self._leaving:
            bound = self.screen.active_bindings.get(event.key)
            if bound is not None and bound.node is self and bound.binding.action in LEAVE:
                self._leave()
        elif self.swallow is not None and self.swallow(event):
            event.stop()
            event.prevent_default()

    def _leave(self) -> None:
        self._leaving = True
        if self.closed is not None:
            self.closed()

    def on_focus(self) -> None:
        self._leaving = False

    def _watch_value(self, value: str) -> None:
        super()._watch_value(value)
        if self.typed is not None:
            self.typed(value)

    class Cleared(Message):
        """Esc: the filter is cleared; back to the list."""

    class Done(Message):
        """Enter: back to the list with the filter kept."""

    def action_clear(self) -> None:
        self._leave()
        self.post_message(self.Cleared())

    def action_done(self) -> None:
        self._leave()
        self.post_message(self.Done())


#: The keys a burst after the filter still reaches: `/` (the filter again) and the cursor's
#: moves (`j`, `k`, `g`, `G`: they run and write nothing, and `Enter j` is how a filtered list is
#: walked); they neither end the burst nor make it longer.
PASSED = frozenset({"filter", *(spec.action for spec in keys_for("list") if spec.action != "fold")})


class AfterFilter(_Screen):
    """Mixed into the inbox screen: printable keys typed in a burst right after the filter
    closed (Enter or Esc: `FilterInput.closed` calls `_filter_closed`) are swallowed, and a
    toast names them once the burst ends. The rest of a word meant for the filter never opens
    a shell, restarts a loop, changes the saved order or answers. Swallowed rather than typed
    into the filter again: what is listed, and the block under the cursor, stay as the
    operator left them; `/` and the cursor's moves still work (`PASSED`)."""

    #: Seconds: a printable key this soon after the filter closed, or after the last key
    #: swallowed, is swallowed (people type a word's letters well under this apart).
    BURST_GAP = 0.6
    #: The burst's clock (monotonic seconds; a test holds it still).
    keys_clock: Callable[[], float] = time.monotonic
    _burst_until = 0.0
    _swallowed = ""
    _burst_timer: Timer | None = None

    def _filter_closed(self) -> None:
        self._burst_until = self.keys_clock() + self.BURST_GAP

    def on_key(self, event: events.Key) -> None:
        if self.swallow(event):
            event.stop()
            event.prevent_default()

    def swallow(self, event: events.Key) -> bool:
        """Whether `event` is a key of the burst to swallow (then noted for the toast)."""
        if not self._burst_until:
            return False
        now = self.keys_clock()
        if now >= self._burst_until:
            self._burst_until = 0.0
            return False
        if not event.is_printable or self.app.screen is not self:
            return False
        bound = self.active_bindings.get(event.key)
        if bound is not None and bound.binding.action in PASSED:
            return False
        self._burst_until = now + self.BURST_GAP
        self._swallowed += event.character or ""
        if self._burst_timer is not None:
            self._burst_timer.stop()
        self._burst_timer = self.set_timer(self.BURST_GAP, self._burst_over)
        return True

    def _burst_over(self) -> None:
        self._burst_timer = None
        typed, self._swallowed = self._swallowed, ""
        if typed:
            self.notify(
                printable(f'Ignored "{typed}": typed as the filter closed. / filters again.'),
                title="Keys ignored",
                markup=False,
                timeout=6,
            )
