"""The inbox screen's header: the line at the top (blocks, repos, watched repos, each remote
backend, warnings; then what the view hides or how it sorts), while the first scan runs, and
when it failed. The text is built here and nowhere else (`header_line`); `ShowsHeader` is mixed
into the inbox screen, whose state (the rows, the answers waiting, the snoozed rows) it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.widgets import Static

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.view import ORDER_NAMES, ORDERS, RowOrder
from hitl_tui.textio import printable
from hitl_tui.tui.filter_bar import FilterInput
from hitl_tui.tui.widgets import BlockList

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object

READING = "hitl · reading repositories…"


#: Each remote backend's scopes and their states: title -> scope -> (state, message).
SourceStates = dict[str, dict[str, tuple[str, str]]]


@dataclass(frozen=True)
class HeaderParts:
    """What the header says of the inbox, counted once per change of it (never per keystroke
    of the filter: counting the repos is a pass over every block)."""

    count: int
    repos: int
    watched: int
    #: The remote backends' states and the warnings, as the header ends.
    tail: str


@dataclass(frozen=True)
class ViewState:
    """What the header says of the view: listed of known, snoozed, order, grouping, filter."""

    listed: int
    known: int
    snoozed: int = 0
    hidden: int = 0
    order: str = ORDERS[0]
    group: str | None = None
    #: The snoozed view (only the snoozed blocks) is shown.
    snoozed_view: bool = False
    #: Answers waiting for their loop (rows, not blocks), how many of them did not resume, and
    #: how many whose loop's restart failed.
    waiting: int = 0
    late: int = 0
    failed: int = 0
    #: Blocks marked for a batch answer, and how many of them the view does not list.
    marked: int = 0
    marked_hidden: int = 0


#: The states of a remote scope that was read (a "warning" one is named with its message).
READ = ("ok", "warning")


def header_parts(inbox: Inbox, source_states: SourceStates) -> HeaderParts:
    tail = ""
    for title, scopes in source_states.items():
        ok = sum(state in READ for state, _ in scopes.values())
        tail += f" · {title} {ok}/{len(scopes)} ok"
        trouble = [f"{scope}: {msg}" for scope, (st, msg) in scopes.items() if st != "ok"]
        if trouble:
            more = f"; +{len(trouble) - 2} more" if len(trouble) > 2 else ""
            tail += f" ({printable('; '.join(trouble[:2]))}{more})"
    warnings = len(inbox.warnings)
    if warnings:
        tail += f" · {plural(warnings, 'warning')}"
    return HeaderParts(len(inbox.blocks), inbox.repo_count(), len(inbox.workspace.repos), tail)


def header_line(parts: HeaderParts, view: ViewState | None = None) -> str:
    """The line at the top: blocks (`12 of 340 blocks` when some are not listed), repos,
    watched repos, each remote backend, warnings; then what the view hides or how it sorts."""
    count, watched = parts.count, parts.watched
    if view is not None and view.snoozed_view:
        text = f"hitl · snoozed: {plural(view.listed, 'block')} (Z: back to the inbox)"
        text += f" · {count:,} open · watching {watched:,}"
    elif count:
        shown = count
        if view is not None:  # the list's own count of what it knows: what it lists is of it
            shown, count = view.listed, view.known
        noun = "block" if count == 1 else "blocks"
        repo_noun = "repo" if parts.repos == 1 else "repos"
        what = f"{count:,} {noun}" if shown == count else f"{shown:,} of {count:,} {noun}"
        text = f"hitl · {what} in {parts.repos:,} {repo_noun} · watching {watched:,}"
    else:
        text = f"hitl · no open blocks · watching {plural(watched, 'repo')}"
    if view is not None:
        if view.waiting:
            text += f" · {view.waiting} waiting for their loop"
            trouble = [f"{view.late} not resumed"] if view.late else []
            if view.failed:
                trouble.append(f"{plural(view.failed, 'restart')} failed")
            if trouble:
                text += f" ({', '.join(trouble)})"
        if view.marked:
            text += f" · {view.marked:,} marked"
            if view.marked_hidden:
                text += f" ({view.marked_hidden:,} hidden by the filter)"
        if view.hidden:
            text += f" · +{view.hidden} hidden by the filter"
        if view.snoozed and not view.snoozed_view:
            text += f" · {view.snoozed} snoozed"
        if view.order != ORDERS[0]:
            text += f" · {ORDER_NAMES[view.order]}"
        if view.group:
            text += f" · grouped by {view.group}"
    return text + parts.tail


def header_text(inbox: Inbox, source_states: SourceStates, view: ViewState | None = None) -> str:
    """The line at the top (see `header_line`)."""
    return header_line(header_parts(inbox, source_states), view)


class ShowsHeader(_Screen):
    """The header of the inbox screen (mixed into it): its text from the inbox's last counts
    and the view as it is."""

    rows: RowOrder
    _waiting: set[str]
    _asleep: set[str]
    _parts: HeaderParts | None
    _progress: tuple[int, int] | None

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def blocklist(self) -> BlockList: ...

        def _wake(self) -> None: ...

    def show_header(self, inbox: Inbox, source_states: SourceStates) -> None:
        """The header, the empty-inbox text, and where the focus goes, from the inbox."""
        count = len(inbox.blocks) + len(self._waiting)
        self._parts = header_parts(inbox, source_states)
        self._wake()
        self._render_header()
        self.set_class(count == 0, "empty")
        # The hidden list must not keep the focus (nor the footer its keys), and gets it back.
        blocklist = self.blocklist
        blocklist.can_focus = bool(count)
        filtering = self.query_one(FilterInput).has_focus
        if count == 0 and blocklist.has_focus:
            self.set_focus(None)
        elif count and self.focused is None and self.app.screen is self and not filtering:
            blocklist.focus()
        watched = len(inbox.workspace.repos)
        self.query_one("#empty", Static).update(
            f"No open blocks in {plural(watched, 'repo')}.\n\nWatching for new ones; "
            "a loop that stops with a question shows up here at once."
        )

    def view_state(self) -> ViewState:
        listed, known = self.rows.counts
        spec = self.rows.spec
        waiting = late = failed = 0
        if self._waiting:  # rows, not blocks: not counted as blocks (a pass over them only)
            blocks = self.rows.blocks
            for rk in self._waiting:
                block = blocks.get(rk)
                if block is None:
                    continue
                waiting += 1
                late += block.state == "not-resumed"
                failed += block.state == "restart-failed"
                listed -= self.rows.accepts(rk, block)
            known -= waiting
        return ViewState(
            listed=listed,
            known=known,
            waiting=waiting,
            late=late,
            failed=failed,
            snoozed=len(self._asleep),
            hidden=self.rows.hidden_arrivals,
            order=spec.order,
            group=spec.group,
            snoozed_view=spec.snoozed,
            marked=len(self.rows.marked),
            marked_hidden=self.rows.marked_hidden() if self.rows.marked else 0,
        )

    def _render_header(self) -> None:
        """The header from the inbox's last counts and the view as it is (cheap: per key)."""
        if self._progress is not None:
            self.show_progress()
            return
        if self._parts is None:
            return
        bar = self.query_one("#topbar", Static)
        bar.update(header_line(self._parts, self.view_state()))
        bar.set_class(bool(self._parts.count), "has-blocks")

    def show_progress(self) -> None:
        """The header while the first scan runs: how far it is (its counts come at the end)."""
        if self._progress is None:
            return
        done, total = self._progress
        found = len(self.rows.blocks) - len(self._waiting)
        text = f"hitl · reading {done:,} of {total:,} repos · {found:,} blocks so far"
        if self._waiting:
            text += f" · {len(self._waiting)} waiting for their loop"
        bar = self.query_one("#topbar", Static)
        bar.update(text)
        bar.set_class(bool(found), "has-blocks")

    def show_failure(self, text: str) -> None:
        """The header says what failed (the first scan, when it raised)."""
        self._progress = None
        bar = self.query_one("#topbar", Static)
        bar.update(f"hitl · {text}")
        bar.remove_class("has-blocks")


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
