"""The inbox app: every open block across the watched repositories, answered in two keystrokes.

This is the only package that imports Textual. It reads through the domain's Inbox, plans
answers with the sources, and applies them with the same code the CLI uses; parsing and writing
run in worker threads so that no keypress waits on the disk.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from hitl_tui.answering import apply_answer, plan_answer, source_for
from hitl_tui.config import Config
from hitl_tui.inbox import Delta, Inbox, default_workers, key_of
from hitl_tui.model import Answer, Block, Choice, HitlError, Plan, StaleError
from hitl_tui.sources.base import Source
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.commands import HitlCommands
from hitl_tui.tui.inbox_screen import InboxScreen
from hitl_tui.tui.messages import Answered, AnswerStale, Refused, ScanDone, Undone
from hitl_tui.tui.screens import (
    HelpScreen,
    HistoryScreen,
    Preview,
    PreviewScreen,
    TextAnswerScreen,
    Typed,
)
from hitl_tui.tui.widgets import row_key

#: What each worker group does, for the message when one fails.
WORKER_TASKS = {
    "scan": "Reading the repositories",
    "watch": "Live watching",
    "github": "Polling GitHub",
    "apply": "Writing an answer (or an undo)",
}

#: A burst of arrivals ends after this many seconds without a new block ...
ARRIVAL_QUIET = 0.5
#: ... or this long after its first block, whichever comes first.
ARRIVAL_MAX = 2.0
#: Blocks named in the toast of a burst; the rest are counted.
ARRIVAL_NAMES = 5


class HitlApp(App[int]):
    """hitl's terminal app."""

    CSS_PATH = "app.tcss"
    TITLE = "hitl"
    #: Ctrl+P: Textual's own commands, and hitl's (tui/commands.py).
    COMMANDS: ClassVar = App.COMMANDS | {HitlCommands}
    #: Screen classes for small terminals (app.tcss, and the preview's CSS): below 60 columns
    #: the inbox drops its state column, below 20 rows every screen packs tighter.
    HORIZONTAL_BREAKPOINTS: ClassVar = [(0, "-narrow"), (60, "-wide")]
    VERTICAL_BREAKPOINTS: ClassVar = [(0, "-short"), (20, "-tall")]

    BINDINGS: ClassVar = bindings("inbox")

    def __init__(
        self,
        inbox: Inbox,
        config: Config | None = None,
        *,
        watch: bool = True,
        clock: Callable[[], datetime] | None = None,
        notices: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.inbox = inbox
        self.config = config or Config()
        self.watch_enabled = watch
        self.clock = clock or (lambda: datetime.now(UTC))
        self.stop_event = asyncio.Event()
        self.loaded = False
        self.operator = self.config.operator_name()
        #: Messages from before start-up (answers a crash interrupted, then recovered).
        self.notices = list(notices or ())
        #: Each remote backend's title -> scope -> (state, one-line message), as last polled.
        self.source_states: dict[str, dict[str, tuple[str, str]]] = {}
        self.inbox.use_remotes(self.config.remotes)
        #: One preview screen, built on first use and kept installed (see PreviewScreen).
        self._preview_screen: PreviewScreen | None = None
        #: Configuration warnings already toasted (inbox.warnings: a project.md unread, ...).
        self._warned: set[str] = set()
        #: Own-words drafts, by (block row, choice key or None): kept while the app runs, until
        #: the block is answered or leaves, or the operator discards the draft.
        self.drafts: dict[tuple[str, str | None], tuple[str, ...]] = {}
        #: Blocks of the burst of arrivals in progress, and those waiting for a modal to close.
        self._arriving: list[Block] = []
        self._held: list[Block] = []
        self._burst_timer: Timer | None = None
        self._burst_began = 0.0
        self.inbox_screen = InboxScreen(self.clock)

    # -- the inbox screen and the workers ------------------------------------------------------

    def get_default_screen(self) -> InboxScreen:
        return self.inbox_screen

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        if self.config.keys:
            self.set_keymap(dict(self.config.keys))
        self.screen_change_signal.subscribe(self, self._screen_changed)
        for message in self.notices:
            self.notify(printable(message), title="Recovered", severity="warning", markup=False)

    @on(InboxScreen.Ready)
    def _inbox_ready(self) -> None:
        self.initial_scan()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def initial_scan(self) -> None:
        self.inbox.scan(workers=default_workers())
        if self.watch_enabled:
            self.inbox.watch_dirs()  # maps each watched folder to its repo: here, not on the UI
        self.post_message(ScanDone(self.inbox.sorted_blocks()))
        self.inbox.save_cache()

    @on(ScanDone)
    def _scan_done(self, message: ScanDone) -> None:
        self.inbox_screen.load(message.blocks)
        # Start-up made most of the objects the app will ever hold (blocks, rows, widgets).
        # Frozen, the cyclic GC stops walking them: at 5,000 blocks one full collection took
        # 80 ms, in the middle of a keypress.
        gc.freeze()
        self.loaded = True
        self.refresh_header()
        self.inbox_screen.show_current()
        self._toast_warnings()
        if self.watch_enabled:
            self.run_watcher()
            for source in self.inbox.remotes:
                self.run_remote(source)

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def run_watcher(self) -> None:
        from hitl_tui.watch import watch_inbox

        while not self.stop_event.is_set():
            try:
                await watch_inbox(
                    self.inbox, self._on_delta, self.stop_event, on_error=self._watch_error
                )
            except Exception as exc:  # the watcher itself failed: say so, and start again
                self._watch_error(exc)
                await asyncio.sleep(2)

    @work(group="remote", exit_on_error=False)
    async def run_remote(self, source: Source) -> None:
        """Poll a remote backend's scopes; each shows its own state, none hides the others."""

        async def update(scope: str, state: str, message: str, delta: Delta | None) -> None:
            await self._on_remote(source, scope, state, message, delta)

        try:
            await source.watch(self.inbox, update, self.stop_event)
        except HitlError as exc:  # the backend cannot start at all
            self.notify(printable(str(exc)), title=source.title, severity="error", markup=False)

    async def _on_remote(
        self, source: Source, scope: str, state: str, message: str, delta: Delta | None
    ) -> None:
        states = self.source_states.setdefault(source.title, {})
        before = states.get(scope)
        states[scope] = (state, message)
        if delta is not None:
            self.apply_delta(delta, announce=before is not None)
        else:
            self.refresh_header()
        if state != "ok" and (before is None or before[0] != state):
            self.notify(
                printable(f"{scope}: {message}"),
                title=f"{source.title} source",
                severity="warning",
                markup=False,
            )

    def _watch_error(self, exc: Exception) -> None:
        self.notify(
            printable(f"{type(exc).__name__}: {exc}"),
            title="Live watching hit an error (still watching)",
            severity="error",
            markup=False,
            timeout=10,
        )

    async def _on_delta(self, delta: Delta) -> None:
        self.apply_delta(delta, announce=True)

    def apply_delta(self, delta: Delta, announce: bool = False) -> None:
        try:
            self.inbox_screen.apply(delta)
            self.refresh_header()
        except NoMatches:  # a change that arrives while the app is closing
            return
        if delta.removed and self.drafts:
            gone = {row_key(k) for k in delta.removed}
            self.drafts = {k: v for k, v in self.drafts.items() if k[0] not in gone}
        self._toast_warnings()
        if announce and delta.added:
            self._arrived(delta.added)

    # -- arrivals: one toast and one bell per burst, none over a modal ------------------------

    def _arrived(self, blocks: list[Block]) -> None:
        """Collect a burst: it ends after ARRIVAL_QUIET s without a new block (ARRIVAL_MAX s at
        the latest), then rings once and shows one toast naming every block in it."""
        self._arriving.extend(blocks)
        now = time.monotonic()
        if self._burst_timer is None:
            self._burst_began = now
        else:
            self._burst_timer.stop()
        # Never 0: Textual's timer divides by its interval (a burst past ARRIVAL_MAX would
        # ask for one).
        wait = min(ARRIVAL_QUIET, max(0.01, self._burst_began + ARRIVAL_MAX - now))
        self._burst_timer = self.set_timer(wait, self._end_burst)

    def _still_open(self, blocks: list[Block]) -> list[Block]:
        """The blocks still listed, each once (one may have been answered or left meanwhile)."""
        try:
            listed = self.inbox_screen.blocklist.blocks
        except NoMatches:  # the burst ended as the app was closing
            return []
        seen: dict[str, Block] = {}
        for block in blocks:
            rk = row_key(key_of(block))
            if rk in listed:
                seen[rk] = listed[rk]
        return list(seen.values())

    def _end_burst(self) -> None:
        self._burst_timer = None
        blocks = self._still_open(self._arriving)
        self._arriving = []
        if not blocks:
            return
        if self.config.bell:
            self.bell()
        if len(self.screen_stack) > 1:
            # A modal is open (the preview, a text box): a toast there would cover its
            # buttons. The bell has rung; the toast waits until the modal closes.
            self._held.extend(blocks)
            return
        self._announce(blocks)

    def _screen_changed(self, screen) -> None:
        if len(self.screen_stack) == 1 and self._held:
            blocks = self._still_open(self._held)
            self._held = []
            if blocks:
                self._announce(blocks)

    def _announce(self, blocks: list[Block]) -> None:
        if len(blocks) == 1:
            block = blocks[0]
            title = "New block"
            message = f"{block.id}: {block.one_line_question(120)}"
        else:
            names = ", ".join(b.id for b in blocks[:ARRIVAL_NAMES])
            more = len(blocks) - ARRIVAL_NAMES
            title = "New blocks"
            message = f"{len(blocks)} new blocks: {names}" + (
                f" and {more} more" if more > 0 else ""
            )
        self.notify(printable(message), title=title, severity="warning", markup=False)

    def _toast_warnings(self) -> None:
        """A toast once per new configuration warning (the header keeps the count)."""
        for warning in self.inbox.warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                self.notify(printable(warning), title="Warning", severity="warning", markup=False)

    def refresh_header(self) -> None:
        """The inbox screen's header and empty-inbox text, from the inbox as it is now."""
        self.inbox_screen.show_header(self.inbox, self.source_states)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised: say what failed, in a toast (and the header, for the first
        scan, which would otherwise say "reading repositories…" forever). The app runs on."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        what = WORKER_TASKS.get(event.worker.group, "A background task")
        text = f"{what} failed: {type(error).__name__}: {error}"
        if event.worker.group == "scan":
            self.inbox_screen.show_failure(printable(text))
        self.notify(printable(text), title="Error", severity="error", markup=False, timeout=30)

    # -- actions -----------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.config.keys))

    def action_history(self) -> None:
        from hitl_tui import journal

        # The newest answers only: the journal may hold 90 days of them (`hitl history` pages).
        self.push_screen(HistoryScreen(journal.history(limit=500)))

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
        self.apply_delta(message.delta)
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

    def go_to(self, block: Block) -> None:
        """Highlight `block` (the palette's "Go to block"), when it is still listed."""
        if not self.inbox_screen.go_to(block):
            self.notify(
                printable(f"{block.id} is no longer listed."), severity="warning", markup=False
            )

    def action_raw(self) -> None:
        self.inbox_screen.toggle_raw()

    def _current(self) -> Block | None:
        block = self.inbox_screen.current
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
            self._preview(block, self._answer(choice=choice))

    def _answer(self, choice: Choice | None = None, texts: tuple[str, ...] = ()) -> Answer:
        return Answer(choice=choice, texts=texts, operator=self.operator, when=self.clock())

    def action_own_words(self) -> None:
        block = self._current()
        if block is not None:
            self._ask_text(block, None)

    def _ask_text(self, block: Block, choice: Choice | None) -> None:
        questions = list(block.questions) if choice is None and len(block.questions) > 1 else []
        if questions:
            defaults = list(block.defaults)
            defaults = [(d or "") for d in defaults] + [""] * (len(questions) - len(defaults))
            title = f"Answer each question of {block.id}"
        else:
            questions = [block.one_line_question(400)]
            defaults = [""]
            title = (
                f"{block.id}: {choice.option} — your text"
                if choice
                else f"{block.id}: answer in your own words"
            )

        draft_key = (row_key(key_of(block)), choice.key if choice else None)
        draft = self.drafts.get(draft_key)
        if draft is not None and len(draft) != len(questions):
            draft = None  # the block now asks a different number of questions

        def done(typed: Typed | None) -> None:
            if typed is None:  # discarded on purpose
                self.drafts.pop(draft_key, None)
                return
            texts = typed.texts
            shown = [printable(d, keep_newlines=True) for d in defaults]
            if not any(t.strip() for t in texts) or (draft is None and list(texts) == shown):
                self.drafts.pop(draft_key, None)  # nothing of the operator's own to keep
            else:
                self.drafts[draft_key] = texts
            if not typed.go:
                if draft_key in self.drafts:
                    self.notify(
                        printable(f"Draft kept for {block.id}: press o to carry on."),
                        title="Draft",
                        markup=False,
                    )
                return
            if choice is not None:
                answer = self._answer(choice=choice, texts=texts)
            else:
                answer = self._answer(texts=texts)
            self._preview(block, answer)

        self.push_screen(TextAnswerScreen(block, questions, defaults, title, draft), done)

    def _preview(self, block: Block, answer: Answer) -> None:
        try:
            plan = plan_answer(self.inbox, block, answer)
        except StaleError as exc:
            self._stale(block, str(exc))
            return
        except HitlError as exc:
            self.notify(printable(str(exc)), severity="error", markup=False, timeout=8)
            return
        replan = None
        try:
            editable = source_for(self.inbox, block).decision_text(block, answer)
        except HitlError:
            editable = None
        if editable is not None:

            def replan(text: str) -> Plan:
                edited = Answer(
                    choice=answer.choice,
                    texts=answer.texts,
                    note=answer.note,
                    operator=answer.operator,
                    when=answer.when,
                    decision_override=text,
                )
                return plan_answer(self.inbox, block, edited)

        what = answer.choice.label() if answer.choice else "your own words"
        title = f"Answer {block.id} with {what}"
        preview = Preview(plan, title, editable, replan)
        if self._preview_screen is None:
            self._preview_screen = PreviewScreen(preview)
            self.install_screen(self._preview_screen, "preview")
        else:
            self._preview_screen.load(preview)
        self.push_screen("preview", self._confirmed)

    def _confirmed(self, plan: Plan | None) -> None:
        if plan is not None:
            self.apply_in_background(plan)

    @work(thread=True, group="apply", exit_on_error=False)
    def apply_in_background(self, plan: Plan) -> None:
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
            self.call_from_thread(source.refresh_soon)
        else:
            delta = self.inbox.handle([block.path])
        self.post_message(Answered(plan, done, delta))

    @on(Answered)
    def _answered(self, message: Answered) -> None:
        plan, done, delta = message.plan, message.done, message.delta
        answered = row_key(key_of(plan.block))
        self.drafts = {k: v for k, v in self.drafts.items() if k[0] != answered}
        self.apply_delta(delta)
        message = f"{plan.block.id}: " + "; ".join(done)
        if plan.hint:
            message += f"\n{plan.hint}"
        self.notify(printable(message, keep_newlines=True), title="Answered", markup=False)

    @on(AnswerStale)
    def _answer_stale(self, message: AnswerStale) -> None:
        self._stale(message.block, message.message)

    def _stale(self, block: Block, message: str) -> None:
        delta = self.inbox.handle([block.path])
        self.apply_delta(delta)
        self.notify(
            printable(message) + "\nNothing was written; the block as it is now is shown.",
            title="Block changed",
            severity="error",
            markup=False,
            timeout=10,
        )

    async def action_quit(self) -> None:
        self.stop_event.set()
        self.exit(0)

    def on_unmount(self) -> None:
        self.stop_event.set()
        gc.unfreeze()  # what start-up froze can be collected again (an embedding process)
