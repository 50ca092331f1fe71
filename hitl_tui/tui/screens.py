"""Modal screens: the preview of an answer, typing an answer, and the key help.

Each is a `ModalScreen[T]` that ends in `dismiss(value)`; the app decides what to do with it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.actions import SkipAction
from textual.app import ComposeResult, SuspendNotSupported
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, DataTable, Footer, Input, Label, Static, TextArea

from hitl_tui.inbox.inbox import Delta, Inbox
from hitl_tui.journal import Entry
from hitl_tui.loops.records import loop_word, row_path
from hitl_tui.loops.resume import loop_states
from hitl_tui.model import Block, HitlError, Plan
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings, help_text
from hitl_tui.tui.history_batches import BatchHistory, Row, batch_cells, row_id, rows_of
from hitl_tui.tui.messages import HistoryUndone, Refused
from hitl_tui.tui.undo_flow import AsksBeforeUndo


def one_line(text: str) -> str:
    """A message in one printable line (a toast of agent or journal text)."""
    return " ".join(printable(text).split())


def diff_text(diff: str) -> Text:
    """A unified diff coloured line by line, without ever parsing it as markup."""
    text = Text()
    for line in printable(diff, keep_newlines=True).splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        text.append(line + "\n", style=style)
    return text


@dataclass(frozen=True)
class Preview:
    """What a preview shows: a plan under a title and, when its source has one, the decision
    text the operator may edit, with `replan` to plan the answer again from the edited text."""

    plan: Plan
    title: str
    editable: str | None = None
    replan: Callable[[str], Plan] | None = None
    #: The `[[loop]]` restart run after applying, as the operator reads it; None: none.
    restart: str | None = None
    #: Why that restart will not run (`loops.ControlInValue.line`); None: not refused.
    restart_refused: str | None = None


class ConfirmDiscard(ModalScreen[bool]):
    """Asked before an edit or a draft is thrown away: `d` discards, `Esc` keeps editing."""

    DEFAULT_CSS = """
    ConfirmDiscard { align: center middle; background: $background 60%; }
    #discard-box {
        width: 60; max-width: 100%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    #discard-question { height: auto; margin-bottom: 1; }
    #discard-buttons { height: auto; align-horizontal: right; }
    #discard-buttons Button { margin-left: 2; }
    ConfirmDiscard.-short #discard-question { margin-bottom: 0; }
    ConfirmDiscard.-short #discard-buttons Button, ConfirmDiscard.-narrow #discard-buttons Button {
        height: 1; min-width: 0; border: none; margin-left: 1;
    }
    """

    BINDINGS: ClassVar = bindings("discard")

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="discard-box") as box:
            box.border_title = "Discard?"
            yield Static(Content(printable(self.question)), id="discard-question")
            with Horizontal(id="discard-buttons"):
                yield Button("Keep editing (Esc)", id="keep", variant="primary")
                yield Button("Discard (d)", id="discard", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    @on(Button.Pressed, "#discard")
    def action_discard(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#keep")
    def action_keep(self) -> None:
        self.dismiss(False)


class PreviewScreen(ModalScreen[Plan | None]):
    """The exact diff of every file the answer changes. Enter or y applies, Escape goes back.

    The app builds one and keeps it installed: each answer `load`s a new plan into it, so that
    opening a preview redraws a screen instead of composing, styling and laying out a new one
    (that took most of the ~90 ms an open cost).
    """

    DEFAULT_CSS = """
    PreviewScreen { align: center middle; background: $background; }
    #preview-box {
        width: 96%; height: 94%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #preview-title { text-style: bold; height: auto; margin-bottom: 1; }
    #diff-scroll { height: 1fr; border: round $primary 50%; }
    #decision { height: 5; border: round $secondary; }
    #decision:focus { border: round $accent; }
    #preview-error { color: $error; height: auto; }
    #preview-buttons { height: 3; align-horizontal: right; }
    #preview-buttons Button { margin-left: 2; }
    /* Under 20 rows the diff gets the room: a one-line title, a one-line decision box and
       one-line buttons, no outer border. */
    PreviewScreen.-short #preview-box { width: 100%; height: 100%; border: none; padding: 0; }
    PreviewScreen.-short #preview-title {
        height: 1; margin-bottom: 0; text-wrap: nowrap; text-overflow: ellipsis;
    }
    PreviewScreen.-short #decision { height: 3; }
    PreviewScreen.-short #preview-buttons { height: 1; }
    PreviewScreen.-short #preview-buttons Button { height: 1; min-width: 0; border: none; }
    /* Toasts (an error, "not applied") stand above the buttons, never over them. */
    PreviewScreen ToastRack { margin-bottom: 6; }
    PreviewScreen.-short ToastRack { margin-bottom: 2; }
    """

    #: Shown, and nothing applied, when not one line of the diff is in view.
    TOO_SMALL = (
        "The window is too small to show the diff, so nothing was applied: enlarge it "
        "(60×15 shows the diff) and press Enter again, or Esc to go back."
    )

    BINDINGS: ClassVar = bindings("preview")

    #: Frames a `y` waits for the diff's first layout before "too small" (see `action_apply`).
    LAYOUT_FRAMES = 5

    def __init__(self, preview: Preview) -> None:
        super().__init__()
        self.load(preview)

    def load(self, preview: Preview) -> None:
        """Show `preview`: its plan, and its decision text in the box when it has one."""
        self.plan = preview.plan
        self.planned = preview.plan  # for the decision text as generated
        # The box shows the decision made printable, like every other pane: agent text in a
        # TextArea reaches the terminal as it is (an OSC 2 retitled the pane, ESC[2J cleared
        # the screen). The box holding exactly that text is the unedited decision, and applies
        # `planned`: the generated decision, byte for byte, as `hitl answer` writes it. Once
        # edited, the box's text is written as it stands (symbols such as ␛ included).
        self.editable = (
            None if preview.editable is None else printable(preview.editable, keep_newlines=True)
        )
        self.replan = preview.replan
        self.title_text = preview.title
        self.restart = preview.restart
        self.restart_refused = preview.restart_refused
        #: Whether the restart runs after applying (`r` turns it off and on again).
        self.run_restart = preview.restart is not None
        self.error: str | None = None
        self._opened = True
        #: Frames waited for since this plan was loaded before deciding on a `y` with no diff
        #: line placed (see `action_apply`).
        self._waited = 0
        if self.is_mounted:
            self._fill()

    def compose(self) -> ComposeResult:
        with Vertical(id="preview-box"):
            yield Static(id="preview-title")
            with VerticalScroll(id="diff-scroll", can_focus=False):
                yield Static(id="diff")
            area = TextArea(id="decision", soft_wrap=True)
            area.border_title = "Decision text (e to edit)"
            yield area
            yield Static("", id="preview-error", markup=False)
            with Horizontal(id="preview-buttons"):
                yield Button("Back (Esc)", id="cancel")
                yield Button("Apply (Enter / y)", id="apply", variant="success")

    def on_mount(self) -> None:
        self._fill()

    def on_screen_resume(self) -> None:
        # Each new preview opens on Apply; back from a question on top (discard?), the focus
        # stays where the operator left it.
        if self._opened:
            self._opened = False
            self.query_one("#apply", Button).focus()

    def title_line(self) -> str:
        """The title, and what runs once the answer is written (`r` skips it)."""
        if self.restart_refused is not None:
            return f"{self.title_text} · {self.restart_refused}"
        if self.restart is None:
            return self.title_text
        if self.run_restart:
            return f"{self.title_text} · then runs: {self.restart} (r: skip)"
        return f"{self.title_text} · restart skipped (r: run it)"

    def _fill(self) -> None:
        self.query_one("#preview-title", Static).update(Content(printable(self.title_line())))
        self.query_one("#diff", Static).update(diff_text(self.plan.diff()))
        self.query_one("#diff-scroll", VerticalScroll).scroll_home(animate=False)
        self.query_one("#preview-error", Static).update("")
        area = self.query_one("#decision", TextArea)
        area.display = self.editable is not None
        # Always: load_text also forgets the last preview's undo history and cursor, which
        # would otherwise replay an abandoned edit into this plan (ctrl+z).
        area.load_text(self.editable or "")
        self.query_one("#apply", Button).focus()

    @property
    def focus_chain(self) -> list[Widget]:
        """Tab goes decision box -> Apply -> Back (the diff scrolls with the arrow keys)."""
        if not self.is_mounted:
            return super().focus_chain
        area = self.query_one("#decision", TextArea)
        chain: list[Widget] = [area] if area.display else []
        return [*chain, self.query_one("#apply", Button), self.query_one("#cancel", Button)]

    def focus_next(self, selector="*") -> Widget | None:
        return self._at_the_end(super().focus_next(selector))

    def focus_previous(self, selector="*") -> Widget | None:
        return self._at_the_end(super().focus_previous(selector))

    def _at_the_end(self, widget: Widget | None) -> Widget | None:
        """Tabbing into the decision box puts the cursor after its text: typing appends."""
        if isinstance(widget, TextArea):
            widget.move_cursor(widget.document.end)
        return widget

    def action_edit(self) -> None:
        if self.editable is not None:
            area = self.query_one("#decision", TextArea)
            area.focus()
            area.move_cursor(area.document.end)

    def action_toggle_restart(self) -> None:
        if self.restart_refused is not None:
            self.notify(printable(self.restart_refused), severity="warning", markup=False)
            return
        if self.restart is None:
            self.notify("No [[loop]] restart covers this repository.", markup=False)
            return
        self.run_restart = not self.run_restart
        self.query_one("#preview-title", Static).update(Content(printable(self.title_line())))

    def action_scroll_diff(self, lines: int) -> None:
        self.query_one("#diff-scroll", VerticalScroll).scroll_relative(y=lines, animate=False)

    @property
    def edited(self) -> bool:
        """The decision box holds text other than the generated decision."""
        if self.editable is None or not self.is_mounted:
            return False
        return self.query_one("#decision", TextArea).text != self.editable

    @on(TextArea.Changed, "#decision")
    def _edited(self, event: TextArea.Changed) -> None:
        if self.replan is None:
            return
        error = self.query_one("#preview-error", Static)
        try:
            if event.text_area.text == self.editable:
                self.plan = self.planned  # as loaded, or edited back: no need to plan again
            else:
                self.plan = self.replan(event.text_area.text)
        except HitlError as exc:
            self.error = str(exc)
            error.update(Content(printable(str(exc))))
            return
        self.error = None
        error.update("")
        self.query_one("#diff", Static).update(diff_text(self.plan.diff()))

    def diff_lines_in_view(self) -> int:
        """How many lines of the diff the operator can see right now (0: none at all)."""
        scroll = self.query_one("#diff-scroll", VerticalScroll)
        box = self.query_one("#preview-box", Vertical)
        seen = scroll.scrollable_content_region.intersection(box.content_region)
        seen = seen.intersection(self.region)
        return seen.height if seen.width > 0 and scroll.display else 0

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        if self.error:
            self.notify(printable(self.error), severity="error", markup=False)
            return
        if self.diff_lines_in_view() == 0:
            if self._waited < self.LAYOUT_FRAMES:
                # A `y` typed with the choice key reaches the preview before its first layout,
                # when no diff line is placed yet: decide once the diff is on screen (a loaded
                # machine may take more than one frame to place it).
                self._waited += 1
                self.call_after_refresh(self.action_apply)
                return
            # Never apply what could not be shown: the diff is the answer's only full account.
            self.notify(self.TOO_SMALL, title="Not applied", severity="warning", timeout=8)
            return
        self.dismiss(self.plan)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if not self.edited:
            self.dismiss(None)
            return

        def answered(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)
            else:  # back in the box, the cursor where it was
                self.query_one("#decision", TextArea).focus()

        self.app.push_screen(
            ConfirmDiscard("Discard your edit of the decision text? Nothing is written."),
            answered,
        )


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi, split as a shell would (`code --wait`)."""
    for name in ("VISUAL", "EDITOR"):
        try:
            argv = shlex.split(os.environ.get(name, ""))
        except ValueError:
            continue
        if argv:
            return argv
    return ["vi"]


