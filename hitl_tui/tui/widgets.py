"""The inbox's two widgets: the list of blocks and the detail of the highlighted one.

Agent text reaches the screen only as `rich.text.Text` or `Content` built from plain strings that
went through `printable()`: never as markup, so `[b`, `[/x]` or `[@click=app.quit]` in a
BLOCKED.md is just text, and escape sequences show as visible symbols.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Static, TextArea

from hitl_tui.inbox import Delta, Key, key_of
from hitl_tui.model import Block
from hitl_tui.textio import printable
from hitl_tui.timefmt import age

Clock = Callable[[], datetime]
COLUMNS = ("repo", "age", "state", "question")


def row_key(key: Key) -> str:
    return f"{key[0]}:{key[1]}"


class BlockList(DataTable):
    """Every open block, oldest first. The highlighted block stays put when others come and go."""

    BINDINGS: ClassVar = [
        ("j", "cursor_down", "Down"),
        ("k", "cursor_up", "Up"),
    ]

    def __init__(self, clock: Clock, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.clock = clock
        self.blocks: dict[str, Block] = {}
        self.order: list[str] = []

    FIXED = (("block", "repo", 20), ("age", "age", 4), ("state", "state", 9))

    def on_mount(self) -> None:
        for label, key, width in self.FIXED:
            self.add_column(label, key=key, width=width)
        self.add_column("question", key="question", width=40)
        self._fit_question()

    def on_resize(self) -> None:
        self._fit_question()

    def _fit_question(self) -> None:
        """The question takes the rest of the width, so the list never scrolls sideways."""
        used = sum(width + 2 * self.cell_padding for _, _, width in self.FIXED)
        width = max(10, self.scrollable_content_region.width - used - 2 * self.cell_padding - 1)
        column = self.columns.get("question")  # type: ignore[call-overload]
        if column is not None and column.width != width:
            column.width = width
            column.auto_width = False
            self._require_update_dimensions = True
            self._clear_caches()
            self.refresh()

    def _cells(self, block: Block) -> tuple[Text, Text, Text, Text]:
        state = Text("needs ctx", style="bold cyan") if block.state == "needs_context" else Text("")
        if block.problems:
            state = Text("raw", style="bold red") if not block.choices else Text("check", "red")
        elif block.state == "blocked" and block.category:
            state = Text(printable(block.category), style="yellow", overflow="ellipsis")
        return (
            Text(printable(block.id), overflow="ellipsis", no_wrap=True),
            Text(age(block.since, self.clock()), justify="right"),
            state,
            Text(printable(block.one_line_question(300)), no_wrap=True, overflow="ellipsis"),
        )

    @property
    def current(self) -> Block | None:
        if not self.order or self.cursor_row < 0 or self.cursor_row >= len(self.order):
            return None
        return self.blocks.get(self.order[self.cursor_row])

    def load(self, blocks: list[Block]) -> None:
        """Replace every row (start-up, or an out-of-order arrival)."""
        keep = self.order[self.cursor_row] if self.current else None
        self.clear()
        self.blocks = {}
        self.order = []
        for block in blocks:
            key = row_key(key_of(block))
            self.blocks[key] = block
            self.order.append(key)
            self.add_row(*self._cells(block), key=key)
        self._restore(keep)

    def _restore(self, keep: str | None) -> None:
        if keep in self.blocks:
            self.move_cursor(row=self.order.index(keep), animate=False)
        elif self.order:
            self.move_cursor(row=min(self.cursor_row, len(self.order) - 1), animate=False)

    def apply(self, delta: Delta) -> None:
        """Apply a Delta with the least change: the highlighted block keeps the cursor."""
        keep = self.order[self.cursor_row] if self.current else None
        keep_index = self.cursor_row
        for key in delta.removed:
            rk = row_key(key)
            if rk in self.blocks:
                del self.blocks[rk]
                index = self.order.index(rk)
                self.order.pop(index)
                self.remove_row(rk)
                if rk == keep:
                    keep = self.order[min(index, len(self.order) - 1)] if self.order else None
        for block in delta.changed:
            rk = row_key(key_of(block))
            if rk in self.blocks:
                self.blocks[rk] = block
                cells = zip(COLUMNS, self._cells(block), strict=True)
                for column, cell in cells:
                    self.update_cell(rk, column, cell)
        rebuild = False
        for block in delta.added:
            rk = row_key(key_of(block))
            if rk in self.blocks:
                self.blocks[rk] = block
                continue
            last = self.blocks[self.order[-1]] if self.order else None
            self.blocks[rk] = block
            if last is None or (block.since, block.id) >= (last.since, last.id):
                self.order.append(rk)
                self.add_row(*self._cells(block), key=rk)
            else:
                rebuild = True
        if rebuild:
            ordered = sorted(self.blocks.values(), key=lambda b: (b.since, b.id))
            self.load(ordered)
        if keep is not None:
            self._restore(keep)
        elif self.order:
            self.move_cursor(row=min(keep_index, len(self.order) - 1), animate=False)

    def refresh_ages(self) -> None:
        for rk in self.order:
            block = self.blocks[rk]
            self.update_cell(rk, "age", Text(age(block.since, self.clock()), justify="right"))


def _pane(title: str, id: str, classes: str = "pane") -> Static:
    pane = Static("", id=id, classes=classes, markup=False)
    pane.border_title = title
    return pane


def choice_text(block: Block) -> RenderableType:
    """Each choice with its number key, option and consequence (hanging indent), no markup."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3)
    grid.add_column(ratio=1)
    if not block.choices:
        grid.add_row("", Text("No listed choices: press o to answer in your own words.", "dim"))
        return grid
    for index, choice in enumerate(block.choices, 1):
        badge = Text(f" {index} " if index <= 9 else "   ", style="bold reverse")
        body = Text.assemble((f"{printable(choice.key)}) ", "bold"), printable(choice.option))
        if choice.consequence:
            body.append(f"\n→ {printable(choice.consequence)}", style="dim")
        if choice.needs_text:
            body.append("\n(asks for your text)", style="dim italic")
        grid.add_row(badge, body)
    grid.add_row(Text(" o ", style="bold"), Text("answer in your own words", style="dim"))
    return grid


