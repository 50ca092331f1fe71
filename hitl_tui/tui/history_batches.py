"""The history's batches: the answers given at once (`answers.batch`, marks in the app or
`hitl answer ID ID ...`) are one line, which `Space` (or `Enter`) expands into its answers, and
`u` on it undoes the whole batch, asked first (`journal.undo_batch`: each answer as `hitl undo`
undoes one, each refused on its own). Mixed into `screens.HistoryScreen`; journal text is
shown as plain text, never markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work

from hitl_tui.inbox.inbox import Delta
from hitl_tui.journal import Entry, grouped
from hitl_tui.journal.batches import Group
from hitl_tui.model import HitlError
from hitl_tui.textio import printable
from hitl_tui.tui.messages import HistoryUndone, Refused
from hitl_tui.tui.undo_flow import ConfirmUndo

#: A row of the history: an answer, or a batch's line.
Row = Entry | Group


def row_id(row: Row) -> str:
    """What keeps the cursor on a row across a refill: the entry's id, or the batch's."""
    return row.id if isinstance(row, Entry) else f"batch:{row.batch}"


def rows_of(entries: list[Entry], expanded: set[str]) -> list[Row]:
    """The history's rows, newest first: an answer given alone; a batch as one line (a Group),
    followed by its answers when it is `expanded`."""
    rows: list[Row] = []
    for group in grouped(entries):
        if group.batch is None:
            rows.append(group.newest)
            continue
        rows.append(group)
        if group.batch in expanded:
            rows.extend(group.entries)
    return rows


def batch_cells(group: Group, expanded: bool) -> tuple[Text, ...]:
    """A batch's line: when, who, how many blocks, what was answered, how many are undone."""
    newest = group.newest
    entries = group.entries
    undone = sum(e.undone for e in entries)
    sign = "▾" if expanded else "▸"
    answered = {printable(e.answered) for e in entries}
    said = printable(newest.answered) + (" …" if len(answered) > 1 else "")
    state = "undone" if undone == len(entries) else f"{undone} undone" if undone else "done"
    return (
        Text(newest.time.astimezone().strftime("%Y-%m-%d %H:%M")),
        Text(printable(newest.operator)),
        Text(f"{sign} batch of {len(entries)}", style="bold"),
        Text(said[:56], overflow="ellipsis", no_wrap=True),
        Text(state, style="dim" if undone else ""),
        Text(""),
        Text(printable(group.batch or ""), style="dim"),
    )


def undo_question(group: Group) -> str:
    open_ = [e for e in group.entries if not e.undone]
    names = ", ".join(printable(e.block_id) for e in open_[:6])
    more = f" and {len(open_) - 6} more" if len(open_) > 6 else ""
    return (
        f"Undo the whole batch {group.batch}: {len(open_)} answers ({names}{more})?\n"
        "Each is undone as hitl undo undoes one; one whose loop has acted on it since, or "
        "whose file changed, is refused and named."
    )


class BatchHistory:
    """`Space` on a batch's line expands it; `u` on it undoes the batch (asked first)."""

    app: Any
    expanded: set[str]
    operator: str | None
    inbox: Any
    on_change: Any

    if TYPE_CHECKING:  # the history screen's

        @property
        def current_row(self) -> Row | None: ...

        @property
        def remotes(self) -> list: ...

        def _fill(self, keep: str | None = None) -> None: ...

        def post_message(self, message: Any) -> bool: ...

    def action_expand(self) -> None:
        """`Space` (or `Enter`) on a batch's line, or on one of its answers: show / hide them."""
        row = self.current_row
        batch = row.batch if row is not None else None
        if batch is None:
            return
        self.expanded ^= {batch}
        self._fill(f"batch:{batch}")

    def ask_undo_batch(self, group: Group) -> None:
        if all(e.undone for e in group.entries):
            self.app.notify("Every answer of this batch is undone already.", markup=False)
            return

        def chosen(yes: bool | None) -> None:
            if yes:
                self._undo_batch(group)

        self.app.push_screen(ConfirmUndo(undo_question(group)), chosen)

    @work(thread=True, group="apply", exit_on_error=False, description="_undo_batch")
    def _undo_batch(self, group: Group) -> None:
        from hitl_tui import journal
        from hitl_tui.answers.batch import undo_batch
        from hitl_tui.loops.records import row_path

        try:
            results = undo_batch(group.batch or "", self.operator or "operator", self.remotes)
        except HitlError as exc:
            self.post_message(Refused("Not undone", printable(str(exc))))
            return
        delta = Delta()
        undone = {r.entry for r in results if r.status == "undone"}
        paths = [e.block_path for e in group.entries if e.id in undone]
        if self.inbox is not None:
            delta = self.inbox.handle([p for p in paths if isinstance(p, Path)])
        for entry in group.entries:
            if entry.id in undone:  # its row waiting for the loop goes
                delta.removed.append((entry.block_source, row_path(entry.id)))
        refused = [r for r in results if r.status == "refused"]
        text = f"batch {group.batch}: {len(undone)} undone"
        if refused:
            text += f", {len(refused)} refused: " + "; ".join(
                f"{r.block_id}: {r.message}" for r in refused[:3]
            )
        self.post_message(HistoryUndone(text, delta, journal.history(limit=500)))
