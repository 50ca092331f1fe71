"""`A`: the grants, "Allow always" answers to agents' permission prompts, and revoking one.

Each grant allows one tool with exactly one input in one repository (`sources.asks.grants`).
The screen lists every grant of the inbox's local repositories (read in a worker: one small
file per repository), newest last as the files hold them. `x` asks first (`ConfirmRevoke`,
the focus on Keep), then a worker revokes it with `agent.grants.revoke`, the plan `hitl grants
--revoke` writes: the grant's line removed, journaled, so `hitl undo` puts it back.

A grant's summary is agent text (the tool and its input): plain text, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Static

from hitl_tui.model import HitlError
from hitl_tui.sources.asks.format import parse_time
from hitl_tui.sources.asks.grants import Grant
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.messages import Refused

#: (repository folder, its id in the inbox, the grant)
Row = tuple[Path, str, Grant]

#: What the empty list says: how a grant is made.
EMPTY = (
    "No grants. A grant is made when you answer an agent's permission prompt (hitl mcp's "
    "approve) with Allow always: that tool with exactly that input is then allowed in that "
    "repository without asking."
)


def when(grant: Grant) -> str:
    """When it was granted, local time, to the minute (the file's text if it is no time)."""
    at = parse_time(grant.granted)
    return at.astimezone().strftime("%Y-%m-%d %H:%M") if at else printable(grant.granted)[:16]


def revoke_question(label: str, grant: Grant) -> str:
    return "\n".join(
        [
            f"Revoke the grant {grant.id}?",
            f"It allows {printable(grant.summary)}",
            f"in {printable(label)} without asking (granted by {printable(grant.by)}, "
            f"{when(grant)}).",
            "The agent is asked again the next time. hitl undo puts it back.",
        ]
    )


@dataclass
class GrantsRead(Message):
    """The grants of the inbox's repositories, read by the screen's worker."""

    rows: list[Row]


@dataclass
class GrantRevoked(Message):
    """A grant was revoked: the toast's text, and the grants read again."""

    message: str
    rows: list[Row]


class ConfirmRevoke(ModalScreen[bool]):
    """Asked before a grant is revoked: `y` revokes, `n` or `Esc` keeps it (the focus starts on
    Keep: Enter keeps)."""

    DEFAULT_CSS = """
    ConfirmRevoke { align: center middle; background: $background 60%; }
    #revoke-box {
        width: 80; max-width: 100%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    #revoke-question { height: auto; margin-bottom: 1; }
    #revoke-hint { color: $text-muted; height: 1; }
    #revoke-buttons { height: auto; align-horizontal: right; }
    #revoke-buttons Button { margin-left: 2; }
    ConfirmRevoke.-short #revoke-question { margin-bottom: 0; }
    ConfirmRevoke.-short #revoke-buttons Button, ConfirmRevoke.-narrow #revoke-buttons Button {
        height: 1; min-width: 0; border: none; margin-left: 1;
    }
    """
    BINDINGS: ClassVar = bindings("revoke")

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="revoke-box") as box:
            box.border_title = "Revoke?"
            yield Static(Content(printable(self.text, keep_newlines=True)), id="revoke-question")
            yield Static("y revoke · n/Esc keep", id="revoke-hint", markup=False)
            with Horizontal(id="revoke-buttons"):
                yield Button("Keep (Esc)", id="keep", variant="primary")
                yield Button("Revoke (y)", id="revoke", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    @on(Button.Pressed, "#revoke")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#keep")
    def action_keep(self) -> None:
        self.dismiss(False)


class GrantsScreen(ModalScreen[None]):
    """Every grant of the inbox's repositories: repository, what it allows, who, when, its id.
    j/k move, `x` revokes the highlighted one (asked first), Esc closes."""

    DEFAULT_CSS = """
    GrantsScreen { align: center middle; background: $background; }
    #grants-box {
        width: 96%; height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    #grants-table { height: 1fr; }
    #grants-empty { height: auto; padding: 1 0; }
    #grants-hint { color: $text-muted; height: 1; }
    GrantsScreen.-short #grants-box { width: 100%; height: 100%; border: none; padding: 0; }
    """
    BINDINGS: ClassVar = bindings("grants")

    def __init__(self, repos: list[tuple[Path, str]], operator: str = "operator") -> None:
        super().__init__()
        #: (folder, id) of each local repository of the inbox, in the ids' order.
        self.repos = sorted(repos, key=lambda item: item[1])
        self.operator = operator
        #: The grants shown, in the table's order; None until the worker has read them.
        self.rows: list[Row] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="grants-box") as box:
            box.border_title = "Grants: Allow always answers"
            yield Static("Reading the grants…", id="grants-empty", markup=False)
            yield DataTable(id="grants-table", cursor_type="row")
            yield Static(
                "j/k move · x revokes the highlighted grant (asks first; hitl undo puts it "
                "back) · Esc closes",
                id="grants-hint",
                markup=False,
            )
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.table.add_columns("repo", "allows", "by", "granted", "id")
        self.table.display = False
        self._read()

    @property
    def table(self) -> DataTable:
        return self.query_one("#grants-table", DataTable)

    @property
    def current(self) -> Row | None:
        """The highlighted grant (None: none is listed)."""
        row = self.table.cursor_row
        rows = self.rows or []
        return rows[row] if 0 <= row < len(rows) else None

    @work(thread=True, group="grants", exit_on_error=False, description="_read")
    def _read(self) -> None:
        from hitl_tui.agent.grants import listed

        self.post_message(GrantsRead(listed(self.repos)))

    @on(GrantsRead)
    def _got(self, message: GrantsRead) -> None:
        message.stop()
        self._fill(message.rows)

    def _fill(self, rows: list[Row], keep: str | None = None, at: int = 0) -> None:
        """The table from `rows`; the cursor on the grant `keep` when listed, else on row `at`
        (or the last: the row below a revoked grant takes its place)."""
        self.rows = rows
        table = self.table
        table.clear()
        for _repo, label, grant in rows:
            table.add_row(
                Text(printable(label)),
                Text(printable(grant.summary), overflow="ellipsis", no_wrap=True),
                Text(printable(grant.by)),
                Text(when(grant)),
                Text(grant.id, style="dim"),
            )
        empty = self.query_one("#grants-empty", Static)
        empty.update(Content(EMPTY))
        empty.display = not rows
        table.display = bool(rows)
        ids = [g.id for _, _, g in rows]
        row = ids.index(keep) if keep in ids else min(at, len(rows) - 1)
        if row > 0:
            table.move_cursor(row=row, animate=False)
        if rows:
            table.focus()

    def action_cursor_down(self) -> None:
        self.table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.table.action_cursor_up()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_revoke(self) -> None:
        row = self.current
        if row is None:
            self.notify("No grant is highlighted.", severity="warning")
            return
        _repo, label, grant = row

        def chosen(yes: bool | None) -> None:
            if yes:
                self._revoke(row)

        self.app.push_screen(ConfirmRevoke(revoke_question(label, grant)), chosen)

    @work(thread=True, group="apply", exit_on_error=False, description="_revoke")
    def _revoke(self, row: Row) -> None:
        """`hitl grants --revoke ID` for the highlighted grant, then the grants read again."""
        from hitl_tui.agent.grants import listed, revoke

        repo, label, grant = row
        try:
            done = revoke(repo, label, grant, self.operator)
        except HitlError as exc:
            self.post_message(Refused("Not revoked", str(exc)))
            self.post_message(GrantsRead(listed(self.repos)))
            return
        text = f"Revoked {grant.id} in {label}: {grant.summary}."
        if done.entry:
            text += (
                f" Journal entry {done.entry}: hitl undo {done.entry}, or u on it in the "
                "history (h), puts it back."
            )
        self.post_message(GrantRevoked(text, listed(self.repos)))

    @on(GrantRevoked)
    def _revoked(self, message: GrantRevoked) -> None:
        message.stop()
        current = self.current
        self._fill(message.rows, current[2].id if current else None, self.table.cursor_row)
        self.notify(_one_line(message.message), title="Revoked", markup=False, timeout=10)

    @on(Refused)
    def _refused(self, message: Refused) -> None:
        message.stop()
        self.notify(
            _one_line(message.message),
            title=message.title,
            severity="error",
            markup=False,
            timeout=10,
        )


def _one_line(text: str) -> str:
    return " ".join(printable(text).split())
