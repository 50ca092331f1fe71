"""The list's share of the screen: stable, whatever block is highlighted, and the operator's.

The list is as tall as its rows, at most its share of the screen (half, by default); the
detail takes the rest and scrolls in its own panes. So moving from a short loopkit block to an
agenticloop task with a long template leaves the list where it was, and a filter that lists 6
blocks gives the room it frees to the detail. `+` and `-` change the share by a step, `L` zooms
the list onto the whole screen (the detail hidden) and back; both are kept in `seen.json`
(`state.seen`) with the order and grouping, so the app opens the way it was left.

`ListSizing` is mixed into the inbox screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hitl_tui.state.seen import LIST_SHARES, SeenBook

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object

#: The list's share of the screen (percent) when the operator has not chosen one.
DEFAULT_SHARE = 50
#: What one `+` or `-` changes it by (percent).
STEP = 10


class ListSizing(_Screen):
    """`+`, `-` and `L`, for the inbox screen (mixed into it)."""

    seen: SeenBook

    @property
    def list_share(self) -> int:
        share = self.seen.list_share
        return DEFAULT_SHARE if share is None else share

    def show_list_size(self) -> None:
        """Size the list as chosen (at mount, and after each key)."""
        inbox = self.query_one("#inbox")
        # Set here, the bound outranks the stylesheet's: zoomed, there is none.
        inbox.styles.max_height = None if self.seen.list_zoom else f"{self.list_share}%"
        self.set_class(self.seen.list_zoom, "-zoom-list")

    def action_list_size(self, step: int) -> None:
        """`+` / `-`: the list a step taller or shorter (back from a zoom, first)."""
        low, high = LIST_SHARES
        share = self.list_share
        if not self.seen.list_zoom:
            share = min(high, max(low, share + step * STEP))
        self.seen.choose_list(share, False)
        self.show_list_size()
        # The list's new height says it; only a key that changes nothing does.
        if share == high and step > 0:
            self.notify(f"The list takes {share}% of the screen, its most", timeout=2)
        elif share == low and step < 0:
            self.notify(f"The list takes {share}% of the screen, its least", timeout=2)

    def action_list_zoom(self) -> None:
        """`L`: the list on the whole screen (the detail hidden), or back to its share."""
        self.seen.choose_list(self.seen.list_share, not self.seen.list_zoom)
        self.show_list_size()
        if self.seen.list_zoom:
            self.notify("The list fills the screen: L shows the detail again", timeout=2)