@dataclass(frozen=True)
class Typed:
    """What the text boxes held when the operator left them: `go` continues to the preview;
    otherwise (Esc) the texts are kept as the block's draft."""

    texts: tuple[str, ...]
    go: bool


class TextAnswerScreen(ModalScreen[Typed | None]):
    """One text box per question (one for most blocks); Ctrl+S continues to the preview.

    Esc goes back keeping what was typed (the app holds it as the block's draft and fills the
    boxes with it next time); *Discard draft* empties it on purpose (dismisses None).
    """

    DEFAULT_CSS = """
    TextAnswerScreen { align: center middle; background: $background; }
    #answer-box {
        width: 90%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #answer-title { text-style: bold; margin-bottom: 1; height: auto; }
    .answer-question { color: $text-muted; height: auto; width: 1fr; }
    .answer-text { height: 5; margin-bottom: 1; }
    #answer-error { color: $error; height: auto; }
    #answer-buttons { height: 3; align-horizontal: right; }
    #answer-buttons Button { margin-left: 2; }
    """

    BINDINGS: ClassVar = bindings("text")

    def __init__(
        self,
        block: Block,
        prompts: list[str],
        defaults: list[str],
        title: str,
        draft: tuple[str, ...] | None = None,
        origin: str | None = None,
    ) -> None:
        super().__init__()
        self.block = block
        self.prompts = prompts
        self.defaults = defaults
        self.draft = draft
        #: Where the text in the boxes came from when it is not the operator's draft (an
        #: earlier answer reused with `p`, maybe in another repository): the title says so.
        self.origin = origin
        if origin is not None:
            self.title_text = f"{title} — {origin}"
        else:
            self.title_text = title + (" (your draft)" if draft else "")
        self._last_box: TextArea | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="answer-box"):
            yield Static(Content(printable(self.title_text)), id="answer-title")
            pairs = zip(self.prompts, self.draft or self.defaults, strict=True)
            for index, (prompt, default) in enumerate(pairs, 1):
                if prompt:
                    yield Label(Content(printable(prompt)), classes="answer-question")
                # Pre-filled with agent text (a task's recommended default): printable, so no
                # escape sequence reaches the terminal; what the box shows is what is written.
                # A draft is the operator's own text, shown as they left it.
                shown = default if self.draft else printable(default, keep_newlines=True)
                yield TextArea(shown, id=f"answer-{index}", classes="answer-text", soft_wrap=True)
            yield Static("", id="answer-error", markup=False)
            with Horizontal(id="answer-buttons"):
                if self.draft and self.origin is None:
                    yield Button("Discard draft", id="discard", variant="error")
                yield Button("Editor (Ctrl+E)", id="editor")
                yield Button("Back (Esc)", id="cancel")
                yield Button("Preview (Ctrl+S)", id="submit", variant="primary")

    def on_mount(self) -> None:
        area = self.query_one("#answer-1", TextArea)
        area.focus()
        if self.draft:
            area.move_cursor(area.document.end)  # carry on where the draft ends

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, TextArea):
            self._last_box = event.widget  # the box the editor opens on (the button has focus)

    def _texts(self) -> tuple[str, ...]:
        return tuple(area.text for area in self.query(".answer-text").results(TextArea))

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        texts = tuple(text.strip() for text in self._texts())
        if not any(texts) or (len(texts) > 1 and not all(texts)):
            self.query_one("#answer-error", Static).update("Type an answer first.")
            return
        self.dismiss(Typed(texts, go=True))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(Typed(self._texts(), go=False))

    @on(Button.Pressed, "#discard")
    def action_discard(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#editor")
    def action_editor(self) -> None:
        """The focused box's text in $VISUAL / $EDITOR (vi): the app steps aside while it runs,
        and what was saved comes back into the box. An editor that cannot start or exits
        non-zero leaves the box as it was, and says so in one line."""
        area = self._last_box or self.query_one("#answer-1", TextArea)
        argv = editor_command()
        if self.app.is_web:  # `hitl serve`: no terminal the editor could take over
            self.notify(
                one_line(
                    f"The editor needs a terminal, and the browser has none here: type the "
                    f"answer in the box ({argv[0]} not started)."
                ),
                severity="warning",
                markup=False,
            )
            return
        with tempfile.TemporaryDirectory(prefix="hitl-answer-") as folder:  # mode 0700
            path = Path(folder) / "answer.md"
            path.write_text(area.text, encoding="utf-8")
            try:
                code = self._run_editor([*argv, str(path)])
            except OSError as exc:
                why = exc.strerror or type(exc).__name__
                self.notify(
                    one_line(
                        f"Could not start the editor {argv[0]}: {why}; the text is unchanged."
                    ),
                    severity="error",
                    markup=False,
                )
                return
            if code != 0:
                self.notify(
                    one_line(f"{argv[0]} exited with {code}: the text is unchanged."),
                    severity="warning",
                    markup=False,
                )
                return
            text = path.read_text(encoding="utf-8", errors="replace")
        if text.endswith("\n") and not area.text.endswith("\n"):
            text = text[:-1]  # the newline an editor adds at the end of the file
        area.load_text(printable(text, keep_newlines=True))
        area.move_cursor(area.document.end)
        area.focus()

    def _run_editor(self, argv: list[str]) -> int:
        try:
            with self.app.suspend():
                return subprocess.run(argv, check=False).returncode
        except SuspendNotSupported:
            # No terminal to hand over (headless, as under run_test): run it all the same.
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
            return done.returncode


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help {
        width: 84; max-width: 100%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 1 2;
    }
    """
    BINDINGS: ClassVar = bindings("help")

    def __init__(self, keymap: Mapping[str, str] | None = None) -> None:
        super().__init__()
        #: The config's remapped keys (binding id -> keys), shown instead of the defaults.
        self.keymap = dict(keymap or {})

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as box:
            box.border_title = "Keys"
            yield Static(help_text(self.keymap), id="help-text", markup=False)

    def on_resize(self) -> None:
        """Wrapped lines indent to the description column: the text is laid out for the
        box's width, again when the terminal's changes."""
        self.call_after_refresh(self._fill)

    def _fill(self) -> None:
        try:
            box = self.query_one("#help", VerticalScroll)
            text = self.query_one("#help-text", Static)
        except NoMatches:  # closed meanwhile
            return
        width = box.content_region.width - 1  # a scrollbar's room
        if width > 0:
            text.update(help_text(self.keymap, width))

    def action_close(self) -> None:
        self.dismiss(None)


def history_text(entry: Entry) -> str:
    """What the history's filter looks in: the answer's id, repository, block, what was
    answered, its summary and who answered (lowercased, printable)."""
    parts = (entry.id, str(entry.repo), entry.block_id, entry.answered, entry.summary)
    return printable(" ".join((*parts, entry.operator))).lower()


class HistoryScreen(BatchHistory, AsksBeforeUndo, ModalScreen[None]):
    """Every answer given from this machine, newest first: when, who, where, what, undone.

    j/k (or the arrows) move the cursor, `/` filters as you type, `u` undoes the highlighted
    answer with the rules of `hitl undo ID` (the domain decides; a refusal is one line), asked
    first, and again when the loop has acted on it (`undo_flow`).
    """

    DEFAULT_CSS = """
    HistoryScreen { align: center middle; background: $background; }
    #history-box {
        width: 96%; height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #history-filter { height: 1; border: none; padding: 0 1; margin-bottom: 1; }
    #history-filter:focus { background: $boost; }
    #history-table { height: 1fr; }
    #history-hint { color: $text-muted; height: 1; }
    HistoryScreen.-short #history-box { width: 100%; height: 100%; border: none; padding: 0; }
    HistoryScreen.-short #history-filter { margin-bottom: 0; }
    """
    BINDINGS: ClassVar = bindings("history")
    #: Answers read for the screen: the journal may hold 90 days (`hitl history` pages).
    LIMIT = 500

    def __init__(
        self,
        entries: list[Entry],
        operator: str | None = None,
        inbox: Inbox | None = None,
        on_change: Callable[[Delta], None] | None = None,
    ) -> None:
        super().__init__()
        self.entries = list(entries)
        #: Whether each answer's loop resumed (`resume.ResumeBook`, read once here).
        book = inbox.resumes if inbox is not None else None
        self.loop_states = (
            {entry: loop_word(r) for entry, r in loop_states(book).items()} if book else {}
        )
        #: The rows shown, in the table's order (the filter's): answers, and a batch's line
        #: (a `journal.batches.Group`; its answers follow it when it is expanded).
        self.shown: list[Row] = []
        #: The batches whose answers are shown under their line (`Space`).
        self.expanded: set[str] = set()
        self.operator = operator
        #: The inbox re-reads the block an undo put back; `on_change` shows that in the list.
        self.inbox = inbox
        self.on_change = on_change

    def compose(self) -> ComposeResult:
        with Vertical(id="history-box") as box:
            box.border_title = "History"
            yield Input(
                placeholder="/ to filter: id, repo, block, answer, operator",
                id="history-filter",
            )
            table: DataTable = DataTable(id="history-table", cursor_type="row")
            yield table
            yield Static(
                "j/k move · / filter · u undoes the highlighted answer "
                "(as hitl undo ID) · Esc closes",
                id="history-hint",
                markup=False,
            )
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#history-table", DataTable)
        table.add_columns("when", "who", "block", "answered", "state", "loop", "id")
        self._fill()
        table.focus()

    @property
    def table(self) -> DataTable:
        return self.query_one("#history-table", DataTable)

    @property
    def current_row(self) -> Row | None:
        """The highlighted row: an answer or a batch's line (None: the list is empty)."""
        row = self.table.cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    @property
    def current(self) -> Entry | None:
        """The highlighted answer (None: the list is empty, or a batch's line is)."""
        row = self.current_row
        return row if isinstance(row, Entry) else None

    def _fill(self, keep: str | None = None) -> None:
        """The table from `entries` and the filter; the cursor stays on `keep` when shown."""
        words = self.query_one("#history-filter", Input).value.lower().split()
        found = [e for e in self.entries if all(w in history_text(e) for w in words)]
        self.shown = rows_of(found, self.expanded)
        table = self.table
        table.clear()
        for entry in self.shown:
            if not isinstance(entry, Entry):  # a batch's line
                table.add_row(*batch_cells(entry, entry.batch in self.expanded))
                continue
            state = "undone" if entry.undone else entry.status
            loop = "" if entry.undone else self.loop_states.get(entry.id, "")
            block = printable(entry.block_id)
            if entry.batch is not None and entry.batch in self.expanded:
                block = f"  └ {block}"
            table.add_row(
                Text(entry.time.astimezone().strftime("%Y-%m-%d %H:%M")),
                Text(printable(entry.operator)),
                Text(block),
                Text(printable(entry.answered)[:56], overflow="ellipsis", no_wrap=True),
                Text(state, style="dim" if entry.undone else ""),
                Text(loop, style="bold" if loop == "not resumed" else ""),
                Text(entry.id, style="dim"),
            )
        if not self.shown:
            empty = "No answers match the filter." if words else "No answers yet."
            table.add_row(Text(empty), "", "", "", "", "", "")
        ids = [row_id(e) for e in self.shown]
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)

    @on(Input.Changed, "#history-filter")
    def _filtered(self) -> None:
        current = self.current_row
        self._fill(row_id(current) if current else None)

    @on(DataTable.RowSelected, "#history-table")
    def _selected(self) -> None:
        """Enter on a batch's line expands it, as Space does."""
        self.action_expand()

    @on(Input.Submitted, "#history-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_filter(self) -> None:
        """`/`, a priority key (as the inbox's): the box focused at once, so that the letters
        typed on behind it are its own (never `h` or `q`, closing the history); in it, `/`
        is typed."""
        if isinstance(self.focused, Input):
            raise SkipAction()
        self.set_focus(self.query_one("#history-filter", Input))

    def action_close(self) -> None:
        if isinstance(self.focused, Input):  # Esc in the filter: back to the list, kept
            self.table.focus()
            return
        self.dismiss(None)

    def action_undo(self) -> None:
        row = self.current_row
        if row is not None and not isinstance(row, Entry):  # a batch's line: all of it
            self.ask_undo_batch(row)
            return
        entry = self.current
        if entry is None:
            self.notify("No answer is highlighted.", severity="warning")
            return
        self._find_undo(entry)

    @property
    def remotes(self) -> list:
        return self.inbox.remotes if self.inbox is not None else []

    @work(thread=True, group="apply", exit_on_error=False, description="_find_undo")
    def _find_undo(self, entry: Entry) -> None:
        """What `hitl undo ID` would do with the highlighted answer, asked first (undo_flow)."""
        from hitl_tui.answers.service import undo_target

        try:
            found = undo_target(entry.id, remotes=self.remotes)
        except HitlError as exc:
            self.post_message(Refused("Not undone", one_line(str(exc))))
            return
        self.app.call_from_thread(self._ask_undo, found)

    def _ask_undo(self, found) -> None:
        if self.app.screen is self:
            self.ask_undo(found)

    def undo_now(self, entry: Entry, force: bool) -> None:
        self._undo(entry, force)

    @work(thread=True, group="apply", exit_on_error=False, description="_undo")
    def _undo(self, entry: Entry, force: bool = False) -> None:
        """`hitl undo ID [--force]` for the highlighted answer, then the block it put back
        re-read."""
        from hitl_tui import journal
        from hitl_tui.answers.service import undo_answer
        from hitl_tui.journal.undo import LoopActed

        try:
            message = undo_answer(entry.id, self.operator or "operator", self.remotes, force)
        except LoopActed as exc:  # the loop acted since the question: asked again
            self.app.call_from_thread(self.ask_force, entry, exc.what)
            return
        except HitlError as exc:
            self.post_message(Refused("Not undone", one_line(str(exc))))
            return
        delta = Delta()
        if self.inbox is not None and isinstance(entry.block_path, Path):
            delta = self.inbox.handle([entry.block_path])
        # Its row waiting for the loop goes (`undo` forgot it).
        delta.removed.append((entry.block_source, row_path(entry.id)))
        self.post_message(HistoryUndone(message, delta, journal.history(limit=self.LIMIT)))

    @on(HistoryUndone)
    def _undone(self, message: HistoryUndone) -> None:
        message.stop()
        if self.on_change is not None:
            self.on_change(message.delta)
        current = self.current_row
        self.entries = message.entries
        self._fill(row_id(current) if current else None)
        self.notify(one_line(message.message), title="Undone", markup=False)

    @on(Refused)
    def _refused(self, message: Refused) -> None:
        message.stop()
        self.notify(
            one_line(message.message),
            title=message.title,
            severity="error",
            markup=False,
            timeout=10,
        )