class BlockDetail(Horizontal):
    """Question, Context, Attempted and Choices of one block; `r` shows the raw file instead.

    The choices get their own column, so what the operator can do is always in view.
    """

    can_focus = False

    def compose(self):
        with VerticalScroll(id="story"):
            yield _pane("Problems", "problems")
            yield _pane("Question", "question")
            yield _pane("Context", "context")
            yield _pane("Attempted", "attempted")
            yield _pane("More", "extra")
        with VerticalScroll(id="actions"):
            yield _pane("Choices", "choices")
        raw = TextArea("", id="raw", read_only=True, soft_wrap=True, show_line_numbers=True)
        raw.border_title = "Raw file"
        yield raw

    def show(self, block: Block | None) -> None:
        problems = self.query_one("#problems", Static)
        if block is None:
            for pane in ("#question", "#context", "#attempted", "#choices", "#extra"):
                self.query_one(pane, Static).update("")
            problems.remove_class("shown")
            return
        if block.problems:
            text = "\n".join(printable(p) for p in block.problems)
            problems.update(Content(text + "\n(press r to see the raw file)"))
            problems.add_class("shown")
        else:
            problems.remove_class("shown")
        header = block.title and f"{printable(block.title)}\n"
        question = self.query_one("#question", Static)
        question.update(Content((header or "") + printable(block.question, keep_newlines=True)))
        source = f"{block.source} · {block.state}"
        if block.category:
            source += f" · {block.category}"
        question.border_subtitle = Content(printable(f"{block.id} · {source}"))
        context = block.context.strip() or "(none given)"
        self.query_one("#context", Static).update(Content(printable(context, keep_newlines=True)))
        attempted = "\n".join(f"• {printable(a)}" for a in block.attempted) or "(none given)"
        self.query_one("#attempted", Static).update(Content(attempted))
        self.query_one("#choices", Static).update(choice_text(block))
        extra = self.query_one("#extra", Static)
        if block.extra:
            body = "\n\n".join(
                f"{printable(s.title)}\n{printable(s.body, keep_newlines=True)}"
                for s in block.extra
            )
            extra.update(Content(body))
            extra.add_class("shown")
        else:
            extra.remove_class("shown")
        raw = self.query_one("#raw", TextArea)
        raw.load_text(printable(block.raw, keep_newlines=True))
        name = getattr(block.path, "name", None) or str(block.path)
        raw.border_title = Content(printable(f"Raw {name}"))
        for scroll in self.query(VerticalScroll):
            scroll.scroll_home(animate=False)

    def toggle_raw(self) -> bool:
        self.toggle_class("raw")
        return self.has_class("raw")
