"""The snooze dialog (`z`): how long to set the highlighted block aside.

A `ModalScreen` that ends in `dismiss(choice)`: one of `CHOICES`' keys, or None when the
operator cancels. The inbox screen turns the choice into a time (`until`) and writes the
snooze (`snoozebook`); nothing here touches the state folder.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from hitl_tui.model import Block
from hitl_tui.state.snoozes import until_for
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings

#: Choice -> (its key on screen, what it says). The keys are the `snooze.*` bindings'.
CHOICES = {
    "15m": ("1", "15 minutes"),
    "1h": ("2", "1 hour"),
    "4h": ("3", "4 hours"),
    "tomorrow": ("4", "until tomorrow 09:00"),
    "change": ("5", "until it changes"),
}
DURATIONS = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "4h": timedelta(hours=4)}


def until_of(choice: str, now: datetime) -> datetime | None:
    """When a snooze chosen as `choice` ends (None: when the block changes)."""
    if choice in DURATIONS:
        return until_for(now, duration=DURATIONS[choice])
    if choice == "tomorrow":
        return until_for(now, clock="tomorrow")
    return None


class SnoozeScreen(ModalScreen[str | None]):
    """Snooze one block: 1 to 5 pick how long, Esc cancels."""

    DEFAULT_CSS = """
    SnoozeScreen { align: center middle; }
    #snooze {
        width: 60; height: auto;
        border: round $accent; background: $surface; padding: 1 2;
    }
    #snooze-block { color: $text-muted; margin-bottom: 1; }
    .snooze-choice { height: 1; }
    #snooze-hint { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar = bindings("snooze")

    def __init__(self, block: Block) -> None:
        super().__init__()
        self.block = block

    def compose(self) -> ComposeResult:
        with Vertical(id="snooze") as box:
            box.border_title = "Snooze"
            what = printable(f"{self.block.id}: {self.block.one_line_question(200)}")
            yield Static(Content(what), id="snooze-block")
            for choice, (key, label) in CHOICES.items():
                line = Content.from_markup("[b] $key [/b]  $label", key=key, label=label)
                yield Static(line, id=f"snooze-{choice}", classes="snooze-choice")
            yield Static(
                "It leaves the list until then, or sooner if the agent rewrites it.\n"
                "Esc: cancel. Z shows the snoozed blocks.",
                id="snooze-hint",
                markup=False,
            )

    def action_pick(self, choice: str) -> None:
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
