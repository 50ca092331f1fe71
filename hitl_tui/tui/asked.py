"""Asked again, and asked before, in the app: the journal's answer index (`similar`) and what
the inbox shows of it.

- The index is built in a thread worker at start-up, and refreshed (only the records written
  since) whenever the journal's active file changed when the inbox does: after an answer or an
  undo of this app, or of a `hitl` command in another terminal.
- The list marks a block that asks again with `↻` (`BlockList.is_asked`); the detail has an
  "Asked again" line at the top and an "Asked before" pane with up to 3 earlier answers to
  similar questions (`BlockDetail.asked`). Both are computed for the rows drawn and the block
  highlighted, memoised per (index version, block fingerprint): a keypress costs a dict look-up.
- `p` reuses an earlier answer: one opens its preview (the same choice, when the block lists
  it), several a picker first (`ReuseScreen`: 1 to 3, Esc). An answer in the operator's own
  words opens the text box with those words in it, then the preview. hitl never answers by
  itself: the preview is always shown, and nothing is written until the operator applies it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from hitl_tui.answers.batch import match_option
from hitl_tui.loops.similarity import AnswerIndex, Earlier, journal_stamp, save_recent
from hitl_tui.model import Block, Choice
from hitl_tui.textio import printable
from hitl_tui.timefmt import age
from hitl_tui.tui.answer_flow import text_box
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.detail import BlockDetail
from hitl_tui.tui.waiting import waiting_of

if TYPE_CHECKING:
    from textual.app import App

    #: The inbox screen (tui/inbox_screen.py, which imports this module: no import back); its
    #: attributes are not checked here.
    InboxScreen = Any

#: Earlier answers listed under "Asked before", and offered by `p`.
LIMIT = 3


class Asked:
    """The app's answer index (None until the start-up worker built it) and its questions."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.index: AnswerIndex | None = None
        self._stamp: tuple | None = None
        self._screen: InboxScreen | None = None

    # -- the index: built, then refreshed in workers ---------------------------------------

    def start(self, app: App, screen: InboxScreen) -> None:
        """Hook into the inbox screen's list and detail, and build the index in a thread."""
        self._screen = screen
        screen.blocklist.is_asked = lambda block: self.again(block) is not None
        screen.query_one(BlockDetail).asked = self.texts
        app.run_worker(
            lambda: self._build(app),
            thread=True,
            group="asked",
            exit_on_error=False,
            description="build the answer index",
        )

    def _build(self, app: App) -> None:
        stamp = journal_stamp()
        index = AnswerIndex.from_journal()
        save_recent(index, self.clock(), stamp)  # what `hitl list` reads
        app.call_from_thread(self._built, index, stamp)

    def _built(self, index: AnswerIndex, stamp: tuple | None) -> None:
        self.index, self._stamp = index, stamp
        self._redraw()

    def journal_may_have_changed(self, app: App) -> None:
        """The inbox changed: when the journal did too (one stat), read what is new."""
        if self.index is None:
            return
        stamp = journal_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        app.run_worker(
            lambda: self._refresh(app, stamp),
            thread=True,
            group="asked",
            exit_on_error=False,
            description="refresh the answer index",
        )

    def _refresh(self, app: App, stamp: tuple | None) -> None:
        index = self.index
        if index is not None and index.refresh():
            save_recent(index, self.clock(), stamp)
            app.call_from_thread(self._redraw)

    def _redraw(self) -> None:
        screen = self._screen
        if screen is None or not screen.is_mounted:
            return
        screen.blocklist.refresh_ages()  # the rows' marks, drawn again
        screen.query_one(BlockDetail).show_asked(screen.current)

    # -- what it says of a block ------------------------------------------------------------

    def again(self, block: Block) -> Earlier | None:
        index = self.index
        if index is None or waiting_of(block) is not None:  # an answer's row asks nothing
            return None
        return index.asked_again(block)

    def before(self, block: Block) -> list[Earlier]:
        index = self.index
        if index is None or waiting_of(block) is not None:
            return []
        return index.earlier(block, LIMIT)

    def texts(self, block: Block) -> tuple[Text | None, Text | None]:
        """The detail's "Asked again" line and "Asked before" lines (None: not shown)."""
        now = self.clock()
        again = self.again(block)
        before = self.before(block)
        return (
            None if again is None else again_text(again, now),
            before_text(before, now) if before else None,
        )


def _ago(when: datetime, now: datetime) -> str:
    return f"{age(when, now)} ago"


def again_text(earlier: Earlier, now: datetime) -> Text:
    """`You answered this 2h ago in shop: B) Keep invoices — it asked again.`"""
    text = Text()
    text.append(f"You answered this {_ago(earlier.time, now)} in ", style="bold")
    text.append(printable(earlier.repo_name), style="bold")
    text.append(": ")
    text.append(printable(earlier.answered))
    text.append(" — it asked again.", style="bold")
    text.append(
        "\nThe answer did not settle it: tighten PROMPT.md (or the task), or press p to give "
        "the same answer again.",
        style="dim",
    )
    return text


