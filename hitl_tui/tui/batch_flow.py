"""Answering each question once, from the inbox screen: marks (`Space`, `M`, `Esc`), and a
choice key or `o` with marks, which answers every marked block in one batch (a preview with a
section per block, applied in a worker, a result with written / refused / skipped, and an undo
of the whole batch). The marks are the domain's `view.RowOrder.marked` (a set of row keys: a
key costs what it marks, never a pass over every block); the batch is `answers.batch`'s.
`Batches` is mixed into the inbox screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from hitl_tui.answers.batch import Batch, How, apply_batch, plan_batch
from hitl_tui.answers.service import restart_for
from hitl_tui.inbox.inbox import Inbox
from hitl_tui.inbox.view import RowOrder, row_of
from hitl_tui.loops.commands import Loop
from hitl_tui.model import Block, Choice, HitlError
from hitl_tui.textio import printable
from hitl_tui.tui.batch_screens import BatchPreviewScreen, BatchResultScreen
from hitl_tui.tui.header import plural
from hitl_tui.tui.messages import BatchApplied, BatchUndone, Host, Refused
from hitl_tui.tui.quiet import Quiet
from hitl_tui.tui.screens import TextAnswerScreen, Typed
from hitl_tui.tui.undo_flow import ConfirmUndo
from hitl_tui.tui.waiting import waiting_of
from hitl_tui.tui.widgets import BlockList

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen
else:
    _Screen = object


class Batches(_Screen):
    """`Space`, `M`, `Esc`, and the batch answer, for the inbox screen (mixed into it)."""

    rows: RowOrder
    inbox: Inbox
    operator: str
    loops: tuple[Loop, ...]

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def blocklist(self) -> BlockList: ...

        @property
        def current(self) -> Block | None: ...

        @property
        def host(self) -> Host: ...

        def _current(self) -> Block | None: ...

        def _is_waiting_row(self, block: Block) -> bool: ...

        def _render_header(self) -> None: ...

        def _look_again(self) -> object: ...

    # -- marks -------------------------------------------------------------------------------

    def read_questions(self, quiet: Quiet | None = None) -> None:
        """Once the first scan is over, read every block's question for the same-question
        rule in a thread (`similarity` keeps them by text): the first `M`, or grouping by
        question, then costs a look-up per block, not a read. `quiet`: the app's, the read
        stops at each key and goes on once the operator pauses (`Quiet.sliced`)."""
        self._read_questions(list(self.rows.blocks.values()), quiet or Quiet(0.0))

    @work(thread=True, group="questions", exit_on_error=False, description="_read_questions")
    def _read_questions(self, blocks: list[Block], quiet: Quiet) -> None:
        from hitl_tui.loops.similarity import read_question

        for block in quiet.sliced(blocks):
            read_question(block)

    def _markable(self, rk: str) -> bool:
        """A block can be marked; an answer waiting for its loop cannot."""
        block = self.rows.blocks.get(rk)
        return block is not None and waiting_of(block) is None

    def action_mark(self) -> None:
        """`Space`: mark or unmark the highlighted block; on a group's header row, every block
        of the group (unmarked when all of them were marked)."""
        table = self.blocklist
        group = table.current_group
        if group is not None:
            rks = {rk for rk in self.rows.members(group.name) if self._markable(rk)}
            if not rks:
                return
            table.set_marks(rks, not rks <= self.rows.marked)
        else:
            block = table.current
            if block is None or self._is_waiting_row(block):
                return
            rk = row_of(block)
            table.set_marks({rk}, rk not in self.rows.marked)
        self._render_header()

    def action_mark_same(self) -> None:
        """`M`: mark the highlighted block and every open block asking the same question
        (`similarity.same_question`, the one rule), across repositories and sources, listed
        or not (the header counts those the filter hides)."""
        from hitl_tui.loops.similarity import same_question

        block = self._current()
        if block is None or self._is_waiting_row(block):
            return
        rows = self.rows
        same = {
            rk
            for rk, other in rows.blocks.items()
            if other is block or (waiting_of(other) is None and same_question(block, other))
        }
        new = len(same - rows.marked)
        self.blocklist.set_marks(same, True)
        self._render_header()
        hidden = rows.marked_hidden()
        text = f"{plural(len(same), 'block')} asking this question: {new} newly marked"
        if hidden:
            text += f"; {hidden} marked not listed (the filter)"
        self.notify(text + ".", title="Marked", markup=False, timeout=4)

    def action_clear_marks(self) -> None:
        """`Esc`: no block marked any more."""
        if self.rows.marked:
            self.blocklist.clear_marks()
            self._render_header()

    # -- the batch: a choice key or o with marks --------------------------------------------

    def answer_marked(self, number: int | None) -> None:
        """A choice key (`number`) or `o` (None) while blocks are marked: every marked block is
        answered. A choice is taken by its option's text from the highlighted block when it is
        marked (else the first marked one), and matched per block by that text; own words
        (and a choice that asks for words) go through the text box first."""
        blocks = self.rows.marked_blocks()
        if not blocks:
            return
        current = self.current
        ref = current if current is not None and row_of(current) in self.rows.marked else blocks[0]
        count = plural(len(blocks), "marked block")
        if number is None:
            self._ask_batch_text(blocks, f"Answer {count} in your own words", ref)
            return
        if number > len(ref.choices):
            self.notify(
                printable(
                    f"{ref.id} has {len(ref.choices)} choices: the batch takes its choice's "
                    "text. Press o to answer the marked blocks in your own words."
                ),
                severity="warning",
                markup=False,
            )
            return
        choice = ref.choices[number - 1]
        if choice.needs_text:  # a batch carries an option's text or own words, not both
            self.notify(
                printable(
                    f"{choice.option} asks for your words: press o to answer the {count} in "
                    "your own words, or answer them one at a time (Esc clears the marks)."
                ),
                severity="warning",
                markup=False,
            )
            return
        how = How(option=choice.option, operator=self.operator)
        self._plan_batch(blocks, how, f"Answer {count} with “{choice.option}”")

    def _ask_batch_text(self, blocks: list[Block], title: str, ref: Block) -> None:
        """One text box for every marked block (the highlighted one's question shown)."""
        question = ref.one_line_question(400)

        def done(typed: Typed | None) -> None:
            if typed is None or not typed.go:
                return
            try:
                how = How(texts=typed.texts, operator=self.operator)
            except HitlError as exc:
                self.notify(printable(str(exc)), severity="error", markup=False)
                return
            self._plan_batch(blocks, how, title)

        self.app.push_screen(TextAnswerScreen(ref, [question], [""], title), done)

    @work(thread=True, group="preview", exit_on_error=False, description="_plan_batch")
    def _plan_batch(self, blocks: list[Block], how: How, title: str) -> None:
        """Plan every block (read its files: a worker), then show the preview."""
        try:
            batch = plan_batch(self.inbox, blocks, how)
        except HitlError as exc:
            self.post_message(Refused("Not answered", str(exc)))
            return
        self.app.call_from_thread(self._show_batch, batch, title)

    def _show_batch(self, batch: Batch, title: str) -> None:
        if len(self.app.screen_stack) > 1:  # the operator went elsewhere meanwhile
            return
        commands = {
            r.command
            for item in batch.items
            if (r := restart_for(self.loops, item.block)) is not None and r.command
        }
        restart = plural(len(commands), "loop") if commands else None
        screen = BatchPreviewScreen(batch, title, batch.how.option, self._batch_pick, restart)
        self.app.push_screen(screen, lambda done: self._batch_confirmed(screen, done))

    def _batch_pick(self, batch: Batch, index: int, choice: Choice | None) -> None:
        """In the preview: plan item `index` again for `choice` (None: skip it)."""
        screen = self.app.screen
        if not isinstance(screen, BatchPreviewScreen):
            return
        try:
            new = batch.skip(index) if choice is None else batch.choose(index, choice)
        except HitlError as exc:
            self.notify(printable(str(exc)), severity="error", markup=False)
            return
        screen.update(new, index)

    def _batch_confirmed(self, screen: BatchPreviewScreen, batch: Batch | None) -> None:
        if batch is not None:
            self.notify(
                f"Writing {plural(batch.count('ready'), 'answer')}…", title="Batch", timeout=3
            )
            self._apply_batch(batch, screen.run_restart)

    @work(thread=True, group="apply", exit_on_error=False, description="_apply_batch")
    def _apply_batch(self, batch: Batch, restart: bool) -> None:
        """Write every ready block (`apply_batch`: each as one answer is written, the restarts
        together after), then re-read what changed."""
        done = apply_batch(self.inbox, batch, restart)
        paths = [i.block.path for i in done.items if isinstance(i.block.path, Path)]
        delta = self.inbox.handle(paths)
        self.post_message(BatchApplied(done, delta))

    # (Named handlers, not @on: this mixin is no Textual class, so @on would go unseen.)
    def on_batch_applied(self, message: BatchApplied) -> None:
        batch = message.batch
        self.host.apply_delta(message.delta)
        self.blocklist.clear_marks()
        self._render_header()
        self._look_again()  # the answers' rows, waiting for their loops, listed now
        self.app.push_screen(BatchResultScreen(batch, self._ask_undo_batch))

    # -- undoing a batch ------------------------------------------------------------------

    def _ask_undo_batch(self, batch: Batch) -> None:
        written = [i for i in batch.items if i.status == "written"]
        names = ", ".join(printable(i.block.id) for i in written[:6])
        more = f" and {len(written) - 6} more" if len(written) > 6 else ""
        text = (
            f"Undo the whole batch {batch.id}: {plural(len(written), 'answer')} "
            f"({names}{more})?\nEach is undone as hitl undo undoes one; one whose loop has "
            "acted on it since, or whose file changed, is refused and named."
        )

        def chosen(yes: bool | None) -> None:
            if yes:
                self._undo_batch(batch)

        self.app.push_screen(ConfirmUndo(text), chosen)

    @work(thread=True, group="apply", exit_on_error=False, description="_undo_batch")
    def _undo_batch(self, batch: Batch) -> None:
        from hitl_tui.answers.batch import undo_batch
        from hitl_tui.loops.records import row_path

        try:
            results = undo_batch(batch.id, self.operator, self.inbox.remotes)
        except HitlError as exc:
            self.post_message(Refused("Not undone", str(exc)))
            return
        written = [i for i in batch.items if i.status == "written"]
        delta = self.inbox.handle([i.block.path for i in written if isinstance(i.block.path, Path)])
        undone = {r.entry for r in results if r.status == "undone"}
        for item in written:
            if item.entry is not None and item.entry in undone:  # its waiting row goes
                delta.removed.append((item.block.source, row_path(item.entry)))
        lines = [f"{r.status} {r.block_id}: {r.message}" for r in results]
        self.post_message(BatchUndone(lines, delta))

    def on_batch_undone(self, message: BatchUndone) -> None:
        self.host.apply_delta(message.delta)
        screen = self.app.screen
        if isinstance(screen, BatchResultScreen):
            screen.show_undone(message.lines)
        undone = sum(line.startswith("undone ") for line in message.lines)
        refused = sum(line.startswith("refused ") for line in message.lines)
        text = f"{plural(undone, 'answer')} undone"
        if refused:
            text += f", {refused} refused (named in the result)"
        self.notify(text, title="Batch undone", markup=False)
