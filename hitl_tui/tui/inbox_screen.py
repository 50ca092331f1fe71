"""The inbox screen: the header, the list of blocks, the detail of the highlighted one, and
everything the operator does to a block from there.

The app owns the data and the workers that feed it (the Inbox, the scan, the watcher, remote
polling), the arrivals' toasts, and the other screens (help, history). This screen owns its
layout and what it shows, and the answer flow: a choice, an optional text box (drafts kept),
the preview, the confirm, the write in a worker (the answer service: `service.write_answer`),
and what follows it (answered, stale, refused); the raw file. Its workers post the messages of
`messages.py`; the `@on` handlers below take them.

Mixed into it, each its own module: the header (`header.py`, its text built there and nowhere
else), the loop's actions `R`, `t`, `x` and the restart after an answer (`loop_actions.py`),
snoozes (`z`, `Z`: `snoozing.py`, written in a thread), and the undo of the highlighted answer
(asked first: `undo_flow.py`). Triage is here: the filter (`/`, `set_filter`), the order (`s`)
and grouping (`v`), the marks of blocks not seen yet (`n` / `N`; `seenbook`, saved every few
seconds in a thread). What is listed is the domain's `view.RowOrder`, which this screen builds
and `BlockList` draws.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import ClassVar, cast

from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState

from hitl_tui.answers.service import restart_for, source_for, write_answer
from hitl_tui.inbox.inbox import Delta, Inbox, key_of
from hitl_tui.inbox.view import GROUPS, ORDERS, RowOrder, ViewSpec, row_of
from hitl_tui.loops import notices
from hitl_tui.loops.commands import Loop
from hitl_tui.loops.similarity import question_groups
from hitl_tui.model import Answer, Block, Choice, HitlError, Plan, StaleError
from hitl_tui.state.seen import SeenBook
from hitl_tui.state.snoozes import SnoozeBook
from hitl_tui.textio import printable
from hitl_tui.tui.answer_flow import Drafts, preview_of, text_box
from hitl_tui.tui.batch_flow import Batches
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.detail import BlockDetail
from hitl_tui.tui.filter_bar import AfterFilter, FilterInput
from hitl_tui.tui.footer import HintFooter, row_kind
from hitl_tui.tui.header import READING, HeaderParts, ShowsHeader
from hitl_tui.tui.list_size import ListSizing
from hitl_tui.tui.loop_actions import LoopActions
from hitl_tui.tui.messages import (
    Answered,
    AnswerStale,
    Host,
    ListChanged,
    Refused,
    Restarted,
    Undone,
    WaitingLooked,
)
from hitl_tui.tui.previews import Previews
from hitl_tui.tui.screens import PreviewScreen, TextAnswerScreen, Typed
from hitl_tui.tui.snoozing import Snoozing
from hitl_tui.tui.undo_flow import UndoesHighlighted
from hitl_tui.tui.waiting import rows_delta, waiting_of
from hitl_tui.tui.widgets import BlockList, BlockListHeader, Clock, row_key


class InboxScreen(
    UndoesHighlighted,
    ShowsHeader,
    Snoozing,
    LoopActions,
    Batches,
    ListSizing,
    Previews,
    AfterFilter,
    Screen,
):
    """The app's first screen, under every modal: the inbox shown, and the answer flow."""

    #: Every key of the inbox section; quit, help and history switch screens: the app's.
    BINDINGS: ClassVar = bindings(
        "inbox", app_actions={"quit", "help", "history", "grants", "stats"}
    )

    class Ready(Message):
        """The screen and its widgets are mounted: the app may fill them."""

    def __init__(
        self,
        clock: Clock,
        inbox: Inbox,
        operator: str,
        *,
        seen: SeenBook | None = None,
        snoozes: SnoozeBook | None = None,
        sla: tuple[timedelta, timedelta] | None = None,
        loops: tuple[Loop, ...] = (),
        bell: bool = True,
    ) -> None:
        super().__init__()
        #: Ring when an answer's loop did not resume in time (the config's `bell`).
        self.ring = bell
        #: Row keys of the answers waiting for their loop that the list holds.
        self._waiting: set[str] = set()
        self._looks = 0
        self.clock = clock
        #: `[[loop]]`: the restart run after an answer is written.
        self.loops = loops
        self.inbox = inbox
        self.operator = operator
        self.drafts = Drafts()
        #: What the operator has highlighted, and the order and grouping chosen (seen.json).
        self.seen = seen if seen is not None else SeenBook(None)
        #: The blocks set aside (snoozed.json).
        self.snoozes = snoozes if snoozes is not None else SnoozeBook(None)
        self.sla = sla
        order, group = self.seen.order, self.seen.group  # the names saved: this list's only
        spec = ViewSpec(
            order=order if order in ORDERS else ORDERS[0],
            group=group if group in GROUPS else None,
        )
        self.rows = RowOrder(
            spec=spec, snoozes=self.snoozes, clock=clock, questions=question_groups
        )
        #: Row keys of the blocks snoozed when last looked (to see whose snooze ran out).
        self._asleep: set[str] = set()
        #: The header's counts of the inbox, as of its last change.
        self._parts: HeaderParts | None = None
        self._saving = False
        #: When the timer last let a save of the seen marks go (`_save_seen_tick`).
        self._seen_tick = time.monotonic()
        #: One preview screen, built on first use and kept installed (see PreviewScreen).
        self._preview_screen: PreviewScreen | None = None
        #: The first scan's progress while it runs (repos read, of how many), as the header
        #: says it; None once it is done (`finish_scan`) or before its first batch.
        self._progress: tuple[int, int] | None = None
        #: Batches of the first scan listed so far (`add_batch`), and whether it is over (no
        #: seen marks are saved before: a save drops the marks of blocks not listed yet).
        self._batches = 0
        #: The kind of row the footer hints keys for (`footer_context`), as last drawn.
        self._footer_context: str | None = None
        self.scanned = False

    @property
    def host(self) -> Host:
        return cast(Host, self.app)

    def compose(self) -> ComposeResult:
        yield Static(READING, id="topbar", markup=False)
        with Vertical(id="filter-bar"):
            with Horizontal(id="filter-row"):
                yield Static("/", id="filter-label", markup=False)
                yield FilterInput(
                    placeholder="words, repo:shop, cat:, state:, src:, id:, age:>1h, -word",
                    id="filter",
                    select_on_focus=False,
                )
            yield Static("", id="filter-problems", markup=False)
        table = BlockList(self.clock, self.rows, is_new=self._is_new, sla=self.sla, id="blocks")
        with Vertical(id="inbox") as inbox:
            inbox.border_title = "Inbox"
            yield BlockListHeader(table, id="columns")
            yield table
        yield Static("", id="empty", markup=False)
        yield Static("", id="list-note", markup=False)
        yield BlockDetail(id="detail")
        # The palette's key is in the help: the footer keeps its room for hitl's own keys,
        # those of the row under the cursor (tui/footer.py).
        yield HintFooter(show_command_palette=False)

    #: Seconds between saves of the seen marks (only when some changed).
    SAVE_EVERY = 5.0
    #: A save waits while keys come or blocks arrive (`tui/quiet.py`), this many s at most.
    SAVE_LATEST = 30.0
    #: Seconds between looks at the answers waiting for their loop (deadlines; answers given
    #: by `hitl answer` meanwhile; signs without a file event, when not watching).
    LOOK_EVERY = 5.0

    def _is_new(self, block: Block) -> bool:
        """A block not seen yet (an answer waiting for its loop is never new)."""
        return waiting_of(block) is None and self.seen.is_new(block)

    def on_mount(self) -> None:
        self.blocklist.focus()
        self.show_list_size()
        # Every change of the box's text filters, as it happens (not on Input.Changed: see
        # FilterInput), whether typed or set by `set_filter`.
        box = self.query_one(FilterInput)
        box.typed = self._filter
        box.closed = self._filter_closed
        box.swallow = self.swallow
        self.set_interval(60, self.refresh_ages)
        self.set_interval(self.SAVE_EVERY, self._save_seen_tick)
        self.set_interval(self.LOOK_EVERY, self._look_at_waiting)
        self.post_message(self.Ready())

    def refresh_ages(self) -> None:
        """Every minute: the ages (and their colours), snoozes whose time is up (back, and
        new), snoozes another hitl set or ended, and `age:` filters."""
        self.blocklist.refresh_ages()
        self.snoozes.refresh()
        if self.blocklist.refilter():
            self.show_current()
        self._wake()
        self._render_header()

    @property
    def blocklist(self) -> BlockList:
        return self.query_one(BlockList)

    @property
    def current(self) -> Block | None:
        """The highlighted block."""
        return self.blocklist.current

    def load(self, blocks: list[Block]) -> None:
        """The first scan's blocks, the first one highlighted. On a first run every block
        found counts as seen; snoozes of blocks no longer open are forgotten."""
        self.seen.adopt([b for b in blocks if waiting_of(b) is None])
        self._waiting = {row_of(b) for b in blocks if waiting_of(b) is not None}
        table = self.blocklist
        table.load(blocks)
        if table.order:
            table.select(table.order[0])
        self._asleep = self._snoozed_rows()
        self._prune(list(blocks))
        self.scanned = True

    def add_batch(self, blocks: list[Block], done: int, total: int) -> None:
        """Blocks the first scan found (`ScanBatch`), listed as they come: the first batch as
        `load` lists the blocks, the next ones as arrivals (`view.RowOrder.apply`), so that the
        highlighted block keeps the cursor. On a first run they all count as seen."""
        self.seen.adopt([b for b in blocks if waiting_of(b) is None], more=True)
        self._progress = (done, total)
        if self._batches == 0:
            self._waiting = {row_of(b) for b in blocks if waiting_of(b) is not None}
            table = self.blocklist
            table.load(blocks)
            if table.order:
                table.select(table.order[0])
            self.show_current()
        elif blocks:
            self.apply(Delta(added=blocks))
        self._batches += 1
        self.show_progress()

    def finish_scan(self, blocks: list[Block], waiting: list[Block]) -> None:
        """The first scan is over: `blocks` (every block it found, the inbox as it is now)
        are listed, each once, and nothing else of the scan's; `waiting` (the rows of answers
        waiting for their loop) were listed with the first batch. Then as `load` ends."""
        if self._batches == 0:  # no batch came (a caller that posts ScanDone alone)
            self.load(blocks + waiting)
        else:
            listed = self.rows.blocks
            final = {row_of(b): b for b in blocks}
            missing = [b for rk, b in final.items() if rk not in listed]
            changed = [
                b
                for rk, b in final.items()
                if rk in listed and listed[rk].fingerprint != b.fingerprint
            ]
            gone = [
                key_of(b) for rk, b in listed.items() if rk not in final and rk not in self._waiting
            ]
            self.seen.adopt(missing)  # the last part of a first run's load
            if missing or changed or gone:
                self.apply(Delta(added=missing, changed=changed, removed=gone))
            self._asleep = self._snoozed_rows()
            self._prune(list(self.rows.blocks.values()))
        self._progress = None
        self.scanned = True

    @work(thread=True, group="snooze", exit_on_error=False, description="_prune")
    def _prune(self, blocks: list[Block]) -> None:
        self.snoozes.prune(blocks, self.clock())

    def apply(self, delta: Delta) -> None:
        """A Delta applied to the list; the detail follows when its block moved or changed, and
        the drafts of blocks that left go with them."""
        if delta.waiting:
            delta = self._with_waiting_rows(delta)
        table = self.blocklist
        before = table.current
        table.apply(delta)
        for key in delta.removed:
            self._waiting.discard(row_key(key))
        self._waiting.update(row_of(b) for b in delta.added if waiting_of(b) is not None)
        after = table.current
        moved = after is None or before is None or key_of(after) != key_of(before)
        if moved or (after is not None and any(key_of(b) == key_of(after) for b in delta.changed)):
            self.show_current()
        if delta.removed:
            self.drafts.forget(row_key(k) for k in delta.removed)

    def _with_waiting_rows(self, delta: Delta, open_now: list | None = None) -> Delta:
        """`delta` with the rows of its changed waiting answers (`Delta.waiting`) added,
        changed or removed; a loop that did not resume rings and says so, one that resumed
        says how."""
        blocks = self.rows.blocks
        known = {rk: blocks[rk] for rk in self._waiting if rk in blocks}
        changes = rows_delta(delta.waiting, known, open_now)
        rows = changes.delta
        merged = Delta(
            added=[*delta.added, *rows.added],
            changed=[*delta.changed, *rows.changed],
            removed=[*delta.removed, *rows.removed],
            rewatch=delta.rewatch,
        )
        for record in changes.resumed:
            how = record.how or "it acted"
            if how.startswith("asked again"):  # the loop ran, and is blocked again
                text = f"{record.block_id}: the loop ran and asked again (↻ in the list)"
            else:
                text = f"{record.block_id}: the loop resumed ({how})"
            # The last line of the answer's one toast (answered, restarted, resumed).
            self.host.progress.step(record.block_id, "resumed", printable(text))
        if changes.late:
            if self.ring:
                self.app.bell()
            # Every hitl of the operator's shows them late (one turned them, `ResumeBook.due`;
            # the others saw the file change): the shared channels get one notice, claimed.
            late = changes.late
            self.host.send_notice(notices.not_resumed(late), notices.shared_late(late))
            names = ", ".join(r.block_id for r in changes.late[:3])
            more = f" and {len(changes.late) - 3} more" if len(changes.late) > 3 else ""
            self.notify(
                printable(
                    f"{names}{more}: no sign of the loop since the answer. "
                    "R restarts it, t goes to it."
                ),
                title="Not resumed",
                severity="warning",
                markup=False,
                timeout=15,
            )
        return merged

    def _look_at_waiting(self) -> None:
        book = self.inbox.resumes
        if book is not None and not self.workers_in("look"):
            self._look_again()

    def workers_in(self, group: str) -> bool:
        return any(w.group == group and not w.is_finished for w in self.workers)

    #: Every this many looks, remote answers (GitHub) are looked at too: over the network.
    REMOTE_EVERY = 12

    @work(thread=True, group="look", exit_on_error=False, description="_look_again")
    def _look_again(self) -> None:
        self._looks += 1
        remote = self._looks % self.REMOTE_EVERY == 0
        changed = self.inbox.check_waiting(remote=remote).waiting
        self.post_message(WaitingLooked(changed, self.inbox.open_waiting()))

    @on(WaitingLooked)
    def _looked(self, message: WaitingLooked) -> None:
        delta = self._with_waiting_rows(Delta(waiting=message.changed), message.open_now)
        if delta:  # the same answers wait and none changed: nothing to draw
            self.host.apply_delta(delta)

    @on(ListChanged)
    def _list_changed(self, message: ListChanged) -> None:
        self.host.apply_delta(message.delta)

    def go_to(self, block: Block) -> None:
        """Highlight `block` (the palette's "Go to block"). One the filter hides: the filter is
        cleared, and a toast says so (the operator asked for that block, not for the filter)."""
        rk = row_of(block)
        if self.blocklist.select(rk):
            return
        hiding = self.rows.spec.query.text
        if rk in self.rows.blocks and hiding:
            self.set_filter("")
            if self.blocklist.select(rk):
                self.notify(
                    printable(f"Filter {hiding} cleared: it hid {block.id}."),
                    title="Go to block",
                    markup=False,
                )
                return
        self.notify(printable(f"{block.id} is no longer listed."), severity="warning", markup=False)

    def show_current(self) -> None:
        try:
            detail = self.query_one(BlockDetail)
        except NoMatches:  # a highlight that arrives while the app is closing
            return
        table = self.blocklist
        detail.show(table.current)
        self._show_note(table)
        context = self.footer_context()
        if context != self._footer_context:  # the footer hints this row's keys
            self._footer_context = context
            self.refresh_bindings()

    def footer_context(self) -> str | None:
        """What the footer hints keys for (`footer.row_kind`)."""
        return row_kind(self.blocklist)

    def _show_note(self, table: BlockList) -> None:
        note = self._note(table)
        shown = self.query_one("#list-note", Static)
        shown.update(note)
        shown.set_class(bool(note), "shown")
        self.query_one(BlockDetail).set_class(bool(note), "no-block")

    def _note(self, table: BlockList) -> str:
        """What is said instead of a block's detail when no block is highlighted: a group's
        header row, or a view that lists none of the blocks there are."""
        group = table.current_group
        if group is not None:
            noun = "block" if group.count == 1 else "blocks"
            what = "folded: Enter shows them" if group.folded else "Enter folds"
            return printable(
                f"{group.name or '(none)'}: {group.count} {noun} ({what}; Space marks them)."
            )
        if table.current is not None or not table.blocks:
            return ""
        spec = self.rows.spec
        if spec.snoozed:
            return "No block is snoozed. Z goes back to the inbox."
        if not spec.query.empty:
            return "No block matches the filter. Esc in the filter (/) clears it."
        return "Every block is snoozed. Z shows them."

    @on(BlockList.Highlighted)
    def _highlighted(self, event: BlockList.Highlighted) -> None:
        self.show_current()
        block = event.block
        if block is not None and waiting_of(block) is None and self.seen.saw(block):
            self.blocklist.refresh_row(row_of(block))  # its new mark goes

    # -- the view: filter, order, grouping, new blocks ---------------------------------------

    def set_filter(self, text: str) -> None:
        """List only the blocks `text` matches (`query.Query`; "" lists all); the filter's box
        shows it (the palette's "filter by repo..." calls this)."""
        box = self.query_one(FilterInput)
        if box.value != text:
            with box.prevent(Input.Changed):
                box.value = text
        self._filter(text)
        self.set_class(bool(text) or box.has_focus, "filtering")

    def _filter(self, text: str) -> None:
        spec = self.rows.spec
        problems = self.query_one("#filter-problems", Static)
        if spec.query.text != text:
            spec = spec.with_query(text)
            table = self.blocklist
            before = table.current
            table.set_spec(spec)
            if table.current is before:  # the detail stays: only the note may change
                self._show_note(table)
            else:
                self.show_current()
            self._render_header()
        # `cat:` that finds none where some formats' blocks carry no category says so.
        note = self.rows.category_note(
            lambda name: getattr(self.inbox.source_named(name), "category_hint", None)
        )
        shown = "; ".join([*spec.query.problems, *([note] if note else [])])
        problems.update(shown)
        problems.set_class(bool(shown), "shown")

    def action_filter(self) -> None:
        """`/`: the filter's box, the cursor at the end of what is there. A priority key (run
        as the app reads it) that focuses the box at once: the letters typed on behind it, in
        one read of a fast burst or a busy app's backlog, are the filter's, never the list's
        keys (`z` snoozing, `t` a shell). In a text box, `/` is typed."""
        if isinstance(self.focused, Input):
            raise SkipAction()
        self.rows.warm()
        self.set_class(True, "filtering")
        box = self.query_one(FilterInput)
        self.set_focus(box)  # not `focus()`: its callback comes after the keys queued already
        box.cursor_position = len(box.value)

    @on(FilterInput.Cleared)
    def _filter_cleared(self) -> None:
        self.set_filter("")
        self.set_class(False, "filtering")
        self._back_to_list()

    @on(FilterInput.Done)
    def _filter_done(self) -> None:
        self.set_class(bool(self.rows.spec.query.text), "filtering")
        self._back_to_list()

    def _back_to_list(self) -> None:
        if self.blocklist.can_focus:
            self.blocklist.focus()
        else:
            self.set_focus(None)

    def _set_view(self, spec: ViewSpec) -> None:
        self.blocklist.set_spec(spec)
        self.seen.choose_view(spec.order, spec.group)
        self.show_current()
        self._render_header()

    def action_cycle_order(self) -> None:
        """`s`: the next order (the header names it, but for the default)."""
        self._set_view(self.rows.spec.next_order())

    def action_cycle_group(self) -> None:
        """`v`: no grouping, by repo, by source, by state, by question."""
        self._set_view(self.rows.spec.next_group())

    def action_next_new(self, step: int) -> None:
        """`n` / `N`: the next / previous block not seen yet, in list order, wrapping."""
        table = self.blocklist
        current = table.current
        start = row_of(current) if current is not None else None
        rk = self.rows.next_where(start, step, self._is_new)
        if rk is None:
            self.notify("No new blocks.", timeout=3)
            return
        if not table.select(rk):  # in a folded group: unfold it
            group = self.rows.group_of(self.rows.blocks[rk])
            if group is not None and group in self.rows.folded:
                table.relist(lambda: self.rows.toggle_fold(group))
            table.select(rk)

    # -- seen marks: saved every few seconds when some changed, in a thread, and at exit -----

    def _save_seen_tick(self) -> None:
        """The SAVE_EVERY timer: at 50,000 blocks a save is a second of Python (in a thread,
        sharing the interpreter with the keys), so it waits for a pause in the keys and the
        arrivals (the app's `Quiet`), SAVE_LATEST s at most."""
        quiet = getattr(self.app, "quiet", None)
        now = time.monotonic()
        if quiet is not None and quiet.wait() > 0 and now - self._seen_tick < self.SAVE_LATEST:
            return
        self._seen_tick = now
        self.save_seen_soon()

    def save_seen_soon(self) -> None:
        # Not during the first scan: a save drops the marks of blocks not listed (yet).
        if self.scanned and self.seen.dirty and not self._saving:
            self._saving = True
            self._save_seen(list(self.rows.blocks.values()))

    @work(thread=True, group="seen", exit_on_error=False, description="_save_seen")
    def _save_seen(self, blocks: list[Block]) -> None:
        try:
            self.seen.save(blocks)
        finally:
            self._saving = False

    def save_seen_now(self) -> None:
        """At exit: what is left to save (the app calls this as it closes)."""
        if self.seen.dirty:
            self.seen.save(list(self.rows.blocks.values()))

    def action_raw(self) -> None:
        """The highlighted block's file as it is on disk, instead of its parsed parts (r)."""
        self.query_one(BlockDetail).toggle_raw()

    # -- the answer flow: choice -> (text box) -> preview -> confirm -> write in a worker ----

    def _current(self) -> Block | None:
        block = self.current
        if block is None:
            self.notify("No block is highlighted.", severity="warning")
        return block

    def _is_waiting_row(self, block: Block) -> bool:
        """An answer waiting for its loop, not a block: said so, and True."""
        record = waiting_of(block)
        if record is None:
            return False
        self.notify(
            printable(
                f"{record.block_id} is answered ({record.answered}); it waits for its loop. "
                "R restarts the loop, t goes to it, x drops it from the list."
            ),
            markup=False,
        )
        return True

    def action_choose(self, number: int) -> None:
        if self.rows.marked:  # every marked block (tui/batch_flow.py)
            self.answer_marked(number)
            return
        block = self._current()
        if block is None or self._is_waiting_row(block):
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
        if self.rows.marked:
            self.answer_marked(None)
            return
        block = self._current()
        if block is not None and not self._is_waiting_row(block):
            self._ask_text(block, None)

    def action_note(self) -> None:
        """`w`: reply and keep it blocked (tui/note_flow.py)."""
        from hitl_tui.tui.note_flow import ask_note

        block = self._current()
        if block is not None and not self._is_waiting_row(block):
            ask_note(self, block)

    def action_reuse(self) -> None:
        """`p`: reuse an earlier answer to a similar question (tui/asked.py)."""
        from hitl_tui.tui.asked import reuse

        reuse(self, self.app, self.app.asked)  # type: ignore[attr-defined]

    def _answer(self, choice: Choice | None, texts: tuple[str, ...] = ()) -> Answer:
        return Answer(choice=choice, texts=texts, operator=self.operator, when=self.clock())

    def _ask_text(
        self,
        block: Block,
        choice: Choice | None,
        prefill: tuple[str, ...] | None = None,
        origin: str | None = None,
    ) -> None:
        """The text box for `choice` (None: own words), from `prefill` (an earlier answer
        reused: `origin` says whose, in the title) or its draft if one is kept; Esc keeps what
        was typed as a draft, a discard drops it, Continue goes to the preview."""
        box = text_box(block, choice)
        draft = prefill if prefill is not None else self.drafts.get(box)

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

        screen = TextAnswerScreen(block, box.questions, box.defaults, box.title, draft, origin)
        self.app.push_screen(screen, done)

    def _preview(self, block: Block, answer: Answer) -> None:
        """The preview of `answer`; applied in a worker when the operator confirms it. A remote
        block's plan comes from where it lives (another machine's hitl): read in a worker."""
        source = self.inbox.source_named(block.source)
        if source is not None and source.remote:
            self.notify(
                printable(f"{block.id}: asking {block.repo_name.split(':')[0]} for the plan…"),
                title="Preview",
                markup=False,
                timeout=3,
            )
            self._remote_preview(block, answer)
            return
        try:
            preview = preview_of(self.inbox, block, answer)
        except StaleError as exc:
            self._stale(block, str(exc))
            return
        except HitlError as exc:
            self.notify(printable(str(exc)), severity="error", markup=False, timeout=8)
            return
        self._show_preview(block, preview)

    def _confirmed(self, plan: Plan | None) -> None:
        if plan is not None:
            screen = self._preview_screen
            self._apply_in_background(plan, screen is None or screen.run_restart)

    @work(thread=True, group="apply", exit_on_error=False, description="_apply_in_background")
    def _apply_in_background(self, plan: Plan, restart: bool = True) -> None:
        """Write the confirmed plan (a remote one is sent: `service.write_answer`), then re-read
        what it changed; the restart follows once the toast says what was written."""
        block = plan.block
        try:
            answered = write_answer(self.inbox, plan)
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
        if answered.waiting is not None:  # the answer's row: waiting for the loop
            delta.waiting.append(answered.waiting)
        self.post_message(Answered(answered, delta, restart))

    @on(Answered)
    def _answered(self, message: Answered) -> None:
        answered, delta = message.answered, message.delta
        block = answered.plan.block
        self.drafts.forget([row_key(key_of(block))])
        self.host.apply_delta(delta)
        text = f"{block.id}: " + "; ".join(answered.done)
        restart = restart_for(self.loops, block)
        restarting: str | None = None
        if restart is None:
            if answered.hint:
                text += f"\n{answered.hint}"
        elif restart.refused is not None:
            text += f"\n{restart.refused}"
        elif message.restart:
            restarting = f"{block.id}: restarting: {restart.command}"
        else:
            text += "\nrestart skipped: R runs it"
        # One toast for the answer: the restart and the loop's resume update it.
        progress = self.host.progress
        progress.step(block.id, "answered", printable(text, keep_newlines=True), start=True)
        if restarting is not None and restart is not None:
            progress.step(block.id, "restart", printable(restarting))
            # The answer's row (its record) says so if the restart fails.
            waiting = answered.waiting
            self._restart(block, restart.loop, waiting.id if waiting is not None else None)

    @on(Restarted)
    def _restarted(self, message: Restarted) -> None:
        self.show_restarted(message)

    @on(AnswerStale)
    def _answer_stale(self, message: AnswerStale) -> None:
        self._stale(message.block, message.message)

    def _stale(self, block: Block, message: str) -> None:
        """The block changed since it was read: nothing was written; show it as it is now."""
        delta = self.inbox.handle([block.path])
        now = self.inbox.blocks.get(key_of(block))
        if now is not None and now != block and all(b is not now for b in delta.changed):
            # Same bytes, other text: what was shown came from a wrong parse-cache entry
            # (`answering.cache_was_wrong` dropped it); the file's block replaces it.
            delta.changed.append(now)
        self.host.apply_delta(delta)
        self.notify(
            printable(message) + "\nNothing was written; the block as it is now is shown.",
            title="Block changed",
            severity="error",
            markup=False,
            timeout=10,
        )

    # -- undo: the highlighted answer (else the last one), asked first (tui/undo_flow.py) ----

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
