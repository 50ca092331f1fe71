"""`waiting.rows_delta` makes a record's row only when the row is new or changed: the same
Delta and notices as making every row, on records of every state against rows of every state
(the app looks at every open record every 5 s; at 1,000 that was 40 ms a look)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hitl_tui.inbox.inbox import key_of
from hitl_tui.inbox.view import row_of
from hitl_tui.loops.records import Waiting
from hitl_tui.tui.waiting import row_for, rows_delta, waiting_of

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
STATES = ("waiting", "not-resumed", "restart-failed", "resumed", "dropped")


def record(n: int, state: str, **more) -> Waiting:
    return Waiting(
        key=f"loopkit:/loops/r{n}/BLOCKED.md",
        entry=f"e{n}",
        block_id=f"r{n}",
        source="loopkit" if n % 2 else "agenticloop",
        repo=f"/loops/r{n}",
        path=f"/loops/r{n}/BLOCKED.md",
        title=None,
        question=f"Question {n} [b]?",
        answered="A) yes",
        answered_at=T0,
        deadline=T0 + timedelta(minutes=10),
        signs={},
        state=state,
        **more,
    )


def reference(records, known, open_now=None):
    """rows_delta as it was: every record's row made."""
    added, changed, removed, late, resumed = [], [], [], [], []
    latest = {r.id: r for r in records}
    if open_now is not None:
        for r in open_now:
            latest.setdefault(r.id, r)
    for r in latest.values():
        row = row_for(r)
        rk = row_of(row)
        old = waiting_of(known.get(rk))
        if r.is_open:
            if old is None:
                added.append(row)
            elif old.state != r.state:
                removed.append(key_of(row))
                added.append(row)
            elif old != r:
                changed.append(row)
            if r.state == "not-resumed" and (old is None or old.state != "not-resumed"):
                late.append(r)
        elif old is not None:
            removed.append(key_of(row))
            if r.state == "resumed":
                resumed.append(r)
    if open_now is not None:
        still = {row_of(row_for(r)) for r in latest.values() if r.is_open}
        for rk, block in known.items():
            if waiting_of(block) is not None and rk not in still and key_of(block) not in removed:
                removed.append(key_of(block))
    return added, changed, removed, late, resumed


def test_rows_delta_equals_making_every_row():
    cases = 0
    for before, now in itertools.product((None, *STATES), STATES):
        for how in (None, "new commit 1a2b3c4"):
            old = [record(1, before)] if before else []
            known = {row_of(row_for(r)): row_for(r) for r in old if r.is_open}
            # A row of a record no longer in the book (dropped by another hitl).
            known[row_of(row_for(record(9, "waiting")))] = row_for(record(9, "waiting"))
            changed = [record(1, now, how=how), replace(record(2, now), restarts=2)]
            for open_now in (None, [r for r in changed if r.is_open], []):
                got = rows_delta(changed, known, open_now)
                want = reference(changed, known, open_now)
                assert (
                    got.delta.added,
                    got.delta.changed,
                    got.delta.removed,
                    got.late,
                    got.resumed,
                ) == want, (before, now, how, open_now)
                cases += 1
    assert cases == 6 * 5 * 2 * 3
