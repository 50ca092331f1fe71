"""The two screens of a batch answer: its preview (one section per marked block, with its exact
diff, a count, and keys to move between sections and to pick a choice for a block that lists no
such option, or skip it) and its result (written, refused, skipped; `u` undoes the batch).

The batch itself is the domain's (`answers.batch`: `plan_batch`, `Batch.choose`, `apply_batch`,
`journal.undo_batch`); these screens show it and say what the operator picked. Everything shown
is agent or journal text: plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from hitl_tui.model import Choice
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.screens import diff_text

if TYPE_CHECKING:
    from hitl_tui.answers.batch import Batch, Item

#: What each status is called in a section's head and in the counts.
STATUS_WORDS = {
    "ready": "ready",
    "choose": "choose",
    "refused": "refused",
    "written": "written",
    "skipped": "skipped",
}


def decided(item: Item) -> str:
    """What a planned item answers: the block's own choice (`B) Node 22`), or own words."""
    plan = item.plan
    if plan is None:
        return ""
    choice = plan.answer.choice
    if choice is not None:
        text = f"{choice.key}) {choice.option}"
        if plan.answer.texts:
            text += ": " + " | ".join(plan.answer.texts)
        return text
    return "your own words: " + " | ".join(plan.answer.texts)


def counts(batch: Batch) -> dict[str, int]:
    found: dict[str, int] = {}
    for item in batch.items:
        found[item.status] = found.get(item.status, 0) + 1
    return found


def count_line(batch: Batch) -> str:
    """`6 blocks: 4 ready · 2 to choose · 0 refused`."""
    found = counts(batch)
    total = len(batch.items)
    noun = "block" if total == 1 else "blocks"
    parts = [f"{found.get('ready', 0)} ready", f"{found.get('choose', 0)} to choose"]
    if found.get("skipped"):
        parts.append(f"{found['skipped']} skipped")
    parts.append(f"{found.get('refused', 0)} refused")
    return f"{total} {noun}: " + " · ".join(parts)


def head_text(index: int, total: int, item: Item, option: str | None) -> Text:
    """A section's first line: which block, where, and what becomes of it."""
    block = item.block
    text = Text()
    text.append(f" {index + 1}/{total} ", style="bold reverse")
    text.append(f" {printable(block.id)}", style="bold")
    text.append(f" · {printable(block.source)} · {printable(block.repo_name)} · ", style="dim")
    status = item.status
    if status == "ready":
        text.append("ready: ", style="bold green")
        text.append(printable(decided(item)))
    elif status == "choose":
        text.append("choose: ", style="bold yellow")
        wanted = f"no option {printable(option)!r} here" if option else "pick one of its choices"
        text.append(f"{wanted}; 1-{min(len(block.choices), 9)} picks, s skips")
    elif status == "skipped":
        text.append("skipped", style="bold")
        if item.reason:
            text.append(f": {printable(item.reason)}")
    else:
        text.append(f"{STATUS_WORDS.get(status, status)}: ", style="bold red")
        text.append(printable(item.reason or ""))
    return text


def body_text(item: Item) -> Text:
    """A section's body: the exact diff of its plan, or the block's choices to pick from."""
    if item.plan is not None and item.status in ("ready", "written"):
        return diff_text(item.plan.diff())
    if item.status == "choose":
        text = Text()
        text.append(printable(item.block.one_line_question(300)) + "\n", style="italic")
        for number, choice in enumerate(item.block.choices[:9], 1):
            text.append(f" {number} ", style="bold reverse")
            text.append(f" {printable(choice.key)}) {printable(choice.option)}")
            if choice.consequence:
                text.append(f" — {printable(choice.consequence)}", style="dim")
            if choice.needs_text:
                text.append(" (asks for your text)", style="dim italic")
            text.append("\n")
        return text
    return Text("nothing is written for this block", style="dim")


