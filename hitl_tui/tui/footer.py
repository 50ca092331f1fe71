"""The inbox's footer: the keys that matter where the cursor is.

Textual's Footer shows every binding marked `show`, the same on every row; at 80 columns it
was cut before `z`, `v`, `p` or `R` could be hinted. `HintFooter` shows, by the highlighted
row's kind (`InboxScreen.footer_context`), the keys of that kind in their order of use: on a
block the answer's and the triage keys (own words, snooze, reuse, group), on an answer
waiting for its loop the loop's keys (restart, drop, to the loop), on a group's header its
fold and mark. Elsewhere (the filter's box) it is Textual's Footer. The keys are the key
table's bindings (their ids), remapped as the config says.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from hitl_tui.tui.waiting import waiting_of
from hitl_tui.tui.widgets import BlockList

#: The bindings (key table ids) hinted for each kind of row, in this order: `?` and `q`
#: first (a 40-column pane keeps them), and at 80 columns the first eight of a block's, the
#: first six of an answer's.
HINTS = {
    "block": (
        "hitl.down",
        "hitl.help",
        "hitl.quit",
        "hitl.own-words",
        "hitl.snooze",
        "hitl.reuse",
        "hitl.filter",
        "hitl.group",
        "hitl.undo",
        "hitl.restart",
        "hitl.history",
        "hitl.raw",
    ),
    "waiting": (
        "hitl.down",
        "hitl.help",
        "hitl.quit",
        "hitl.restart",
        "hitl.dismiss",
        "hitl.open",
        "hitl.filter",
        "hitl.undo",
        "hitl.history",
    ),
    "group": (
        "hitl.down",
        "hitl.help",
        "hitl.quit",
        "hitl.fold",
        "hitl.mark",
        "hitl.group",
        "hitl.filter",
    ),
}


def row_kind(table: BlockList) -> str | None:
    """The kind of the list's row under the cursor (a key of HINTS: a block, an answer waiting
    for its loop, a group's header), or None (the filter's box has the focus, or nothing is
    listed)."""
    if not table.has_focus or not table.drawn:
        return None
    block = table.current
    if block is None:
        return "group"
    return "waiting" if waiting_of(block) is not None else "block"


class HintFooter(Footer):
    """Textual's Footer, its keys chosen by the row under the cursor (see the module)."""

    def compose(self) -> ComposeResult:
        context = getattr(self.screen, "footer_context", lambda: None)()
        wanted = HINTS.get(context) if context else None
        if wanted is None or not self._bindings_ready:
            yield from super().compose()
            return
        by_id = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.id in wanted and binding.id not in by_id:
                by_id[binding.id] = (binding, enabled, tooltip)
        shown = [by_id[i] for i in wanted if i in by_id]
        self.styles.grid_size_columns = len(shown)
        for binding, enabled, tooltip in shown:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)
