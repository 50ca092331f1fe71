"""The detail of the highlighted block: its question, context, what was tried, the rest of its
file (empty sections folded into one line), and the choices in a column of their own; `r` shows
the raw file instead. Agent text is shown as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static, TextArea

from hitl_tui.keys import keys_for
from hitl_tui.model import Block, Section
from hitl_tui.textio import printable
from hitl_tui.tui.widgets import WAITING_WORDS, BlockList


def _clip(text: str, limit: int) -> str:
    """Agent text made printable and cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return printable(text, keep_newlines=True)
    rest = len(text) - limit
    return (
        printable(text[:limit], keep_newlines=True)
        + f"\n… {rest:,} more characters: press r for the raw file"
    )


def _pane(title: str, id: str, classes: str = "pane") -> Static:
    pane = Static("", id=id, classes=classes, markup=False)
    pane.border_title = title
    return pane


#: Choices drawn in the pane (keys reach 9; a file listing thousands is hostile or broken).
CHOICE_LIMIT = 30


#: Sources whose choices hitl derives and names in full: drawn one line each, no consequence.
SHORT_CHOICES = frozenset({"agenticloop"})


#: The list's keys that the detail's columns do not take (they scroll with the arrows, Home,
#: End and the page keys): pressed there, a toast says where they work.
LIST_ONLY = frozenset(
    key
    for spec in keys_for("list")
    for key in spec.keys.split(",")
    if key not in {"up", "down", "home", "end", "pageup", "pagedown"}
)
#: The key of a segment's meta that names the inbox action a click on it runs.
CLICK = "hitl-click"


def _clickable(text: Text, action: str) -> Text:
    """`text` that runs the inbox screen's `action` when clicked (BlockDetail.on_click): the
    action is ours, in the style's meta; the text stays plain (no markup, no `@click`)."""
    text.stylize(Style(meta={CLICK: action}))
    return text