class BatchPreviewScreen(ModalScreen["Batch | None"]):
    """One section per marked block: its exact diff (or its choices, when it lists no such
    option), a count, `n` / `N` to move between sections, `1`-`9` to pick a choice for the
    current block, `s` to skip it; `y` applies (the ready ones), `Esc` goes back, nothing
    written."""

    DEFAULT_CSS = """
    BatchPreviewScreen { align: center middle; background: $background; }
    #batch-box {
        width: 96%; height: 94%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #batch-title { text-style: bold; height: auto; }
    #batch-count { height: 1; color: $text-muted; margin-bottom: 1; }
    #batch-sections { height: 1fr; border: round $primary 50%; }
    .batch-head { height: auto; background: $panel; margin-top: 1; }
    .batch-head.-current { background: $accent 40%; }
    #head-0 { margin-top: 0; }
    .batch-body { height: auto; padding: 0 1; }
    #batch-hint { height: auto; color: $text-muted; }
    #batch-buttons { height: 3; align-horizontal: right; }
    #batch-buttons Button { margin-left: 2; }
    BatchPreviewScreen.-short #batch-box { width: 100%; height: 100%; border: none; padding: 0; }
    BatchPreviewScreen.-short #batch-count { margin-bottom: 0; }
    BatchPreviewScreen.-short #batch-hint { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    BatchPreviewScreen.-short #batch-buttons { height: 1; }
    BatchPreviewScreen.-short #batch-buttons Button { height: 1; min-width: 0; border: none; }
    BatchPreviewScreen ToastRack { margin-bottom: 6; }
    """
    BINDINGS: ClassVar = bindings("batch")

    def __init__(
        self,
        batch: Batch,
        title: str,
        option: str | None,
        choose: Callable[[Batch, int, Choice | None], None],
        restart: str | None = None,
    ) -> None:
        super().__init__()
        self.planned = batch
        self.title_text = title
        #: The option text every block is matched by (None: own words for all).
        self.option = option
        #: Asked when the operator picks a choice (or skips: None) for section `index`: it
        #: plans again (a text box first when the choice needs words) and calls `update`.
        self.choose = choose
        #: The restarts that run after applying, as the operator reads them (None: none).
        self.restart = restart
        self.run_restart = restart is not None
        #: The section the keys act on.
        self.current = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="batch-box") as box:
            box.border_title = "Answer the marked blocks"
            yield Static(id="batch-title")
            yield Static(id="batch-count")
            with VerticalScroll(id="batch-sections", can_focus=False):
                for index in range(len(self.planned.items)):
                    yield Static(id=f"head-{index}", classes="batch-head")
                    yield Static(id=f"body-{index}", classes="batch-body")
            yield Static(
                "n / N next / previous block · ↑ ↓ PgUp PgDn scroll · 1-9 pick a choice for "
                "this block · s skip it · r restarts on/off · y apply · Esc back, nothing written",
                id="batch-hint",
                markup=False,
            )
            with Horizontal(id="batch-buttons"):
                yield Button("Back (Esc)", id="cancel")
                yield Button("Apply (y)", id="apply", variant="success")

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#apply", Button).focus()

    def title_line(self) -> str:
        if self.restart is None:
            return self.title_text
        if self.run_restart:
            return f"{self.title_text} · then restarts: {self.restart} (r: skip)"
        return f"{self.title_text} · restarts skipped (r: run them)"

    def _fill(self) -> None:
        self.query_one("#batch-title", Static).update(Content(printable(self.title_line())))
        for index in range(len(self.planned.items)):
            self._fill_section(index)
        self._show_count()
        self._mark_current()

    def _fill_section(self, index: int) -> None:
        item = self.planned.items[index]
        total = len(self.planned.items)
        self.query_one(f"#head-{index}", Static).update(head_text(index, total, item, self.option))
        self.query_one(f"#body-{index}", Static).update(body_text(item))

    def _show_count(self) -> None:
        line = count_line(self.planned)
        line += f" · block {self.current + 1} of {len(self.planned.items)}"
        self.query_one("#batch-count", Static).update(Content(line))
        ready = counts(self.planned).get("ready", 0)
        self.query_one("#apply", Button).label = f"Apply {ready} (y)"

    def _mark_current(self) -> None:
        for index in range(len(self.planned.items)):
            head = self.query_one(f"#head-{index}", Static)
            head.set_class(index == self.current, "-current")

    def update(self, batch: Batch, index: int | None = None) -> None:
        """The batch as planned again (a choice picked or a block skipped)."""
        self.planned = batch
        if index is None:
            self._fill()
            return
        self._fill_section(index)
        self._show_count()

    # -- keys --------------------------------------------------------------------------------

    def action_next_section(self, step: int) -> None:
        total = len(self.planned.items)
        if not total:
            return
        self.current = (self.current + step) % total
        self._mark_current()
        self._show_count()
        self.call_after_refresh(self._scroll_to_current)

    def _scroll_to_current(self) -> None:
        """The current section's head at the top (after a section planned again is laid out)."""
        head = self.query_one(f"#head-{self.current}", Static)
        self.query_one("#batch-sections", VerticalScroll).scroll_to_widget(
            head, animate=False, top=True
        )

    def action_scroll(self, lines: int) -> None:
        self.query_one("#batch-sections", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_pick(self, number: int) -> None:
        item = self.planned.items[self.current]
        if item.status not in ("choose", "ready", "skipped"):
            self.notify(
                printable(f"{item.block.id} is refused: {item.reason or ''}"),
                severity="warning",
                markup=False,
            )
            return
        choices = item.block.choices
        if not 1 <= number <= len(choices):
            self.notify(
                printable(f"{item.block.id} has {len(choices)} choices."),
                severity="warning",
                markup=False,
            )
            return
        choice = choices[number - 1]
        if choice.needs_text:  # a batch carries no words for one block's choice
            self.notify(
                printable(
                    f"{choice.key}) {choice.option} asks for your words: s skips "
                    f"{item.block.id} here; answer it on its own afterwards."
                ),
                severity="warning",
                markup=False,
            )
            return
        self.choose(self.planned, self.current, choice)

    def action_skip(self) -> None:
        item = self.planned.items[self.current]
        if item.status in ("choose", "ready"):
            self.choose(self.planned, self.current, None)

    def action_toggle_restart(self) -> None:
        if self.restart is None:
            self.notify("No [[loop]] restart covers these repositories.", markup=False)
            return
        self.run_restart = not self.run_restart
        self.query_one("#batch-title", Static).update(Content(printable(self.title_line())))

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        if not counts(self.planned).get("ready"):
            self.notify(
                "Nothing is ready to write: pick a choice (1-9) for a block, or Esc.",
                severity="warning",
                markup=False,
            )
            return
        scroll = self.query_one("#batch-sections", VerticalScroll)
        if scroll.scrollable_content_region.height <= 0:
            self.notify(
                "The window is too small to show the diffs, so nothing was applied.",
                severity="warning",
            )
            return
        self.dismiss(self.planned)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def result_text(batch: Batch, undone: list[str] | None = None) -> Text:
    """What a batch did, one line per block, written first, then refused, then skipped; and
    what its undo did when there was one."""
    text = Text()
    for status in ("written", "refused", "skipped"):
        items = [i for i in batch.items if i.status == status]
        if not items:
            continue
        style = {"written": "bold green", "refused": "bold red"}.get(status, "bold")
        text.append(f"{status} ({len(items)})\n", style=style)
        for item in items:
            text.append(f"  {printable(item.block.id)}", style="bold")
            text.append(f" · {printable(item.block.repo_name)}", style="dim")
            if status == "written":
                text.append(f" · {printable(decided(item))}")
                if item.entry:
                    text.append(f" · {printable(str(item.entry))}", style="dim")
            elif item.reason:
                text.append(f" · {printable(item.reason)}")
            text.append("\n")
    if undone:
        text.append("\nundo of the batch\n", style="bold")
        for line in undone:
            text.append(f"  {printable(line)}\n")
    return text


class BatchResultScreen(ModalScreen[None]):
    """What a batch wrote, refused and skipped; `u` undoes the whole batch (asked first)."""

    DEFAULT_CSS = """
    BatchResultScreen { align: center middle; background: $background 60%; }
    #result-box {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #result-text { height: auto; }
    #result-hint { height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar = bindings("batch-result")

    def __init__(self, batch: Batch, undo: Callable[[Batch], None]) -> None:
        super().__init__()
        self.planned = batch
        #: Asked to undo the batch (it asks first, then undoes in a worker: `undone`).
        self.undo = undo
        self.undone: list[str] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="result-box") as box:
            box.border_title = f"Batch {self.planned.id}"
            yield Static(result_text(self.planned), id="result-text")
            yield Static("u undo the whole batch · Esc close", id="result-hint", markup=False)

    def show_undone(self, lines: list[str]) -> None:
        self.undone = lines
        self.query_one("#result-text", Static).update(result_text(self.planned, lines))
        self.query_one("#result-hint", Static).update("Esc close")

    def action_undo(self) -> None:
        if self.undone is not None:
            self.notify("This batch was undone already.", markup=False)
            return
        if not any(i.status == "written" for i in self.planned.items):
            self.notify("Nothing of this batch was written: nothing to undo.", markup=False)
            return
        self.undo(self.planned)

    def action_close(self) -> None:
        self.dismiss(None)
