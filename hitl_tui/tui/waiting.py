"""The rows of answers waiting for their loop (`resume.Waiting`), as the inbox lists them.

After an answer is written its block leaves the list and a row of the answer takes its place
at the bottom (`view.WAITING` rows sort after every block): *waiting for the loop*, its age
counted from the answer. It leaves when the loop acts on the answer (*resumed*: a toast says
how), or turns *not resumed* when no sign came within the loop's `resume_within`: the bell
rings, a toast says so, and the row moves up among the blocks, where `R` restarts the loop.
A restart that failed (after the answer, or `R`) makes it *restart failed (exit 127)* at once,
among the blocks too, its detail naming why and the log, until a restart succeeds.

Here: how a record becomes a row (`row_for`), and how records that changed become a Delta the
list applies (`rows_delta`). No widget: the inbox screen calls these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from hitl_tui.inbox.inbox import Delta, key_of
from hitl_tui.inbox.view import row_key
from hitl_tui.loops.records import Waiting, row_path
from hitl_tui.model import Block

#: What the state column and the detail call each state of a record.
STATE_WORDS = {
    "waiting": "waiting",
    "not-resumed": "no resume",
    "restart-failed": "restart failed",
    "resumed": "resumed",
}


def waiting_of(block: Block | None) -> Waiting | None:
    """The record behind a row, or None for a block."""
    if block is None:
        return None
    record = block.meta.get("waiting")
    return record if isinstance(record, Waiting) else None


def _at(when: datetime) -> str:
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def row_for(record: Waiting) -> Block:
    """The row of `record`: its question, and in the context what was answered, when, and what
    hitl waits for."""
    block = record.as_block()
    lines = [f"Answered {_at(record.answered_at)}: {record.answered}"]
    if record.state == "waiting":
        lines.append(
            f"Waiting for the loop to act on it until {_at(record.deadline)} "
            "(a new commit, a change to its files, a new block)."
        )
    elif record.state == "not-resumed":
        lines.append(f"Not resumed: no sign of the loop by {_at(record.deadline)}.")
    elif record.state == "restart-failed":
        when = record.restart_at or record.changed_at or record.answered_at
        lines.append(
            f"Restart failed ({record.restart_problem}) at {_at(when)}: the loop was not "
            "started again. R runs the restart again."
        )
        if record.restart_log:
            lines.append(f"Its output: {record.restart_log}")
    if record.restarts:
        times = "once" if record.restarts == 1 else f"{record.restarts} times"
        if record.state == "restart-failed":
            lines.append(f"Restarts run since the answer: {record.restarts} (the last failed).")
        else:
            lines.append(f"Restarted {times} since the answer.")
    lines.append(f"Was: {record.path}")
    return replace(block, context="\n".join(lines), summary=f"answered: {record.answered}")


@dataclass
class RowChanges:
    """What a batch of changed records does to the list, and what to tell the operator."""

    delta: Delta = field(default_factory=Delta)
    #: Records that turned not-resumed now (the bell and a toast).
    late: list[Waiting] = field(default_factory=list)
    #: Records whose loop resumed now, that the list showed (a toast).
    resumed: list[Waiting] = field(default_factory=list)


def _key(record: Waiting) -> tuple[str, str]:
    """`key_of(row_for(record))`, without making the row."""
    return (record.source, row_path(record.id))


def rows_delta(
    records: Iterable[Waiting],
    known: Mapping[str, Block],
    open_now: Iterable[Waiting] | None = None,
) -> RowChanges:
    """The rows of the changed `records`, against the rows `known` (row key -> Block). With
    `open_now` (every open record, as the file says now), rows of records no longer open there
    (resumed or dropped by another hitl) leave too."""
    out = RowChanges()
    delta = out.delta
    latest = {r.id: r for r in records}
    if open_now is not None:
        for record in open_now:
            latest.setdefault(record.id, record)
    # A record's row is made only when it is listed anew or changed: every 5 s the app looks at
    # every open record, and making 1,000 rows each time (dates formatted, Blocks built) held
    # the app for 40 ms at each look.
    for record in latest.values():
        key = _key(record)
        old = waiting_of(known.get(row_key(key)))
        if record.is_open:
            if old is None:
                delta.added.append(row_for(record))
            elif old.state != record.state:
                # waiting <-> not resumed moves the row (not resumed sorts among the blocks)
                delta.removed.append(key)
                delta.added.append(row_for(record))
            elif old != record:
                delta.changed.append(row_for(record))
            if record.state == "not-resumed" and (old is None or old.state != "not-resumed"):
                out.late.append(record)
        elif old is not None:
            delta.removed.append(key)
            if record.state == "resumed":
                out.resumed.append(record)
    if open_now is not None:
        still = {row_key(_key(r)) for r in latest.values() if r.is_open}
        for rk, block in known.items():
            gone = waiting_of(block) is not None and rk not in still
            if gone and key_of(block) not in delta.removed:
                delta.removed.append(key_of(block))
    return out
