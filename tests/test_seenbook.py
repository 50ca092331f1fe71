"""What the operator has seen, and the view they chose (seenbook.py), across runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hitl_tui.state.seen import SeenBook
from tests.test_view import task


def test_a_first_run_sees_everything_it_finds(tmp_path: Path) -> None:
    book = SeenBook(tmp_path / "seen.json")
    old = [task("a", 0), task("b", 1)]
    book.adopt(old)
    assert not any(book.is_new(b) for b in old)
    book.save(old)
    # The next run: a block that came meanwhile is new, one rewritten is new again.
    again = SeenBook(tmp_path / "seen.json")
    again.adopt([*old, task("c", 2)])  # not a first run: adopts nothing
    assert again.is_new(task("c", 2)) and not again.is_new(old[0])
    assert again.is_new(replace(old[1], fingerprint="sha256:rewritten"))
    assert again.saw(task("c", 2)) and not again.saw(task("c", 2))
    assert not again.is_new(task("c", 2))


def test_marks_and_the_view_survive_and_gone_blocks_are_dropped(tmp_path: Path) -> None:
    book = SeenBook(tmp_path / "seen.json")
    book.adopt([])
    book.saw(task("a", 0))
    book.saw(task("b", 0))
    book.choose_view("repo", "source")
    book.save([task("a", 0)])
    data = json.loads((tmp_path / "seen.json").read_text())
    assert [row[1] for row in data["seen"]] == [str(task("a", 0).path)]
    again = SeenBook(tmp_path / "seen.json")
    assert (again.order, again.group) == ("repo", "source") and not again.dirty


def test_two_apps_marks_are_merged(tmp_path: Path) -> None:
    one, two = SeenBook(tmp_path / "seen.json"), SeenBook(tmp_path / "seen.json")
    one.adopt([]), two.adopt([])
    one.saw(task("a", 0))
    two.saw(task("b", 0))
    one.save()
    two.save()
    assert not SeenBook(tmp_path / "seen.json").is_new(task("a", 0))


def test_a_corrupt_file_marks_everything_new_and_says_so(tmp_path: Path, capsys) -> None:
    (tmp_path / "seen.json").write_text('{"format": 1, "seen": [[1, 2]]}')
    book = SeenBook(tmp_path / "seen.json")
    book.adopt([task("a", 0)])
    assert book.is_new(task("a", 0))
    assert "ignored" in capsys.readouterr().err
    book.saw(task("a", 0))
    book.save()
    assert not SeenBook(tmp_path / "seen.json").is_new(task("a", 0))


def test_unsee_makes_a_block_new_again_across_a_restart(tmp_path: Path) -> None:
    book = SeenBook(tmp_path / "seen.json")
    a = task("a", 0)
    book.adopt([a])
    assert not book.is_new(a)
    book.unsee(a)
    assert book.is_new(a) and book.dirty
    book.save([a])
    again = SeenBook(tmp_path / "seen.json")
    assert again.is_new(a)
    assert again.saw(a) and not again.is_new(a)


def test_a_fleet_of_60000_blocks_keeps_its_marks_across_a_restart(tmp_path: Path, capsys) -> None:
    """Issue 30's fleet: 50,000 blocks and more. Their marks fit the file (an 8 MiB limit
    refused it, "too large", and every block showed new at every start)."""
    blocks = [
        replace(
            task(f"t{i}", 0),
            path=Path(f"/home/operator/src/team-{i % 50:02d}/service-{i:05d}/.agenticloop")
            / "tasks"
            / f"T-{i:05d}.md",
            fingerprint=f"sha256:{i:064x}",
        )
        for i in range(60_000)
    ]
    book = SeenBook(tmp_path / "seen.json")
    book.adopt(blocks)
    book.save(blocks)
    assert (tmp_path / "seen.json").stat().st_size > 8 << 20
    again = SeenBook(tmp_path / "seen.json")
    assert not any(again.is_new(b) for b in blocks)
    assert "ignored" not in capsys.readouterr().err