def before_text(found: list[Earlier], now: datetime) -> Text:
    """One line per earlier answer: its date, repo and what was answered; then the key."""
    text = Text()
    for number, earlier in enumerate(found, 1):
        when = earlier.time.astimezone().strftime("%Y-%m-%d %H:%M")
        text.append(f"{number} ", style="bold")
        text.append(f"{when} ({_ago(earlier.time, now)}) · ", style="dim")
        text.append(printable(earlier.repo_name), style="bold")
        text.append(f" · {printable(earlier.answered)}\n")
    hint = "p reuses it" if len(found) == 1 else "p picks one to reuse"
    text.append(f"{hint} (a preview first: nothing is written until you apply)", style="dim")
    return text


# -- reusing one: `p` ----------------------------------------------------------------------


def matching_choice(block: Block, earlier: Earlier) -> Choice | None:
    """The block's choice that the earlier answer chose: the one whose option text is the same
    once folded (`batch.match_option`, the rule a batch answers by: case, white space and
    trailing punctuation aside; `>= 22` is not `<= 22`). None: none, or several."""
    if earlier.choice_option is None:
        return None
    return match_option(block, earlier.choice_option)


def prefill(block: Block, choice: Choice | None, earlier: Earlier) -> tuple[str, ...]:
    """What the text box for `choice` (None: own words) starts with: the earlier answer's
    texts (one per question when they fit, else joined). In own words (no choice of this
    block matched), an earlier choice comes as its decision, the option's text (with its
    texts), never its label and consequence: those were the other block's."""
    box = text_box(block, choice)
    # Journal text is shown made printable, as every pane is (a TextArea passes escapes on).
    texts = [t for t in earlier.texts if t.strip()]
    if choice is None and earlier.choice_option:
        texts = ["\n\n".join([earlier.choice_option, *texts])]
    texts = texts or [earlier.answered]
    texts = [printable(t, keep_newlines=True) for t in texts]
    count = len(box.questions)
    if len(texts) == count:
        return tuple(texts)
    if count == 1:
        return ("\n\n".join(texts),)
    return (texts[0], *box.defaults[1:count])


def reuse(screen: InboxScreen, app: App, asked: Asked) -> None:
    """`p` on the highlighted block: the earlier answer's preview (a picker first when there
    are several)."""
    block = screen.current
    if block is None:
        screen.notify("No block is highlighted.", severity="warning")
        return
    if screen._is_waiting_row(block):  # answered already: it says what can be done
        return
    found = asked.before(block)
    if not found:
        what = "still reading the journal" if asked.index is None else "none in the journal"
        screen.notify(f"No earlier answer to a similar question ({what}).", timeout=4, markup=False)
        return
    if len(found) == 1:
        use(screen, block, found[0])
        return

    def picked(number: int | None) -> None:
        if number is not None and 1 <= number <= len(found):
            use(screen, block, found[number - 1])

    app.push_screen(ReuseScreen(block, found, screen.clock()), picked)


def origin(earlier: Earlier, now: datetime) -> str:
    """What the text box's title says of reused text: whose answer it was, where and when."""
    return f"from the answer given in {printable(earlier.repo_name)} {_ago(earlier.time, now)}"


def use(screen: InboxScreen, block: Block, earlier: Earlier) -> None:
    """Open the preview of `earlier` on `block` (through the text box when it needs words,
    titled with where the words come from: never as the operator's draft)."""
    choice = matching_choice(block, earlier)
    if choice is not None and not choice.needs_text:
        screen._preview(block, screen._answer(choice))
    else:
        found = origin(earlier, screen.clock())
        screen._ask_text(block, choice, prefill=prefill(block, choice, earlier), origin=found)


class ReuseScreen(ModalScreen[int | None]):
    """Pick one of several earlier answers to reuse: 1 to 3, Esc cancels."""

    DEFAULT_CSS = """
    ReuseScreen { align: center middle; }
    #reuse {
        width: 90; max-width: 95%; height: auto;
        border: round $accent; background: $surface; padding: 1 2;
    }
    #reuse-block { color: $text-muted; margin-bottom: 1; }
    .reuse-choice { height: auto; }
    #reuse-hint { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar = bindings("reuse")

    def __init__(self, block: Block, found: list[Earlier], now: datetime) -> None:
        super().__init__()
        self.block = block
        self.found = found[:LIMIT]
        self.now = now

    def compose(self) -> ComposeResult:
        with Vertical(id="reuse") as box:
            box.border_title = "Reuse an earlier answer"
            what = printable(f"{self.block.id}: {self.block.one_line_question(200)}")
            yield Static(Content(what), id="reuse-block")
            for number, earlier in enumerate(self.found, 1):
                line = Text()
                line.append(f" {number} ", style="bold reverse")
                when = earlier.time.astimezone().strftime("%Y-%m-%d %H:%M")
                line.append(f" {when} ({_ago(earlier.time, self.now)}) · ", style="dim")
                line.append(printable(earlier.repo_name), style="bold")
                line.append(f" · {printable(earlier.answered)}")
                line.append(f"\n    asked: {printable(earlier.question)}", style="dim")
                yield Static(line, id=f"reuse-{number}", classes="reuse-choice")
            yield Static(
                "The preview opens with it: nothing is written until you apply. Esc: cancel.",
                id="reuse-hint",
                markup=False,
            )

    def action_pick(self, number: int) -> None:
        if 1 <= number <= len(self.found):
            self.dismiss(number)

    def action_cancel(self) -> None:
        self.dismiss(None)
