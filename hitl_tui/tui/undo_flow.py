"""`u`: say which answer an undo takes and ask first; ask again when the loop has acted on it.

The inbox's `u` and the history's `u` run the same steps: a worker finds the answer and
whether it would be refused (`answering.undo_target`: nothing written), `ConfirmUndo` names it
(repository, block, answer, when) and waits for `y`; when the loop has acted on the answer
since (a commit after it: `resume.loop_acted`), a second `ConfirmUndo` names what the loop did
and waits for `f`; only then a worker undoes it (`answering.undo_answer`, forced only after
that second yes). The undo checks everything again when it runs: a loop that acts between the
question and the `y` is asked about the same way (`undo.LoopActed`).

Everything shown here is journal or agent text (the answer, a commit's subject): plain text,
never markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from hitl_tui.inbox.inbox import Inbox
from hitl_tui.journal.undo import LoopActed
from hitl_tui.loops.records import row_path
from hitl_tui.model import Block, HitlError
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.messages import Refused, Undone
from hitl_tui.tui.waiting import waiting_of

if TYPE_CHECKING:
    from textual.message import Message

    from hitl_tui.journal import Entry
    from hitl_tui.journal.undo import Target


def question(target: Target, highlighted: str | None = None) -> str:
    """What the first question says: which answer, where, when (`highlighted`: the block the
    cursor is on, named when the answer is not its own)."""
    lines = []
    if not target.own and highlighted is not None:
        lines.append(
            f"{printable(highlighted)} has no answer of its own to undo. "
            "The last answer in the journal is:"
        )
    lines.append(f"Undo {target.said()}?")
    lines.append(f"in {target.repo} · {target.entry.id}")
    return "\n".join(lines)


def forced_question(entry: Entry, what: str) -> str:
    """What the second question says: what the loop did, and what undoing does then."""
    return "\n".join(
        [
            f"The loop has acted on this answer since: {printable(what)}.",
            "Undoing it puts the old block and files back under the loop's work, and leaves "
            "the repository changed.",
            f"Undo the answer to {printable(entry.block_id)} anyway?",
            f"in {printable(str(entry.repo))} · {entry.id}",
        ]
    )


class ConfirmUndo(ModalScreen[bool]):
    """Asked before an answer is undone: `y` undoes (`f` when asked again because the loop has
    acted on it), `n` or `Esc` keeps it. The focus starts on Keep (Enter keeps)."""

    DEFAULT_CSS = """
    ConfirmUndo { align: center middle; background: $background 60%; }
    #undo-box {
        width: 80; max-width: 100%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ConfirmUndo.-forced #undo-box { border: round $error; }
    #undo-question { height: auto; margin-bottom: 1; }
    #undo-hint { color: $text-muted; height: 1; }
    #undo-buttons { height: auto; align-horizontal: right; }
    #undo-buttons Button { margin-left: 2; }
    ConfirmUndo.-short #undo-question { margin-bottom: 0; }
    ConfirmUndo.-short #undo-buttons Button, ConfirmUndo.-narrow #undo-buttons Button {
        height: 1; min-width: 0; border: none; margin-left: 1;
    }
    """

    BINDINGS: ClassVar = bindings("undo")

    def __init__(self, text: str, forced: bool = False) -> None:
        super().__init__()
        self.text = text
        #: Asked again: the loop has acted on the answer (`f`, not `y`, undoes).
        self.forced = forced
        self.set_class(forced, "-forced")

    def compose(self) -> ComposeResult:
        with Vertical(id="undo-box") as box:
            box.border_title = "The loop has acted on it" if self.forced else "Undo?"
            yield Static(Content(printable(self.text, keep_newlines=True)), id="undo-question")
            hint = "f undo anyway · n/Esc keep" if self.forced else "y undo · n/Esc keep"
            yield Static(hint, id="undo-hint", markup=False)
            with Horizontal(id="undo-buttons"):
                yield Button("Keep (Esc)", id="keep", variant="primary")
                label = "Undo anyway (f)" if self.forced else "Undo (y)"
                yield Button(label, id="undo", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`y` asks the first question only, `f` the second: a `y` pressed twice never
        undoes what the loop has acted on."""
        if action == "yes":
            return not self.forced
        if action == "force":
            return self.forced
        return True

    def action_yes(self) -> None:
        if not self.forced:
            self.dismiss(True)

    def action_force(self) -> None:
        if self.forced:
            self.dismiss(True)

    @on(Button.Pressed, "#undo")
    def _undo_pressed(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#keep")
    def action_keep(self) -> None:
        self.dismiss(False)


class AsksBeforeUndo:
    """Mixed into a screen whose `u` undoes an answer: its worker found the `Target` and calls
    `ask_undo` (on the app's thread); the screen's `undo_now(entry, force)` starts the undo's
    worker, which calls `ask_force` when the undo was refused because the loop acted."""

    app: Any

    def ask_undo(self, target: Target, highlighted: str | None = None) -> None:
        def chosen(yes: bool | None) -> None:
            if not yes:
                return
            if target.acted is not None:
                self.ask_force(target.entry, target.acted)
            else:
                self.undo_now(target.entry, False)

        self.app.push_screen(ConfirmUndo(question(target, highlighted)), chosen)

    def ask_force(self, entry: Entry, what: str) -> None:
        def chosen(yes: bool | None) -> None:
            if yes:
                self.undo_now(entry, True)

        self.app.push_screen(ConfirmUndo(forced_question(entry, what), forced=True), chosen)

    def undo_now(self, entry: Entry, force: bool) -> None:
        raise NotImplementedError


class UndoesHighlighted(AsksBeforeUndo):
    """The inbox screen's `u` (mixed into it): the answer of the highlighted row or block, else
    the journal's last, found and undone in workers; the screen's `@on(Undone)` shows it."""

    inbox: Inbox
    operator: str

    if TYPE_CHECKING:  # the inbox screen's

        @property
        def current(self) -> Block | None: ...

        def post_message(self, message: Message) -> bool: ...

    def action_undo(self) -> None:
        """`u`: the highlighted answer waiting for its loop, or the highlighted block's own
        newest answer not undone yet, else the journal's last answer: said, and asked first."""
        self._find_undo(self.current)

    @work(thread=True, group="apply", exit_on_error=False, description="_find_undo")
    def _find_undo(self, block: Block | None) -> None:
        from hitl_tui.answers.service import undo_target
        from hitl_tui.state import files as statefile

        record = waiting_of(block)
        remotes = self.inbox.remotes
        try:
            if record is not None and record.entry:
                found = undo_target(record.entry, remotes=remotes)
            elif record is not None:  # no journal id: its block's newest answer
                found = undo_target(block=(record.source, record.path), remotes=remotes)
            else:
                key = statefile.block_key(block) if block is not None else None
                found = undo_target(block=key, remotes=remotes)
        except HitlError as exc:
            self.post_message(Refused("Not undone", str(exc)))
            return
        self.app.call_from_thread(self._ask_undo, found, block.id if block is not None else None)

    def _ask_undo(self, found, highlighted: str | None) -> None:
        if self.app.screen is self:  # not over a screen the operator went to meanwhile
            self.ask_undo(found, highlighted)

    def undo_now(self, entry, force: bool) -> None:
        self._undo(entry, force)

    @work(thread=True, group="apply", exit_on_error=False, description="_undo")
    def _undo(self, entry, force: bool) -> None:
        from hitl_tui import journal
        from hitl_tui.answers.service import undo_answer

        try:
            message = undo_answer(entry.id, self.operator, self.inbox.remotes, force=force)
        except LoopActed as exc:  # the loop acted since the question: asked again
            self.app.call_from_thread(self.ask_force, entry, exc.what)
            return
        except HitlError as exc:
            self.post_message(Refused("Not undone", str(exc)))
            return
        undone = next((e for e in journal.newest_first() if e.id == message.entry), None)
        paths = [undone.block_path] if undone else []
        delta = self.inbox.handle([p for p in paths if isinstance(p, Path)])
        if undone is not None:  # its row waiting for the loop goes (`undo` forgot it)
            delta.removed.append((undone.block_source, row_path(undone.id)))
        self.post_message(Undone(message, delta))
