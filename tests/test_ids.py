"""Issue 12: ids an operator can trust, through real subprocesses.

An id is made from where the repository was found (its path under the PATH it was found
under), never from what else is listed, so a block keeps its id while it exists; `answer`
takes any unique suffix of it (whole path components) and names the matches when it is
ambiguous.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.hostile_cases import SHOP, run_hitl

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _loopkit(dest: Path) -> Path:
    shutil.copytree(SHOP, dest)
    (dest / ".git").mkdir()
    return dest


def _ids(root: Path, *more: Path) -> list[str]:
    done = run_hitl("list", "--json", root, *more)
    assert done.returncode == 0, done.stderr
    return [b["id"] for b in json.loads(done.stdout)]


def test_an_id_stays_put_when_a_same_named_repo_appears(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    _loopkit(root / "team-a" / "svc-one")
    first = run_hitl("list", root)
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().split()[0] == "team-a/svc-one"
    assert _ids(root) == ["team-a/svc-one"]

    _loopkit(root / "team-b" / "svc-one")
    assert sorted(_ids(root)) == ["team-a/svc-one", "team-b/svc-one"]
    listed = run_hitl("list", root).stdout.decode().splitlines()
    assert sorted(line.split()[0] for line in listed) == ["team-a/svc-one", "team-b/svc-one"]

    done = run_hitl("answer", "team-a/svc-one", "--choice", "B", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("team-a/svc-one: ")
    assert not (root / "team-a" / "svc-one" / "BLOCKED.md").exists()
    assert (root / "team-b" / "svc-one" / "BLOCKED.md").exists()
    history = run_hitl("history").stdout.decode()
    assert " team-a/svc-one (loopkit) " in history


def test_a_unique_suffix_answers_and_an_ambiguous_one_names_the_matches(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    _loopkit(root / "team-a" / "svc-one")
    _loopkit(root / "team-b" / "svc-one")
    _loopkit(root / "team-b" / "svc-two")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    ambiguous = run_hitl("answer", "svc-one", "--choice", "B", root)
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.decode() == (
        "hitl: 'svc-one' matches 2 blocks: team-a/svc-one, team-b/svc-one; give more of the id\n"
    )
    # Whole components only: `one` is not a suffix of `svc-one`.
    partial = run_hitl("answer", "one", "--choice", "B", root)
    assert partial.returncode == 2
    assert "no open block with id 'one'" in partial.stderr.decode()
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before

    done = run_hitl("answer", "svc-two", "--choice", "B", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("team-b/svc-two: ")
    assert not (root / "team-b" / "svc-two" / "BLOCKED.md").exists()


def test_task_ids_keep_their_repo_part_and_take_a_suffix(tmp_path: Path) -> None:
    root = tmp_path / "loops"
    billing = root / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", billing)
    (billing / ".git").mkdir()
    ids = _ids(root)
    assert "billing/T-007" in ids
    other = root / "team-b" / "billing"
    shutil.copytree(FIXTURES / "agenticloop-billing", other)
    (other / ".git").mkdir()
    after = _ids(root)
    assert set(ids) <= set(after)  # none of the first ids changed
    assert "team-b/billing/T-007" in after
    dry = run_hitl("answer", "T-009", "--choice", "1", "--dry-run", root)
    assert dry.returncode == 2
    assert dry.stderr.decode() == (
        "hitl: 'T-009' matches 2 blocks: billing/T-009, team-b/billing/T-009; give more of the id\n"
    )
    dry = run_hitl(
        "answer", "team-b/billing/T-009", "--choice", "1", "--note", "set", "--dry-run", root
    )
    assert dry.returncode == 0, dry.stderr


def test_ids_with_several_paths_are_prefixed_by_the_path(tmp_path: Path) -> None:
    """Two PATHs may each hold a `shop`: each PATH's ids start with its short name, which
    depends only on the PATHs given; a PATH that is a repository is that name alone."""
    one = tmp_path / "loops"
    _loopkit(one / "shop")
    api = _loopkit(tmp_path / "work" / "api")
    assert sorted(_ids(one, api)) == ["api", "loops/shop"]
    _loopkit(tmp_path / "work" / "shop")  # not under a PATH: not listed
    assert sorted(_ids(one, api)) == ["api", "loops/shop"]
    done = run_hitl("answer", "shop", "--choice", "B", "--dry-run", one, api)
    assert done.returncode == 0, done.stderr


def _answered_twice(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two blocks answered: (the root, journal ids newest first, as `history --json` has them)."""
    root = tmp_path / "loops"
    _loopkit(root / "team-a" / "svc-one")
    _loopkit(root / "team-b" / "svc-one")
    for target in ("team-a/svc-one", "team-b/svc-one"):
        done = run_hitl("answer", target, "--choice", "B", root)
        assert done.returncode == 0, done.stderr
    history = run_hitl("history", "--json")
    ids = [e["id"] for e in json.loads(history.stdout)]
    assert len(ids) == 2
    return root, ids


def test_undo_takes_the_random_tail_of_a_journal_id(tmp_path: Path) -> None:
    root, (_newest, older) = _answered_twice(tmp_path)
    printed = run_hitl("history").stdout.decode()
    assert f"  {older}  " in printed  # the id as history prints it
    tail = older.rsplit("-", 1)[1]
    done = run_hitl("undo", tail)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"undid {older} (team-a/svc-one)")
    assert (root / "team-a" / "svc-one" / "BLOCKED.md").exists()
    assert not (root / "team-b" / "svc-one" / "BLOCKED.md").exists()


def test_undo_names_the_answers_an_ambiguous_part_matches(tmp_path: Path) -> None:
    root, (newest, older) = _answered_twice(tmp_path)
    day = newest.split("-")[0][4:]  # `1201` of `20261201-...`: inside both ids, a prefix of none
    if day not in older:
        return  # the two answers straddled midnight
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    done = run_hitl("undo", day)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"hitl: {day!r} matches 2 answers: {newest} (team-b/svc-one), "
        f"{older} (team-a/svc-one); give more of the id\n"
    )
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_undo_takes_a_block_id_suffix(tmp_path: Path) -> None:
    root, (newest, older) = _answered_twice(tmp_path)
    ambiguous = run_hitl("undo", "svc-one")
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.decode() == (
        f"hitl: 'svc-one' matches 2 answers: {newest} (team-b/svc-one), "
        f"{older} (team-a/svc-one); give more of the id\n"
    )
    done = run_hitl("undo", "team-a/svc-one")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"undid {older} (team-a/svc-one)")
    assert (root / "team-a" / "svc-one" / "BLOCKED.md").exists()