def choice_text(block: Block) -> RenderableType:
    """Each choice with its number key, option and consequence (hanging indent), no markup.
    A click on a choice opens its preview, as its number does."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3)
    grid.add_column(ratio=1)
    if block.state in WAITING_WORDS:  # an answer waiting for its loop: what can be done
        for key, action, what in (
            ("R", "restart_loop", "restart the loop ([[loop]] restart)"),
            ("t", "open_loop", "go to the loop ([[loop]] open, else a shell in the repo)"),
            ("x", "dismiss_waiting", "drop it from the list (you saw to it)"),
        ):
            badge = Text(f" {key} ", style="bold reverse")
            grid.add_row(_clickable(badge, action), _clickable(Text(what), action))
        return grid
    if not block.choices:
        grid.add_row("", Text("No listed choices: press o to answer in your own words.", "dim"))
        return grid
    # An agenticloop task's choices are hitl's (derived from its status): each reads short,
    # and what it changes in the file's header is in its preview (the title and the diff).
    far = block.meta.get("remote_source")
    short = (far if isinstance(far, str) else block.source) in SHORT_CHOICES
    for index, choice in enumerate(block.choices[:CHOICE_LIMIT], 1):
        badge = Text(f" {index} " if index <= 9 else "   ", style="bold reverse")
        body = Text.assemble((f"{printable(choice.key)}) ", "bold"), printable(choice.option))
        if choice.consequence and not short:
            body.append(f"\n→ {printable(choice.consequence)}", style="dim")
        if choice.needs_text and not short:
            body.append("\n(asks for your text)", style="dim italic")
        action = f"choose({index})"
        grid.add_row(_clickable(badge, action), _clickable(body, action))
    if len(block.choices) > CHOICE_LIMIT:
        more = len(block.choices) - CHOICE_LIMIT
        grid.add_row("", Text(f"… {more:,} more choices: press r for the raw file", "dim"))
    grid.add_row(
        _clickable(Text(" o ", style="bold"), "own_words"),
        _clickable(Text("answer in your own words", style="dim"), "own_words"),
    )
    return grid


def more_text(block: Block) -> tuple[str, bool]:
    """The "More" pane: each section with text, then the empty ones (a template's sections
    nobody filled in) named on one line; and whether that line is all there is (it is then
    drawn on one line, cut to the pane's width)."""
    sections = list(block.extra)
    if block.notes:  # `w`: the operator's notes, the block kept open
        notes = "\n".join(f"• {n}" for n in block.notes)
        sections.insert(0, Section("Your notes (kept blocked: waiting on you)", notes))
    filled = [f"{s.title}\n{s.body}" for s in sections if s.body.strip()]
    empty = [s.title for s in sections if not s.body.strip()]
    if empty:
        names = empty if not filled else [*empty[:3], "…"][: len(empty)]
        count = f"{len(empty)} empty sections" if len(empty) > 1 else "1 empty section"
        filled.append(f"{count} (r shows them): {', '.join(names)}")
    return "\n\n".join(filled), not any(s.body.strip() for s in sections)


class BlockDetail(Horizontal):
    """Question, Context, Attempted and Choices of one block; `r` shows the raw file instead.

    The choices get their own column, so what the operator can do is always in view.
    """

    can_focus = False

    def compose(self):
        with VerticalScroll(id="story"):
            yield _pane("Problems", "problems")
            yield _pane("Asked again", "asked-again")
            yield _pane("Question", "question")
            yield _pane("Context", "context")
            yield _pane("Attempted", "attempted")
            yield _pane("Asked before", "asked-before")
            yield _pane("More", "extra")
        with VerticalScroll(id="actions"):
            yield _pane("Choices", "choices")
        raw = TextArea("", id="raw", read_only=True, soft_wrap=True, show_line_numbers=True)
        raw.border_title = "Raw file"
        yield raw

    #: Characters of one pane's text drawn; the rest is a press of `r` away. Wrapping a
    #: megabyte of text on every highlight would stall the app.
    PANE_LIMIT = 20_000
    #: Characters of the raw file loaded into the raw view (the file is bounded at 1 MiB).
    RAW_LIMIT = 200_000

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.block: Block | None = None
        self._raw_of: Block | None = None
        #: What the journal says of a block: the "Asked again" line and the "Asked before"
        #: lines, each None when there is none (tui/asked.py; None: nothing is asked).
        self.asked: Callable[[Block], tuple[Text | None, Text | None]] | None = None

    def show_asked(self, block: Block | None) -> None:
        """The "Asked again" and "Asked before" panes of `block`, shown when they say something."""
        found: tuple[Text | None, Text | None] = (None, None)
        if block is not None and self.asked is not None:
            found = self.asked(block)
        for pane_id, text in zip(("#asked-again", "#asked-before"), found, strict=True):
            pane = self.query_one(pane_id, Static)
            pane.update(text if text is not None else "")
            pane.set_class(text is not None, "shown")

    def show(self, block: Block | None) -> None:
        self.block = block
        self.show_asked(block)
        problems = self.query_one("#problems", Static)
        if block is None:
            for pane_id in ("#question", "#context", "#attempted", "#choices", "#extra"):
                self.query_one(pane_id, Static).update("")
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
        question.update(Content((header or "") + _clip(block.question, self.PANE_LIMIT)))
        source = block.source
        far, host = block.meta.get("remote_source"), block.meta.get("host")
        if isinstance(far, str) and isinstance(host, str):  # a block on another machine
            source = f"{far} on {host}"
        source += f" · {block.state}"
        if block.category:
            source += f" · {block.category}"
        question.border_subtitle = Content(printable(f"{block.id} · {source}"))
        answered = block.state in WAITING_WORDS  # an answer waiting for its loop
        context = block.context.strip() or "(none given)"
        pane = self.query_one("#context", Static)
        pane.update(Content(_clip(context, self.PANE_LIMIT)))
        pane.border_title = "Your answer" if answered else "Context"
        attempted = "\n".join(f"• {a}" for a in block.attempted) or "(none given)"
        pane = self.query_one("#attempted", Static)
        pane.update(Content(_clip(attempted, self.PANE_LIMIT)))
        # A permission prompt is a tool call, never something the agent tried: no pane for it.
        pane.display = not answered and not (block.category == "permission" and not block.attempted)
        pane = self.query_one("#choices", Static)
        pane.update(choice_text(block))
        pane.border_title = "The loop" if answered else "Choices"
        extra = self.query_one("#extra", Static)
        if block.extra or block.notes:
            text, folded = more_text(block)
            extra.update(Content(_clip(text, self.PANE_LIMIT)))
            extra.add_class("shown")
            extra.set_class(folded, "folded")
        else:
            extra.remove_class("shown")
        if self.has_class("raw"):
            self._load_raw()
        for scroll in self.query(VerticalScroll):
            scroll.scroll_home(animate=False)

    def _load_raw(self) -> None:
        """Fill the raw view, only when it is shown (a large file costs once, not per key)."""
        block = self.block
        if block is None or block is self._raw_of:
            return
        self._raw_of = block
        raw = self.query_one("#raw", TextArea)
        text = printable(block.raw[: self.RAW_LIMIT], keep_newlines=True)
        if len(block.raw) > self.RAW_LIMIT or block.truncated:
            text += "\n\n(… the rest of the file is not shown here)"
        raw.load_text(text)
        name = getattr(block.path, "name", None) or str(block.path)
        raw.border_title = Content(printable(f"Raw {name}"))

    def on_key(self, event: events.Key) -> None:
        """In the detail's columns (Tab or a click put the focus there) the list's own keys do
        nothing: say where they work. Esc goes back to the list."""
        if event.key == "escape":
            event.stop()
            self._back_to_list()
        elif event.key in LIST_ONLY:
            event.stop()
            self.notify(
                f"{event.character or event.key} works in the list: press Esc to return to it",
                severity="warning",
                markup=False,
                timeout=3,
            )

    def _back_to_list(self) -> None:
        for widget in self.screen.query(BlockList):
            widget.focus()
            return

    async def on_click(self, event: events.Click) -> None:
        """A click on a choice (or on "o") runs what its key runs, on the inbox screen."""
        action = event.style.meta.get(CLICK) if event.style else None
        if isinstance(action, str):
            event.stop()
            await self.run_action(f"screen.{action}")

    def toggle_raw(self) -> bool:
        self.toggle_class("raw")
        if self.has_class("raw"):
            self._load_raw()
        return self.has_class("raw")
