"""The order of the rows (view.py): one order for `hitl list` and the app, kept by deltas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hitl_tui.inbox import Delta
from hitl_tui.view import RowOrder, key_of, ordered, row_of

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def block(name: str, minutes: int):
    from hitl_tui.model import Block

    return Block(
        id=name,
        source="loopkit",
        repo=Path("/r") / name,
        path=Path("/r") / name / "BLOCKED.md",
        state="blocked",
        question=f"{name}?",
        context="",
        attempted=(),
        choices=(),
        since=T0 + timedelta(minutes=minutes),
        fingerprint="x",
        raw="",
    )


def ids(rows: RowOrder) -> list[str]:
    return [rows.blocks[rk].id for rk in rows.order]


def test_oldest_first_ties_by_id() -> None:
    blocks = [block("zeta", 5), block("alpha", 5), block("old", 0)]
    assert [b.id for b in ordered(blocks)] == ["old", "alpha", "zeta"]
    assert ids(RowOrder(blocks)) == ["old", "alpha", "zeta"]


def test_arrivals_append_or_insert_and_known_rows_stay() -> None:
    rows = RowOrder([block("a", 0), block("c", 10)])
    changed, keep = rows.apply(Delta(added=[block("d", 20), block("b", 5)]), row_of(block("c", 0)))
    assert changed and ids(rows) == ["a", "b", "c", "d"]
    assert keep == row_of(block("c", 0))
    # A changed block keeps its row even when its time would sort it elsewhere.
    changed, _ = rows.apply(Delta(changed=[block("a", 99)]), None)
    assert changed and ids(rows) == ["a", "b", "c", "d"]


def test_the_highlighted_row_leaving_highlights_the_next_one() -> None:
    a, b, c = block("a", 0), block("b", 1), block("c", 2)
    rows = RowOrder([a, b, c])
    _, keep = rows.apply(Delta(removed=[key_of(b)]), row_of(b))
    assert ids(rows) == ["a", "c"] and keep == row_of(c)
    _, keep = rows.apply(Delta(removed=[key_of(c)]), row_of(c))
    assert ids(rows) == ["a"] and keep is None
    assert rows.apply(Delta(), row_of(a)) == (False, row_of(a))
