"""The inbox screen: the header, the list of blocks, and the detail of the highlighted one.

The app owns the data (the Inbox, the drafts, the workers) and the answer flow; this screen
owns the layout and what it shows: the header's text is built here and nowhere else.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from hitl_tui.inbox import Delta, Inbox, key_of
from hitl_tui.model import Block
from hitl_tui.textio import printable
from hitl_tui.tui.widgets import BlockDetail, BlockList, BlockListHeader, Clock
from hitl_tui.view import row_of

READING = "hitl · reading repositories…"


#: Each remote backend's scopes and their states: title -> scope -> (state, message).
SourceStates = dict[str, dict[str, tuple[str, str]]]


def header_text(inbox: Inbox, source_states: SourceStates) -> str:
    """The line at the top: blocks, repos, watched repos, each remote backend, warnings."""
    count = len(inbox.blocks)
    repos = inbox.repo_count()
    watched = len(inbox.workspace.repos)
    if count:
        noun = "block" if count == 1 else "blocks"
        repo_noun = "repo" if repos == 1 else "repos"
        text = f"hitl · {count} {noun} in {repos} {repo_noun} · watching {watched}"
    else:
        text = f"hitl · no open blocks · watching {plural(watched, 'repo')}"
    for title, scopes in source_states.items():
        ok = sum(state == "ok" for state, _ in scopes.values())
        text += f" · {title} {ok}/{len(scopes)} ok"
        trouble = [f"{scope} {msg}" for scope, (st, msg) in scopes.items() if st != "ok"]
        if trouble:
            text += f" ({printable(trouble[0])})"
    warnings = len(inbox.warnings)
    if warnings:
        text += f" · {plural(warnings, 'warning')}"
    return text


class InboxScreen(Screen):
    """The app's first screen, under every modal."""

    class Ready(Message):
        """The screen and its widgets are mounted: the app may fill them."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield Static(READING, id="topbar", markup=False)
        table = BlockList(self.clock, id="blocks")
        with Vertical(id="inbox") as inbox:
            inbox.border_title = "Inbox"
            yield BlockListHeader(table, id="columns")
            yield table
        yield Static("", id="empty", markup=False)
        yield BlockDetail(id="detail")
        # The palette's key is in the help: the footer keeps its room for hitl's own keys.
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.blocklist.focus()
        self.set_interval(60, self.blocklist.refresh_ages)
        self.post_message(self.Ready())

    @property
    def blocklist(self) -> BlockList:
        return self.query_one(BlockList)

    @property
    def current(self) -> Block | None:
        """The highlighted block."""
        return self.blocklist.current

    def load(self, blocks: list[Block]) -> None:
        """The first scan's blocks, the first one highlighted."""
        table = self.blocklist
        table.load(blocks)
        if blocks:
            table.move_cursor(row=0)

    def apply(self, delta: Delta) -> None:
        """A Delta applied to the list; the detail follows when its block moved or changed."""
        table = self.blocklist
        before = table.current
        table.apply(delta)
        after = table.current
        moved = after is None or before is None or key_of(after) != key_of(before)
        if moved or any(key_of(b) == key_of(after) for b in delta.changed):
            self.show_current()

    def go_to(self, block: Block) -> bool:
        """Highlight `block`; False when it is not listed (answered or gone meanwhile)."""
        return self.blocklist.select(row_of(block))

    def show_current(self) -> None:
        try:
            detail = self.query_one(BlockDetail)
        except NoMatches:  # a highlight that arrives while the app is closing
            return
        detail.show(self.blocklist.current)

    @on(BlockList.Highlighted)
    def _highlighted(self, event: BlockList.Highlighted) -> None:
        self.show_current()

    def toggle_raw(self) -> None:
        self.query_one(BlockDetail).toggle_raw()

    def show_header(self, inbox: Inbox, source_states: SourceStates) -> None:
        """The header, the empty-inbox text, and where the focus goes, from the inbox."""
        count = len(inbox.blocks)
        bar = self.query_one("#topbar", Static)
        bar.update(header_text(inbox, source_states))
        bar.set_class(bool(count), "has-blocks")
        self.set_class(count == 0, "empty")
        # The hidden list must not keep the focus (nor the footer its keys), and gets it back.
        blocklist = self.blocklist
        blocklist.can_focus = bool(count)
        if count == 0 and blocklist.has_focus:
            self.set_focus(None)
        elif count and self.focused is None and self.app.screen is self:
            blocklist.focus()
        watched = len(inbox.workspace.repos)
        self.query_one("#empty", Static).update(
            f"No open blocks in {plural(watched, 'repo')}.\n\nWatching for new ones; "
            "a loop that stops with a question shows up here at once."
        )

    def show_failure(self, text: str) -> None:
        """The header says what failed (the first scan, when it raised)."""
        bar = self.query_one("#topbar", Static)
        bar.update(f"hitl · {text}")
        bar.remove_class("has-blocks")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
