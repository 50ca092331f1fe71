"""The snooze memory (snoozebook.py), in-process: when a snooze ends, what is pruned, and two
processes' snoozes merged rather than lost."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl_tui.state.snoozes import SnoozeBook, until_for
from tests.test_view import task

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_snooze_ends_at_its_time_or_when_the_block_changes(tmp_path: Path) -> None:
    book = SnoozeBook(tmp_path / "snoozed.json")
    shop, docs = task("shop", 0), task("docs", 0)
    book.snooze(shop, NOW + timedelta(hours=1))
    book.snooze(docs, None)
    assert book.snoozed(shop, NOW) and not book.snoozed(shop, NOW + timedelta(hours=1))
    assert book.snoozed(docs, NOW + timedelta(days=400))
    rewritten = replace(docs, fingerprint="sha256:new")
    assert not book.snoozed(rewritten, NOW)
    # A new process reads the same.
    again = SnoozeBook(tmp_path / "snoozed.json")
    assert again.snoozed(shop, NOW) and again.snoozed(docs, NOW)


def test_prune_forgets_what_is_over(tmp_path: Path) -> None:
    book = SnoozeBook(tmp_path / "snoozed.json")
    due, changed, gone, kept = (task(n, 0) for n in ("due", "changed", "gone", "kept"))
    book.snooze(due, NOW + timedelta(minutes=1))
    book.snooze(changed, None)
    book.snooze(gone, None)
    book.snooze(kept, NOW + timedelta(hours=1))
    pruned = book.prune([due, replace(changed, fingerprint="x2"), kept], NOW + timedelta(minutes=2))
    assert pruned == 3
    assert [s.id for s in SnoozeBook(tmp_path / "snoozed.json")] == ["kept"]


def test_two_processes_snoozes_are_merged(tmp_path: Path) -> None:
    one, two = SnoozeBook(tmp_path / "s.json"), SnoozeBook(tmp_path / "s.json")
    one.snooze(task("a", 0), None)
    two.snooze(task("b", 0), None)  # `two` had not read `a`: it must not drop it
    assert {s.id for s in SnoozeBook(tmp_path / "s.json")} == {"a", "b"}
    assert one.unsnooze(task("b", 0)) and not one.unsnooze(task("b", 0))
    assert {s.id for s in two} == {"a"}


def test_no_state_folder_keeps_them_in_memory() -> None:
    book = SnoozeBook(None)
    book.snooze(task("a", 0), None)
    assert book.snoozed(task("a", 0), NOW)


@pytest.mark.parametrize(
    ("clock", "hour", "days"), [("09:00", 9, 1), ("13:30", 13, 0), ("tomorrow", 9, 1)]
)
def test_until_a_time_of_day_is_the_next_one(clock: str, hour: int, days: int) -> None:
    local_noon = datetime.now().astimezone().replace(hour=12, minute=0, second=0, microsecond=0)
    until = until_for(local_noon, clock=clock).astimezone()
    assert until.hour == hour and (until.date() - local_noon.date()).days == days
    with pytest.raises(ValueError, match="not a time of day"):
        until_for(local_noon, clock="noonish")
