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
    #: The remote backends' states and the warnings, as the header ends (" · " first).
    tail: str
    #: Of the watched repositories, those polled (the kernel's limit on watches reached).
    polled: int = 0


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
    #: A filter is typed (only then is the count "N of M"), and the answers it lists.
    filtered: bool = False
    waiting_listed: int = 0


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
    return HeaderParts(
        len(inbox.blocks), inbox.repo_count(), len(inbox.workspace.repos), tail, len(inbox.polled)
    )


def header_line(parts: HeaderParts, view: ViewState | None = None, width: int | None = None) -> str:
    """The line at the top: blocks (`12 of 340 blocks` with a filter only), repos, watched
    repos, each remote backend, warnings; then what the view hides or how it sorts. Within
    `width`, it is shortened before it is cut: each part's short form first, then "watching"
    left out (what it counts is in `hitl status`)."""
    full = _header_parts(parts, view, short=False)
    if width is None or _joined(full) <= width:
        return " · ".join(full)
    # Shorter words first, then without "watching"; the backends' states and their messages
    # (why a host is not read) stay, last on the line: what is cut is the end of a message.
    short = _header_parts(parts, view, short=True)
    if _joined(short) > width:
        short = [p for p in short if not p.startswith("watching ")]
    return " · ".join(short)


def _tail(tail: str) -> list[str]:
    return tail.removeprefix(" · ").split(" · ") if tail else []


def _joined(texts: list[str]) -> int:
    from rich.cells import cell_len

    return cell_len(" · ".join(texts))


def _header_parts(parts: HeaderParts, view: ViewState | None, short: bool) -> list[str]:
    count, watched = parts.count, parts.watched
    filtered = view is not None and view.filtered
    # Past the kernel's limit on inotify watches, some of them are polled (`watch.WatchLimit`).
    polled = ""
    if parts.polled:
        from hitl_tui.inbox.watch import POLL_EVERY  # (watchfiles: loaded once watching)

        polled = f" ({parts.polled:,} polled" + (")" if short else f" every {POLL_EVERY:g} s)")
    out = ["hitl"]
    if view is not None and view.snoozed_view:
        out.append(
            f"snoozed: {plural(view.listed, 'block')}"
            + ("" if short else " (Z: back to the inbox)")
        )
        out.append(f"{count:,} open")
        out.append(f"watching {watched:,}{polled}")
    elif count:
        shown = count
        if view is not None:  # the list's own count of what it knows: what it lists is of it
            shown, count = view.listed, view.known
        noun = "block" if count == 1 else "blocks"
        repo_noun = "repo" if parts.repos == 1 else "repos"
        # "N of M" with a filter only: what the snooze sets aside is counted on its own.
        # "N of M" with a filter only (what a snooze sets aside is counted on its own).
        what = f"{shown:,} of {count:,} {noun}" if filtered else plural(shown, "block")
        out.append(f"{what}{'/' if short else ' in '}{parts.repos:,} {repo_noun}")
        out.append(f"watching {watched:,}{polled}")
    else:
        out.append("no open blocks")
        out.append(f"watching {plural(watched, 'repo')}{polled}")
    if view is not None:
        if view.waiting:
            waiting = f"{view.waiting:,}"
            if filtered:  # the answers the filter lists, counted apart from the blocks
                waiting = f"{view.waiting_listed:,} of {waiting}"
            text = f"{waiting} waiting" + ("" if short else " for their loop")
            trouble = [f"{view.late} not resumed"] if view.late else []
            if view.failed:
                trouble.append(f"{plural(view.failed, 'restart')} failed")
            if trouble:
                text += f" ({', '.join(trouble)})"
            out.append(text)
        if view.marked:
            text = f"{view.marked:,} marked"
            if view.marked_hidden:
                hidden = "hidden" if short else "hidden by the filter"
                text += f" ({view.marked_hidden:,} {hidden})"
            out.append(text)
        if view.hidden:
            out.append(f"+{view.hidden} hidden" + ("" if short else " by the filter"))
        if view.snoozed and not view.snoozed_view:
            out.append(f"{view.snoozed} snoozed")
        if view.order != ORDERS[0]:
            name = ORDER_NAMES[view.order]
            out.append(name.removesuffix(" first") if short else name)
        if view.group:
            out.append(f"by {view.group}" if short else f"grouped by {view.group}")
    return out + _tail(parts.tail)


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
        waiting = late = failed = waiting_listed = 0
        if self._waiting:  # rows, not blocks: not counted as blocks (a pass over them only)
            blocks = self.rows.blocks
            for rk in self._waiting:
                block = blocks.get(rk)
                if block is None:
                    continue
                waiting += 1
                late += block.state == "not-resumed"
                failed += block.state == "restart-failed"
                shown = self.rows.accepts(rk, block)
                listed -= shown
                waiting_listed += shown
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
            filtered=bool(spec.query.text),
            waiting_listed=waiting_listed,
        )

    def on_resize(self) -> None:
        """The header is shortened to the new width (after the bar is laid out anew)."""
        self.call_after_refresh(self._render_header)

    def _render_header(self) -> None:
        """The header from the inbox's last counts and the view as it is (cheap: per key)."""
        if self._progress is not None:
            self.show_progress()
            return
        if self._parts is None:
            return
        bar = self.query_one("#topbar", Static)
        width = bar.content_region.width or self.app.size.width - 2
        bar.update(header_line(self._parts, self.view_state(), width))
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
