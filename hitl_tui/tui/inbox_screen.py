"""The inbox screen: the header, the list of blocks, the detail of the highlighted one, and
everything the operator does to a block from there.

The app owns the data and the workers that feed it (the Inbox, the scan, the watcher, remote
polling), the arrivals' toasts, and the other screens (help, history). This screen owns its
layout and what it shows (the header's text is built here and nowhere else), and the answer
flow: a choice, an optional text box (drafts kept), the preview, the confirm, the write in a
worker, and what follows it (answered, stale, refused); the undo of the last answer; the raw
file. Its workers post the messages of `messages.py`; the `@on` handlers below take them.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol, cast

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from hitl_tui.answering import apply_answer, source_for
from hitl_tui.inbox import Delta, Inbox, key_of
from hitl_tui.model import Answer, Block, Choice, HitlError, Plan, StaleError
from hitl_tui.textio import printable
from hitl_tui.tui.answer_flow import Drafts, preview_of, text_box
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.messages import Answered, AnswerStale, Refused, Undone
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen, Typed
from hitl_tui.tui.widgets import BlockDetail, BlockList, BlockListHeader, Clock, row_key
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


class Host(Protocol):
    """What the inbox screen asks of its app (HitlApp), which it cannot import (a cycle)."""

    def apply_delta(self, delta: Delta, announce: bool = False) -> None:
        """The inbox changed: the list, the header, the configuration warnings follow."""

    def worker_failed(self, worker: Worker) -> None:
        """A worker raised: say what failed."""


class InboxScreen(Screen):
    """The app's first screen, under every modal: the inbox shown, and the answer flow."""

    #: Every key of the inbox section; quit, help and history switch screens: the app's.
    BINDINGS: ClassVar = bindings("inbox", app_actions={"quit", "help", "history"})

    class Ready(Message):
        """The screen and its widgets are mounted: the app may fill them."""

    def __init__(self, clock: Clock, inbox: Inbox, operator: str) -> None:
        super().__init__()
        self.clock = clock
        self.inbox = inbox
        self.operator = operator
        self.drafts = Drafts()
        #: One preview screen, built on first use and kept installed (see PreviewScreen).
        self._preview_screen: PreviewScreen | None = None

    @property
    def host(self) -> Host:
        return cast(Host, self.app)

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
        """A Delta applied to the list; the detail follows when its block moved or changed, and
        the drafts of blocks that left go with them."""
        table = self.blocklist
        before = table.current
        table.apply(delta)
        after = table.current
        moved = after is None or before is None or key_of(after) != key_of(before)
        if moved or any(key_of(b) == key_of(after) for b in delta.changed):
            self.show_current()
        if delta.removed:
            self.drafts.forget(row_key(k) for k in delta.removed)

    def go_to(self, block: Block) -> None:
        """Highlight `block` (the palette's "Go to block"), when it is still listed."""
        if not self.blocklist.select(row_of(block)):
            self.notify(
                printable(f"{block.id} is no longer listed."), severity="warning", markup=False
            )

    def show_current(self) -> None:
        try:
            detail = self.query_one(BlockDetail)
        except NoMatches:  # a highlight that arrives while the app is closing
            return
        detail.show(self.blocklist.current)

    @on(BlockList.Highlighted)
    def _highlighted(self, event: BlockList.Highlighted) -> None:
        self.show_current()

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

    def action_raw(self) -> None:
        """The highlighted block's file as it is on disk, instead of its parsed parts (r)."""
        self.query_one(BlockDetail).toggle_raw()

    # -- the answer flow: choice -> (text box) -> preview -> confirm -> write in a worker ----

    def _current(self) -> Block | None:
        block = self.current
        if block is None:
            self.notify("No block is highlighted.", severity="warning")
        return block

    def action_choose(self, number: int) -> None:
        block = self._current()
        if block is None:
            return
        if number > len(block.choices):
            if block.choices:
                msg = f"This block has {len(block.choices)} choices; press o for your own words."
            else:
                msg = "This block lists no choices: press o to answer in your own words."
            self.notify(msg, severity="warning")
            return
        choice = block.choices[number - 1]
        if choice.needs_text:
            self._ask_text(block, choice)
        else:
            self._preview(block, self._answer(choice))

    def action_own_words(self) -> None:
        block = self._current()
        if block is not None:
            self._ask_text(block, None)

    def _answer(self, choice: Choice | None, texts: tuple[str, ...] = ()) -> Answer:
        return Answer(choice=choice, texts=texts, operator=self.operator, when=self.clock())

    def _ask_text(self, block: Block, choice: Choice | None) -> None:
        """The text box for `choice` (None: own words), from its draft if one is kept; Esc
        keeps what was typed as a draft, a discard drops it, Continue goes to the preview."""
        box = text_box(block, choice)
        draft = self.drafts.get(box)

        def done(typed: Typed | None) -> None:
            if typed is None:  # discarded on purpose
                self.drafts.discard(box.draft_key)
                return
            kept = self.drafts.keep(box, typed.texts, resumed=draft is not None)
            if not typed.go:
                if kept:
                    self.notify(
                        printable(f"Draft kept for {block.id}: press o to carry on."),
                        title="Draft",
                        markup=False,
                    )
                return
            self._preview(block, self._answer(choice, typed.texts))

        screen = TextAnswerScreen(block, box.questions, box.defaults, box.title, draft)
        self.app.push_screen(screen, done)

    def _preview(self, block: Block, answer: Answer) -> None:
        """The preview of `answer`; applied in a worker when the operator confirms it."""
        try:
            preview = preview_of(self.inbox, block, answer)
        except StaleError as exc:
            self._stale(block, str(exc))
            return
        except HitlError as exc:
            self.notify(printable(str(exc)), severity="error", markup=False, timeout=8)
            return
        if self._preview_screen is None:
            self._preview_screen = PreviewScreen(preview)
            self.app.install_screen(self._preview_screen, "preview")
        else:
            self._preview_screen.load(preview)
        self.app.push_screen("preview", self._confirmed)

    def _confirmed(self, plan: Plan | None) -> None:
        if plan is not None:
            self._apply_in_background(plan)

    @work(thread=True, group="apply", exit_on_error=False)
    def _apply_in_background(self, plan: Plan) -> None:
        """Write the confirmed plan (a remote one is sent), then re-read what it changed."""
        block = plan.block
        try:
            done = apply_answer(self.inbox, plan)
        except StaleError as exc:
            self.post_message(AnswerStale(block, str(exc)))
            return
        except HitlError as exc:
            self.post_message(Refused("", str(exc)))
            return
        source = source_for(self.inbox, block)
        if source.remote:
            delta = self.inbox.drop(block)
            self.app.call_from_thread(source.refresh_soon)
        else:
            delta = self.inbox.handle([block.path])
        self.post_message(Answered(plan, done, delta))

    @on(Answered)
    def _answered(self, message: Answered) -> None:
        plan, done, delta = message.plan, message.done, message.delta
        self.drafts.forget([row_key(key_of(plan.block))])
        self.host.apply_delta(delta)
        text = f"{plan.block.id}: " + "; ".join(done)
        if plan.hint:
            text += f"\n{plan.hint}"
        self.notify(printable(text, keep_newlines=True), title="Answered", markup=False)

    @on(AnswerStale)
    def _answer_stale(self, message: AnswerStale) -> None:
        self._stale(message.block, message.message)

    def _stale(self, block: Block, message: str) -> None:
        """The block changed since it was read: nothing was written; show it as it is now."""
        self.host.apply_delta(self.inbox.handle([block.path]))
        self.notify(
            printable(message) + "\nNothing was written; the block as it is now is shown.",
            title="Block changed",
            severity="error",
            markup=False,
            timeout=10,
        )

    # -- undo: the last answer given from this machine, byte for byte ------------------------

    @work(thread=True, group="apply", exit_on_error=False)
    def action_undo(self) -> None:
        from hitl_tui import journal

        try:
            message = journal.undo(None, operator=self.operator)
        except HitlError as exc:
            self.post_message(Refused("Not undone", str(exc)))
            return
        undone = next((e for e in journal.newest_first() if e.undone), None)
        paths = [undone.block_path] if undone else []
        delta = self.inbox.handle([p for p in paths if isinstance(p, Path)])
        self.post_message(Undone(message, delta))

    @on(Undone)
    def _undone(self, message: Undone) -> None:
        self.host.apply_delta(message.delta)
        self.notify(printable(message.message), title="Undone", markup=False)

    @on(Refused)
    def _refused(self, message: Refused) -> None:
        self.notify(
            printable(message.message),
            title=message.title,
            severity="error",
            markup=False,
            timeout=10,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The answer and undo workers run on this screen (their state does not bubble): the
        app reports a failure, as it does for its own workers."""
        if event.state == WorkerState.ERROR:
            self.host.worker_failed(event.worker)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
