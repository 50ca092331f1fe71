"""`A`: the grants, "Allow always" answers to agents' permission prompts, and revoking one.

Each grant allows one tool with exactly one input in one repository (`sources.asks.grants`).
The screen lists every grant of the inbox's repositories, read in a worker: here one small file
per repository, and on each `[[remote]]` host what `hitl grants --json` lists there (a host that
cannot be read is one line under the list). `x` asks first (`ConfirmRevoke`, the focus on Keep),
then a worker revokes it: here with `agent.grants.revoke`, the plan `hitl grants --revoke`
writes (the grant's line removed, journaled, so `hitl undo` puts it back); on a host by its
hitl (`hitl grants --revoke` there, journaled there).

A grant's summary is agent text (the tool and its input): plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from hitl_tui.model import HitlError
from hitl_tui.sources.asks.format import parse_time
from hitl_tui.sources.asks.grants import GRANT_ID_RE, Grant
from hitl_tui.sources.base import Source
from hitl_tui.sources.ssh.backend import SshBackend
from hitl_tui.textio import printable
from hitl_tui.tui.bindings import bindings
from hitl_tui.tui.messages import Refused


@dataclass(frozen=True)
class Row:
    """One grant listed: its repository (a folder here, a path on `host`), the repository's
    id in the inbox (`shop`, `build-1:shop`), and the grant."""

    repo: Path | str
    label: str
    grant: Grant
    #: The `[[remote]]` host it is on; None: here.
    host: str | None = None
    backend: SshBackend | None = None


def remote_grant(item: dict[str, Any]) -> Grant | None:
    """A grant as a far hitl listed it (`hitl grants --json`), or None when it is not one."""
    keys = ("id", "tool", "input_sha", "summary", "granted", "by", "ask")
    values = [item.get(k) for k in keys]
    if not all(isinstance(v, str) for v in values) or not GRANT_ID_RE.match(str(values[0])):
        return None
    id_, tool, sha, summary, granted, by, ask = (str(v) for v in values)
    return Grant(id_, tool, sha, summary, granted, by, ask, line=b"")


def read_rows(
    repos: Sequence[tuple[Path, str]], remotes: Sequence[Source]
) -> tuple[list[Row], list[str]]:
    """Every grant of the repositories here and of each `[[remote]]` host, and a line for each
    host whose grants could not be read (blocking: a worker's)."""
    from hitl_tui.agent.grants import listed

    rows = [Row(repo, label, grant) for repo, label, grant in listed(list(repos))]
    problems: list[str] = []
    for backend in remotes:
        if not isinstance(backend, SshBackend):
            continue
        for name, host in backend.hosts.items():
            try:
                items = backend.grants(host)
            except HitlError as exc:
                problems.append(_one_line(f"{name}: its grants could not be read: {exc}"))
                continue
            for item in items:
                grant, repo = remote_grant(item), item.get("repo")
                label = item.get("repo_id")
                if grant is None or not isinstance(repo, str) or not isinstance(label, str):
                    continue
                rows.append(Row(repo, f"{name}:{label}", grant, name, backend))
    return rows, problems


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
    """The grants of the inbox's repositories, read by the screen's worker, and the hosts
    whose grants could not be read."""

    rows: list[Row]
    problems: list[str]


@dataclass
class GrantRevoked(Message):
    """A grant was revoked: the toast's text, and the grants read again."""

    message: str
    rows: list[Row]
    problems: list[str]


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
    #grants-problems { height: auto; color: $warning; }
    #grants-hint { color: $text-muted; height: 1; }
    GrantsScreen.-short #grants-box { width: 100%; height: 100%; border: none; padding: 0; }
    """
    BINDINGS: ClassVar = bindings("grants")

    def __init__(
        self,
        repos: list[tuple[Path, str]],
        operator: str = "operator",
        remotes: Sequence[Source] = (),
    ) -> None:
        super().__init__()
        #: (folder, id) of each local repository of the inbox, in the ids' order.
        self.repos = sorted(repos, key=lambda item: item[1])
        self.operator = operator
        #: The config's remote backends: the `[[remote]]` hosts' grants are listed too.
        self.remotes = list(remotes)
        #: The grants shown, in the table's order; None until the worker has read them.
        self.rows: list[Row] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="grants-box") as box:
            box.border_title = "Grants: Allow always answers"
            yield Static("Reading the grants…", id="grants-empty", markup=False)
            yield DataTable(id="grants-table", cursor_type="row")
            yield Static("", id="grants-problems", markup=False)
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
        self.post_message(GrantsRead(*read_rows(self.repos, self.remotes)))

    @on(GrantsRead)
    def _got(self, message: GrantsRead) -> None:
        message.stop()
        self._fill(message.rows, problems=message.problems)

    def _fill(
        self, rows: list[Row], keep: str | None = None, at: int = 0, problems: Sequence[str] = ()
    ) -> None:
        """The table from `rows`; the cursor on the grant `keep` when listed, else on row `at`
        (or the last: the row below a revoked grant takes its place)."""
        self.rows = rows
        table = self.table
        table.clear()
        for row in rows:
            grant = row.grant
            table.add_row(
                Text(printable(row.label)),
                Text(printable(grant.summary), overflow="ellipsis", no_wrap=True),
                Text(printable(grant.by)),
                Text(when(grant)),
                Text(grant.id, style="dim"),
            )
        empty = self.query_one("#grants-empty", Static)
        empty.update(Content(EMPTY))
        empty.display = not rows
        table.display = bool(rows)
        shown = self.query_one("#grants-problems", Static)
        shown.update(Content("\n".join(problems)))
        shown.display = bool(problems)
        ids = [r.grant.id for r in rows]
        cursor = ids.index(keep) if keep in ids else min(at, len(rows) - 1)
        if cursor > 0:
            table.move_cursor(row=cursor, animate=False)
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
        label, grant = row.label, row.grant

        def chosen(yes: bool | None) -> None:
            if yes:
                self._revoke(row)

        self.app.push_screen(ConfirmRevoke(revoke_question(label, grant)), chosen)

    @work(thread=True, group="apply", exit_on_error=False, description="_revoke")
    def _revoke(self, row: Row) -> None:
        """`hitl grants --revoke ID` for the highlighted grant (here, or by the hitl of its
        host), then the grants read again."""
        try:
            text = self._revoked_text(row)
        except HitlError as exc:
            self.post_message(Refused("Not revoked", str(exc)))
            self.post_message(GrantsRead(*read_rows(self.repos, self.remotes)))
            return
        self.post_message(GrantRevoked(text, *read_rows(self.repos, self.remotes)))

    def _revoked_text(self, row: Row) -> str:
        from hitl_tui.agent.grants import revoke

        grant = row.grant
        text = f"Revoked {grant.id} in {row.label}: {grant.summary}."
        if row.backend is not None and row.host is not None:
            host = row.backend.hosts.get(row.host)
            if host is None:
                raise HitlError(f"{row.host} is not in the config's [[remote]] any more")
            data = row.backend.revoke_grant(host, grant.id, str(row.repo), self.operator)
            entry = data.get("entry")
            if isinstance(entry, str) and entry:
                text += (
                    f" On {row.host}, journal entry {entry}: hitl undo {entry} there puts it back."
                )
            return text
        done = revoke(Path(row.repo), row.label, grant, self.operator)
        if done.entry:
            text += (
                f" Journal entry {done.entry}: hitl undo {done.entry}, or u on it in the "
                "history (h), puts it back."
            )
        return text

    @on(GrantRevoked)
    def _revoked(self, message: GrantRevoked) -> None:
        message.stop()
        current = self.current
        keep = current.grant.id if current else None
        self._fill(message.rows, keep, self.table.cursor_row, message.problems)
        self.notify(_one_line(message.message), title="Revoked", markup=False, timeout=10)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """This screen's workers (their state does not bubble): the app reports a failure, as
        it does for its own."""
        if event.state == WorkerState.ERROR:
            failed = getattr(self.app, "worker_failed", None)
            if failed is not None:
                failed(event.worker)

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
